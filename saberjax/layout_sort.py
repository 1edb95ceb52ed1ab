"""The word-major order of one PDOW chunk (saberjax.layout.build_chunk), in linear time: a stable
two-level bucket sort by word rank of the chunk's token stream (the documents' tokens, longest
documents first, ties in document order, each document's in order), whose result is the
word-major order (rank, longer documents first, doc-major position):

- the ranks are cut into buckets of consecutive ranks of about BUCKET_TOKENS tokens each
  (RankBuckets, from a sample of the chunk; a word of many tokens is a bucket of its own), and
  the stream into blocks of up to BLOCK_TOKENS tokens;
- a first pass counts each block's tokens of each bucket; a second moves each block's tokens,
  grouped by bucket (numpy's radix sort of 16-bit keys), to its bucket's share of the output
  arrays, where the buckets follow each other in rank order and a bucket's tokens keep the
  stream order;
- a third sorts each bucket of several ranks stably by rank (the same radix sort of the rank
  within the bucket); a bucket of one rank is in order already.

The output arrays themselves hold the tokens between the passes, so no array of the chunk's
size is allocated besides them, and every pass works on a block or a bucket at a time, whose
temporaries stay in the core's cache.  Each pass is cut into contiguous Pieces that run at once
on the build threads, one per core and shared by every build of the process; the passes are
numpy calls that release the GIL.  The arrays are the same for any pieces, blocks and buckets:
they are the stable order.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

# fewest tokens per piece of a chunk built by several threads (layout.build_chunk): smaller
# chunks are built in one piece, in the calling thread
PIECE_TOKENS = 1 << 18
# the passes' work units: stream blocks of up to BLOCK_TOKENS tokens (at most MAX_BLOCKS of
# them: larger blocks in a larger chunk) and buckets of ranks of about BUCKET_TOKENS tokens (at
# most MAX_BUCKETS such shares), each small enough for its temporaries to stay in a core's
# cache; RANK_SAMPLE tokens of a chunk are counted to cut its buckets
BLOCK_TOKENS = 1 << 17
MAX_BLOCKS = 1 << 12
BUCKET_TOKENS = 1 << 18
MAX_BUCKETS = 1 << 11
RANK_SAMPLE = 1 << 16


class WordMajor(NamedTuple):
    """A chunk's tokens in word-major order, padded; see saberjax.layout.Chunk."""

    word: np.ndarray  # int32 [T_pad] word id (0 in padding)
    doc: np.ndarray  # int32 [T_pad] chunk-local document (the padding document in padding)
    doc_major_pos: np.ndarray  # int32 [T_pad] doc-major position
    word_starts: np.ndarray  # int64: the first word-major position of each word's tokens


def word_major_order(words: np.ndarray, doc_offsets: np.ndarray, word_rank: np.ndarray,
                     padded_tokens: int, pieces: Pieces,
                     piece_tokens: int = PIECE_TOKENS) -> WordMajor:
    """The word-major order of a chunk's doc-major `words` (int32), whose documents start at
    doc_offsets (int64, from 0, one more than the documents), padded to padded_tokens tokens
    (padding tokens: word 0, the padding document, the padding's doc-major positions); the
    passes (module docstring) cut into `pieces`, blocks of at most piece_tokens tokens."""
    return _ChunkSort(words, doc_offsets, word_rank, padded_tokens, pieces, piece_tokens).run()


class _ChunkSort:
    """The state of one chunk's sort: its token stream, buckets and blocks, and the output
    arrays that hold the tokens between the passes."""

    def __init__(self, words: np.ndarray, doc_offsets: np.ndarray, word_rank: np.ndarray,
                 padded_tokens: int, pieces: Pieces, piece_tokens: int):
        lengths = np.diff(doc_offsets)
        self.words, self.pieces, self.padded_tokens = words, pieces, padded_tokens
        self.num_tokens, self.num_docs = len(words), len(lengths)
        num_tokens = self.num_tokens
        # the stream: documents with tokens, longest first (ties in document order); a radix
        # sort where every length is under 65,536
        longest = int(lengths.max(initial=0))
        shortness = longest - lengths
        doc_order = np.argsort(shortness.astype(np.uint16) if longest < 1 << 16 else shortness,
                               kind="stable")
        self.doc_order = doc_order[lengths[doc_order] > 0].astype(np.int32)
        self.stream_offsets = np.concatenate([[0], np.cumsum(lengths[self.doc_order])])
        # each one's doc-major start
        self.stream_pos = doc_offsets[self.doc_order].astype(np.int32)
        self.buckets = RankBuckets(words, word_rank, num_tokens)
        self.block = max(1, min(BLOCK_TOKENS, piece_tokens, num_tokens),
                         -(-num_tokens // MAX_BLOCKS))
        self.num_blocks = -(-num_tokens // self.block)
        self.word = np.empty(padded_tokens, np.int32)
        self.doc = np.empty(padded_tokens, np.int32)
        self.doc_major_pos = np.empty(padded_tokens, np.int32)
        self.block_counts = np.empty((self.num_blocks, self.buckets.count), np.int64)
        self.bucket_edges = np.arange(1, self.buckets.count, dtype=np.uint16)

    def run(self) -> WordMajor:
        """The three passes (module docstring) and the padding."""
        self.pieces.over(self.num_blocks, self.count)
        self.bucket_start = np.concatenate([[0], np.cumsum(self.block_counts.sum(axis=0))])
        # where each block's tokens of each bucket go: after the earlier blocks' of that bucket
        self.block_offsets = np.cumsum(self.block_counts, axis=0)
        self.block_offsets -= self.block_counts
        self.block_offsets += self.bucket_start[:-1]
        self.pieces.over(self.num_blocks, self.place)
        # pass 3 is shared by the tokens of the buckets of several ranks (a bucket of one rank
        # is no work)
        self.bucket_work = np.where(self.buckets.single, 0, np.diff(self.bucket_start))
        self.work_before = np.concatenate([[0], np.cumsum(self.bucket_work)])
        word_starts = np.concatenate([np.zeros(0, np.int64), *(
            starts for part in self.pieces.over(int(self.work_before[-1]), self.sort_buckets)
            for starts in part)])
        return WordMajor(self.word, self.doc, self.doc_major_pos, word_starts)

    def block_keys(self, index: int, work: _Blocks) -> tuple[int, int, int]:
        """Stream block `index`: its tokens' doc-major positions, words and buckets."""
        start = index * self.block
        stop = min(start + self.block, self.num_tokens)
        n = stop - start
        expand_slice(self.stream_pos, self.stream_offsets, start, stop, 1, work.pos[:n])
        np.copyto(work.index[:n], work.pos[:n])
        np.take(self.words, work.index[:n], out=work.words[:n], mode="clip")
        np.copyto(work.index[:n], work.words[:n])
        np.take(self.buckets.of_word, work.index[:n], out=work.keys[:n], mode="clip")
        return start, stop, n

    def count(self, _, start: int, stop: int) -> None:
        """Pass 1 over blocks start .. stop - 1: tokens of each bucket in each block."""
        work = _Blocks(self.block)
        for index in range(start, stop):
            _, _, n = self.block_keys(index, work)
            work.keys[:n].sort(kind="stable")
            self.block_counts[index] = np.diff(
                np.concatenate([[0], np.searchsorted(work.keys[:n], self.bucket_edges), [n]]))

    def place(self, _, start: int, stop: int) -> None:
        """Pass 2 over blocks start .. stop - 1: each block's tokens to their buckets' shares
        of the output arrays."""
        work = _Blocks(self.block)
        for index in range(start, stop):
            first, last, n = self.block_keys(index, work)
            expand_slice(self.doc_order, self.stream_offsets, first, last, 0, work.docs[:n])
            order = np.argsort(work.keys[:n], kind="stable")
            counts = self.block_counts[index]
            present = np.flatnonzero(counts)
            expand_slice(self.block_offsets[index, present],
                         np.concatenate([[0], np.cumsum(counts[present])]),
                         0, n, 1, work.sorted_target[:n])
            work.target[:n][order] = work.sorted_target[:n]
            del order
            self.doc_major_pos[work.target[:n]] = work.pos[:n]
            self.doc[work.target[:n]] = work.docs[:n]
            self.word[work.target[:n]] = work.words[:n]

    def sort_buckets(self, piece: int, start: int, stop: int) -> list[np.ndarray]:
        """Pass 3: the buckets whose work starts in start .. stop - 1 of the total (the last
        piece: every bucket from start on) sorted, and their words' first word-major
        positions; the piece's share of the padding."""
        self.pad(piece)
        bucket_start = self.bucket_start
        own = range(int(np.searchsorted(self.work_before[:-1], start)) if piece else 0,
                    int(np.searchsorted(self.work_before[:-1], stop))
                    if piece < self.pieces.count - 1 else self.buckets.count)
        sizes = np.diff(bucket_start[own.start : own.stop + 1])
        most = int(self.bucket_work[own.start : own.stop].max(initial=0))
        index, keys, moved = np.empty(most, np.intp), np.empty(most, np.uint16), np.empty(
            most, np.int32)
        word, word_starts = self.word, []
        for bucket, n in zip(own, sizes.tolist()):
            first, last = int(bucket_start[bucket]), int(bucket_start[bucket + 1])
            if n == 0:
                continue
            if self.buckets.single[bucket]:
                word_starts.append(np.array([first]))
                continue
            np.copyto(index[:n], word[first:last])
            np.take(self.buckets.key_of_word, index[:n], out=keys[:n], mode="clip")
            order = np.argsort(keys[:n], kind="stable")
            for array in (word, self.doc, self.doc_major_pos):
                np.take(array[first:last], order, out=moved[:n], mode="clip")
                array[first:last] = moved[:n]
            del order
            word_starts.append(np.concatenate(
                [[0], np.flatnonzero(word[first + 1 : last] != word[first : last - 1]) + 1])
                + first)
        return word_starts

    def pad(self, piece: int) -> None:
        """The piece's share of the padding tokens: word 0, the padding document, the doc-major
        positions from num_tokens on."""
        num_tokens, padded_tokens = self.num_tokens, self.padded_tokens
        pad_first, pad_last = (num_tokens + (padded_tokens - num_tokens) * share
                               // self.pieces.count for share in (piece, piece + 1))
        self.word[pad_first:pad_last] = 0
        self.doc[pad_first:pad_last] = self.num_docs
        expand_slice(np.array([num_tokens]), np.array([0, padded_tokens - num_tokens]),
                     pad_first - num_tokens, pad_last - num_tokens, 1,
                     self.doc_major_pos[pad_first:pad_last])


class Pieces:
    """Work on a chunk cut into `count` contiguous pieces that run at once on the build
    threads (in the calling thread when there is one piece)."""

    def __init__(self, count: int):
        self.count = count

    def over(self, total: int, work: Callable[[int, int, int], object]) -> list:
        """[work(piece, start, stop) for each piece's share start .. stop - 1 of range(total)]."""
        cuts = [piece * total // self.count for piece in range(self.count + 1)]

        def run(piece: int):
            return work(piece, cuts[piece], cuts[piece + 1])

        if self.count == 1:
            return [run(0)]
        return list(_build_threads().map(run, range(self.count)))

    def expand(self, values: np.ndarray, offsets: np.ndarray, step: int,
               out: np.ndarray) -> None:
        """out[:offsets[-1]] = runs i of values[i], values[i] + step, ... at positions
        offsets[i] .. offsets[i + 1] - 1 (see expand_slice)."""
        self.over(int(offsets[-1]), lambda _, start, stop: expand_slice(
            values, offsets, start, stop, step, out[start:stop]))


_build_threads_lock = threading.Lock()
_build_threads_pool: concurrent.futures.ThreadPoolExecutor | None = None


def _build_threads() -> concurrent.futures.ThreadPoolExecutor:
    """The threads that run the pieces of chunk builds, one per core, shared by every build of
    the process: chunks built at once (build_layout's, a chunk store's builders) queue their
    pieces here instead of starting threads of their own, so the cores are not oversubscribed."""
    global _build_threads_pool
    with _build_threads_lock:
        if _build_threads_pool is None:
            _build_threads_pool = concurrent.futures.ThreadPoolExecutor(
                os.cpu_count() or 1, thread_name_prefix="saberjax-layout")
        return _build_threads_pool


def _forget_build_threads() -> None:
    """In a forked child: the parent's build threads do not exist there; start new ones."""
    global _build_threads_lock, _build_threads_pool
    _build_threads_lock, _build_threads_pool = threading.Lock(), None


os.register_at_fork(after_in_child=_forget_build_threads)


def expand_slice(values: np.ndarray, offsets: np.ndarray, start: int, stop: int, step: int,
                  target: np.ndarray) -> None:
    """target[:] = entries start .. stop - 1 of the runs i of values[i], values[i] + step, ...
    at positions offsets[i] .. offsets[i + 1] - 1 (offsets from 0, increasing; a run of
    length 0 only at the end; every value in int32).

    np.repeat(values, np.diff(offsets)) for step 0, but as a scatter of the steps between
    runs and a cumulative sum, which numpy runs without the GIL (np.repeat holds it), so
    slices expand in parallel.
    """
    if start >= stop:
        return
    first = int(np.searchsorted(offsets, start, side="right")) - 1
    last = int(np.searchsorted(offsets, stop, side="left"))  # runs first .. last - 1
    jumps = np.subtract(values[first + 1 : last], values[first : last - 1], dtype=np.int32)
    if step:
        lengths = np.diff(offsets[first:last])
        lengths -= 1
        lengths *= step
        jumps -= lengths
        del lengths
    heads = offsets[first + 1 : last] - start
    target.fill(step)
    target[0] = int(values[first]) + step * (start - int(offsets[first]))
    target[heads] = jumps
    np.cumsum(target, out=target)


class _Blocks:
    """Buffers for the passes over stream blocks of up to `size` tokens, allocated
    once by the thread that runs a piece and written in place block after block, so that the
    passes allocate little besides numpy's argsort."""

    def __init__(self, size: int):
        self.pos = np.empty(size, np.int32)  # doc-major positions
        self.docs = np.empty(size, np.int32)
        self.words = np.empty(size, np.int32)
        self.keys = np.empty(size, np.uint16)  # buckets
        self.index = np.empty(size, np.intp)  # indexes for np.take, which copies others
        self.target = np.empty(size, np.intp)  # output positions
        self.sorted_target = np.empty(size, np.intp)


class RankBuckets:
    """Word ranks cut into buckets of consecutive ranks for the sort: about BUCKET_TOKENS
    of the chunk's tokens each (at most MAX_BUCKETS such shares; counted on every stride-th
    token, RANK_SAMPLE of them), a rank of a share's tokens or more a bucket of its own, and
    at most 65,536 ranks in a bucket, so that a rank within its bucket is a 16-bit key.  The
    buckets only steer the work: the chunk is the same for any of them."""

    def __init__(self, words: np.ndarray, word_rank: np.ndarray, num_tokens: int):
        num_words = len(word_rank)
        stride = max(1, num_tokens // RANK_SAMPLE)
        sample = np.bincount(np.take(word_rank, words[::stride]), minlength=num_words)
        shares = max(1, min(MAX_BUCKETS, -(-num_tokens // BUCKET_TOKENS)))
        share = max(int(sample.sum()), 1) / shares  # sampled tokens per share
        share_of_rank = (np.cumsum(sample) - sample) // share
        heavy = sample >= share
        ranks = np.arange(num_words)
        starts = np.ones(num_words, bool)  # the first rank of each bucket
        starts[1:] = ((share_of_rank[1:] != share_of_rank[:-1]) | heavy[1:] | heavy[:-1]
                      | (ranks[1:] >> 16 != ranks[:-1] >> 16))
        self.first_rank = np.append(np.flatnonzero(starts), num_words)  # and the end
        self.count = len(self.first_rank) - 1
        self.single = np.diff(self.first_rank) == 1  # buckets of one rank
        bucket_of_rank = np.cumsum(starts) - 1
        # per word id: its bucket and its rank within the bucket (numpy's radix sort of
        # 16-bit keys makes one pass where the keys are under 256, two otherwise)
        self.of_word = np.take(bucket_of_rank, word_rank).astype(np.uint16)
        self.key_of_word = np.take(ranks - self.first_rank[bucket_of_rank],
                                   word_rank).astype(np.uint16)
