"""The pieces' word ids mapped to the vocabulary and written into the corpus: each piece's
words' vocabulary ids and its place in the corpus (vocabulary_lookups), its ids mapped and
written there by a worker (_mapped, a few pieces ahead: mapped_pieces), into the word ids
file of a NativeCorpusWriter (written_corpus) or of an in-memory corpus (in_memory_corpus),
while the documents' lengths are appended in order; documents left without a vocabulary
word are dropped."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from saberjax import files
from saberjax.corpus.core import Corpus, offsets_from_lengths
from saberjax.corpus.native import NativeCorpusWriter, load_native
from saberjax.corpus.text_words import PieceWords
from saberjax.corpus.tokenizing import token_id_dtype
from saberjax.corpus.worker_pools import WorkerProcesses, in_order


def vocabulary_lookups(pieces: list[tuple[int, PieceWords]], workers: list[np.ndarray]
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
    """(tokens of each document kept, which documents are kept) of a piece (see
    text_workers.Piece), its vocabulary ids written into the file and at the byte offset
    `target` names, by a worker process when target's flag says so: through a memory map,
    its write-back to disk started at once (files.write_mapped: the processes writing one
    file do not queue on its lock), else by write() (a few threads: a memory map's page
    faults would cost more than the lock); either way its write-back starts at once, so that
    the writer's fsync waits for little.  Documents without a vocabulary word are left out."""
    if token_ids is None:
        path, offset = spill
        dtype = token_id_dtype(entries.size)  # entries: one per word of the piece
        with open(path, "rb") as file:
            token_ids = np.frombuffer(os.pread(file.fileno(), int(doc_tokens[-1]) * dtype.itemsize,
                                               offset), dtype)
    ids = entries.take(token_ids)
    kept = ids >= 0
    lengths = np.diff(doc_tokens)
    if not kept.all():
        ends = np.zeros(kept.size + 1, np.int64)
        np.cumsum(kept, out=ends[1:])
        lengths = np.diff(ends[doc_tokens])
        ids = ids.take(np.flatnonzero(kept))  # numpy's boolean index branches on each
    path, offset, in_process = target
    if in_process:
        files.write_mapped(path, offset, ids, write_back=True)
    else:
        with open(path, "r+b") as file:
            files.write_at(file.fileno(), ids, offset)
            files.start_write_back(file.fileno(), offset, ids.nbytes)
    nonempty = lengths > 0
    return lengths[nonempty], nonempty


def mapped_pieces(pool, threads, pieces, lookups, starts, target: tuple[Path, int]
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

    for piece, (lengths, nonempty) in zip(pieces, in_order(pool, _mapped, items(), 2 * threads)):
        yield lengths, nonempty, None if piece.ids is None else piece.ids[nonempty]


def written_corpus(mapped, num_tokens, vocab, name, directory):
    """Writes the pieces' documents as a native corpus in `directory` (the kept documents'
    ids its doc_names), each piece's word ids written into the corpus's file by the worker
    mapping them (`mapped`: mapped_pieces but for the file); (its corpus, memory-mapped,
    the dropped documents)."""
    dropped = 0
    with NativeCorpusWriter(directory, vocab, name=name) as writer:
        for lengths, nonempty, kept_ids in mapped(writer.reserve_word_ids(num_tokens)):
            writer.append(lengths, None, kept_ids)
            dropped += int(nonempty.size - lengths.size)
    return load_native(directory), dropped


def in_memory_corpus(mapped, num_tokens, vocab, name, path: Path):
    """The pieces' documents as one in-memory corpus (see written_corpus), the word ids
    written into a file at `path` first."""
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

