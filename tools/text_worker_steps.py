"""The steps of the text reader's worker processes, timed in the workers themselves, for
tools/text_read_rate.py --worker_steps: that tool submits `tokenised` (or
`tokenised_pieces`), `worker_places` and `worker_mapped` (below) in place of the reader's, and
the worker processes, which import this module by name to call them (it lies on their path,
beside the tool), wrap the reader's steps when they import it.
Each worker adds the thread CPU seconds and the wall seconds of each step to its totals and
writes them, with the process's resource usage so far (user and system seconds, minor page
faults, context switches), as JSON, to STEPS_DIR/worker-<index>.json after every call (the
workers end without an orderly shutdown): the tool sums the files."""

from __future__ import annotations

import json
import os
import resource
import time

from saberjax import files
from saberjax.corpus import columnar_sources, text_workers

STEPS_DIR = "SABERJAX_WORKER_STEPS"  # the environment variable naming the folder
_TOTALS: dict[str, list[float]] = {}  # step: [thread CPU s, wall s, calls]
_SPAN: list[float] = []  # the worker's first call's start, its last call's end (wall clock)


def _add(step: str, cpu: float, wall: float) -> None:
    totals = _TOTALS.setdefault(step, [0.0, 0.0, 0])
    totals[0] += cpu
    totals[1] += wall
    totals[2] += 1


def _wrapped(owner, name: str, step: str) -> None:
    function = getattr(owner, name)

    def timed(*args, **kwargs):
        cpu, wall = time.thread_time(), time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            _add(step, time.thread_time() - cpu, time.perf_counter() - wall)

    setattr(owner, name, timed)


def _saved(worker: dict, step: str, call) -> object:
    """call() timed as `step`, the totals then written to the worker's file."""
    start_cpu, start = time.thread_time(), time.perf_counter()
    if not _SPAN:
        _SPAN.extend([time.time(), 0.0])
    try:
        return call()
    finally:
        _add(step, time.thread_time() - start_cpu, time.perf_counter() - start)
        _SPAN[1] = time.time()
        folder = os.environ.get(STEPS_DIR)
        if folder:
            path = os.path.join(folder, f"worker-{worker['worker']}.json")
            usage = resource.getrusage(resource.RUSAGE_SELF)
            with open(path + ".part", "w") as file:
                json.dump(dict(steps=_TOTALS, span=_SPAN, usage=dict(
                    user_s=usage.ru_utime, system_s=usage.ru_stime,
                    minor_faults=usage.ru_minflt, voluntary_switches=usage.ru_nvcsw,
                    involuntary_switches=usage.ru_nivcsw)), file)
            os.replace(path + ".part", path)


def tokenised(worker: dict, *args):
    return _saved(worker, "tokenised (the call)", lambda: text_workers.tokenised(worker, *args))


def tokenised_pieces(worker: dict, *args):
    return _saved(worker, "tokenised (the call)",
                  lambda: text_workers.tokenised_pieces(worker, *args))


def worker_places(worker: dict, *args):
    return _saved(worker, "places (the call)", lambda: text_workers.worker_places(worker, *args))


def worker_mapped(worker: dict, *args):
    return _saved(worker, "mapped (the call)", lambda: text_workers.worker_mapped(worker, *args))


if os.environ.get(STEPS_DIR):  # in a worker process: its steps timed
    _wrapped(columnar_sources, "_parsed_json_lines", "parsing JSON")
    _wrapped(text_workers, "block_words", "tokenising")
    _wrapped(text_workers, "frequencies", "counting")
    _wrapped(text_workers, "_add_pending", "adding words")
    _wrapped(text_workers, "_kept_tokens", "spilling ids")
    _wrapped(files, "write_at", "writing ids")
    _wrapped(text_workers, "_mapped", "mapping a piece")
