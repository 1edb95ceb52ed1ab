"""Wall-clock timing of device work, shared by launch/bench.py and pallas/check_gpu.py."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp


def timed(fn):
    """(result, seconds) of fn() with the result ready on the device."""
    start = time.perf_counter()
    result = jax.block_until_ready(fn())
    return result, time.perf_counter() - start


def copy_seconds(num_bytes: int, repeats: int, reduce=min) -> tuple[int, float]:
    """(bytes read + written, seconds) of y = x + 1 over num_bytes of float32 on the default
    device, the card's practical copy bandwidth: reduce (min: the best run) of `repeats` runs
    after a compiling one."""
    x = jax.block_until_ready(jnp.ones((max(num_bytes // 4, 1),), jnp.float32))
    copy = jax.jit(lambda v: v + 1.0)
    jax.block_until_ready(copy(x))
    return 2 * x.nbytes, reduce([timed(lambda: copy(x))[1] for _ in range(repeats)])
