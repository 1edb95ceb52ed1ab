"""Blocks of documents -> a Corpus: tokens counted on every core, the vocabulary chosen, ids
mapped, written out of core.

`build_corpus` cuts the blocks into pieces of whole documents (text_pieces) and tokenises
them on a pool of workers (saberjax.corpus.worker_pools): a thread per core (numpy releases
the GIL), or, with many cores and a large input written to a corpus folder, a worker process
per core (_uses_processes), at most a few pieces ahead of the one being collected; a block
of records (JSON Lines) is parsed by the worker that tokenises it.  A piece's tokens are ids
into its own dictionary of words, kept by the worker that read it, in memory while the
worker's share of `memory_bytes` holds them and in its temporary file beside the output after
that; each worker adds its pieces' dictionaries to its own words (text_workers, text_words);
the collecting process keeps only its pieces' documents' ids and counts.  When every piece is
read, the workers hand over their words, which are merged into the corpus's; the vocabulary
is chosen from the summed counts (text.VocabularyRules); each worker counts its pieces' tokens
of vocabulary words, which place each piece in the corpus, then maps its pieces' ids and
writes them there (text_ids), into a corpus folder on disk (memory-mapped
when done) or an in-memory corpus.  The vocabulary is sorted and chosen by counts, never by
the words' numbers (which depend on which worker read which piece), so the corpus depends
only on the documents and the rules, never on how the input was cut into blocks, the number
of workers or their kind.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import numpy as np

from saberjax import text
from saberjax.corpus.core import PACKAGE_DIR, Corpus
from saberjax.corpus.text_blocks import DocumentBlock
from saberjax.corpus.text_ids import (
    in_memory_corpus,
    mapped_pieces,
    piece_starts,
    written_corpus,
)
from saberjax.corpus.text_pieces import block_pieces, piece_size, task_pieces
from saberjax.corpus.text_workers import tokenised_pieces, worker_words
from saberjax.corpus.text_words import CorpusWords, Dictionary, Words, merged_words
from saberjax.corpus.worker_pools import WorkerProcesses, WorkerThreads, in_order
from saberjax.errors import CorpusFormatError

PROCESS_MIN_WORKERS = 16  # fewest workers that tokenise in processes rather than threads
PROCESS_MIN_BYTES = 1 << 28  # and the least input (total_bytes) that does
PROGRESS_SECONDS = 10.0  # between progress lines


class TextCorpus(NamedTuple):
    """The corpus of a text input (the ids of the blocks' documents, where they have ids, its
    doc_names: those of the documents kept, in order) and how many documents were not valid
    UTF-8 (read as Latin-1)."""

    corpus: Corpus
    invalid_utf8_docs: int


def build_corpus(blocks: Iterable[DocumentBlock], rules: text.TextRules = text.DEFAULT_RULES,
                 vocabulary: text.VocabularyRules = text.VocabularyRules(), *, name: str = "",
                 source: str = "text", directory=None, workers: int | None = None,
                 memory_bytes: int | None = None, total_bytes: int | None = None,
                 log: Callable[[str], None] | None = None,
                 processes: bool | None = None,
                 shared_words: Callable[[Dictionary, int], SharedWords] | None = None,
                 durable: bool = True) -> TextCorpus:
    """The corpus of the documents of `blocks` (see the module).

    directory: write the corpus there as a native folder (atomically) and return it
    memory-mapped (durable: on disk when it returns, or left to the operating system's
    write-back: see native.NativeCorpusWriter); None: build it in memory.  workers: threads or processes (default: one
    per core).  memory_bytes: token ids kept in memory, in all, before the workers spill
    them to temporary files (default: unlimited).  total_bytes: the input's size, for the ETA
    of the progress lines that `log` gets every PROGRESS_SECONDS (none when None).  `source`
    names the input in errors.  processes: tokenise in worker processes (True) or threads
    (False); None: processes from PROCESS_MIN_WORKERS workers and PROCESS_MIN_BYTES of input
    on, when writing a directory (_uses_processes).  Documents left without a vocabulary word
    are dropped and counted (Corpus.dropped_empty_docs, and a warning naming `source`).
    shared_words: when `blocks` are one reader's share of an input that other readers (the
    processes of a run) read the rest of, exchanges this reader's words (a Dictionary of
    them, and its documents) for every reader's (SharedWords), from which the vocabulary is
    chosen; the corpus returned is then that of the share's documents, over the input's
    vocabulary.
    """
    threads = workers or os.cpu_count() or 1
    spill_dir = Path(directory).parent if directory is not None else None
    if spill_dir is not None:
        spill_dir.mkdir(parents=True, exist_ok=True)
    progress = _Progress(source, total_bytes, log)
    if processes is None:
        processes = _uses_processes(threads, total_bytes, directory)
    limit = float("inf") if memory_bytes is None else memory_bytes / threads
    with (tempfile.TemporaryDirectory(dir=spill_dir, prefix=".saberjax-tokens-") as spill,
          _tokenising_pool(threads, processes) as pool):
        corpus_words = CorpusWords()
        doc_ids, num_docs, invalid = _read_pieces(blocks, rules, threads, pool, (spill, limit),
                                                  progress, corpus_words)
        corpus_words, worker_numbers = merged_words(corpus_words, pool.each(worker_words))
        places = None  # where this reader's words lie among every reader's
        if shared_words is not None:
            corpus_words, places, num_docs = shared_words(corpus_words.dictionary(), num_docs)
        vocab, new_id = chosen_vocabulary(corpus_words, num_docs, vocabulary, source)
        del corpus_words
        if places is not None:
            new_id = new_id[places]
        starts = piece_starts(pool, len(doc_ids), [new_id[numbers] for numbers in worker_numbers])
        mapped = functools.partial(mapped_pieces, pool, doc_ids, starts)
        num_tokens = int(starts[-1])  # every token of the vocabulary's words
        if directory is not None:
            corpus, dropped = written_corpus(mapped, num_tokens, vocab, name, directory,
                                             durable)
        else:
            corpus, dropped = in_memory_corpus(mapped, num_tokens, vocab, name,
                                               Path(spill) / "word_ids")
    if dropped and shared_words is None:  # a share's: the caller warns of the input's
        _warn_dropped(source, dropped)
    corpus = dataclasses.replace(corpus, dropped_empty_docs=dropped)
    return TextCorpus(corpus, invalid)


class SharedWords(NamedTuple):
    """Every reader's words of an input (their Words merged: the counts and document
    frequencies summed), where each of this reader's words lies among them (int32 numbers)
    and every reader's documents (those left empty included)."""

    words: Words
    places: np.ndarray
    num_docs: int


def chosen_vocabulary(corpus_words: Words, num_docs: int, rules: text.VocabularyRules,
                      source: str) -> tuple[tuple[str, ...], np.ndarray]:
    """(the vocabulary `rules` choose from the words of `num_docs` documents; each word's
    vocabulary id by its number, -1 for none, int32).  CorpusFormatError naming `source`
    when no word is chosen."""
    words = corpus_words.strings()
    vocab_index = choose_vocabulary(words, corpus_words.counts[:len(words)],
                                    corpus_words.doc_freq[:len(words)], num_docs, rules)
    if vocab_index.size == 0:
        raise CorpusFormatError(
            f"{source}: no word is in at least min_df={rules.min_df} and at most "
            f"max_df={rules.max_df} of the {num_docs} documents (stop words left "
            f"out); lower min_df or give more documents")
    new_id = np.full(len(words), -1, np.int32)  # a word's vocabulary id, -1 for none
    new_id[vocab_index] = np.arange(vocab_index.size, dtype=np.int32)
    return tuple(map(words.__getitem__, vocab_index.tolist())), new_id


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


def _uses_processes(workers: int, total_bytes: int | None, directory) -> bool:
    """Whether to tokenise in processes: with many workers, threads wait for the GIL that
    every numpy call of a piece's takes back, so that 64 threads use a few cores; a process
    costs a start (importing numpy and the tokeniser) and copies each piece in, repaid only
    on a large input, whose token ids go to files (a directory is written) rather than back
    to this process."""
    return (workers >= PROCESS_MIN_WORKERS and (total_bytes or 0) >= PROCESS_MIN_BYTES
            and directory is not None)


def _tokenising_pool(workers: int, processes: bool) -> WorkerThreads | WorkerProcesses:
    """The pool that tokenises pieces: `workers` threads, or worker processes (which import
    the tokeniser and numpy, not jax)."""
    return WorkerProcesses(workers) if processes else WorkerThreads(workers)


def _read_pieces(blocks, rules, threads, pool, keeping, progress, corpus_words):
    """(the ids of each piece's documents, or None, in order; the documents; those not valid
    UTF-8) of the pieces of `blocks`, tokenised on `pool` (text_pieces.task_pieces of them a
    call) at most a few calls ahead of the one collected, their words numbered among their
    workers' words and their tokens kept by their workers as `keeping` says
    (text_workers.tokenised); the workers' new words numbered in `corpus_words` as they
    come, on a thread of their own."""
    doc_ids, num_docs, invalid = [], 0, 0
    processes = isinstance(pool, WorkerProcesses)
    size = piece_size(threads, processes)
    pieces = (part for block in blocks for part in block_pieces(block, size))
    tasks = ((first, parts, rules, keeping)
             for first, parts in _consecutive(pieces, task_pieces(size, processes)))
    with ThreadPoolExecutor(1, thread_name_prefix="saberjax-words") as adding:
        added = []
        for results, report in in_order(pool, tokenised_pieces, tasks, 2 * threads):
            if report is not None:
                added.append(adding.submit(corpus_words.add, report))
            for docs, ids, invalid_docs, tokens, piece_bytes in results:  # not `size`, which
                doc_ids.append(ids)  # cuts the blocks read after this
                num_docs += docs
                invalid += invalid_docs
                progress.add(docs, tokens, piece_bytes)
        for future in added:
            future.result()
    return doc_ids, num_docs, invalid


def _consecutive(items: Iterable, count: int) -> Iterator[tuple[int, list]]:
    """(the index of the first, a list of up to `count` consecutive items) of `items`."""
    first = 0
    for group in itertools.batched(items, count):
        yield first, list(group)
        first += len(group)


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
