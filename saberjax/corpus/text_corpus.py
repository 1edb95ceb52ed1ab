"""Blocks of documents -> a Corpus: tokens counted on every core, the vocabulary chosen, ids
mapped, written out of core.

`build_corpus` cuts the blocks into pieces of about PIECE_BYTES (whole documents) and
tokenises the pieces on a thread per core (saberjax.corpus.tokenizing: numpy and pyarrow
release the GIL), at most a few pieces ahead of the one being collected, so memory holds the
pieces in flight and, per piece, its tokens as int32 ids into the piece's own dictionary of
words with each word's count and document frequency.  Those ids (4 bytes a token, as the
corpus itself) stay in memory while they fit `memory_bytes`, and go to a temporary file
beside the output after that.  Every GROUP_PIECES pieces, their dictionaries are merged into
their group's (pyarrow's dictionary_encode over their concatenation), a piece keeping only
its words' indices in it; when every piece is read, the groups' dictionaries are merged the
same way, the vocabulary is chosen from the summed counts (text.VocabularyRules), and each
piece's ids are mapped to vocabulary ids on the threads, in order, straight into a
NativeCorpusWriter (a corpus folder on disk, memory-mapped when done) or into one array.  The corpus depends only on the documents and the rules, never on how the
input was cut into blocks or on the number of threads.

A document's frequency per piece is counted from the piece's tokens transposed into word
order by scipy.sparse (a stable counting sort: each word's tokens in document order), where a
new document begins a new count.
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
import pyarrow as pa
import pyarrow.compute as pc

from saberjax import files, text
from saberjax.corpus.core import PACKAGE_DIR, Corpus, offsets_from_lengths
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

PIECE_BYTES = 1 << 22  # bytes of text tokenised as one task
PROGRESS_SECONDS = 10.0  # between progress lines
GROUP_PIECES = 32  # pieces whose dictionaries are merged into one as soon as they are read


class TextCorpus(NamedTuple):
    """The corpus of a text input (the ids of the blocks' documents, where they have ids, its
    doc_names: those of the documents kept, in order) and how many documents were not valid
    UTF-8 (read as Latin-1)."""

    corpus: Corpus
    invalid_utf8_docs: int


class _Dictionary(NamedTuple):
    """Words with their tokens and documents: keys as block_words keys them, a key LONG_KEY + n
    standing for strings[n]."""

    keys: np.ndarray
    strings: pa.Array
    counts: np.ndarray
    doc_freq: np.ndarray


@dataclasses.dataclass
class _Piece:
    """What is kept of a tokenised piece until its ids are mapped (see the module): its
    dictionary until its group's is made, then `entries`, its words' indices in the group's."""

    dictionary: _Dictionary | None
    doc_tokens: np.ndarray
    token_ids: np.ndarray | None  # None: in the spill file at spill_offset
    spill_offset: int
    ids: np.ndarray | None
    group: int = -1
    entries: np.ndarray | None = None
    entry_counts: np.ndarray | None = None  # int32 tokens of each of its words


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
        pieces, groups, invalid = _read_pieces(blocks, rules, threads, store, progress)
        num_docs = sum(piece.doc_tokens.size - 1 for piece in pieces)
        merged, group_words = _union(groups)
        long = is_long_key(merged.keys)
        words = word_strings(merged.keys[~long]) + [
            word.decode("utf-8", "surrogateescape") for word in merged.strings.to_pylist()]
        counts, doc_freq = merged.counts, merged.doc_freq
        piece_words = [group_words[piece.group][piece.entries] for piece in pieces]
        vocab_index = choose_vocabulary(words, counts, doc_freq, num_docs, vocabulary)
        if vocab_index.size == 0:
            raise CorpusFormatError(
                f"{source}: no word is in at least min_df={vocabulary.min_df} and at most "
                f"max_df={vocabulary.max_df} of the {num_docs} documents (stop words left "
                f"out); lower min_df or give more documents")
        new_id = np.full(len(words), -1, np.int32)  # a word's vocabulary id, -1 for none
        new_id[vocab_index] = np.arange(vocab_index.size, dtype=np.int32)
        vocab = tuple(map(words.__getitem__, vocab_index.tolist()))
        kept = [int(piece.entry_counts[new_id[entries] >= 0].sum())
                for piece, entries in zip(pieces, piece_words)]
        word_ids = None if directory is not None else np.empty(sum(kept), np.int32)
        ends = np.cumsum(kept)
        items = ((piece, entries, new_id, store,
                  None if word_ids is None else word_ids[end - size:end])
                 for piece, entries, size, end in zip(pieces, piece_words, kept, ends))
        with ThreadPoolExecutor(threads) as pool:
            mapped = _in_order(pool, _mapped, items, 2 * threads)
            if directory is not None:
                corpus, dropped = _written(mapped, vocab, name, directory)
            else:
                corpus, dropped = _in_memory(mapped, vocab, name, word_ids)
    if dropped:
        _warn_dropped(source, dropped)
    corpus = dataclasses.replace(corpus, dropped_empty_docs=dropped)
    return TextCorpus(corpus, invalid)


def choose_vocabulary(words: list[str], counts: np.ndarray, doc_freq: np.ndarray,
                      num_docs: int, rules: text.VocabularyRules) -> np.ndarray:
    """Indices (into `words`) of the vocabulary `rules` choose, in alphabetical order."""
    names = np.array(words, dtype=str) if words else np.zeros(0, "U1")
    candidates = (doc_freq >= rules.min_df) & (doc_freq <= rules.max_df * num_docs)
    if rules.stop_words:
        candidates &= ~np.isin(names, list(rules.stop_words))
    candidates = np.flatnonzero(candidates)
    if candidates.size > rules.max_features:  # the most frequent, ties alphabetical
        order = np.lexsort((names[candidates], -counts[candidates]))
        candidates = candidates[order[:rules.max_features]]
    return candidates[np.argsort(names[candidates], kind="stable")]


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


def _read_pieces(blocks, rules, threads, store, progress):
    """(the _Pieces of `blocks` in order, their token ids in `store`; the dictionaries of
    their groups of GROUP_PIECES; documents not valid UTF-8).  A group's dictionary is made
    as soon as its pieces are read, so that memory holds a piece's dictionary only as an
    index into its group's."""
    pieces, groups, invalid = [], [], 0
    parts = ((part, rules, store) for block in blocks for part in _parts(block))

    def close_group():
        members = [piece for piece in pieces if piece.dictionary is not None]
        if members:
            dictionary, entries = _union([piece.dictionary for piece in members])
            for piece, piece_entries in zip(members, entries):
                piece.entry_counts = piece.dictionary.counts.astype(np.int32)
                piece.dictionary, piece.group, piece.entries = None, len(groups), piece_entries
            groups.append(dictionary)

    with ThreadPoolExecutor(threads) as pool:
        for piece, words, size in _in_order(pool, _tokenised, parts, 2 * threads):
            invalid += words.invalid_utf8_docs
            pieces.append(piece)
            progress.add(words, size)
            if len(pieces) % GROUP_PIECES == 0:
                close_group()
    close_group()
    return pieces, groups, invalid


def _parts(block: DocumentBlock) -> Iterator[DocumentBlock]:
    """`block` cut into pieces of whole documents of about PIECE_BYTES (a block of lines, its
    offsets None, is cut after a line break, its pieces' offsets left to the tokenising
    threads)."""
    if block.offsets is None:
        yield from _line_parts(block.data)
        return
    offsets = np.asarray(block.offsets, np.int64)
    num_docs = offsets.size - 1
    start = 0
    while start < num_docs:
        end = int(np.searchsorted(offsets, offsets[start] + PIECE_BYTES, "right")) - 1
        end = min(max(end, start + 1), num_docs)
        base = offsets[start]
        yield DocumentBlock(block.data[base:offsets[end]], offsets[start:end + 1] - base,
                            None if block.ids is None else block.ids[start:end])
        start = end


def _line_parts(data: np.ndarray) -> Iterator[DocumentBlock]:
    start = 0
    while start < data.size:
        end = start + PIECE_BYTES
        while end < data.size:
            breaks = np.flatnonzero(data[end:end + (1 << 16)] == ord("\n"))
            if breaks.size:
                end += int(breaks[0]) + 1
                break
            end += 1 << 16
        end = min(end, data.size)
        yield DocumentBlock(data[start:end], None)
        start = end


def _tokenised(block: DocumentBlock, rules: text.TextRules, store: _TokenStore
               ) -> tuple[_Piece, BlockWords, int]:
    words = block_words(block, rules)
    counts, doc_freq = _frequencies(words)
    piece = _Piece(_Dictionary(words.keys, words.strings, counts, doc_freq), words.doc_tokens,
                   words.token_ids, 0, block.ids)
    store.keep(piece)
    return piece, words, len(block.data)


def _frequencies(words: BlockWords) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, documents) of each word of a piece's dictionary."""
    import scipy.sparse  # here, not with the module: importing saberjax.corpus loads no scipy

    num_words = words.num_words
    tokens = words.token_ids.size
    if tokens == 0:
        return np.zeros(num_words, np.int64), np.zeros(num_words, np.int64)
    by_doc = scipy.sparse.csr_array(
        (np.ones(tokens, np.int8), words.token_ids, words.doc_tokens),
        shape=(words.doc_tokens.size - 1, num_words))
    by_word = by_doc.tocsc()  # each word's tokens, their documents in order
    docs, starts = by_word.indices, by_word.indptr
    new_doc = np.empty(tokens, bool)  # a word's token in another document than its previous
    new_doc[0] = True
    np.not_equal(docs[1:], docs[:-1], out=new_doc[1:])
    new_doc[starts[:-1]] = True  # every word of the dictionary has a token: starts increase
    return np.diff(starts).astype(np.int64), np.add.reduceat(new_doc, starts[:-1],
                                                             dtype=np.int64)


def _union(parts: list[_Dictionary]) -> tuple[_Dictionary, list[np.ndarray]]:
    """(the dictionary of every word of `parts`, tokens and documents summed; per part, the
    index of each of its words in it, int32).  Keys are numbered by pyarrow's
    dictionary_encode over their concatenation, long words likewise."""
    longs = [is_long_key(part.keys) for part in parts]
    keys = np.concatenate([part.keys[~long] for part, long in zip(parts, longs)] +
                          [np.zeros(0, np.uint64)])
    strings = pa.concat_arrays(
        [part.strings.cast(pa.large_binary()).take(pa.array(part.keys[long] - LONG_KEY))
         for part, long in zip(parts, longs)] + [pa.array([], pa.large_binary())])
    key_codes = pc.dictionary_encode(pa.array(keys, pa.uint64()))
    string_codes = pc.dictionary_encode(strings)
    distinct_keys = key_codes.dictionary.to_numpy()
    distinct_strings = len(string_codes.dictionary)
    key_index = key_codes.indices.to_numpy()
    string_index = string_codes.indices.to_numpy() + distinct_keys.size
    entries, key_at, string_at = [], 0, 0
    for part, long in zip(parts, longs):
        part_entries = np.empty(part.keys.size, np.int32)
        keyed = part.keys.size - int(np.count_nonzero(long))
        part_entries[~long] = key_index[key_at:key_at + keyed]
        part_entries[long] = string_index[string_at:string_at + part.keys.size - keyed]
        key_at, string_at = key_at + keyed, string_at + part.keys.size - keyed
        entries.append(part_entries)
    every = np.concatenate(entries + [np.zeros(0, np.int32)])
    size = distinct_keys.size + distinct_strings
    counts, doc_freq = (np.bincount(every, np.concatenate([getattr(part, name) for part in parts]
                                                          + [np.zeros(0)]),
                                    minlength=size).astype(np.int64)
                        for name in ("counts", "doc_freq"))
    merged_keys = np.concatenate([distinct_keys.astype(np.uint64),
                                  LONG_KEY + np.arange(distinct_strings, dtype=np.uint64)])
    return _Dictionary(merged_keys, string_codes.dictionary, counts, doc_freq), entries


def _mapped(piece: _Piece, entries: np.ndarray, new_id: np.ndarray, store: _TokenStore,
            out: np.ndarray | None):
    """(tokens of each document kept, their vocabulary ids (None when written into `out`),
    which documents are kept, the kept documents' ids or None) of a piece, releasing its
    token ids; documents without a vocabulary word are left out."""
    ids = new_id[entries][store.token_ids(piece)]
    kept = ids >= 0
    lengths = np.diff(piece.doc_tokens)
    if not kept.all():
        ends = np.zeros(kept.size + 1, np.int64)
        np.cumsum(kept, out=ends[1:])
        lengths = np.diff(ends[piece.doc_tokens])
        ids = np.compress(kept, ids, out=out)
    elif out is not None:
        out[:] = ids
    nonempty = lengths > 0
    return (lengths[nonempty], None if out is not None else ids, nonempty,
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


def _in_memory(mapped, vocab, name, word_ids):
    """The mapped pieces, their ids written into word_ids, as one in-memory corpus (see
    _written)."""
    lengths_all, doc_ids, dropped = [], [], 0
    for lengths, _, nonempty, kept_ids in mapped:
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

    def add(self, words: BlockWords, size: int) -> None:
        self.docs += words.doc_tokens.size - 1
        self.tokens += words.token_ids.size
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
