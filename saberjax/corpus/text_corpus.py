"""Blocks of documents -> a Corpus: tokens counted on every core, the vocabulary chosen, ids
mapped, written out of core.

`build_corpus` cuts the blocks into pieces of whole documents (of 1 to 4 MB, larger for more
threads: _piece_bytes) and tokenises the pieces on a thread per core (saberjax.corpus.
tokenizing: numpy releases the GIL), at most two pieces a thread and a group (below) ahead of
the one being collected, so that the threads have work while the collecting thread adds a
group's words; a block of records (JSON Lines) is parsed by the thread that tokenises it, so
one pool parses and tokenises on every core.  A piece's tokens are ids into its own dictionary of words
(int32), kept in memory while they fit `memory_bytes` and in a temporary file beside the
output after that.  Every GROUP_PIECES pieces, the thread collecting them adds their
dictionaries, with the words' counts and document frequencies, to the corpus's words (a
key_tables.KeyTable of word keys, long words numbered by a StringTable of their bytes), a
piece keeping only its words' numbers there: a few whole-array passes a group, so that the
tokenising threads share no lock and the collecting thread takes little of the GIL.  When
every piece is read, the vocabulary is chosen from the summed counts (text.VocabularyRules)
and each piece's tokens are mapped to vocabulary ids on the threads, in order, straight into
a NativeCorpusWriter (a corpus folder on disk, memory-mapped when done) or into one array.
The vocabulary is sorted and chosen by counts, never by the words' numbers, so the corpus
depends only on the documents and the rules, never on how the input was cut into blocks or
on the number of threads.

A document's frequency per piece is counted from the piece's tokens sorted by word (a stable
radix sort: each word's tokens in text order), where a new document begins a new count.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import numpy as np

from saberjax import files, text
from saberjax.corpus.core import PACKAGE_DIR, Corpus, offsets_from_lengths
from saberjax.corpus.key_tables import KeyTable, Strings, StringTable, number_keys
from saberjax.corpus.native import NativeCorpusWriter, load_native
from saberjax.corpus.text_blocks import DocumentBlock
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
GROUP_PIECES = 8  # pieces whose words are added to the corpus's at once
PROGRESS_SECONDS = 10.0  # between progress lines


class TextCorpus(NamedTuple):
    """The corpus of a text input (the ids of the blocks' documents, where they have ids, its
    doc_names: those of the documents kept, in order) and how many documents were not valid
    UTF-8 (read as Latin-1)."""

    corpus: Corpus
    invalid_utf8_docs: int


class _Dictionary(NamedTuple):
    """A piece's words with their tokens and documents: keys as block_words keys them, a key
    LONG_KEY + n standing for strings[n]."""

    keys: np.ndarray
    strings: Strings
    counts: np.ndarray
    doc_freq: np.ndarray


@dataclasses.dataclass
class _Piece:
    """What is kept of a tokenised piece until its ids are mapped: where its documents' tokens
    start, its tokens (ids into its dictionary, or None while they wait in the spill file at
    spill_offset), its documents' ids, and its dictionary until its group's words are added
    to the corpus's, then `entries`, the corpus's numbers of its words (int32)."""

    doc_tokens: np.ndarray
    token_ids: np.ndarray | None
    spill_offset: int
    ids: np.ndarray | None
    dictionary: _Dictionary | None
    entries: np.ndarray | None = None


class _Words:
    """The distinct words of a corpus, numbered as groups of pieces add them, with their
    tokens and documents summed: word keys (tokenizing's; a long word keyed LONG_KEY + its
    number among the long words, by its bytes)."""

    def __init__(self):
        self.keys = KeyTable()
        self.long_words = StringTable()
        self.counts = np.zeros(0, np.int64)
        self.doc_freq = np.zeros(0, np.int64)

    def add(self, dictionaries: list[_Dictionary]) -> list[np.ndarray]:
        """The corpus's numbers of each dictionary's words (int32), their counts added: the
        group's words numbered among themselves first (key_tables.number_keys), so that the
        corpus's table sees each distinct word once."""
        keys = np.concatenate([part.keys for part in dictionaries])
        long = np.flatnonzero(is_long_key(keys))
        if long.size:
            keys[long] = LONG_KEY + self._long_numbers(dictionaries, keys, long)
        distinct, index = number_keys(keys)
        numbers = self.keys.numbers(distinct)
        if self.keys.size > self.counts.size:
            size = max(2 * self.counts.size, self.keys.size)
            self.counts = np.concatenate([self.counts, np.zeros(size - self.counts.size,
                                                                np.int64)])
            self.doc_freq = np.concatenate([self.doc_freq,
                                            np.zeros(size - self.doc_freq.size, np.int64)])
        for name in ("counts", "doc_freq"):  # float64 sums: exact below 2**53
            summed = np.bincount(index, np.concatenate([getattr(part, name)
                                                        for part in dictionaries]),
                                 minlength=distinct.size)
            getattr(self, name)[numbers] += summed.astype(np.int64)
        entries = numbers.astype(np.int32)[index]
        return np.split(entries, np.cumsum([part.keys.size for part in dictionaries])[:-1])

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
                 log: Callable[[str], None] | None = None) -> TextCorpus:
    """The corpus of the documents of `blocks` (see the module).

    directory: write the corpus there as a native folder (atomically) and return it
    memory-mapped; None: build it in memory.  workers: threads (default: one per core).
    memory_bytes: token ids kept in memory before they spill to a temporary file (default:
    unlimited).  total_bytes: the input's size, for the ETA of the progress lines that `log`
    gets every PROGRESS_SECONDS (none when None).  `source` names the input in errors.
    Documents left without a vocabulary word are dropped and counted (Corpus.
    dropped_empty_docs, and a warning naming `source`).
    """
    threads = workers or os.cpu_count() or 1
    spill_dir = Path(directory).parent if directory is not None else None
    progress = _Progress(source, total_bytes, log)
    with tempfile.TemporaryFile(dir=spill_dir) as spill:
        store = _TokenStore(spill, float("inf") if memory_bytes is None else memory_bytes)
        corpus_words = _Words()
        pieces, invalid = _read_pieces(blocks, rules, threads, store, corpus_words, progress)
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
        num_tokens = int(counts[vocab_index].sum())
        del words, corpus_words, counts, doc_freq
        items = ((piece, new_id, store) for piece in pieces)
        with ThreadPoolExecutor(threads) as pool:
            mapped = _in_order(pool, _mapped, items, 2 * threads)
            if directory is not None:
                corpus, dropped = _written(mapped, vocab, name, directory)
            else:
                corpus, dropped = _in_memory(mapped, vocab, name, num_tokens)
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


class _TokenStore:
    """Where pieces' token ids wait for the vocabulary: in memory while `limit` bytes hold
    them, then in `file` (each piece written by the thread that tokenised it, at a place
    reserved for it)."""

    def __init__(self, file, limit: float):
        self.fd, self.limit = file.fileno(), limit
        self.held = self.end = 0
        self.lock = threading.Lock()

    def keep(self, piece: _Piece) -> None:
        """Keeps the piece's ids in memory, or writes them out (piece.token_ids None)."""
        size = piece.token_ids.nbytes
        with self.lock:
            if self.held + size <= self.limit:
                self.held += size
                return
            piece.spill_offset, self.end = self.end, self.end + size
        files.write_at(self.fd, piece.token_ids, piece.spill_offset)
        piece.token_ids = None

    def token_ids(self, piece: _Piece) -> np.ndarray:
        """The piece's ids, released from the piece."""
        ids, piece.token_ids = piece.token_ids, None
        if ids is None:
            size = int(piece.doc_tokens[-1]) * 4
            ids = np.frombuffer(os.pread(self.fd, size, piece.spill_offset), np.int32)
        return ids


def _read_pieces(blocks, rules, threads, store, words, progress):
    """(the _Pieces of `blocks` in order, their tokens in `store`, their words added to
    `words` a group of GROUP_PIECES at a time as they are read, so that memory holds a
    piece's dictionary only until then; documents not valid UTF-8)."""
    pieces, invalid, first_pending = [], 0, 0
    parts = ((part, rules, store) for block in blocks
             for part in _parts(block, _piece_bytes(threads)))

    def add_group():
        group = pieces[first_pending:]
        for piece, entries in zip(group, words.add([piece.dictionary for piece in group])):
            piece.dictionary, piece.entries = None, entries

    with ThreadPoolExecutor(threads) as pool:
        for piece, invalid_docs, tokens, size in _in_order(pool, _tokenised, parts,
                                                           2 * threads + GROUP_PIECES):
            invalid += invalid_docs
            pieces.append(piece)
            progress.add(piece.doc_tokens.size - 1, tokens, size)
            if len(pieces) - first_pending == GROUP_PIECES:
                add_group()
                first_pending = len(pieces)
    if len(pieces) > first_pending:
        add_group()
    return pieces, invalid


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


def _tokenised(block: DocumentBlock, rules: text.TextRules, store: _TokenStore
               ) -> tuple[_Piece, int, int, int]:
    """(the piece of `block` (parsed here, when it holds records); its documents not valid
    UTF-8, its tokens, its bytes)."""
    size = len(block.data)
    block = block.parsed()
    words = block_words(block, rules)
    counts, doc_freq = _frequencies(words)
    piece = _Piece(words.doc_tokens, words.token_ids, 0, block.ids,
                   _Dictionary(words.keys, words.strings, counts, doc_freq))
    store.keep(piece)
    return piece, words.invalid_utf8_docs, words.token_ids.size, size


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


def _mapped(piece: _Piece, new_id: np.ndarray, store: _TokenStore):
    """(tokens of each document kept, their vocabulary ids, which documents are kept, the kept
    documents' ids or None) of a piece, releasing its tokens; documents without a vocabulary
    word are left out."""
    ids = new_id.take(piece.entries).take(store.token_ids(piece))
    kept = ids >= 0
    lengths = np.diff(piece.doc_tokens)
    if not kept.all():
        ends = np.zeros(kept.size + 1, np.int64)
        np.cumsum(kept, out=ends[1:])
        lengths = np.diff(ends[piece.doc_tokens])
        ids = ids[kept]
    nonempty = lengths > 0
    return (lengths[nonempty], ids, nonempty,
            None if piece.ids is None else piece.ids[nonempty])


def _written(mapped, vocab, name, directory):
    """Writes the mapped pieces as a native corpus in `directory` (the kept documents' ids its
    doc_names); (its corpus, memory-mapped, the dropped documents)."""
    dropped = 0
    with NativeCorpusWriter(directory, vocab, name=name) as writer:
        for lengths, ids, nonempty, kept_ids in mapped:
            writer.append(lengths, ids, kept_ids)
            dropped += int(nonempty.size - lengths.size)
    return load_native(directory), dropped


def _in_memory(mapped, vocab, name, num_tokens):
    """The mapped pieces, `num_tokens` in all, as one in-memory corpus (see _written)."""
    lengths_all, doc_ids, dropped = [], [], 0
    word_ids, at = np.empty(num_tokens, np.int32), 0
    for lengths, ids, nonempty, kept_ids in mapped:
        word_ids[at:at + ids.size] = ids
        at += ids.size
        lengths_all.append(lengths)
        dropped += int(nonempty.size - lengths.size)
        doc_ids.append(kept_ids)
    lengths = np.concatenate(lengths_all) if lengths_all else np.zeros(0, np.int64)
    doc_names = None if any(ids is None for ids in doc_ids) or not doc_ids else np.concatenate(
        doc_ids)
    return Corpus(offsets_from_lengths(lengths), word_ids, vocab, name,
                  doc_names=doc_names), dropped


def _in_order(pool: ThreadPoolExecutor, function: Callable, items: Iterable, ahead: int
              ) -> Iterator:
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
