"""Blocks of documents -> a Corpus: tokens counted on every core, the vocabulary chosen, ids
mapped, written out of core.

`build_corpus` cuts the blocks into pieces of whole documents (of 1 to 4 MB, larger for more
threads: _piece_bytes) and tokenises them on a pool of workers (saberjax.corpus.worker_pools):
a thread per core (numpy releases the GIL), or, with many cores and a large input written to
a corpus folder, a worker process per core (_uses_processes), at most a few pieces ahead of
the one being collected; a block of records (JSON Lines) is parsed by the worker that
tokenises it.  A piece's tokens are ids into its own dictionary of words (int32), kept in
memory while the worker's share of `memory_bytes` holds them and in the worker's temporary
file beside the output after that.  Each worker adds its pieces' dictionaries, with the
words' counts and document frequencies, to its own words (a key_tables.KeyTable of word
keys, long words numbered by a StringTable of their bytes), GROUP_PIECES at a time, keeping
for each piece its words' numbers there and their tokens; the collecting process keeps only
where each piece's documents' tokens start and where its ids wait.  When every piece is read,
the workers hand over their words, which are merged into the corpus's; the vocabulary is
chosen from the summed counts (text.VocabularyRules), which gives each piece's tokens of
vocabulary words and so its place in the corpus; the workers then map each piece's ids and
write them there, into the word ids file of a NativeCorpusWriter (a corpus folder on disk,
memory-mapped when done) or of an in-memory corpus, while the documents' lengths are
appended in order.  The vocabulary is sorted and chosen by counts, never by the words'
numbers (which depend on which worker read which piece), so the corpus depends only on the
documents and the rules, never on how the input was cut into blocks, the number of workers
or their kind.

A document's frequency per piece is counted from the piece's tokens sorted by word (a stable
radix sort: each word's tokens in text order), where a new document begins a new count.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import tempfile
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from saberjax import files, text
from saberjax.corpus.core import PACKAGE_DIR, Corpus, offsets_from_lengths
from saberjax.corpus.key_tables import KeyTable, Strings, StringTable, number_keys
from saberjax.corpus.native import NativeCorpusWriter, load_native
from saberjax.corpus.text_blocks import DocumentBlock
from saberjax.corpus.worker_pools import WorkerProcesses, WorkerThreads
from saberjax.corpus.tokenizing import (
    LONG_KEY,
    BlockWords,
    block_words,
    is_long_key,
    word_strings,
)
from saberjax.errors import CorpusFormatError

PIECE_BYTES = 1 << 22  # most bytes of text tokenised as one task
MIN_PIECE_BYTES = 1 << 20  # fewest, unless the block is smaller
PIECE_BYTES_PER_THREAD = 1 << 18  # pieces grow with the threads, within those bounds
GROUP_PIECES = 8  # pieces whose words a worker adds to its own at once
SMALL_COUNT = 255  # a word's tokens in a piece kept in a byte below this
PROCESS_MIN_WORKERS = 16  # fewest workers that tokenise in processes rather than threads
PROCESS_MIN_BYTES = 1 << 28  # and the least input (total_bytes) that does
PROGRESS_SECONDS = 10.0  # between progress lines


class TextCorpus(NamedTuple):
    """The corpus of a text input (the ids of the blocks' documents, where they have ids, its
    doc_names: those of the documents kept, in order) and how many documents were not valid
    UTF-8 (read as Latin-1)."""

    corpus: Corpus
    invalid_utf8_docs: int


class _Dictionary(NamedTuple):
    """Distinct words with their tokens and documents: keys as block_words keys them, a key
    LONG_KEY + n standing for strings[n]."""

    keys: np.ndarray
    strings: Strings
    counts: np.ndarray
    doc_freq: np.ndarray


@dataclasses.dataclass
class _Piece:
    """What the collecting process keeps of a tokenised piece until its ids are mapped: where
    its documents' tokens start; its tokens, ids into its own dictionary, in memory or None
    while they wait in a worker's spill file (`spill`: its path and the byte offset); its
    documents' ids."""

    doc_tokens: np.ndarray
    token_ids: np.ndarray | None
    spill: tuple[str, int] | None
    ids: np.ndarray | None


class _PieceWords(NamedTuple):
    """For each word of a piece's dictionary, its number among its worker's words (int32)
    and its tokens, in a byte each until the collecting process needs them: `counts` (uint8,
    SMALL_COUNT for that many or more) and the exact counts of the words (by their place)
    seen SMALL_COUNT times or more."""

    entries: np.ndarray
    counts: np.ndarray
    frequent: np.ndarray
    frequent_counts: np.ndarray

    @staticmethod
    def of(entries: np.ndarray, counts: np.ndarray) -> _PieceWords:
        frequent = np.flatnonzero(counts >= SMALL_COUNT)
        return _PieceWords(entries, np.minimum(counts, SMALL_COUNT).astype(np.uint8),
                           frequent, counts[frequent])

    def tokens(self, words: np.ndarray) -> int:
        """The tokens of the words where `words` (bool, a word's place) is true."""
        return int(self.counts[words].sum(dtype=np.int64)
                   + (self.frequent_counts[words[self.frequent]] - SMALL_COUNT).sum())


class _Words:
    """Distinct words numbered as groups of dictionaries are added, with their tokens and
    documents summed: word keys (tokenizing's; a long word keyed LONG_KEY + its number
    among the long words, by its bytes)."""

    def __init__(self):
        self.keys = KeyTable()
        self.long_words = StringTable()
        self.counts = np.zeros(0, np.int64)
        self.doc_freq = np.zeros(0, np.int64)

    def add(self, dictionaries: list[_Dictionary]) -> list[np.ndarray]:
        """The numbers (int32) of each dictionary's words, their counts added: the group's
        words numbered among themselves first (key_tables.number_keys; one dictionary's
        are distinct already), so that the table sees each distinct word once."""
        keys = np.concatenate([part.keys for part in dictionaries])
        long = np.flatnonzero(is_long_key(keys))
        if long.size:
            keys[long] = LONG_KEY + self._long_numbers(dictionaries, keys, long)
        if len(dictionaries) == 1:  # a dictionary's words are distinct
            distinct, index = keys, None
            counts, doc_freq = dictionaries[0].counts, dictionaries[0].doc_freq
        else:
            distinct, index = number_keys(keys)
            counts, doc_freq = (  # float64 sums: exact below 2**53
                np.bincount(index, np.concatenate([getattr(part, name) for part in dictionaries]),
                            minlength=distinct.size).astype(np.int64)
                for name in ("counts", "doc_freq"))
        numbers = self.keys.numbers(distinct)
        if self.keys.size > self.counts.size:
            size = max(2 * self.counts.size, self.keys.size)
            self.counts = np.concatenate([self.counts, np.zeros(size - self.counts.size,
                                                                np.int64)])
            self.doc_freq = np.concatenate([self.doc_freq,
                                            np.zeros(size - self.doc_freq.size, np.int64)])
        self.counts[numbers] += counts  # the numbers of distinct words are distinct
        self.doc_freq[numbers] += doc_freq
        entries = numbers.astype(np.int32)
        if index is None:
            return [entries]
        return np.split(entries[index], np.cumsum([part.keys.size for part in dictionaries])[:-1])

    def _long_numbers(self, dictionaries: list[_Dictionary], keys: np.ndarray,
                      long: np.ndarray) -> np.ndarray:
        """The long words' numbers (uint64) of keys[long], the long keys of the dictionaries'
        keys concatenated: every dictionary's strings numbered in the corpus's long words at
        once (the StringTable tells repeated strings of the group apart by their bytes)."""
        numbers = self.long_words.numbers(Strings.concatenate([part.strings
                                                               for part in dictionaries]))
        sizes = [part.keys.size for part in dictionaries]
        string_bases = np.cumsum([0] + [len(part.strings) for part in dictionaries[:-1]])
        base = np.repeat(string_bases, sizes).take(long)  # the strings before the key's part
        return numbers.take((keys.take(long) - LONG_KEY).view(np.int64) + base).astype(np.uint64)

    def dictionary(self) -> _Dictionary:
        """Every word, in the order of their numbers, as a dictionary."""
        return _Dictionary(self.keys.keys(), self.long_words.strings(),
                           self.counts[:self.keys.size], self.doc_freq[:self.keys.size])

    def strings(self) -> list[str]:
        """Every word, in the order of their numbers."""
        keys = self.keys.keys()
        long = is_long_key(keys)
        words = np.empty(keys.size, object)
        words[~long] = word_strings(keys[~long])
        long_words = self.long_words.strings().tolist()
        words[long] = [long_words[number].decode("utf-8", "surrogateescape")
                       for number in (keys[long] - LONG_KEY).tolist()]
        return words.tolist()


def build_corpus(blocks: Iterable[DocumentBlock], rules: text.TextRules = text.DEFAULT_RULES,
                 vocabulary: text.VocabularyRules = text.VocabularyRules(), *, name: str = "",
                 source: str = "text", directory=None, workers: int | None = None,
                 memory_bytes: int | None = None, total_bytes: int | None = None,
                 log: Callable[[str], None] | None = None,
                 processes: bool | None = None) -> TextCorpus:
    """The corpus of the documents of `blocks` (see the module).

    directory: write the corpus there as a native folder (atomically) and return it
    memory-mapped; None: build it in memory.  workers: threads or processes (default: one
    per core).  memory_bytes: token ids kept in memory, in all, before the workers spill
    them to temporary files (default: unlimited).  total_bytes: the input's size, for the ETA
    of the progress lines that `log` gets every PROGRESS_SECONDS (none when None).  `source`
    names the input in errors.  processes: tokenise in worker processes (True) or threads
    (False); None: processes from PROCESS_MIN_WORKERS workers and PROCESS_MIN_BYTES of input
    on, when writing a directory (_uses_processes).  Documents left without a vocabulary word
    are dropped and counted (Corpus.dropped_empty_docs, and a warning naming `source`).
    """
    threads = workers or os.cpu_count() or 1
    spill_dir = Path(directory).parent if directory is not None else None
    if spill_dir is not None:
        spill_dir.mkdir(parents=True, exist_ok=True)
    progress = _Progress(source, total_bytes, log)
    if processes is None:
        processes = _uses_processes(threads, total_bytes, directory)
    limit = float("inf") if memory_bytes is None else memory_bytes / threads
    with (tempfile.TemporaryDirectory(dir=spill_dir, prefix=".saberjax-tokens-") as spill,
          _tokenising_pool(threads, processes) as pool):
        pieces, invalid = _read_pieces(blocks, rules, threads, pool, (spill, limit), progress)
        corpus_words, worker_numbers, piece_words = _merged_words(pool.each(_worker_words),
                                                                  len(pieces))
        num_docs = sum(piece.doc_tokens.size - 1 for piece in pieces)
        words = corpus_words.strings()
        counts = corpus_words.counts[:len(words)]
        doc_freq = corpus_words.doc_freq[:len(words)]
        vocab_index = choose_vocabulary(words, counts, doc_freq, num_docs, vocabulary)
        if vocab_index.size == 0:
            raise CorpusFormatError(
                f"{source}: no word is in at least min_df={vocabulary.min_df} and at most "
                f"max_df={vocabulary.max_df} of the {num_docs} documents (stop words left "
                f"out); lower min_df or give more documents")
        new_id = np.full(len(words), -1, np.int32)  # a word's vocabulary id, -1 for none
        new_id[vocab_index] = np.arange(vocab_index.size, dtype=np.int32)
        vocab = tuple(map(words.__getitem__, vocab_index.tolist()))
        del words, corpus_words, counts, doc_freq
        lookups, starts = _lookups(piece_words, [new_id[numbers] for numbers in worker_numbers])
        mapped = functools.partial(_mapped_pieces, pool, threads, pieces, lookups, starts)
        num_tokens = int(starts[-1])  # every token of the vocabulary's words
        if directory is not None:
            corpus, dropped = _written(mapped, num_tokens, vocab, name, directory)
        else:
            corpus, dropped = _in_memory(mapped, num_tokens, vocab, name,
                                         Path(spill) / "word_ids")
    if dropped:
        _warn_dropped(source, dropped)
    corpus = dataclasses.replace(corpus, dropped_empty_docs=dropped)
    return TextCorpus(corpus, invalid)


def choose_vocabulary(words: list[str], counts: np.ndarray, doc_freq: np.ndarray,
                      num_docs: int, rules: text.VocabularyRules) -> np.ndarray:
    """Indices (into `words`) of the vocabulary `rules` choose, in alphabetical order.  The
    words' strings are compared only once the document frequencies have ruled words out, so
    that a long run of letters seen in a few documents does not widen an array of every
    word."""
    candidates = np.flatnonzero((doc_freq >= rules.min_df)
                                & (doc_freq <= rules.max_df * num_docs))
    chosen = [i for i in candidates.tolist() if words[i] not in rules.stop_words]
    candidates = np.array(chosen, np.int64)
    names = (np.array([words[i] for i in chosen], dtype=str) if chosen
             else np.zeros(0, "U1"))
    if candidates.size > rules.max_features:  # the most frequent, ties alphabetical
        order = np.lexsort((names, -counts[candidates]))[:rules.max_features]
        candidates, names = candidates[order], names[order]
    return candidates[np.argsort(names, kind="stable")]


def _uses_processes(workers: int, total_bytes: int | None, directory) -> bool:
    """Whether to tokenise in processes: with many workers, threads wait for the GIL that
    every numpy call of a piece's takes back, so that 64 threads use a few cores; a process
    costs a start (importing numpy and the tokeniser) and copies each piece in, repaid only
    on a large input, whose token ids go to files (a directory is written) rather than back
    to this process."""
    return (workers >= PROCESS_MIN_WORKERS and (total_bytes or 0) >= PROCESS_MIN_BYTES
            and directory is not None)


def _tokenising_pool(workers: int, processes: bool) -> WorkerThreads | WorkerProcesses:
    """The pool that tokenises pieces: `workers` threads, or worker processes (which import
    the tokeniser and numpy, not jax)."""
    return WorkerProcesses(workers) if processes else WorkerThreads(workers)


def _read_pieces(blocks, rules, threads, pool, keeping, progress):
    """(the _Pieces of `blocks` in order, tokenised on `pool` at most a few pieces ahead of
    the one collected, their words numbered among their workers' words and their tokens kept
    as `keeping` says (_kept_tokens); the documents not valid UTF-8)."""
    pieces, invalid = [], 0
    parts = ((index, part, rules, keeping) for index, part in enumerate(
        part for block in blocks for part in _parts(block, _piece_bytes(threads))))
    for piece, invalid_docs, tokens, size in _in_order(pool, _tokenised, parts, 2 * threads):
        invalid += invalid_docs
        pieces.append(piece)
        progress.add(piece.doc_tokens.size - 1, tokens, size)
    return pieces, invalid


def _merged_words(workers: list[tuple[_Dictionary, dict[int, _PieceWords]]], num_pieces: int
                  ) -> tuple[_Words, list[np.ndarray], list[tuple[int, _PieceWords]]]:
    """(the words of the workers' dictionaries, merged; each worker's words' numbers among
    them; each piece's worker and _PieceWords) of what the workers hand over
    (_worker_words)."""
    words = _Words()  # a worker's words at a time: fewer passes than all at once
    numbers = [words.add([dictionary])[0] for dictionary, _ in workers]
    pieces: list = [None] * num_pieces
    for worker, (_, worker_pieces) in enumerate(workers):
        for index, piece in worker_pieces.items():
            pieces[index] = (worker, piece)
    return words, numbers, pieces


def _piece_bytes(threads: int) -> int:
    """The size of pieces: PIECE_BYTES_PER_THREAD times the threads, within MIN_PIECE_BYTES
    and PIECE_BYTES.  Every numpy call of a piece's takes the GIL back, which waits longer the
    more threads share it, so many threads tokenise larger pieces; a few keep them small, so
    that the pieces in flight (a few per thread) hold little memory."""
    return max(min(threads * PIECE_BYTES_PER_THREAD, PIECE_BYTES),
               min(MIN_PIECE_BYTES, PIECE_BYTES))


def _parts(block: DocumentBlock, piece_bytes: int) -> Iterator[DocumentBlock]:
    """`block` cut into pieces of whole documents of about piece_bytes (a block of lines or of
    records, its offsets None, is cut after a line break, its pieces' offsets, or records,
    left to the tokenising threads)."""
    if block.offsets is None:
        yield from _line_parts(block.data, piece_bytes, block.parse)
        return
    offsets = np.asarray(block.offsets, np.int64)
    num_docs = offsets.size - 1
    start = 0
    while start < num_docs:
        end = int(np.searchsorted(offsets, offsets[start] + piece_bytes, "right")) - 1
        end = min(max(end, start + 1), num_docs)
        base = offsets[start]
        yield DocumentBlock(block.data[base:offsets[end]], offsets[start:end + 1] - base,
                            None if block.ids is None else block.ids[start:end])
        start = end


def _line_parts(data: np.ndarray, piece_bytes: int, parse) -> Iterator[DocumentBlock]:
    start = 0
    while start < data.size:
        end = start + piece_bytes
        while end < data.size:
            breaks = np.flatnonzero(data[end:end + (1 << 16)] == ord("\n"))
            if breaks.size:
                end += int(breaks[0]) + 1
                break
            end += 1 << 16
        end = min(end, data.size)
        yield DocumentBlock(data[start:end], None, None, parse)
        start = end


def _tokenised(worker: dict, index: int, block: DocumentBlock, rules: text.TextRules,
               keeping: tuple[str, float]) -> tuple[_Piece, int, int, int]:
    """(piece `index` of the input, `block` (parsed here, when it holds records), its tokens
    kept as `keeping` says (_kept_tokens); its documents not valid UTF-8, its tokens, its
    bytes).  Its dictionary waits in the worker's state for GROUP_PIECES of them to be
    added to the worker's words at once (_add_pending)."""
    size = len(block.data)
    block = block.parsed()
    words = block_words(block, rules)
    counts, doc_freq = _frequencies(words)
    pending = worker.setdefault("pending", {})
    pending[index] = _Dictionary(words.keys, words.strings, counts, doc_freq)
    if len(pending) == GROUP_PIECES:
        _add_pending(worker)
    piece = _Piece(words.doc_tokens, words.token_ids, None, block.ids)
    _kept_tokens(worker, piece, *keeping)
    return piece, words.invalid_utf8_docs, words.token_ids.size, size


def _add_pending(worker: dict) -> None:
    """Adds the worker's pending dictionaries to its words (its state's "words"), keeping
    each piece's _PieceWords (its state's "pieces", by the pieces' indices)."""
    pending = worker.pop("pending", {})
    if not pending:
        return
    words = worker.setdefault("words", _Words())
    pieces = worker.setdefault("pieces", {})
    for (index, dictionary), entries in zip(pending.items(), words.add(list(pending.values()))):
        pieces[index] = _PieceWords.of(entries, dictionary.counts)


def _kept_tokens(worker: dict, piece: _Piece, folder: str, limit: float) -> None:
    """Keeps the piece's token ids in memory while the worker's so far and these fit `limit`
    bytes, else appends them to the worker's spill file in `folder` (piece.spill)."""
    size = piece.token_ids.nbytes
    held = worker.get("held bytes", 0)
    if held + size <= limit:
        worker["held bytes"] = held + size
        return
    path = os.path.join(folder, f"worker-{worker['worker']}.ids")
    with open(path, "ab") as file:
        piece.spill = (path, file.tell())
        file.write(piece.token_ids.data)
    piece.token_ids = None


def _worker_words(worker: dict) -> tuple[_Dictionary, dict[int, _PieceWords]]:
    """(the words a worker numbered, its pieces' _PieceWords by their indices), which it
    forgets."""
    _add_pending(worker)
    words = worker.pop("words", None) or _Words()
    return words.dictionary(), worker.pop("pieces", {})


def _frequencies(words: BlockWords) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, documents) of each word of a piece's dictionary: the tokens in word order
    (_word_order: each word's tokens in text order), where a word's first token and a token
    in another document than its word's previous token begin a new document of that word."""
    num_words = words.num_words
    counts = np.bincount(words.token_ids, minlength=num_words)
    if words.token_ids.size == 0:
        return counts.astype(np.int64), np.zeros(num_words, np.int64)
    num_docs = words.doc_tokens.size - 1
    docs = np.repeat(np.arange(num_docs, dtype=np.min_scalar_type(num_docs)),  # fewest bytes
                     np.diff(words.doc_tokens))
    docs = docs.take(_word_order(words.token_ids, num_words))
    new_doc = np.empty(docs.size, bool)
    np.not_equal(docs[1:], docs[:-1], out=new_doc[1:])
    word_ends = np.zeros(num_words + 1, np.int64)
    np.cumsum(counts, out=word_ends[1:])
    new_doc[word_ends[:-1]] = True  # every word of the dictionary has a token
    new_docs = np.zeros(docs.size + 1, np.int64)  # new documents before each token
    np.cumsum(new_doc, out=new_docs[1:])
    return counts.astype(np.int64), np.diff(new_docs.take(word_ends))


def _word_order(token_ids: np.ndarray, num_words: int) -> np.ndarray:
    """The positions of `token_ids` (in [0, num_words)) sorted by id, stably: a radix sort by
    16-bit digits, each a stable argsort of uint16 (numpy's radix sort)."""
    order = None
    for shift in range(0, max(num_words - 1, 1).bit_length(), 16):
        digit = (token_ids >> shift).astype(np.uint16)  # the low 16 bits of the shifted ids
        order = (np.argsort(digit, kind="stable") if order is None
                 else order[np.argsort(digit[order], kind="stable")])
    return order


def _lookups(pieces: list[tuple[int, _PieceWords]], workers: list[np.ndarray]
             ) -> tuple[list[np.ndarray], np.ndarray]:
    """(the vocabulary ids of each piece's words, -1 for none; where each piece's tokens of
    vocabulary words begin in the corpus, [pieces + 1]) of each piece's worker and words
    (`workers`: the vocabulary ids of each worker's words), which are released one by one."""
    lookups, kept = [], []
    for index, (worker, piece) in enumerate(pieces):
        pieces[index] = None
        lookup = workers[worker][piece.entries]
        lookups.append(lookup)
        kept.append(piece.tokens(lookup >= 0))
    starts = np.zeros(len(kept) + 1, np.int64)
    np.cumsum(kept, out=starts[1:])
    return lookups, starts


def _mapped(worker: dict, doc_tokens: np.ndarray, token_ids: np.ndarray | None,
            spill: tuple[str, int] | None, entries: np.ndarray,
            target: tuple[Path, int, bool]) -> tuple[np.ndarray, np.ndarray]:
    """(tokens of each document kept, which documents are kept) of a piece (see _Piece),
    its vocabulary ids written into the file and at the byte offset `target` names, by a
    worker process when target's flag says so: through a memory map, its write-back to disk
    started at once (files.write_mapped: the processes writing one file do not queue on its
    lock, and the writer's fsync waits for little), else by write() (a few threads: a memory
    map's page faults would cost more than the lock);
    documents without a vocabulary word are left out."""
    if token_ids is None:
        path, offset = spill
        with open(path, "rb") as file:
            token_ids = np.frombuffer(os.pread(file.fileno(), int(doc_tokens[-1]) * 4, offset),
                                      np.int32)
    ids = entries.take(token_ids)
    kept = ids >= 0
    lengths = np.diff(doc_tokens)
    if not kept.all():
        ends = np.zeros(kept.size + 1, np.int64)
        np.cumsum(kept, out=ends[1:])
        lengths = np.diff(ends[doc_tokens])
        ids = ids[kept]
    path, offset, in_process = target
    if in_process:
        files.write_mapped(path, offset, ids, write_back=True)
    else:
        with open(path, "r+b") as file:
            files.write_at(file.fileno(), ids, offset)
    nonempty = lengths > 0
    return lengths[nonempty], nonempty


def _mapped_pieces(pool, threads, pieces, lookups, starts, target: tuple[Path, int]
                   ) -> Iterator:
    """(tokens of each document kept, which documents are kept, the kept documents' ids or
    None) of each piece in order, mapped on `pool` (of `threads` workers) a few pieces ahead
    by its words' vocabulary ids (`lookups`), its vocabulary ids written into the file
    `target` names (and the byte offset of its first id) at its start (starts), its tokens
    released."""
    path, offset = target
    in_processes = isinstance(pool, WorkerProcesses)

    def items():
        for piece, lookup, start in zip(pieces, lookups, starts.tolist()):
            token_ids, piece.token_ids = piece.token_ids, None
            yield (piece.doc_tokens, token_ids, piece.spill, lookup,
                   (path, offset + 4 * start, in_processes))

    for piece, (lengths, nonempty) in zip(pieces, _in_order(pool, _mapped, items(),
                                                               2 * threads)):
        yield lengths, nonempty, None if piece.ids is None else piece.ids[nonempty]


def _written(mapped, num_tokens, vocab, name, directory):
    """Writes the pieces' documents as a native corpus in `directory` (the kept documents'
    ids its doc_names), each piece's word ids written into the corpus's file by the worker
    mapping them (`mapped`: _mapped_pieces but for the file); (its corpus, memory-mapped,
    the dropped documents)."""
    dropped = 0
    with NativeCorpusWriter(directory, vocab, name=name) as writer:
        for lengths, nonempty, kept_ids in mapped(writer.reserve_word_ids(num_tokens)):
            writer.append(lengths, None, kept_ids)
            dropped += int(nonempty.size - lengths.size)
    return load_native(directory), dropped


def _in_memory(mapped, num_tokens, vocab, name, path: Path):
    """The pieces' documents as one in-memory corpus (see _written), the word ids written
    into a file at `path` first."""
    lengths_all, doc_ids, dropped = [], [], 0
    with open(path, "wb") as file:
        file.truncate(4 * num_tokens)
    for lengths, nonempty, kept_ids in mapped((path, 0)):
        lengths_all.append(lengths)
        dropped += int(nonempty.size - lengths.size)
        doc_ids.append(kept_ids)
    word_ids = np.fromfile(path, np.int32, num_tokens)
    lengths = np.concatenate(lengths_all) if lengths_all else np.zeros(0, np.int64)
    doc_names = None if any(ids is None for ids in doc_ids) or not doc_ids else np.concatenate(
        doc_ids)
    return Corpus(offsets_from_lengths(lengths), word_ids, vocab, name,
                  doc_names=doc_names), dropped


def _in_order(pool: WorkerThreads | WorkerProcesses, function: Callable,
              items: Iterable, ahead: int) -> Iterator:
    """function(item) of each item, computed on the pool at most `ahead` items ahead of the
    one yielded, in order."""
    in_flight: deque = deque()
    for item in items:
        in_flight.append(pool.submit(function, *item))
        if len(in_flight) >= ahead:
            yield in_flight.popleft().result()
    while in_flight:
        yield in_flight.popleft().result()


def _warn_dropped(source: str, dropped: int) -> None:
    warnings.warn(f"{source}: dropped {dropped} empty document(s)", stacklevel=2,
                  skip_file_prefixes=(PACKAGE_DIR,))


class _Progress:
    """Progress lines of a long read: bytes, documents, Mtoken/s and, when the input's size is
    known, the ETA."""

    def __init__(self, source: str, total_bytes: int | None, log):
        self.source, self.total_bytes, self.log = source, total_bytes, log
        self.start = self.last = time.perf_counter()
        self.bytes = self.docs = self.tokens = 0

    def add(self, docs: int, tokens: int, size: int) -> None:
        self.docs += docs
        self.tokens += tokens
        self.bytes += size
        now = time.perf_counter()
        if self.log is not None and now - self.last >= PROGRESS_SECONDS:
            self.last = now
            self.log(self.line(now))

    def line(self, now: float) -> str:
        seconds = max(now - self.start, 1e-9)
        eta = ""
        if self.total_bytes and self.bytes:
            left = max(self.total_bytes - self.bytes, 0) * seconds / self.bytes
            eta = f", ETA {left:.0f} s"
        return (f"reading {self.source}: {self.bytes / 1e9:.2f} GB, {self.docs:,} documents, "
                f"{self.tokens / seconds / 1e6:.1f} Mtoken/s{eta}")
