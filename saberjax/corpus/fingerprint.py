"""Corpus fingerprints: the SHA-256 of a corpus's token layout and vocabulary, its formats, and
the parts (CorpusPart) from which the processes of a run combine it.

The fingerprint is the SHA-256 of: a header (FINGERPRINT_FORMAT, the sizes D T V and
FINGERPRINT_BLOCK_BYTES); the SHA-256 digest of each FINGERPRINT_BLOCK_BYTES block of
doc_offsets (int64 little-endian) and then of word_ids (int32 little-endian), the last block of
each shorter, runs of blocks hashed at once on a thread per core (hashlib releases the GIL); the
vocabulary as JSON.  The word ids' blocks lie at fixed positions whatever reads them, so the
processes of a run hash the blocks of their own tokens (corpus_part) and combine them
(combined_fingerprint).  Records written with an earlier definition hold EARLIER_FINGERPRINT's
(earlier_fingerprint) or legacy_fingerprint's.  Each function takes a Corpus (its doc_offsets,
word_ids and vocab); the Corpus's methods of the same names delegate here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from saberjax.background import on_threads, thread_count

# Bytes of doc_offsets and word_ids per SHA-256 block of the fingerprint: part of its
# definition (a multiple of 8, recorded in the hashed header), not a tuning knob.  Small, so
# that a process's part of the corpus shares at most a block's tokens with each neighbour
# (corpus_part); large enough that a block's hashing outweighs the call.
FINGERPRINT_BLOCK_BYTES = 1 << 18
FINGERPRINT_FORMAT = b"saberjax-corpus-v3\0"
# The blocked fingerprint records written before FINGERPRINT_FORMAT hold (earlier_fingerprint):
# (format, block bytes)
EARLIER_FINGERPRINT = (b"saberjax-corpus-v2\0", 1 << 26)


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


def fingerprint(corpus) -> str:
    """The corpus's fingerprint (the module's definition), reading every token."""
    return _blocked_fingerprint(corpus, FINGERPRINT_FORMAT, FINGERPRINT_BLOCK_BYTES,
                                _word_digests(corpus, FINGERPRINT_BLOCK_BYTES))


def outline(corpus) -> str:
    """SHA-256 hex of the fingerprint's definition without the word ids' blocks: the sizes,
    the document offsets and the vocabulary, which every process of a run holds whole and
    can compare before any reads its tokens."""
    return _blocked_fingerprint(corpus, FINGERPRINT_FORMAT, FINGERPRINT_BLOCK_BYTES, ())


def earlier_fingerprint(corpus) -> str:
    """The fingerprint as saberjax computed it in blocks of EARLIER_FINGERPRINT's size
    (format saberjax-corpus-v2), reading every token."""
    format, block_bytes = EARLIER_FINGERPRINT
    return _blocked_fingerprint(corpus, format, block_bytes, _word_digests(corpus, block_bytes))


def legacy_fingerprint(corpus) -> str:
    """The fingerprint as saberjax computed it before it was hashed in blocks (format
    saberjax-corpus-v1): one SHA-256 over the offsets, the word ids and the vocabulary, on
    one thread (2 to 3 ns a token)."""
    digest = hashlib.sha256(b"saberjax-corpus-v1\0")
    digest.update(f"{corpus.num_docs} {corpus.num_tokens} {corpus.num_words}\n".encode())
    digest.update(np.ascontiguousarray(corpus.doc_offsets, dtype="<i8"))
    digest.update(np.ascontiguousarray(corpus.word_ids, dtype="<i4"))
    digest.update(json.dumps(corpus.vocab, ensure_ascii=False).encode())
    return digest.hexdigest()


def corpus_part(corpus, first: int, last: int, workers: int | None = None) -> CorpusPart:
    """What the tokens [first, last) give towards the whole corpus's fingerprint and word
    counts (combined_fingerprint, Corpus.combine_parts): their word counts (validated,
    Corpus.word_counts), the digests of the fingerprint blocks lying wholly among them and
    their tokens in the blocks they share with the tokens before and after (at most one block
    at each end).  Reads only those tokens."""
    if not 0 <= first <= last <= corpus.num_tokens:
        raise ValueError(f"tokens [{first}, {last}) are not a range of the corpus's "
                         f"{corpus.num_tokens} tokens")
    size = FINGERPRINT_BLOCK_BYTES // 4
    inner_first, inner_last = -(-first // size), last // size
    if last == corpus.num_tokens:  # the short last block of the corpus ends the part
        inner_last = _blocks(last, 4, FINGERPRINT_BLOCK_BYTES)
    inner_last = max(inner_first, inner_last)
    edges = [(start, np.array(corpus.word_ids[start:end], np.int32))
             for start, end in ((first, min(inner_first * size, last)),
                                (max(inner_last * size, first), last)) if start < end]
    return CorpusPart(first, last, corpus.word_counts(workers, (first, last)), inner_first,
                      tuple(block_digests(corpus.word_ids, inner_first, inner_last,
                                          FINGERPRINT_BLOCK_BYTES, workers)),
                      tuple(edges))


def combined_fingerprint(corpus, parts: Sequence[CorpusPart]) -> str:
    """The corpus's fingerprint from parts (corpus_part) covering its tokens, one after
    another, in any order, reading no token: the blocks lying wholly in a part give their
    digests, those shared by neighbouring parts are hashed from their edges.  ValueError when
    the parts do not cover the tokens exactly once."""
    parts = sorted(parts, key=lambda part: (part.first, part.last))
    ends = [0] + [part.last for part in parts]
    if ends[-1] != corpus.num_tokens or any(part.first != end
                                            for part, end in zip(parts, ends)):
        raise ValueError(f"the parts cover tokens {[(p.first, p.last) for p in parts]}, "
                         f"not [0, {corpus.num_tokens}) once")
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
    num_blocks = _blocks(corpus.num_tokens, 4, FINGERPRINT_BLOCK_BYTES)
    return _blocked_fingerprint(corpus, FINGERPRINT_FORMAT, FINGERPRINT_BLOCK_BYTES,
                                [digests[block] for block in range(num_blocks)])


def _blocked_fingerprint(corpus, format: bytes, block_bytes: int,
                         word_digests: Sequence[bytes]) -> str:
    """The fingerprint's definition with the format and block size given, of the word ids'
    block digests given (those of the offsets are hashed here)."""
    digest = hashlib.sha256(format)
    digest.update(f"{corpus.num_docs} {corpus.num_tokens} {corpus.num_words} "
                  f"{block_bytes}\n".encode())
    for block in block_digests(corpus.doc_offsets, 0, _blocks(corpus.doc_offsets.size, 8,
                                                              block_bytes), block_bytes):
        digest.update(block)
    for block in word_digests:
        digest.update(block)
    digest.update(json.dumps(corpus.vocab, ensure_ascii=False).encode())
    return digest.hexdigest()


def _word_digests(corpus, block_bytes: int) -> list[bytes]:
    """The digests of every block of block_bytes of the corpus's word ids."""
    return block_digests(corpus.word_ids, 0, _blocks(corpus.num_tokens, 4, block_bytes),
                         block_bytes)


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
