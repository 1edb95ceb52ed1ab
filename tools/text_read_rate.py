"""The reading rate of raw text: one load_text into a temporary native folder, as the
launchers read text into a cache entry.  Prints one JSON line: tokens read (every token the
rules keep, before the vocabulary), tokens of the corpus, seconds, Mtoken/s, CPU seconds (of
this process, and of the worker processes it waited for), the CPU seconds of the thread
collecting the pieces and of the words' adding (on the collecting thread where a checkout adds
them there: the reader's serial work, which bounds its rate) and peak RSS (of this process).
Works with any saberjax checkout on PYTHONPATH (it only calls load_text).

    PYTHONPATH=CHECKOUT python tools/text_read_rate.py PATH --format=jsonl --workers=16
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("--format", default="auto")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--piece_bytes", type=int, default=None,
                        help="pieces of this size (text_corpus.MIN_PIECE_BYTES and PIECE_BYTES)")
    parser.add_argument("--processes", choices=["auto", "yes", "no"], default="auto",
                        help="tokenise in worker processes (yes), threads (no) or by the "
                             "reader's rule (auto)")
    args = parser.parse_args()
    from saberjax.platform import reuse_freed_memory

    reuse_freed_memory()
    from saberjax.corpus import text_corpus
    from saberjax.corpus.plain_text import load_text

    if args.piece_bytes:
        text_corpus.MIN_PIECE_BYTES = text_corpus.PIECE_BYTES = args.piece_bytes
    progress = []
    start_progress = text_corpus._Progress.__init__

    def kept(self, *args, **kwargs):
        start_progress(self, *args, **kwargs)
        progress.append(self)

    text_corpus._Progress.__init__ = kept
    if args.processes != "auto":  # text_corpus._uses_processes's bounds
        yes = args.processes == "yes"
        text_corpus.PROCESS_MIN_WORKERS = 1 if yes else 1 << 30
        text_corpus.PROCESS_MIN_BYTES = 0
    thread_cpu = dict(collecting=0.0, adding=0.0)
    _timed(text_corpus, "_read_pieces", thread_cpu, "collecting")
    _timed(text_corpus._Words, "add", thread_cpu, "adding")
    phases = {}
    for owner, name, phase in _PHASES:
        holder = text_corpus
        for part in (owner or "").split(".") if owner else ():
            holder = getattr(holder, part, None)
        _phased(holder, name, phases, phase)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory(dir=".") as folder:
        start = time.perf_counter()
        corpus = load_text(args.path, directory=f"{folder}/native", workers=args.workers,
                           format=args.format)
        seconds = time.perf_counter() - start
    end = resource.getrusage(resource.RUSAGE_SELF)
    children_end = resource.getrusage(resource.RUSAGE_CHILDREN)
    read = progress[0].tokens
    print(json.dumps(dict(
        path=args.path, format=args.format, workers=args.workers, tokens_read=read,
        corpus_tokens=corpus.num_tokens, seconds=round(seconds, 2),
        mtoken_per_s=round(read / seconds / 1e6, 1),
        cpu_seconds=round(end.ru_utime + end.ru_stime - usage.ru_utime - usage.ru_stime, 2),
        worker_cpu_seconds=round(children_end.ru_utime + children_end.ru_stime
                                 - children.ru_utime - children.ru_stime, 2),
        collecting_cpu_seconds=round(thread_cpu["collecting"], 2),
        adding_cpu_seconds=round(thread_cpu["adding"], 2),
        peak_rss_mb=round(end.ru_maxrss / 1024), phases=phases)), flush=True)


# the reader's steps (those a checkout has): (the text_corpus attribute holding the function,
# dotted, or None for the module; the function; the step's name).  "closing" and "loading"
# lie within "mapping and writing"; "ending the workers" and "deleting the spill files"
# after it.
_PHASES = ((None, "_read_pieces", "reading"), (None, "_merged_words", "merging"),
           ("_Words", "strings", "words"), (None, "choose_vocabulary", "vocabulary"),
           (None, "_lookups", "pieces' places"),
           (None, "_written", "mapping and writing"), (None, "_in_memory", "mapping"),
           ("NativeCorpusWriter", "close", "closing (fsync)"), (None, "load_native", "loading"),
           ("WorkerProcesses", "__exit__", "ending the workers"),
           ("tempfile.TemporaryDirectory", "cleanup", "deleting the spill files"))


def _phased(owner, name: str, phases: dict, phase: str) -> None:
    """owner.name (when it exists) wrapped to add to phases[phase] its wall seconds, the CPU
    seconds of its thread, of this process and of the worker processes that ended meanwhile
    (the CPU of the others is counted only once they end)."""
    function = getattr(owner, name, None)
    if function is None:
        return

    def phased(*args, **kwargs):
        start = (time.perf_counter(), time.thread_time(), time.process_time(),
                 _children_cpu())
        try:
            return function(*args, **kwargs)
        finally:
            end = (time.perf_counter(), time.thread_time(), time.process_time(),
                   _children_cpu())
            totals = phases.setdefault(phase, dict(wall_s=0.0, thread_cpu_s=0.0,
                                                   process_cpu_s=0.0, workers_cpu_s=0.0))
            for key, first, last in zip(totals, start, end):
                totals[key] = round(totals[key] + last - first, 3)

    setattr(owner, name, phased)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(owner, name: str, totals: dict, key: str) -> None:
    """owner.name wrapped to add the CPU seconds of the thread calling it to totals[key]."""
    function = getattr(owner, name)

    def timed(*args, **kwargs):
        start = time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            totals[key] += time.thread_time() - start

    setattr(owner, name, timed)


if __name__ == "__main__":
    main()
