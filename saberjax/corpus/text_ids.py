"""The pieces' word ids mapped to the vocabulary and written into the corpus, by the workers
that read them (text_workers): each worker finds its pieces' words' vocabulary ids and their
tokens of vocabulary words (piece_starts, which places the pieces in the corpus), then maps
and writes its pieces' ids there (mapped_pieces), into the word ids' parts of a
NativeCorpusWriter (written_corpus) or of an in-memory corpus (in_memory_corpus), files that
the workers write at once (word_id_parts), while the documents' lengths are appended in
order; documents left without a vocabulary word are dropped."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from saberjax.corpus.core import Corpus, offsets_from_lengths
from saberjax.corpus.native import NativeCorpusWriter, load_native
from saberjax.corpus.text_workers import worker_mapped, worker_places
from saberjax.corpus import word_id_parts
from saberjax.corpus.word_id_parts import WordIdParts, sized_parts
from saberjax.corpus.worker_pools import WorkerProcesses, WorkerThreads

APPEND_PIECES = 256  # pieces whose documents the corpus's writer appends at once


def piece_starts(pool: WorkerThreads | WorkerProcesses, num_pieces: int,
                 vocabulary_ids: list[np.ndarray]) -> np.ndarray:
    """Where each piece's tokens of vocabulary words begin in the corpus, [pieces + 1], from
    the workers (`vocabulary_ids`: the vocabulary ids of each worker's words, -1 for none,
    in the order of their indices), which keep their pieces' words' vocabulary ids."""
    tokens = np.zeros(num_pieces, np.int64)
    for kept in pool.each_of(worker_places, [(ids,) for ids in vocabulary_ids]):
        for index, count in kept.items():
            tokens[index] = count
    starts = np.zeros(num_pieces + 1, np.int64)
    np.cumsum(tokens, out=starts[1:])
    return starts


def mapped_pieces(pool: WorkerThreads | WorkerProcesses, doc_ids: list[np.ndarray | None],
                  starts: np.ndarray, parts: WordIdParts, *, write_back: bool) -> Iterator:
    """(tokens of each document kept, which documents are kept, the kept documents' ids or
    None) of each piece in order (`doc_ids`: each piece's documents' ids, or None), its ids
    mapped and written by the worker that read it into the corpus's word ids' `parts` at
    its start (starts), their write-back to disk started at once where `write_back` says
    (text_workers._mapped)."""
    mapped = {}
    for worker in pool.each(worker_mapped, starts, parts, write_back):
        mapped.update(worker)
    for index, ids in enumerate(doc_ids):
        lengths, nonempty = mapped.pop(index)
        yield lengths, nonempty, None if ids is None else ids[nonempty]


def written_corpus(mapped, num_tokens, vocab, name, directory, durable: bool = True):
    """Writes the pieces' documents as a native corpus in `directory` (the kept documents'
    ids its doc_names), each piece's word ids written into the corpus's file by the worker
    mapping them (`mapped`: mapped_pieces but for the file and write_back, which follows
    `durable`: see NativeCorpusWriter), their documents appended APPEND_PIECES pieces at a
    time (an append's checks cost more than its few documents); (its corpus, memory-mapped,
    the dropped documents)."""
    dropped = 0
    with NativeCorpusWriter(directory, vocab, name=name, durable=durable) as writer:
        pieces = mapped(writer.reserve_word_ids(num_tokens), write_back=durable)
        for batch in itertools.batched(pieces, APPEND_PIECES):
            lengths, nonempty, kept_ids = zip(*batch)
            writer.append(np.concatenate(lengths), None,
                          None if kept_ids[0] is None else np.concatenate(kept_ids))
            dropped += sum(map(np.size, nonempty)) - sum(map(np.size, lengths))
    return load_native(directory), dropped


def in_memory_corpus(mapped, num_tokens, vocab, name, path: Path):
    """The pieces' documents as one in-memory corpus (see written_corpus), the word ids
    written into parts whose first is at `path` first (read back at once: their write-back
    to disk is left to the system)."""
    lengths_all, doc_ids, dropped = [], [], 0
    parts = sized_parts(path, 0, num_tokens, word_id_parts.PART_BYTES)
    for lengths, nonempty, kept_ids in mapped(parts, write_back=False):
        lengths_all.append(lengths)
        dropped += int(nonempty.size - lengths.size)
        doc_ids.append(kept_ids)
    word_ids = parts.read()
    lengths = np.concatenate(lengths_all) if lengths_all else np.zeros(0, np.int64)
    doc_names = None if any(ids is None for ids in doc_ids) or not doc_ids else np.concatenate(
        doc_ids)
    return Corpus(offsets_from_lengths(lengths), word_ids, vocab, name,
                  doc_names=doc_names), dropped

