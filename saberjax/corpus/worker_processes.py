"""Python processes that call functions for this one: `WorkerProcesses(count)` starts `count`
interpreters running serve_calls, each calling
one function at a time on arguments pickled to its stdin and pickling the result, or the
exception, back.

Tokenising text is numpy over bytes in many short calls, each taking the GIL back, so that
threads of one process share one core's worth of Python; processes each have their own.  The
workers are started as fresh interpreters, never forked from a process whose threads may hold
locks, and never import the caller's main module (as multiprocessing's spawn and forkserver
do), so that a script without a main guard does not run again in them; they import only what
the functions they call need (numpy and the tokeniser, not jax).
"""

from __future__ import annotations

import os
import pickle
import queue
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

_ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                      "MKL_NUM_THREADS")}


class WorkerProcesses:
    """`count` worker processes behind the Executor's submit (a thread of this process per
    worker feeds it a call and waits for its result: the pipes' reads and writes release the
    GIL).  Functions and arguments must pickle; the functions are looked up by module and name
    in the workers, on this process's sys.path."""

    def __init__(self, count: int):
        path = os.pathsep.join(entry or os.getcwd() for entry in sys.path)
        environment = dict(os.environ, PYTHONPATH=path, **_ONE_THREAD)
        command = [sys.executable, "-c", f"import {__name__} as m; m.serve_calls()"]
        self._processes = [subprocess.Popen(command,
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            env=environment) for _ in range(count)]
        self._idle: queue.SimpleQueue = queue.SimpleQueue()
        for process in self._processes:
            self._idle.put(process)
        self._threads = ThreadPoolExecutor(count)

    def submit(self, function: Callable, *args) -> Future:
        return self._threads.submit(self._call, function, args)

    def _call(self, function: Callable, args: tuple):
        process = self._idle.get()
        try:
            pickle.dump((function, args), process.stdin, pickle.HIGHEST_PROTOCOL)
            process.stdin.flush()
            failed, result = pickle.load(process.stdout)
        except (EOFError, OSError) as error:
            raise RuntimeError(f"a worker process ended (exit status {process.poll()}): "
                               f"{error!r}") from None
        self._idle.put(process)
        if failed:
            raise result
        return result

    def __enter__(self) -> WorkerProcesses:
        return self

    def __exit__(self, *exc_info) -> None:
        self._threads.shutdown(wait=True, cancel_futures=True)
        for process in self._processes:
            try:
                process.stdin.close()
            except OSError:
                pass
        for process in self._processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            process.stdout.close()


def serve_calls() -> None:
    """Calls functions for the parent until its pipe closes: the protocol's stream is the
    original stdout, and stdout is pointed at stderr so that nothing printed corrupts it."""
    calls = os.fdopen(os.dup(0), "rb")
    results = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    while True:
        try:
            function, args = pickle.load(calls)
        except EOFError:
            return
        try:
            reply = (False, function(*args))
        except Exception as error:  # noqa: BLE001 - handed to the caller, who raises it
            reply = (True, error)
        try:
            data = pickle.dumps(reply, pickle.HIGHEST_PROTOCOL)
        except Exception as error:  # noqa: BLE001 - an exception that does not pickle
            data = pickle.dumps((True, RuntimeError(repr(reply[1]) + f" ({error!r})")))
        results.write(data)
        results.flush()
