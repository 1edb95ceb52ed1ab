"""PDOW: partition by document, order by word (paper section 3.1).

The corpus is cut into chunks of whole documents under a token budget.  Inside a chunk the
tokens are stored twice over, once in each order the algorithm needs::

    documents of the chunk   d0: [a b a]   d1: [c a]   d2: [b]         (doc-major, T = 6)
    doc-major position        0 1 2         3 4         5
    doc_start                 0             3           5   6 (pad doc) ...

    word-major order (words by decreasing corpus frequency: a, b, c; within a word, longer
    documents first, then by doc-major position)
    word                      a a a b b c
    doc                       0 0 1 0 2 1
    doc_major_pos             0 2 4 1 5 3      <- the shuffle pointers

The sampler walks the word-major arrays (one word's B-hat row and tree stay hot while its
tokens are sampled); the doc-topic matrix A lives in doc-major order, where document d owns the
segment doc_start[d] .. doc_start[d+1] and keeps its (topic, count) pairs compacted at the front;
`doc_major_pos` moves each token's new topic from word-major to doc-major position when A is
rebuilt (shuffle and segmented count).  A token's global id, which keys its random numbers, is
`token_base + doc_major_pos`: the position of the token in the corpus, whatever the chunking.

All chunks of a layout are padded to one size bucket (the largest chunk's), so a run compiles
one shape and the chunks of a mesh's devices are equal shards.  Padding tokens sit at the end of the word-major arrays (word 0) and form one padding
document at the end of the doc-major arrays; every count masks them out.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import threading
from collections.abc import Callable, Collection

import jax
import numpy as np

from saberjax import timing
from saberjax.corpus import Corpus
from saberjax.rng import global_token_ids, split_token_id

DEFAULT_CHUNK_TOKENS = 1 << 26
# fewest tokens per piece of a chunk built by several threads (build_chunk): smaller
# chunks are built in one piece, in the calling thread
PIECE_TOKENS = 1 << 18
# build_chunk's work units: stream blocks of up to BLOCK_TOKENS tokens (at most MAX_BLOCKS
# of them: larger blocks in a larger chunk) and buckets of ranks of about BUCKET_TOKENS
# tokens (at most MAX_BUCKETS such shares), each small enough for its temporaries to stay in
# a core's cache; RANK_SAMPLE tokens of a chunk are counted to cut its buckets
BLOCK_TOKENS = 1 << 17
MAX_BLOCKS = 1 << 12
BUCKET_TOKENS = 1 << 18
MAX_BUCKETS = 1 << 11
RANK_SAMPLE = 1 << 16
TILE_TOKENS = 8  # tokens of one word per E-step program (saberjax.pallas.sampler)


def bucket_size(n: int, minimum: int = 256) -> int:
    """n rounded up to one of 8 sizes per power of two (at most 1/8 padding)."""
    n = max(int(n), minimum)
    step = 1 << max(n.bit_length() - 4, 0)
    return -(-n // step) * step


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Chunk:
    """One PDOW chunk as arrays (numpy on the host, jax on a device); see the module docstring."""

    word: np.ndarray  # int32 [T_pad] word id of each word-major token
    doc: np.ndarray  # int32 [T_pad] chunk-local document of each word-major token
    doc_major_pos: np.ndarray  # int32 [T_pad] doc-major position of each word-major token
    doc_start: np.ndarray  # int32 [D_pad + 1] start of each document's doc-major segment
    num_tokens: np.ndarray  # int32 scalar: real tokens (the rest is padding)
    # uint32 [blocks, 2]: (low, high) words of the global id of the token at doc-major
    # position block * block_tokens (one block for a chunk of consecutive documents)
    token_base: np.ndarray
    # int32 [max_tiles(T_pad, V, tile_tokens) + 1]: the E-step kernel's work list, tiles of up
    # to tile_tokens consecutive word-major tokens of one word; tile i is tile_start[i] ..
    # tile_start[i + 1] - 1, and entries past the last tile hold num_tokens (empty tiles)
    tile_start: np.ndarray
    # static (part of the pytree's structure, so a jitted kernel knows it)
    tile_tokens: int = dataclasses.field(default=TILE_TOKENS, metadata=dict(static=True))
    # doc-major positions per token_base entry (a chunk's padded tokens: one entry)
    block_tokens: int = dataclasses.field(default=1 << 31, metadata=dict(static=True))

    @property
    def padded_tokens(self) -> int:
        return self.word.shape[0]

    @property
    def padded_docs(self) -> int:
        return self.doc_start.shape[0] - 1

    def token_ids(self, doc_major_pos):
        """(low, high) uint32 words of the global ids (corpus positions) of the tokens at
        doc-major positions: what every random draw of a token is keyed by."""
        return block_token_ids(self.token_base, self.block_tokens, doc_major_pos)


def block_token_ids(token_base, block_tokens: int, doc_major_pos):
    """Chunk.token_ids of a token_base table (also read inside kernels)."""
    block = doc_major_pos // block_tokens
    return global_token_ids(token_base[block, 0], token_base[block, 1],
                            doc_major_pos - block * block_tokens)


@dataclasses.dataclass(frozen=True, eq=False)
class Layout:
    """The whole corpus in PDOW chunks, plus what was used to build them."""

    chunks: tuple[Chunk, ...]
    chunk_docs: tuple[tuple[int, int], ...]  # [first, last) corpus documents of each chunk
    num_words: int
    num_docs: int
    num_tokens: int
    word_order: np.ndarray  # int32 [V] word ids by decreasing corpus frequency


def max_tiles(padded_tokens: int, num_words: int, tile_tokens: int) -> int:
    """Most word tiles a chunk can need: full tiles plus one partial tile per distinct word.
    A bound from sizes alone, so chunks of one size bucket keep one shape."""
    return -(-padded_tokens // tile_tokens) + min(num_words, padded_tokens)


def word_tile_start(words: np.ndarray, num_words: int, padded_tokens: int,
                    tile_tokens: int = TILE_TOKENS) -> np.ndarray:
    """Chunk.tile_start for word-major words (real tokens only)."""
    words = np.asarray(words)
    run_starts = np.flatnonzero(np.diff(words, prepend=-1) != 0)  # each word's first token
    return _tile_start(run_starts, np.diff(run_starts, append=len(words)), num_words,
                       padded_tokens, tile_tokens)


def _tile_start(run_starts: np.ndarray, run_lengths: np.ndarray, num_words: int,
                padded_tokens: int, tile_tokens: int,
                pieces: _Pieces | None = None) -> np.ndarray:
    """Chunk.tile_start of word-major runs of one word each (lengths >= 1): every run cut
    into tiles of tile_tokens tokens, in O(tiles) (the heads expanded in `pieces`)."""
    run_tiles = -(-np.asarray(run_lengths, np.int64) // tile_tokens)
    tile_offsets = np.concatenate([[0], np.cumsum(run_tiles)])
    num_tiles = int(tile_offsets[-1])
    tile_start = np.empty(max_tiles(padded_tokens, num_words, tile_tokens) + 1, np.int32)
    (pieces or _Pieces(1)).expand(run_starts, tile_offsets, tile_tokens, tile_start)
    tile_start[num_tiles:] = int(np.sum(run_lengths))
    return tile_start


def with_tile_tokens(chunk: Chunk, num_words: int, tile_tokens: int) -> Chunk:
    """The chunk with the E-step work list for tiles of tile_tokens tokens (the layout builds
    TILE_TOKENS; other sizes are for tuning the kernel)."""
    words = np.asarray(chunk.word)[: int(chunk.num_tokens)]
    return dataclasses.replace(chunk, tile_tokens=tile_tokens, tile_start=word_tile_start(
        words, num_words, chunk.padded_tokens, tile_tokens))


def chunk_boundaries(doc_offsets: np.ndarray, chunk_tokens: int,
                     multiple_of: int = 1) -> np.ndarray:
    """Document indices cutting the corpus into the fewest chunks of about chunk_tokens each.

    The number of chunks is ceil(T / chunk_tokens) rounded up to a multiple of `multiple_of`
    (one share per device); cuts are placed at the document boundaries nearest to equal token
    shares, so chunks are balanced.  With fewer documents than chunks some chunks are empty.
    """
    num_docs = len(doc_offsets) - 1
    total = int(doc_offsets[-1])
    num_chunks = max(1, -(-total // max(int(chunk_tokens), 1)))
    num_chunks = -(-num_chunks // multiple_of) * multiple_of
    targets = np.arange(1, num_chunks, dtype=np.float64) * total / num_chunks
    cuts = np.searchsorted(doc_offsets, targets, side="left")
    return np.concatenate([[0], np.clip(cuts, 0, num_docs), [num_docs]]).astype(np.int64)


def padded_shape(doc_offsets: np.ndarray, spans) -> tuple[int, int]:
    """(padded tokens, padded documents) that every chunk of the spans is laid out with: the
    largest chunk's size buckets, so all chunks share one shape (one compiled step, and equal
    shards on a mesh), with room for the padding document."""
    offsets = np.asarray(doc_offsets, np.int64)
    tokens = max(int(offsets[last] - offsets[first]) for first, last in spans)
    docs = max(last - first for first, last in spans)
    return bucket_size(tokens), bucket_size(docs + 1)


def padded_doc_start(offsets: np.ndarray, padded_tokens: int, padded_docs: int) -> np.ndarray:
    """Chunk.doc_start of a chunk whose documents have corpus offsets `offsets` (one more than
    its documents): each document's segment start, then the padding document's (at the
    chunk's real tokens, its segment the padding tokens) and padded_tokens for the rest."""
    doc_start = np.full(padded_docs + 1, padded_tokens, dtype=np.int32)
    doc_start[: len(offsets)] = offsets - offsets[0]
    return doc_start


def build_chunk(corpus: Corpus, first_doc: int, last_doc: int, word_rank: np.ndarray,
                padded_tokens: int, padded_docs: int, workers: int | None = None,
                piece_tokens: int = PIECE_TOKENS) -> Chunk:
    """The PDOW arrays of documents [first_doc, last_doc) of the corpus, padded to
    padded_tokens tokens and padded_docs documents (see padded_shape).

    Linear in tokens, with no comparison sort, as a stable two-level bucket sort by word rank
    of the chunk's token stream (the documents' tokens, longest documents first, ties in
    document order, each document's in order), whose result is the word-major order (rank,
    longer documents first, doc-major position):

    - the ranks are cut into buckets of consecutive ranks of about BUCKET_TOKENS tokens each
      (_RankBuckets, from a sample of the chunk; a word of many tokens is a bucket of its
      own), and the stream into blocks of up to BLOCK_TOKENS tokens;
    - a first pass counts each block's tokens of each bucket; a second moves each block's
      tokens, grouped by bucket (numpy's radix sort of 16-bit keys), to its bucket's share
      of the output arrays, where the buckets follow each other in rank order and a
      bucket's tokens keep the stream order;
    - a third sorts each bucket of several ranks stably by rank (the same radix sort of the
      rank within the bucket); a bucket of one rank is in order already.

    The output arrays themselves hold the tokens between the passes, so no array of the
    chunk's size is allocated besides them, and every pass works on a block or a bucket at a
    time, whose temporaries stay in the core's cache.  Each pass is cut into `workers`
    contiguous pieces (default: one per core; fewer for a chunk of under piece_tokens tokens a
    piece, one below that; blocks of at most piece_tokens tokens) that run at once on the
    build threads (_build_threads); the passes are numpy calls that release the GIL.  The
    arrays are the same for any workers, blocks and buckets: they are the stable order.
    """
    offsets = np.asarray(corpus.doc_offsets[first_doc : last_doc + 1], dtype=np.int64)
    token_base = int(offsets[0])
    words = np.asarray(corpus.word_ids[offsets[0] : offsets[-1]], dtype=np.int32)
    lengths = np.diff(offsets)
    num_tokens, num_docs = len(words), last_doc - first_doc
    pieces = _Pieces(max(1, min(workers or os.cpu_count() or 1, num_tokens // piece_tokens)))

    # the stream: documents with tokens, longest first (ties in document order); a radix
    # sort where every length is under 65,536
    longest = int(lengths.max(initial=0))
    shortness = longest - lengths
    doc_order = np.argsort(shortness.astype(np.uint16) if longest < 1 << 16 else shortness,
                           kind="stable")
    doc_order = doc_order[lengths[doc_order] > 0].astype(np.int32)
    stream_offsets = np.concatenate([[0], np.cumsum(lengths[doc_order])])
    stream_pos = (offsets[doc_order] - token_base).astype(np.int32)  # each one's doc-major start
    buckets = _RankBuckets(words, word_rank, num_tokens)
    block = max(1, min(BLOCK_TOKENS, piece_tokens, num_tokens), -(-num_tokens // MAX_BLOCKS))
    num_blocks = -(-num_tokens // block)
    word = np.empty(padded_tokens, np.int32)
    doc = np.empty(padded_tokens, np.int32)
    doc_major_pos = np.empty(padded_tokens, np.int32)

    def block_keys(index: int, work: _Blocks) -> tuple[int, int, int]:
        """Stream block `index`: its tokens' doc-major positions, words and buckets."""
        start = index * block
        stop = min(start + block, num_tokens)
        n = stop - start
        _expand_slice(stream_pos, stream_offsets, start, stop, 1, work.pos[:n])
        np.copyto(work.index[:n], work.pos[:n])
        np.take(words, work.index[:n], out=work.words[:n], mode="clip")
        np.copyto(work.index[:n], work.words[:n])
        np.take(buckets.of_word, work.index[:n], out=work.keys[:n], mode="clip")
        return start, stop, n

    # pass 1: tokens of each bucket in each block
    block_counts = np.empty((num_blocks, buckets.count), np.int64)
    bucket_edges = np.arange(1, buckets.count, dtype=np.uint16)

    def count(_, start: int, stop: int) -> None:
        work = _Blocks(block)
        for index in range(start, stop):
            _, _, n = block_keys(index, work)
            work.keys[:n].sort(kind="stable")
            block_counts[index] = np.diff(
                np.concatenate([[0], np.searchsorted(work.keys[:n], bucket_edges), [n]]))

    pieces.over(num_blocks, count)
    bucket_start = np.concatenate([[0], np.cumsum(block_counts.sum(axis=0))])
    # where each block's tokens of each bucket go: after the earlier blocks' of that bucket
    block_offsets = np.cumsum(block_counts, axis=0)
    block_offsets -= block_counts
    block_offsets += bucket_start[:-1]

    # pass 2: each block's tokens to their buckets' shares of the output arrays
    def place(_, start: int, stop: int) -> None:
        work = _Blocks(block)
        for index in range(start, stop):
            first, last, n = block_keys(index, work)
            _expand_slice(doc_order, stream_offsets, first, last, 0, work.docs[:n])
            order = np.argsort(work.keys[:n], kind="stable")
            present = np.flatnonzero(block_counts[index])
            _expand_slice(block_offsets[index, present],
                          np.concatenate([[0], np.cumsum(block_counts[index, present])]),
                          0, n, 1, work.sorted_target[:n])
            work.target[:n][order] = work.sorted_target[:n]
            del order
            doc_major_pos[work.target[:n]] = work.pos[:n]
            doc[work.target[:n]] = work.docs[:n]
            word[work.target[:n]] = work.words[:n]

    pieces.over(num_blocks, place)

    # pass 3: buckets of several ranks sorted by rank, shared by their tokens (a bucket of
    # one rank is no work); the padding
    bucket_work = np.where(buckets.single, 0, np.diff(bucket_start))
    work_before = np.concatenate([[0], np.cumsum(bucket_work)])
    total_work = int(work_before[-1])

    def sort_buckets(piece: int, start: int, stop: int) -> list[np.ndarray]:
        """The buckets whose work starts in start .. stop - 1 of the total (the last piece:
        every bucket from start on) sorted, and their words' first word-major positions; the
        piece's share of the padding."""
        pad_first, pad_last = (num_tokens + (padded_tokens - num_tokens) * share // pieces.count
                               for share in (piece, piece + 1))
        word[pad_first:pad_last] = 0
        doc[pad_first:pad_last] = num_docs
        _expand_slice(np.array([num_tokens]), np.array([0, padded_tokens - num_tokens]),
                      pad_first - num_tokens, pad_last - num_tokens, 1,
                      doc_major_pos[pad_first:pad_last])
        own = range(int(np.searchsorted(work_before[:-1], start)) if piece else 0,
                    int(np.searchsorted(work_before[:-1], stop))
                    if piece < pieces.count - 1 else buckets.count)
        sizes = np.diff(bucket_start[own.start : own.stop + 1])
        most = int(bucket_work[own.start : own.stop].max(initial=0))
        index, keys, moved = np.empty(most, np.intp), np.empty(most, np.uint16), np.empty(
            most, np.int32)
        word_starts = []
        for bucket, n in zip(own, sizes.tolist()):
            first, last = int(bucket_start[bucket]), int(bucket_start[bucket + 1])
            if n == 0:
                continue
            if buckets.single[bucket]:
                word_starts.append(np.array([first]))
                continue
            np.copyto(index[:n], word[first:last])
            np.take(buckets.key_of_word, index[:n], out=keys[:n], mode="clip")
            order = np.argsort(keys[:n], kind="stable")
            for array in (word, doc, doc_major_pos):
                np.take(array[first:last], order, out=moved[:n], mode="clip")
                array[first:last] = moved[:n]
            del order
            word_starts.append(np.concatenate(
                [[0], np.flatnonzero(word[first + 1 : last] != word[first : last - 1]) + 1])
                + first)
        return word_starts

    word_starts = np.concatenate([np.zeros(0, np.int64), *(
        starts for part in pieces.over(total_work, sort_buckets) for starts in part)])
    return Chunk(
        word=word,
        doc=doc,
        doc_major_pos=doc_major_pos,
        doc_start=padded_doc_start(offsets, padded_tokens, padded_docs),
        num_tokens=np.int32(num_tokens),
        token_base=np.array([split_token_id(token_base)], dtype=np.uint32),
        tile_start=_tile_start(word_starts, np.diff(word_starts, append=num_tokens),
                               corpus.num_words, padded_tokens, TILE_TOKENS, pieces),
        block_tokens=padded_tokens,
    )


class _Pieces:
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
        offsets[i] .. offsets[i + 1] - 1 (see _expand_slice)."""
        self.over(int(offsets[-1]), lambda _, start, stop: _expand_slice(
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


def _expand_slice(values: np.ndarray, offsets: np.ndarray, start: int, stop: int, step: int,
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
    """Buffers for build_chunk's passes over stream blocks of up to `size` tokens, allocated
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


class _RankBuckets:
    """Word ranks cut into buckets of consecutive ranks for build_chunk: about BUCKET_TOKENS
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


@dataclasses.dataclass(frozen=True, eq=False)
class LayoutPlan:
    """Where a corpus is cut into chunks and the one shape they are padded to, decided before
    any chunk is built (build_layout builds them in memory, saberjax.chunk_store on disk)."""

    chunk_docs: tuple[tuple[int, int], ...]  # [first, last) corpus documents of each chunk
    padded_tokens: int
    padded_docs: int
    word_order: np.ndarray  # int32 [V] word ids by decreasing corpus frequency
    word_rank: np.ndarray  # int32 [V] rank of each word id in word_order

    def build_chunk(self, corpus: Corpus, index: int, workers: int | None = None) -> Chunk:
        """The PDOW arrays of chunk `index` (build_chunk, cut into `workers` pieces)."""
        return build_chunk(corpus, *self.chunk_docs[index], self.word_rank,
                           self.padded_tokens, self.padded_docs, workers=workers)


def plan_layout(corpus: Corpus, chunk_tokens: int | None = None,
                num_parts: int = 1) -> LayoutPlan:
    """The chunks of at most about chunk_tokens tokens that build_layout cuts the corpus into,
    all of one shape; the number of chunks is a multiple of num_parts (see build_layout)."""
    if corpus.num_tokens == 0:
        raise ValueError(f"corpus {corpus.name!r} has no tokens to train on")
    if corpus.num_tokens >= 2**31 and chunk_tokens is None:
        chunk_tokens = DEFAULT_CHUNK_TOKENS
    chunk_tokens = int(chunk_tokens or corpus.num_tokens)
    if not 0 < chunk_tokens < 2**31 - 2**20:
        raise ValueError(f"chunk_tokens must be in [1, 2**31 - 2**20), got {chunk_tokens}")
    word_order = np.argsort(-corpus.word_counts(), kind="stable").astype(np.int32)
    word_rank = np.empty_like(word_order)
    word_rank[word_order] = np.arange(len(word_order), dtype=np.int32)
    cuts = chunk_boundaries(np.asarray(corpus.doc_offsets), chunk_tokens, num_parts)
    spans = tuple((int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]))
    return LayoutPlan(spans, *padded_shape(corpus.doc_offsets, spans), word_order, word_rank)


@timing.in_phase("layout")
def build_layout(corpus: Corpus, chunk_tokens: int | None = None, num_parts: int = 1,
                 parts: Collection[int] | None = None) -> Layout:
    """Cut the corpus into PDOW chunks of at most about chunk_tokens tokens, all of one shape.

    num_parts: the number of chunks is a multiple of it, part p holding the p-th run of
    n / num_parts consecutive chunks (one equal share per device of a mesh).  parts: the parts
    whose chunks are built (None: all); the others are None in Layout.chunks, for a process
    that holds only its own devices' share.
    """
    plan = plan_layout(corpus, chunk_tokens, num_parts)
    spans = plan.chunk_docs
    chunks_per_part = len(spans) // num_parts
    built = [index for index in range(len(spans))
             if parts is None or index // chunks_per_part in parts]
    cores = os.cpu_count() or 1
    threads = max(1, min(len(built), cores))

    def build_one(index: int) -> Chunk | None:
        if index not in built:
            return None
        return plan.build_chunk(corpus, index, workers=max(1, cores // threads))

    # one thread per chunk, each chunk's pieces on its share of the cores (build_chunk)
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        chunks = tuple(pool.map(build_one, range(len(spans))))
    return Layout(
        chunks=chunks,
        chunk_docs=spans,
        num_words=corpus.num_words,
        num_docs=corpus.num_docs,
        num_tokens=corpus.num_tokens,
        word_order=plan.word_order,
    )


def word_shares(corpus: Corpus, layout: Layout, num_parts: int,
                parts: Collection[int]) -> dict[int, Chunk]:
    """The tokens of each of `parts`' shares of the vocabulary, over the doc-major space of
    all chunks of a layout with one chunk per part (partition by word, saberjax.execution).

    Part p holds the words of rank p, p + n, p + 2n, ... (n = num_parts: rows and tokens both
    near-balanced, as word frequencies fall smoothly with rank), as rows rank // n of its
    share of B.  Its tokens come from every chunk, chunk e's doc-major positions and
    documents offset by e * (padded tokens) and e * (padded documents), so a document's
    segment, its A pairs and its tokens' global ids are those of the by-document layout.
    Word-major order as in build_chunk: by row, then longer documents first, then position.
    Padding tokens point past the doc-major space (their topics are never stored) and at the
    last chunk's padding document.  Shares are padded to one size, so every part's arrays
    have one shape.
    """
    offsets = np.asarray(corpus.doc_offsets, np.int64)
    padded_tokens, padded_docs = padded_shape(offsets, layout.chunk_docs)
    num_chunks = len(layout.chunk_docs)
    if num_chunks * padded_tokens + padded_tokens >= 2**31:
        raise ValueError(f"partition by word spans {num_chunks} x {padded_tokens:,} doc-major "
                         f"positions, more than int32 indexes; partition by document")
    word_rank = np.empty(corpus.num_words, np.int32)
    word_rank[layout.word_order] = np.arange(corpus.num_words, dtype=np.int32)
    ranks = word_rank[np.asarray(corpus.word_ids)]
    part_of = ranks % num_parts
    share_tokens = bucket_size(int(np.bincount(part_of, minlength=num_parts).max()))
    lengths = np.diff(offsets)
    firsts = np.array([first for first, _ in layout.chunk_docs])
    chunk_of_doc = np.repeat(np.arange(num_chunks), np.diff(np.append(firsts, corpus.num_docs)))
    # per token: its document's index in the doc-major space and its doc-major position
    doc_index = (chunk_of_doc * padded_docs + np.arange(corpus.num_docs)
                 - firsts[chunk_of_doc]).astype(np.int32)
    doc_base = chunk_of_doc * padded_tokens + offsets[:-1] - offsets[firsts[chunk_of_doc]]
    doc_of_token = np.repeat(np.arange(corpus.num_docs, dtype=np.int32), lengths)
    doc_major_pos = (doc_base[doc_of_token] + np.arange(corpus.num_tokens)
                     - offsets[doc_of_token]).astype(np.int32)
    # sort key: row, then longer documents first (positions are increasing already)
    shortness = (lengths.max(initial=0) - lengths)[doc_of_token]
    key = (ranks // num_parts).astype(np.int64) * (lengths.max(initial=0) + 1) + shortness
    doc_start = np.concatenate(  # every chunk's segment starts, chunk e's at e * padded_tokens
        [padded_doc_start(offsets[first:last + 1], padded_tokens, padded_docs)[:-1]
         + e * padded_tokens for e, (first, last) in enumerate(layout.chunk_docs)]
        + [[num_chunks * padded_tokens]]).astype(np.int32)
    token_base = np.array([split_token_id(int(offsets[first])) for first in firsts], np.uint32)
    num_rows = -(-corpus.num_words // num_parts)

    def share(part: int) -> Chunk:
        position = np.flatnonzero(part_of == part)
        order = position[np.argsort(key[position], kind="stable")]
        num_tokens, pad = len(order), share_tokens - len(order)
        rows = (ranks[order] // num_parts).astype(np.int32)
        return Chunk(
            word=np.concatenate([rows, np.zeros(pad, np.int32)]),
            doc=np.concatenate([doc_index[doc_of_token[order]],
                                np.full(pad, num_chunks * padded_docs - 1, np.int32)]),
            doc_major_pos=np.concatenate([doc_major_pos[order], num_chunks * padded_tokens
                                          + np.arange(pad, dtype=np.int32)]),
            doc_start=doc_start,
            num_tokens=np.int32(num_tokens),
            token_base=token_base,
            tile_start=word_tile_start(rows, num_rows, share_tokens),
            block_tokens=padded_tokens,
        )

    with concurrent.futures.ThreadPoolExecutor(min(len(parts), os.cpu_count() or 1)) as pool:
        return dict(zip(parts, pool.map(share, parts)))
