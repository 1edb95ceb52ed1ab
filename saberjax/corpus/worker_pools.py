"""Pools of workers that keep state between calls: `WorkerThreads(count)` and
`WorkerProcesses(count)`, one interface.  `submit(function, *args)` calls
function(state, *args) on some worker, `state` being that worker's own dict (its "worker",
the worker's index, set by the pool), so that a worker can gather what it computes across
its calls (a text reader's words and their counts) and hand it over once, by `each` (or
`each_of`, with each worker's own arguments), instead of with every result.  `in_order`
keeps a pool a few calls ahead of the results it yields, in order.

Tokenising text is numpy over bytes in many short calls, each taking the GIL back, so that
threads of one process share about one core's worth of Python; processes each have their
own.  A worker process is a fresh interpreter running serve_calls, calling one function at
a time on arguments pickled to its stdin and pickling the result, or the exception, back.
It is never forked from a process whose threads may hold locks, and never imports the
caller's main module (as multiprocessing's spawn and forkserver do), so that a script without
a main guard does not run again in it; it imports only what the functions it calls need
(numpy and the tokeniser, not jax), and keeps the memory it frees for its next arrays
(platform.reuse_freed_memory), as the launchers' processes do.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

_ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                      "MKL_NUM_THREADS")}
PIPE_BYTES = 1 << 20  # a worker's pipes' capacity, where the OS allows it (Linux: 64 KB)


class WorkerThreads:
    """`count` threads of this process, each with its state (see the module)."""

    def __init__(self, count: int):
        self._threads = ThreadPoolExecutor(count)
        self._states: dict[int, dict] = {}
        self._lock = threading.Lock()

    def submit(self, function: Callable, *args) -> Future:
        return self._threads.submit(self._call, function, args)

    def _call(self, function: Callable, args: tuple):
        thread = threading.get_ident()
        state = self._states.get(thread)
        if state is None:
            with self._lock:
                state = self._states[thread] = dict(worker=len(self._states))
        return function(state, *args)

    def each(self, function: Callable, *args) -> list:
        """function(state, *args) of every worker that has state, on the pool's threads at
        once, in the order of their indices; once every submitted call has returned."""
        return self.each_of(function, [args] * len(self._states))

    def each_of(self, function: Callable, arguments: list[tuple]) -> list:
        """function(state, *arguments[i]) of every worker i that has state (one tuple of
        arguments each, in the order of their indices), on the pool's threads at once."""
        states = list(self._states.values())
        _check_each(arguments, len(states))
        return list(self._threads.map(lambda state, args: function(state, *args), states,
                                      arguments))

    def __enter__(self) -> WorkerThreads:
        return self

    def __exit__(self, *exc_info) -> None:
        self._threads.shutdown(wait=True, cancel_futures=True)


class WorkerProcesses:
    """`count` worker processes behind submit (a thread of this process per worker feeds it a
    call and waits for its result: the pipes' reads and writes release the GIL).  Functions
    and arguments must pickle; the functions are looked up by module and name in the workers,
    on this process's sys.path."""

    def __init__(self, count: int):
        path = os.pathsep.join(entry or os.getcwd() for entry in sys.path)
        environment = dict(os.environ, PYTHONPATH=path, **_ONE_THREAD)
        self._processes = [
            subprocess.Popen([sys.executable, "-c",
                              f"import {__name__} as m; m.serve_calls({index})"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environment)
            for index in range(count)]
        self._idle: queue.SimpleQueue = queue.SimpleQueue()
        for process in self._processes:
            _widen_pipes(process)
            self._idle.put(process)
        self._threads = ThreadPoolExecutor(count)

    def submit(self, function: Callable, *args) -> Future:
        return self._threads.submit(self._on_idle, function, args)

    def _on_idle(self, function: Callable, args: tuple):
        process = self._idle.get()
        try:
            return _call(process, function, args)
        finally:
            self._idle.put(process)

    def each(self, function: Callable, *args) -> list:
        """function(state, *args) of every worker, at once, in the order of their indices;
        once every submitted call has returned."""
        return self.each_of(function, [args] * len(self._processes))

    def each_of(self, function: Callable, arguments: list[tuple]) -> list:
        """function(state, *arguments[i]) of every worker i (one tuple of arguments each, in
        the order of their indices), at once."""
        _check_each(arguments, len(self._processes))
        return list(self._threads.map(lambda process, args: _call(process, function, args),
                                      self._processes, arguments))

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


def _check_each(arguments: list[tuple], workers: int) -> None:
    if len(arguments) != workers:
        raise ValueError(f"{len(arguments)} tuples of arguments for {workers} workers")


def in_order(pool: WorkerThreads | WorkerProcesses, function: Callable,
             items: Iterable, ahead: int) -> Iterator:
    """function(state, *item) of each item, computed on the pool at most `ahead` items ahead
    of the one yielded, in order."""
    in_flight: deque = deque()
    for item in items:
        in_flight.append(pool.submit(function, *item))
        if len(in_flight) >= ahead:
            yield in_flight.popleft().result()
    while in_flight:
        yield in_flight.popleft().result()


def _widen_pipes(process: subprocess.Popen) -> None:
    """Gives the worker's pipes PIPE_BYTES (a piece of text passes in a few writes rather
    than one per 64 KB), where the OS has the setting and allows the size."""
    for pipe in (process.stdin, process.stdout):
        try:
            fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except (AttributeError, OSError):
            pass


def _call(process: subprocess.Popen, function: Callable, args: tuple):
    """function(state, *args) in the worker process; its exception raised here."""
    try:
        pickle.dump((function, args), process.stdin, pickle.HIGHEST_PROTOCOL)
        process.stdin.flush()
        failed, result = pickle.load(process.stdout)
    except (EOFError, OSError) as error:
        raise RuntimeError(f"a worker process ended (exit status {process.poll()}): "
                           f"{error!r}") from None
    if failed:
        raise result
    return result


def serve_calls(index: int) -> None:
    """Calls functions for the parent, with this worker's state, until its pipe closes, then
    ends the process at once (every result is flushed; the interpreter's orderly shutdown
    would only free memory, slowly): the protocol's stream is the original stdout, and
    stdout is pointed at stderr so that nothing printed corrupts it."""
    from saberjax.platform import reuse_freed_memory

    reuse_freed_memory()
    calls = os.fdopen(os.dup(0), "rb")
    results = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    state = dict(worker=index)
    while True:
        try:
            function, args = pickle.load(calls)
        except EOFError:
            sys.stderr.flush()
            os._exit(0)
        try:
            reply = (False, function(state, *args))
        except Exception as error:  # noqa: BLE001 - handed to the caller, who raises it
            reply = (True, error)
        try:
            data = pickle.dumps(reply, pickle.HIGHEST_PROTOCOL)
        except Exception as error:  # noqa: BLE001 - an exception that does not pickle
            data = pickle.dumps((True, RuntimeError(repr(reply[1]) + f" ({error!r})")))
        results.write(data)
        results.flush()
