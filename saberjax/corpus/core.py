"""The Corpus type, its builders from entries, align_vocabulary and the shared limits.

A :class:`Corpus` is a CSR-like token stream: ``doc_offsets`` (int64, D+1) delimits each
document's slice of ``word_ids`` (int32, T). :func:`from_entries` and :func:`from_doc_runs`
build one from (document, word, count) entries or from runs of a document's tokens, dropping
documents without tokens (with a warning and ``Corpus.dropped_empty_docs``) unless asked to
keep them; every loader of a text format, count matrices and plain text build through them.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import mmap
import os
import warnings
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from saberjax.background import on_threads, thread_count
from saberjax.errors import CorpusFormatError

MAX_COUNT = 2**31 - 1  # largest accepted count of one word in one document
WORD_COUNT_BLOCK = 1 << 18  # fewest tokens per np.bincount in Corpus.word_counts
SPARSE_COUNT_BLOCK = 1 << 20  # fewest tokens per sparse product in Corpus.word_counts
SPARSE_COUNT_TOKENS = 1 << 28  # fewest tokens Corpus.word_counts counts by sparse products
# Bytes of doc_offsets and word_ids per SHA-256 block of Corpus.fingerprint: part of its
# definition (a multiple of 8, recorded in the hashed header), not a tuning knob.  Small, so
# that a process's part of the corpus shares at most a block's tokens with each neighbour
# (Corpus.part); large enough that a block's hashing outweighs the call.
FINGERPRINT_BLOCK_BYTES = 1 << 18
FINGERPRINT_FORMAT = b"saberjax-corpus-v3\0"
# The blocked fingerprint records written before FINGERPRINT_FORMAT hold (has_fingerprint):
# (format, block bytes)
EARLIER_FINGERPRINT = (b"saberjax-corpus-v2\0", 1 << 26)
CHECK_BLOCK = 1 << 20  # tokens per np.min / np.max pair in check_word_ids

# saberjax's folder: warnings skip its frames, naming the caller
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass(frozen=True, eq=False)
class Corpus:
    """Documents as one token stream: doc d is ``word_ids[doc_offsets[d]:doc_offsets[d + 1]]``.

    doc_offsets: int64 [D+1]; word_ids: int32 [T], each document's tokens in file order;
    vocab: word id i is vocab[i]; dropped_empty_docs: documents a loader dropped for having no
    tokens; unknown_tokens: tokens skipped for a word outside the vocabulary the documents
    were matched to (corpus_in_vocabulary, align_vocabulary); doc_names: the documents' ids,
    strings [D] read from the source's id field (None when it names none), carried to outputs
    such as doc_topics and left out of the fingerprint. Arrays are validated, converted to
    int64 / int32 (memory maps are not copied) and exposed read-only, so a corpus cannot change
    after its fingerprint is taken.  checked=False leaves the word ids to be validated by
    whoever counts them (word_counts, part): a memory-mapped corpus of which each process of a
    run reads only its own documents (native.load_native).
    """

    doc_offsets: np.ndarray
    word_ids: np.ndarray
    vocab: tuple[str, ...]
    name: str = ""
    dropped_empty_docs: int = 0
    unknown_tokens: int = 0
    doc_names: np.ndarray | None = None
    checked: bool = True

    def __post_init__(self):
        offsets = int_vector(self.doc_offsets, "doc_offsets")
        word_ids = int_vector(self.word_ids, "word_ids")
        vocab = tuple(self.vocab)
        if offsets.size == 0:
            raise CorpusFormatError("doc_offsets is empty; it needs num_docs + 1 entries")
        if offsets[0] != 0:
            raise CorpusFormatError(f"doc_offsets[0] is {offsets[0]}, expected 0")
        if offsets[-1] != word_ids.size:
            raise CorpusFormatError(
                f"doc_offsets[-1] is {offsets[-1]}, expected num_tokens = {word_ids.size}")
        steps = np.diff(offsets)
        if np.any(steps < 0):
            i = int(np.argmax(steps < 0))
            raise CorpusFormatError(
                f"doc_offsets decrease at index {i + 1} ({offsets[i]} -> {offsets[i + 1]})")
        if self.checked:
            check_word_ids(word_ids, len(vocab))
        if self.doc_names is not None:
            names = np.array(self.doc_names, dtype=object)
            if names.shape != (offsets.size - 1,):
                raise CorpusFormatError(f"doc_names holds {names.size} names for "
                                        f"{offsets.size - 1} documents")
            object.__setattr__(self, "doc_names", _read_only(names))
        object.__setattr__(self, "doc_offsets", _read_only(offsets.astype(np.int64, copy=False)))
        object.__setattr__(self, "word_ids", _read_only(word_ids.astype(np.int32, copy=False)))
        object.__setattr__(self, "vocab", vocab)

    def __repr__(self) -> str:
        return (f"Corpus(name={self.name!r}, num_docs={self.num_docs}, "
                f"num_tokens={self.num_tokens}, num_words={self.num_words})")

    @property
    def num_docs(self) -> int:
        return self.doc_offsets.size - 1

    @property
    def num_tokens(self) -> int:
        return self.word_ids.size

    @property
    def num_words(self) -> int:
        return len(self.vocab)

    def doc_lengths(self) -> np.ndarray:
        """Tokens per document, int64 [D]."""
        return np.diff(self.doc_offsets)

    def word_counts(self, workers: int | None = None,
                    tokens: tuple[int, int] | None = None) -> np.ndarray:
        """Tokens per word id, int64 [V], of the tokens [first, last) (None: every token).

        A corpus whose processes' parts were combined (combine_parts) answers for every token
        from them, reading none.  An unchecked corpus's tokens are validated first
        (check_word_ids).  The tokens are cut into `workers` contiguous pieces (default: one
        per core; at most one per block) counted at once on threads, a block at a time, and
        the pieces' counts are summed.  np.bincount holds the GIL for its pass finding its
        input's smallest and largest value (about 0.6 of its 1.5 ns a token), so threads
        counting with it mostly take turns: SPARSE_COUNT_TOKENS tokens or more, counted on
        several threads, are counted instead as the row sums of a V x 1 sparse matrix with a
        one in each token's row (scipy.sparse's COO matrix-vector product, which releases the
        GIL), in blocks of SPARSE_COUNT_BLOCK tokens read where they lie.  scipy comes with
        jax; it is imported only then (0.2 s).  Fewer tokens are counted by np.bincount in
        blocks of WORD_COUNT_BLOCK tokens, each copied into a buffer of np.bincount's index
        type (np.copyto releases the GIL, np.bincount's own conversion of int32 holds it in
        stretches).  A block holds at least V tokens; the buffers are allocated by the
        calling thread, so the counting threads allocate only counts of V words.
        """
        if tokens is None and "_combined_word_counts" in self.__dict__:
            return self.__dict__["_combined_word_counts"].copy()
        first, last = (0, self.num_tokens) if tokens is None else tokens
        self.check(first, last, workers)
        word_ids = self.word_ids[first:last]
        threads = workers or os.cpu_count() or 1
        sparse = threads > 1 and word_ids.size >= SPARSE_COUNT_TOKENS
        block = max(SPARSE_COUNT_BLOCK if sparse else WORD_COUNT_BLOCK, self.num_words, 1)
        num_blocks = -(-word_ids.size // block)
        pieces = thread_count(num_blocks, threads)
        cuts = [min(piece * num_blocks // pieces * block, word_ids.size)
                for piece in range(pieces + 1)]
        count_block = (_sparse_counter if sparse else _bincounter)(
            self.num_words, min(block, word_ids.size), pieces)

        def count(piece: int) -> np.ndarray:
            counts = np.zeros(self.num_words, np.int64)
            for start in range(cuts[piece], cuts[piece + 1], block):
                counts += count_block(piece, word_ids[start : min(start + block,
                                                                  cuts[piece + 1])])
            return counts

        return functools.reduce(np.add, on_threads(count, range(pieces), pieces))

    def check(self, first: int = 0, last: int | None = None,
              workers: int | None = None) -> None:
        """Validate the word ids of tokens [first, last) (None: to the end) of an unchecked
        corpus (check_word_ids; nothing for a checked one): what a reader of tokens counts
        first."""
        if not self.checked:
            check_word_ids(self.word_ids[first:last], self.num_words, workers, first)

    def fingerprint(self) -> str:
        """SHA-256 hex of the token layout and vocabulary (not the name), stable across processes
        and the same on any number of cores or processes.

        Identifies a corpus in caches and run records; computed once per object, or combined
        from the parts of the processes of a run (combine_parts).  It is the SHA-256 of: a
        header (FINGERPRINT_FORMAT, the sizes D T V and FINGERPRINT_BLOCK_BYTES); the SHA-256
        digest of each FINGERPRINT_BLOCK_BYTES block of doc_offsets (int64 little-endian) and
        then of word_ids (int32 little-endian), the last block of each shorter, runs of blocks
        hashed at once on a thread per core (hashlib releases the GIL); the vocabulary as JSON.
        The word ids' blocks lie at fixed positions whatever reads them, so the processes of a
        run hash the blocks of their own tokens (part).  Records written with an earlier
        definition hold EARLIER_FINGERPRINT's or legacy_fingerprint(); has_fingerprint accepts
        them.
        """
        return self._fingerprint

    @functools.cached_property
    def _fingerprint(self) -> str:
        block_bytes = FINGERPRINT_BLOCK_BYTES
        return self._blocked_fingerprint(FINGERPRINT_FORMAT, block_bytes, block_digests(
            self.word_ids, 0, _blocks(self.num_tokens, 4, block_bytes), block_bytes))

    def outline(self) -> str:
        """SHA-256 hex of fingerprint()'s definition without the word ids' blocks: the sizes,
        the document offsets and the vocabulary, which every process of a run holds whole and
        can compare before any reads its tokens."""
        return self._blocked_fingerprint(FINGERPRINT_FORMAT, FINGERPRINT_BLOCK_BYTES, ())

    def _blocked_fingerprint(self, format: bytes, block_bytes: int,
                             word_digests: Sequence[bytes]) -> str:
        """fingerprint()'s definition with another format and block size, of the word ids'
        block digests given (those of the offsets are hashed here)."""
        digest = hashlib.sha256(format)
        digest.update(f"{self.num_docs} {self.num_tokens} {self.num_words} "
                      f"{block_bytes}\n".encode())
        for block in block_digests(self.doc_offsets, 0, _blocks(self.doc_offsets.size, 8,
                                                                block_bytes), block_bytes):
            digest.update(block)
        for block in word_digests:
            digest.update(block)
        digest.update(json.dumps(self.vocab, ensure_ascii=False).encode())
        return digest.hexdigest()

    def part(self, first: int, last: int, workers: int | None = None) -> CorpusPart:
        """What the tokens [first, last) give towards the whole corpus's fingerprint and word
        counts (combine_parts): their word counts (validated, word_counts), the digests of the
        fingerprint blocks lying wholly among them and their tokens in the blocks they share
        with the tokens before and after (at most one block at each end).  Reads only those
        tokens."""
        if not 0 <= first <= last <= self.num_tokens:
            raise ValueError(f"tokens [{first}, {last}) are not a range of the corpus's "
                             f"{self.num_tokens} tokens")
        size = FINGERPRINT_BLOCK_BYTES // 4
        inner_first, inner_last = -(-first // size), last // size
        if last == self.num_tokens:  # the short last block of the corpus ends the part
            inner_last = _blocks(last, 4, FINGERPRINT_BLOCK_BYTES)
        inner_last = max(inner_first, inner_last)
        edges = [(start, np.array(self.word_ids[start:end], np.int32))
                 for start, end in ((first, min(inner_first * size, last)),
                                    (max(inner_last * size, first), last)) if start < end]
        return CorpusPart(first, last, self.word_counts(workers, (first, last)), inner_first,
                          tuple(block_digests(self.word_ids, inner_first, inner_last,
                                              FINGERPRINT_BLOCK_BYTES, workers)),
                          tuple(edges))

    def largest_part_bytes(self) -> int:
        """The most bytes CorpusPart.to_bytes takes for a part of this corpus: its header,
        the counts, a digest for each block of the corpus and two edges of a block each."""
        return (8 * (6 + 2 * 2) + 8 * self.num_words
                + 32 * _blocks(self.num_tokens, 4, FINGERPRINT_BLOCK_BYTES)
                + 2 * FINGERPRINT_BLOCK_BYTES)

    def combine_parts(self, parts: Sequence[CorpusPart]) -> None:
        """Take the corpus's fingerprint and word counts from parts (part) covering its tokens,
        one after another, instead of reading the tokens: the processes of a run each read
        their own documents and combine every process's part (processes.combine_corpus_parts).
        The values are those of the corpus read whole.  ValueError when the parts do not cover
        the tokens exactly once."""
        parts = sorted(parts, key=lambda part: (part.first, part.last))
        ends = [0] + [part.last for part in parts]
        if ends[-1] != self.num_tokens or any(part.first != end
                                              for part, end in zip(parts, ends)):
            raise ValueError(f"the parts cover tokens {[(p.first, p.last) for p in parts]}, "
                             f"not [0, {self.num_tokens}) once")
        size = FINGERPRINT_BLOCK_BYTES // 4
        digests: dict[int, bytes] = {}
        edges: dict[int, list] = {}
        for part in parts:
            digests.update(enumerate(part.block_digests, part.first_block))
            for start, tokens in part.edges:
                edges.setdefault(start // size, []).append(tokens)
        for block, pieces in edges.items():
            tokens = np.ascontiguousarray(np.concatenate(pieces), "<i4")
            digests[block] = hashlib.sha256(memoryview(tokens).cast("B")).digest()
        num_blocks = _blocks(self.num_tokens, 4, FINGERPRINT_BLOCK_BYTES)
        self.__dict__["_fingerprint"] = self._blocked_fingerprint(
            FINGERPRINT_FORMAT, FINGERPRINT_BLOCK_BYTES,
            [digests[block] for block in range(num_blocks)])
        self.__dict__["_combined_word_counts"] = _read_only(functools.reduce(
            np.add, (part.word_counts for part in parts), np.zeros(self.num_words, np.int64)))

    def legacy_fingerprint(self) -> str:
        """The fingerprint as saberjax computed it before it was hashed in blocks (format
        saberjax-corpus-v1): one SHA-256 over the offsets, the word ids and the vocabulary, on
        one thread (2 to 3 ns a token).  Only for records written then (has_fingerprint);
        computed on each call."""
        digest = hashlib.sha256(b"saberjax-corpus-v1\0")
        digest.update(f"{self.num_docs} {self.num_tokens} {self.num_words}\n".encode())
        digest.update(np.ascontiguousarray(self.doc_offsets, dtype="<i8"))
        digest.update(np.ascontiguousarray(self.word_ids, dtype="<i4"))
        digest.update(json.dumps(self.vocab, ensure_ascii=False).encode())
        return digest.hexdigest()

    def earlier_fingerprint(self) -> str:
        """The fingerprint as saberjax computed it in blocks of EARLIER_FINGERPRINT's size
        (format saberjax-corpus-v2), reading every token.  Only for records written then
        (has_fingerprint); computed on each call."""
        format, block_bytes = EARLIER_FINGERPRINT
        return self._blocked_fingerprint(format, block_bytes, block_digests(
            self.word_ids, 0, _blocks(self.num_tokens, 4, block_bytes), block_bytes))

    def has_fingerprint(self, recorded) -> bool:
        """Whether a fingerprint a record holds (a checkpoint's manifest, a model's config) is
        this corpus's: fingerprint(), or earlier_fingerprint() or legacy_fingerprint() for a
        record written before (each computed only when the ones before do not match)."""
        return isinstance(recorded, str) and any(
            recorded == fingerprint() for fingerprint in (
                self.fingerprint, self.earlier_fingerprint, self.legacy_fingerprint))

    def subset(self, doc_indices) -> Corpus:
        """The given documents, in the given order, with the same vocabulary and name.

        Each run of consecutive documents is copied as one slice, so the tokens cost no
        memory beyond the result (a train/test split of the corpus is a few thousand runs).
        """
        docs = int_vector(doc_indices, "doc_indices")
        if docs.size and (docs.min() < 0 or docs.max() >= self.num_docs):
            raise IndexError(f"doc_indices must lie in [0, {self.num_docs}), "
                             f"got values from {docs.min()} to {docs.max()}")
        heads = docs[np.diff(docs, prepend=-2) != 1]  # first and last document of each run
        tails = docs[np.diff(docs, append=-2) != 1]
        starts, ends = self.doc_offsets[heads].tolist(), self.doc_offsets[tails + 1].tolist()
        word_ids = np.concatenate([self.word_ids[:0]] + [
            self.word_ids[start:end] for start, end in zip(starts, ends)])
        return Corpus(offsets_from_lengths(self.doc_lengths()[docs]), word_ids, self.vocab,
                      name=self.name,
                      doc_names=None if self.doc_names is None else self.doc_names[docs])

    def doc_word_counts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(doc int64, word int32, count int32) per distinct (doc, word) pair, by doc then word.

        The sparse document-word count matrix, for count-based initialisation and evaluation.
        """
        docs = np.repeat(np.arange(self.num_docs, dtype=np.int64), self.doc_lengths())
        keys, counts = np.unique(docs * self.num_words + self.word_ids, return_counts=True)
        doc, word = np.divmod(keys, max(self.num_words, 1))
        return doc, word.astype(np.int32), counts.astype(np.int32)


class CorpusPart(NamedTuple):
    """What a process's tokens [first, last) give towards its corpus's fingerprint and word
    counts (Corpus.part), for Corpus.combine_parts; sent between processes as bytes
    (to_bytes, from_bytes)."""

    first: int
    last: int
    word_counts: np.ndarray  # int64 [V]: the part's tokens per word id
    first_block: int  # the first fingerprint block lying wholly in the part
    block_digests: tuple[bytes, ...]  # SHA-256 of the blocks first_block ... in the part
    # (first token, int32 word ids) of its tokens in the blocks it shares with the tokens
    # before and after it: at most one at each end
    edges: tuple[tuple[int, np.ndarray], ...]

    def to_bytes(self) -> bytes:
        """The part as bytes: a header of int64 (first, last, first_block, blocks, V, edges,
        each edge's first token and length), the counts, the digests, the edges' word ids;
        all little-endian."""
        header = [self.first, self.last, self.first_block, len(self.block_digests),
                  self.word_counts.size, len(self.edges)]
        for start, tokens in self.edges:
            header += [start, tokens.size]
        return b"".join([np.asarray(header, "<i8").tobytes(),
                         np.asarray(self.word_counts, "<i8").tobytes(),
                         *self.block_digests,
                         *(np.asarray(tokens, "<i4").tobytes() for _, tokens in self.edges)])

    @classmethod
    def from_bytes(cls, data: bytes) -> CorpusPart:
        """The part to_bytes wrote at the start of data (what follows is ignored)."""
        first, last, first_block, blocks, num_words, num_edges = np.frombuffer(data, "<i8", 6)
        header = np.frombuffer(data, "<i8", 6 + 2 * num_edges)
        at = header.nbytes
        counts = np.frombuffer(data, "<i8", num_words, at).astype(np.int64)
        at += counts.nbytes
        digests = tuple(data[at + 32 * i : at + 32 * (i + 1)] for i in range(blocks))
        at += 32 * blocks
        edges = []
        for start, size in header[6:].reshape(-1, 2):
            edges.append((int(start), np.frombuffer(data, "<i4", size, at).astype(np.int32)))
            at += 4 * int(size)
        return cls(int(first), int(last), counts, int(first_block), digests, tuple(edges))


def _blocks(items: int, item_bytes: int, block_bytes: int) -> int:
    """Blocks of block_bytes holding `items` items of item_bytes (the last one short)."""
    return -(-items * item_bytes // block_bytes)


def block_digests(array: np.ndarray, first: int, last: int, block_bytes: int,
                  workers: int | None = None) -> list[bytes]:
    """SHA-256 digests of the blocks first ... last - 1 of block_bytes of an array (as
    little-endian, the array's last block short): contiguous runs of blocks hashed at once on
    `workers` threads (default: one per core; hashlib releases the GIL)."""
    size = block_bytes // array.itemsize
    pieces = thread_count(last - first, workers)
    cuts = [first + piece * (last - first) // pieces for piece in range(pieces + 1)]

    def run(piece: int) -> list[bytes]:
        digests = []
        for block in range(cuts[piece], cuts[piece + 1]):
            data = np.ascontiguousarray(array[block * size : (block + 1) * size],
                                        dtype=array.dtype.newbyteorder("<"))
            digests.append(hashlib.sha256(memoryview(data).cast("B")).digest())
        return digests

    return [digest for run_digests in on_threads(run, range(pieces), pieces)
            for digest in run_digests]


def align_vocabulary(corpus: Corpus, vocab: Sequence[str]) -> Corpus:
    """The corpus re-expressed in another vocabulary, matching words by their strings.

    Tokens of words missing from `vocab` are dropped (with a warning saying how many), and
    documents keep their order, so that test documents with their own vocabulary file can be
    scored against a trained model.  A corpus none of whose tokens is left is an error
    (CorpusFormatError naming both vocabularies' sizes), since scoring nothing would look like
    a perfect score.  Returns the corpus itself when the vocabularies are equal.
    """
    vocab = tuple(vocab)
    if corpus.vocab == vocab:
        return corpus
    index = {word: i for i, word in enumerate(vocab)}
    mapping = np.array([index.get(word, -1) for word in corpus.vocab], dtype=np.int64)
    mapped = mapping[corpus.word_ids]
    known = mapped >= 0
    shared = (f"{int((mapping >= 0).sum())} of its {len(corpus.vocab)} words are in the model "
              f"vocabulary of {len(vocab)} words")
    if corpus.num_tokens and not known.any():
        raise CorpusFormatError(f"{corpus.name or 'corpus'}: shares no word with the model's "
                                f"vocabulary: {shared}, so none of its {corpus.num_tokens} "
                                f"tokens can be scored; is it in the model's language?")
    if not known.all():
        warnings.warn(f"{corpus.name or 'corpus'}: {shared}; dropped {int((~known).sum())} of "
                      f"{corpus.num_tokens} tokens whose words are not in the model vocabulary",
                      stacklevel=2)
    docs = np.repeat(np.arange(corpus.num_docs), corpus.doc_lengths())[known]
    lengths = np.bincount(docs, minlength=corpus.num_docs)
    return Corpus(offsets_from_lengths(lengths), mapped[known].astype(np.int32), vocab,
                  name=corpus.name, dropped_empty_docs=corpus.dropped_empty_docs,
                  unknown_tokens=corpus.unknown_tokens + int((~known).sum()),
                  doc_names=corpus.doc_names)


def from_entries(doc, word, count, num_docs: int, vocab: tuple[str, ...], name: str,
                 source: str, keep_empty: bool = False) -> Corpus:
    """The corpus of validated entries: count[i] >= 1 tokens of word word[i] in document doc[i]
    (0-based, doc in [0, num_docs), word in [0, len(vocab))), expanded into a token stream.

    Entries are grouped by document stably, so each document keeps its entries' order;
    documents without entries are dropped (and counted, with a warning naming `source`), so
    the cost never depends on num_docs, unless keep_empty (one document per id, empty ones
    included). The corpus is named `name`.
    """
    if np.any(doc[1:] < doc[:-1]):
        order = np.argsort(doc, kind="stable")
        doc, word, count = doc[order], word[order], count[order]
    return from_doc_runs(doc, count, np.repeat(word.astype(np.int32), count), num_docs,
                         vocab, name, source, keep_empty)


def from_doc_runs(doc, tokens, word_ids, num_docs: int, vocab: tuple[str, ...],
                  name: str, source: str, keep_empty: bool = False) -> Corpus:
    """The corpus of word_ids, made of runs of tokens[i] >= 1 tokens of document doc[i]
    (non-decreasing in [0, num_docs)); documents without tokens are dropped (with a warning)
    unless keep_empty."""
    if keep_empty:  # document d starts where the runs of documents >= d start
        first_run = np.searchsorted(doc, np.arange(num_docs + 1))
        return Corpus(offsets_from_lengths(tokens)[first_run], word_ids, vocab, name=name)
    doc_starts = np.flatnonzero(np.diff(doc, prepend=-1))  # tokens >= 1: no empty docs here
    doc_offsets = offsets_from_lengths(tokens)[np.append(doc_starts, doc.size)]
    dropped = num_docs - doc_starts.size
    if dropped:
        warnings.warn(f"{source}: dropped {dropped} empty document(s)", stacklevel=2,
                      skip_file_prefixes=(PACKAGE_DIR,))
    return Corpus(doc_offsets, word_ids, vocab, name=name, dropped_empty_docs=dropped)


def int_vector(values, what: str) -> np.ndarray:
    """values as a 1-D integer array (an empty sequence counts as integer); CorpusFormatError
    naming `what` otherwise."""
    array = np.asarray(values)
    if array.size == 0 and not np.issubdtype(array.dtype, np.integer):
        array = array.astype(np.int64)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise CorpusFormatError(
            f"{what} must be a 1-D integer array, got dtype {array.dtype} and shape {array.shape}")
    return array


def check_word_ids(word_ids: np.ndarray, num_words: int, workers: int | None = None,
                   first: int = 0) -> None:
    """CorpusFormatError naming the first word id outside [0, num_words), if any (word_ids
    being the corpus's from token `first` on).

    The smallest and largest id are found a block of CHECK_BLOCK tokens at a time (both
    reductions of a block while it is in the cache) in `workers` contiguous pieces at once on
    threads (default: one per core; numpy's reductions release the GIL); the offending id is
    searched for only when there is one.  The blocks of a memory-mapped corpus are released
    once checked (release_mapped), so that checking it does not make it resident.
    """
    if word_ids.size == 0:
        return
    num_blocks = -(-word_ids.size // CHECK_BLOCK)
    pieces = thread_count(num_blocks, workers)
    cuts = [piece * num_blocks // pieces * CHECK_BLOCK for piece in range(pieces + 1)]

    def extremes(piece: int) -> tuple[int, int]:
        lowest, highest = np.iinfo(np.int64).max, np.iinfo(np.int64).min
        for start in range(cuts[piece], min(cuts[piece + 1], word_ids.size), CHECK_BLOCK):
            block = word_ids[start : start + CHECK_BLOCK]
            lowest, highest = min(lowest, int(block.min())), max(highest, int(block.max()))
            release_mapped(block)
        return lowest, highest

    lows, highs = zip(*on_threads(extremes, range(pieces), pieces))
    if min(lows) < 0 or max(highs) >= num_words:
        i = int(np.argmax((word_ids < 0) | (word_ids >= num_words)))
        raise CorpusFormatError(
            f"word_ids[{first + i}] is {word_ids[i]}, outside the vocabulary range "
            f"[0, {num_words})")


def release_mapped(array: np.ndarray) -> None:
    """Drops the pages under a view of a file memory-mapped read-only (np.memmap, mode "r")
    from this process's memory: they stay in the page cache, and a later read maps them again,
    so a pass over a memory-mapped corpus leaves its resident memory as it was.  No effect on
    other arrays (a copy-on-write map would lose its changes)."""
    mapped = array
    while isinstance(mapped, np.ndarray) and not (isinstance(mapped, np.memmap)
                                                  and isinstance(mapped.base, mmap.mmap)):
        mapped = mapped.base
    if (not isinstance(mapped, np.memmap) or mapped.mode != "r"
            or not hasattr(mapped.base, "madvise")):
        return
    start = mapped.ctypes.data - mapped.offset % mmap.ALLOCATIONGRANULARITY  # the map's
    first = (array.ctypes.data - start) // mmap.PAGESIZE * mmap.PAGESIZE
    end = min(array.ctypes.data - start + array.nbytes, len(mapped.base))
    if end > first:
        mapped.base.madvise(mmap.MADV_DONTNEED, first, end - first)


def _bincounter(num_words: int, block: int, pieces: int):
    """count(piece, tokens): the counts of up to `block` tokens by np.bincount, through an
    index buffer of the piece's (see Corpus.word_counts)."""
    buffers = [np.empty(block, np.intp) for _ in range(pieces)]

    def count(piece: int, tokens: np.ndarray) -> np.ndarray:
        buffer = buffers[piece][: len(tokens)]
        np.copyto(buffer, tokens)
        return np.bincount(buffer, minlength=num_words)

    return count


def _sparse_counter(num_words: int, block: int, pieces: int):
    """count(piece, tokens): the counts of up to `block` tokens as the row sums of a
    num_words x 1 sparse matrix with a one in each token's row (see Corpus.word_counts); the
    matrix's arrays besides the tokens are shared by the pieces."""
    import scipy.sparse  # here, not with the module: 0.2 s, paid for large corpora only

    column, ones, one = np.zeros(block, np.int32), np.ones(block, np.int32), np.ones(1, np.int32)

    def count(piece: int, tokens: np.ndarray) -> np.ndarray:
        n = len(tokens)
        matrix = scipy.sparse.coo_array((ones[:n], (tokens, column[:n])), shape=(num_words, 1))
        return matrix @ one  # int32: a block's counts are at most its tokens

    return count


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


def offsets_from_lengths(lengths: np.ndarray) -> np.ndarray:
    """Document offsets (int64, D+1) of documents of the given lengths."""
    return np.concatenate((np.zeros(1, np.int64), np.cumsum(lengths, dtype=np.int64)))
