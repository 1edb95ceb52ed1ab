"""Work on threads: in a thread of its own while the caller goes on (its result is a future),
or cut into pieces computed at once on several threads."""

from __future__ import annotations

import concurrent.futures
import os
import threading
from typing import Callable


def in_background(work: Callable, *args, name: str) -> concurrent.futures.Future:
    """Start work(*args) in a new thread named `name`; the future holds its result or its
    exception.  The thread is not a daemon: the process waits for it before it exits, so
    work that starts the runtime is never cut off halfway."""
    future = concurrent.futures.Future()

    def run():
        try:
            future.set_result(work(*args))
        except BaseException as error:  # noqa: BLE001 (handed to whoever asks for the result)
            future.set_exception(error)

    threading.Thread(target=run, name=name).start()
    return future


def thread_count(blocks: int, workers: int | None = None) -> int:
    """Threads for work of `blocks` blocks: `workers` (default: one per core), at most one a
    block, at least one."""
    return max(1, min(workers or os.cpu_count() or 1, blocks))


def on_threads(function: Callable, items, threads: int) -> list:
    """[function(item) for item in items], computed on `threads` threads at once (in the
    calling thread for one)."""
    if threads <= 1:
        return [function(item) for item in items]
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return list(pool.map(function, items))
