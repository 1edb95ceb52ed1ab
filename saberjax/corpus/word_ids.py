"""Passes over a corpus's word ids on a thread per core: checking them against the vocabulary
(check_word_ids, releasing a memory-mapped corpus's pages as it goes: release_mapped) and
counting them (count_words), each a block at a time so that a block's passes find it in the
cache."""

from __future__ import annotations

import functools
import mmap
import os

import numpy as np

from saberjax.background import on_threads, thread_count
from saberjax.errors import CorpusFormatError

WORD_COUNT_BLOCK = 1 << 18  # fewest tokens per np.bincount in count_words
SPARSE_COUNT_BLOCK = 1 << 20  # fewest tokens per sparse product in count_words
SPARSE_COUNT_TOKENS = 1 << 28  # fewest tokens count_words counts by sparse products
CHECK_BLOCK = 1 << 20  # tokens per np.min / np.max pair in check_word_ids


def count_words(word_ids: np.ndarray, num_words: int, workers: int | None = None) -> np.ndarray:
    """Tokens per word id, int64 [num_words], of word ids already checked (check_word_ids).

    The tokens are cut into `workers` contiguous pieces (default: one per core; at most one
    per block) counted at once on threads, a block at a time, and the pieces' counts are
    summed.  np.bincount holds the GIL for its pass finding its input's smallest and largest
    value (about 0.6 of its 1.5 ns a token), so threads counting with it mostly take turns:
    SPARSE_COUNT_TOKENS tokens or more, counted on several threads, are counted instead as
    the row sums of a V x 1 sparse matrix with a one in each token's row (scipy.sparse's COO
    matrix-vector product, which releases the GIL), in blocks of SPARSE_COUNT_BLOCK tokens
    read where they lie.  scipy comes with jax; it is imported only then (0.2 s).  Fewer
    tokens are counted by np.bincount in blocks of WORD_COUNT_BLOCK tokens, each copied into
    a buffer of np.bincount's index type (np.copyto releases the GIL, np.bincount's own
    conversion of int32 holds it in stretches).  A block holds at least V tokens; the buffers
    are allocated by the calling thread, so the counting threads allocate only counts of V
    words.
    """
    threads = workers or os.cpu_count() or 1
    sparse = threads > 1 and word_ids.size >= SPARSE_COUNT_TOKENS
    block = max(SPARSE_COUNT_BLOCK if sparse else WORD_COUNT_BLOCK, num_words, 1)
    num_blocks = -(-word_ids.size // block)
    pieces = thread_count(num_blocks, threads)
    cuts = [min(piece * num_blocks // pieces * block, word_ids.size)
            for piece in range(pieces + 1)]
    count_block = (_sparse_counter if sparse else _bincounter)(
        num_words, min(block, word_ids.size), pieces)

    def count(piece: int) -> np.ndarray:
        counts = np.zeros(num_words, np.int64)
        for start in range(cuts[piece], cuts[piece + 1], block):
            counts += count_block(piece, word_ids[start : min(start + block, cuts[piece + 1])])
        return counts

    return functools.reduce(np.add, on_threads(count, range(pieces), pieces))


def _bincounter(num_words: int, block: int, pieces: int):
    """count(piece, tokens): the counts of up to `block` tokens by np.bincount, through an
    index buffer of the piece's (see count_words)."""
    buffers = [np.empty(block, np.intp) for _ in range(pieces)]

    def count(piece: int, tokens: np.ndarray) -> np.ndarray:
        buffer = buffers[piece][: len(tokens)]
        np.copyto(buffer, tokens)
        return np.bincount(buffer, minlength=num_words)

    return count


def _sparse_counter(num_words: int, block: int, pieces: int):
    """count(piece, tokens): the counts of up to `block` tokens as the row sums of a
    num_words x 1 sparse matrix with a one in each token's row (see count_words); the
    matrix's arrays besides the tokens are shared by the pieces."""
    import scipy.sparse  # here, not with the module: 0.2 s, paid for large corpora only

    column, ones, one = np.zeros(block, np.int32), np.ones(block, np.int32), np.ones(1, np.int32)

    def count(piece: int, tokens: np.ndarray) -> np.ndarray:
        n = len(tokens)
        matrix = scipy.sparse.coo_array((ones[:n], (tokens, column[:n])), shape=(num_words, 1))
        return matrix @ one  # int32: a block's counts are at most its tokens

    return count


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
