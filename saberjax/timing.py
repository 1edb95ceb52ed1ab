"""Wall-clock timing: of device work (launch/bench.py, tools/check_gpu.py) and of the phases
of a run (the training log's "where the time went" line).

Library code marks its phases with ``with timing.phase("layout"): ...`` (or the decorator
``@timing.in_phase("layout")``); that costs nothing
unless a run records them: ``with phases.recording(): ...`` (or ``phases.record()``, for the
rest of a launcher's run) makes a `Phases` the recorder of every phase entered in that
context (the thread that runs the launcher; threads a phase starts are inside its wall-clock
time).
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import functools
import resource
import statistics
import time

import jax
import jax.numpy as jnp

from saberjax import compilation


def timed(fn):
    """(result, seconds) of fn() with the result ready on the device."""
    start = time.perf_counter()
    result = jax.block_until_ready(fn())
    return result, time.perf_counter() - start


def median_seconds(program, repeats: int) -> float:
    """Median wall seconds of program() (its result ready on the device) over `repeats` calls
    after one that compiles; nan for none."""
    jax.block_until_ready(program())
    times = [timed(program)[1] for _ in range(repeats)]
    return statistics.median(times) if times else float("nan")


def copy_seconds(num_bytes: int, repeats: int, reduce=min) -> tuple[int, float]:
    """(bytes read + written, seconds) of y = x + 1 over num_bytes of float32 on the default
    device, the card's practical copy bandwidth: reduce (min: the best run) of `repeats` runs
    after a compiling one."""
    x = jax.block_until_ready(jnp.ones((max(num_bytes // 4, 1),), jnp.float32))
    copy = compilation.jit(lambda v: v + 1.0)
    jax.block_until_ready(copy(x))
    return 2 * x.nbytes, reduce([timed(lambda: copy(x))[1] for _ in range(repeats)])


_RECORDER: contextvars.ContextVar[Phases | None] = contextvars.ContextVar("saberjax_phases",
                                                                         default=None)


def peak_rss_bytes() -> int:
    """The process's peak resident memory so far (getrusage's ru_maxrss, kB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class Phases:
    """Wall-clock seconds of the named phases of a run, each phase's own: time in a phase
    entered inside another counts for the inner one only, so the phases add up to the time
    spent in any of them.  peak_rss: the process's peak resident memory when each phase last
    ended (peak_rss_bytes), so a phase that raised the peak shows where memory went."""

    def __init__(self):
        self.seconds: dict[str, float] = collections.defaultdict(float)
        self.peak_rss: dict[str, int] = {}
        self._nested: list[float] = []  # seconds of inner phases, per open phase

    @contextlib.contextmanager
    def recording(self):
        """Make this the recorder of every `phase` entered in the current context, until the
        block ends."""
        token = _RECORDER.set(self)
        try:
            yield self
        finally:
            _RECORDER.reset(token)

    def record(self) -> Phases:
        """Make this the recorder of every `phase` entered in the current context from now on
        (a launcher's whole run); returns self."""
        _RECORDER.set(self)
        return self

    @contextlib.contextmanager
    def phase(self, name: str):
        """Time the block as phase `name` (less the phases entered inside it)."""
        start = time.perf_counter()
        self._nested.append(0.0)
        try:
            yield
        finally:
            elapsed, nested = time.perf_counter() - start, self._nested.pop()
            self.seconds[name] += elapsed - nested
            self.peak_rss[name] = peak_rss_bytes()
            if self._nested:
                self._nested[-1] += elapsed


@contextlib.contextmanager
def phase(name: str):
    """Time the block as phase `name` of the run recording in this context, if any."""
    recorder = _RECORDER.get()
    if recorder is None:
        yield
        return
    with recorder.phase(name):
        yield


def in_phase(name: str):
    """Decorator: every call of the function is timed as phase `name` (see phase)."""
    def decorate(function):
        @functools.wraps(function)
        def timed_call(*args, **kwargs):
            with phase(name):
                return function(*args, **kwargs)
        return timed_call
    return decorate
