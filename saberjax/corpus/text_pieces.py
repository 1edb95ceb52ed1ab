"""Blocks of documents cut into pieces of whole documents, which the reader's workers
tokenise: pieces of 1 to 4 MB, larger for more threads, or of 512 KB for worker processes
(piece_size), several of them a call for worker processes (task_pieces)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from saberjax.corpus.text_blocks import DocumentBlock, LineRange

PIECE_BYTES = 1 << 22  # most bytes of text in a piece
MIN_PIECE_BYTES = 1 << 20  # fewest, unless the block is smaller
PIECE_BYTES_PER_THREAD = 1 << 18  # pieces grow with the threads, within those bounds
PROCESS_PIECE_BYTES = 1 << 19  # a worker process's pieces (within PIECE_BYTES)
TASK_BYTES = 1 << 22  # of pieces a worker process takes at a call (task_pieces)


def piece_size(threads: int, processes: bool = False) -> int:
    """The size of pieces: for threads, PIECE_BYTES_PER_THREAD times the threads, within
    MIN_PIECE_BYTES and PIECE_BYTES: every numpy call of a piece's takes the GIL back, which
    waits longer the more threads share it, so many threads tokenise larger pieces, and a few
    keep them small, so that the pieces in flight (a few per thread) hold little memory.
    Worker processes share no GIL: their pieces are PROCESS_PIECE_BYTES, whose passes stay
    in a core's caches while every core tokenises (larger ones cost more per byte, smaller
    ones more per call of the JSON parser and in the worker's words)."""
    if processes:
        return min(PROCESS_PIECE_BYTES, PIECE_BYTES)
    return max(min(threads * PIECE_BYTES_PER_THREAD, PIECE_BYTES),
               min(MIN_PIECE_BYTES, PIECE_BYTES))


def task_pieces(piece_bytes: int, processes: bool) -> int:
    """Consecutive pieces handed to a worker at a call: a worker process's call costs the
    collecting process a pickle, two pipes and a thread's hand-over, which for 1 MB pieces
    on many cores keep it busier than the workers, so processes take TASK_BYTES of pieces a
    call; a thread's call costs a future, and threads take a piece."""
    return max(1, TASK_BYTES // piece_bytes) if processes else 1


def block_pieces(block: DocumentBlock | LineRange, piece_bytes: int
                 ) -> Iterator[DocumentBlock | LineRange]:
    """`block` cut into pieces of whole documents of about piece_bytes (a block of lines or of
    records, its offsets None, is cut after a line break, its pieces' offsets, or records,
    left to the tokenising workers; a range of a file's lines into ranges of piece_bytes)."""
    if isinstance(block, LineRange):
        for start in range(block.start, block.end, piece_bytes):
            yield block._replace(start=start, end=min(start + piece_bytes, block.end))
        return
    if block.offsets is None:
        yield from line_pieces(block.data, piece_bytes, block.parse)
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


def line_pieces(data: np.ndarray, piece_bytes: int, parse) -> Iterator[DocumentBlock]:
    """`data`, lines of documents (or of records, which `parse` reads), cut into pieces each
    ending at the first line break from piece_bytes past its start on."""
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
