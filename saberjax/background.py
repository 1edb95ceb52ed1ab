"""Work that runs in a thread of its own while the caller goes on: its result is a future."""

from __future__ import annotations

import concurrent.futures
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
