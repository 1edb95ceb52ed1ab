"""The reading rate of raw text: one load_text into a temporary native folder, as the
launchers read text into a cache entry.  Prints one JSON line: tokens read (every token the
rules keep, before the vocabulary), tokens of the corpus, seconds, Mtoken/s, CPU seconds (of
this process, and of the worker processes it waited for), the CPU seconds of the thread
collecting the pieces and of the words' adding (on the collecting thread where a checkout adds
them there: the reader's serial work, which bounds its rate) and peak RSS (of this process).
Works with any saberjax checkout on PYTHONPATH (it only calls load_text; the steps it times
are looked up where this checkout or an earlier one holds them, those it lacks left out).

    PYTHONPATH=CHECKOUT python tools/text_read_rate.py PATH --format=jsonl --workers=16
"""

from __future__ import annotations

import argparse
import importlib
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
                        help="pieces of this size (text_pieces.MIN_PIECE_BYTES, PIECE_BYTES and "
                             "PROCESS_PIECE_BYTES)")
    parser.add_argument("--processes", choices=["auto", "yes", "no"], default="auto",
                        help="tokenise in worker processes (yes), threads (no) or by the "
                             "reader's rule (auto)")
    parser.add_argument("--durable", choices=["yes", "no"], default="no",
                        help="the corpus on disk when load_text returns (yes: the files' "
                             "write-back started by the workers and waited for), or left to "
                             "the system's write-back as the corpus cache leaves its entries "
                             "(no; checkouts without load_text's durable write durably)")
    parser.add_argument("--worker_steps", action="store_true",
                        help="time the worker processes' steps in the workers "
                             "(tools/text_worker_steps.py): worker_steps in the JSON line")
    args = parser.parse_args()
    from saberjax.platform import reuse_freed_memory

    reuse_freed_memory()
    from saberjax.corpus import text_corpus
    from saberjax.corpus.plain_text import load_text

    if args.piece_bytes:
        pieces = _module("saberjax.corpus.text_pieces") or text_corpus
        for name in ("MIN_PIECE_BYTES", "PIECE_BYTES", "PROCESS_PIECE_BYTES"):
            setattr(pieces, name, args.piece_bytes)
    progress = kept_progress(text_corpus)
    if args.processes != "auto":  # text_corpus._uses_processes's bounds
        yes = args.processes == "yes"
        text_corpus.PROCESS_MIN_WORKERS = 1 if yes else 1 << 30
        text_corpus.PROCESS_MIN_BYTES = 0
    thread_cpu = dict(collecting=0.0, adding=0.0)
    timed(text_corpus, "_read_pieces", thread_cpu, "collecting")
    timed(*_located("saberjax.corpus.text_words.Words.add",
                     "saberjax.corpus.text_corpus._Words.add"), thread_cpu, "adding")
    phases = {}
    for phase, *paths in _PHASES:
        _phased(*_located(*paths), phases, phase)
    waits = dict(input_wait_s=0.0)
    _input_timed(text_corpus, waits)
    steps_dir = _worker_steps(text_corpus) if args.worker_steps else None
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory(dir=".") as folder:
        start = time.perf_counter()
        durable = {} if args.durable == "yes" else _durable_option(load_text)
        corpus = load_text(args.path, directory=f"{folder}/native", workers=args.workers,
                           format=args.format, **durable)
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
        peak_rss_mb=round(end.ru_maxrss / 1024), phases=phases,
        input_wait_s=round(waits["input_wait_s"], 2),
        worker_steps=_summed_steps(steps_dir) if steps_dir else None)), flush=True)


# the reader's steps: (the step's name, the dotted paths of the function where this checkout
# and earlier ones hold it, the first that a checkout has timed).  "closing" and "loading"
# lie within "mapping and writing"; "ending the workers" and "deleting the spill files"
# after it.
_TEXT = "saberjax.corpus.text_corpus."
_PHASES = (("reading", _TEXT + "_read_pieces"),
           ("merging", _TEXT + "merged_words", _TEXT + "_merged_words"),
           ("words", "saberjax.corpus.text_words.Words.strings", _TEXT + "_Words.strings"),
           ("vocabulary", _TEXT + "choose_vocabulary"),
           ("pieces' places", _TEXT + "piece_starts",
            _TEXT + "vocabulary_lookups", _TEXT + "_lookups"),
           ("mapping and writing", _TEXT + "written_corpus", _TEXT + "_written"),
           ("mapping", _TEXT + "in_memory_corpus", _TEXT + "_in_memory"),
           ("closing (fsync)", "saberjax.corpus.native.NativeCorpusWriter.close"),
           ("loading", "saberjax.corpus.text_ids.load_native", _TEXT + "load_native"),
           ("ending the workers", "saberjax.corpus.worker_pools.WorkerProcesses.__exit__"),
           ("deleting the spill files", "tempfile.TemporaryDirectory.cleanup"))


def _input_timed(text_corpus, waits: dict) -> None:
    """text_corpus._read_pieces wrapped to add to waits["input_wait_s"] the wall seconds the
    collecting thread waits for the input's next block (the shard readers falling behind)."""
    read_pieces = text_corpus._read_pieces

    def timed_blocks(blocks):
        blocks = iter(blocks)
        while True:
            start = time.perf_counter()
            try:
                block = next(blocks)
            except StopIteration:
                return
            finally:
                waits["input_wait_s"] += time.perf_counter() - start
            yield block

    text_corpus._read_pieces = lambda blocks, *rest: read_pieces(timed_blocks(blocks), *rest)


def _worker_steps(text_corpus) -> str:
    """The worker processes' steps timed (tools/text_worker_steps.py): the reader submits that
    module's tokenised and mapped; the workers write their totals into the folder returned."""
    import os
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import text_worker_steps

    from saberjax.corpus import text_ids

    folder = tempfile.mkdtemp(prefix="worker-steps-")
    os.environ[text_worker_steps.STEPS_DIR] = folder  # after the import: this process unwrapped
    if hasattr(text_corpus, "tokenised_pieces"):  # several pieces a call
        text_corpus.tokenised_pieces = text_worker_steps.tokenised_pieces
    else:
        text_corpus.tokenised = text_worker_steps.tokenised
    text_ids.worker_places = text_worker_steps.worker_places
    text_ids.worker_mapped = text_worker_steps.worker_mapped
    return folder


def _summed_steps(folder: str) -> dict:
    """The workers' step totals (tools/text_worker_steps.py) summed: per step, CPU and wall
    seconds over all workers and the most wall seconds of one worker; their processes' resource
    usage summed (user and system seconds, minor page faults, context switches); the workers'
    spans (first call to last) from the earliest start to the latest end; their count."""
    import glob

    steps, starts, ends, workers, usage = {}, [], [], 0, {}
    for path in glob.glob(f"{folder}/worker-*.json"):
        with open(path) as file:
            saved = json.load(file)
        workers += 1
        for key, value in saved.get("usage", {}).items():
            usage[key] = round(usage.get(key, 0) + value, 2)
        starts.append(saved["span"][0])
        ends.append(saved["span"][1])
        for step, (cpu, wall, calls) in saved["steps"].items():
            total = steps.setdefault(step, dict(cpu_s=0.0, wall_s=0.0, most_wall_s=0.0, calls=0))
            total["cpu_s"] += cpu
            total["wall_s"] += wall
            total["most_wall_s"] = max(total["most_wall_s"], wall)
            total["calls"] += calls
    for total in steps.values():
        for key in ("cpu_s", "wall_s", "most_wall_s"):
            total[key] = round(total[key], 2)
    return dict(workers=workers, steps=steps, usage=usage,
                first_start_to_last_end_s=round(max(ends) - min(starts), 2) if workers else 0)


def _durable_option(load_text) -> dict:
    """{"durable": False} where the checkout's load_text takes it, {} where it does not."""
    import inspect

    return {"durable": False} if "durable" in inspect.signature(load_text).parameters else {}


def _module(name: str):
    """The module `name`, or None where the checkout has none."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _located(*paths: str) -> tuple:
    """(the object holding the named attribute, its name) of the first dotted path (a module's
    then attributes') that the checkout has; (None, None) where it has none."""
    for path in paths:
        parts = path.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            holder = _module(".".join(parts[:cut]))
            if holder is not None:
                for name in parts[cut:-1]:
                    holder = getattr(holder, name, None)
                if hasattr(holder, parts[-1]):
                    return holder, parts[-1]
                break
    return None, None


def _phased(owner, name: str | None, phases: dict, phase: str) -> None:
    """owner.name (when it exists) wrapped to add to phases[phase] its wall seconds, the CPU
    seconds of its thread, of this process and of the worker processes that ended meanwhile
    (the CPU of the others is counted only once they end)."""
    function = getattr(owner, name, None) if name else None
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


def kept_progress(text_corpus) -> list:
    """The reader's progress counters (text_corpus._Progress), each appended to the list
    returned as the reader makes it: the first one's tokens are the tokens read."""
    progress = []
    start_progress = text_corpus._Progress.__init__

    def kept(self, *args, **kwargs):
        start_progress(self, *args, **kwargs)
        progress.append(self)

    text_corpus._Progress.__init__ = kept
    return progress


def timed(owner, name: str, totals: dict, key: str, clock=time.thread_time) -> None:
    """owner.name wrapped to add the seconds of `clock` its calls take (by default the CPU
    seconds of the thread calling it) to totals[key]."""
    function = getattr(owner, name)

    def timed_call(*args, **kwargs):
        start = clock()
        try:
            return function(*args, **kwargs)
        finally:
            totals[key] = totals.get(key, 0.0) + clock() - start

    setattr(owner, name, timed_call)


if __name__ == "__main__":
    main()
