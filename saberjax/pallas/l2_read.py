"""The card's L2 read rate, measured by a Pallas (Triton) kernel: the rate the E-step roofline
(saberjax.roofline) divides its L2 bytes by.

An array of a fraction of the L2 is read `passes` times over in one launch: program p reads
block (p + step * programs) mod blocks at each step, so every program walks the whole array
(more than an SM's L1 holds) and, after the first pass, every read is an L2 hit.  One launch
of many passes leaves the launch and the reduction out of the time.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from saberjax.pallas import default_interpret
from saberjax.timing import timed


def _read_kernel(x_ref, out_ref, *, block: int, steps: int):
    """Add up `steps` blocks of x, program_id's walk through it, lane by lane."""
    program, programs = pl.program_id(0), pl.num_programs(0)
    num_blocks = x_ref.shape[0] // block
    lanes = jnp.arange(block, dtype=jnp.int32)

    def read(step, total):
        first = ((program + step * programs) % num_blocks) * block
        return total + plgpu.load(x_ref.at[first + lanes])

    out_ref[program, :] = jax.lax.fori_loop(0, steps, read, jnp.zeros((block,), jnp.float32))


@functools.partial(jax.jit, static_argnames=("programs", "block", "steps", "interpret"))
def read_blocks(x, *, programs: int, block: int, steps: int, interpret: bool | None = None):
    """Each program's lane sums of its `steps` blocks of x (float32, a multiple of block)."""
    return pl.pallas_call(
        functools.partial(_read_kernel, block=block, steps=steps),
        out_shape=jax.ShapeDtypeStruct((programs, block), jnp.float32),
        grid=(programs,), name="l2_read",
        compiler_params=plgpu.CompilerParams(num_warps=4),
        interpret=default_interpret() if interpret is None else interpret,
    )(x)


def l2_read_seconds(num_bytes: int = 12 << 20, passes: int = 32, programs: int = 1056,
                    block: int = 2048, repeats: int = 5) -> tuple[int, float]:
    """(bytes read, best seconds of `repeats` after a compiling run) of `passes` reads of an
    array of num_bytes (under the L2: 12 MiB of the H100's 50)."""
    blocks = max(num_bytes // (4 * block), 1)
    x = jax.block_until_ready(jnp.ones((blocks * block,), jnp.float32))
    steps = -(-passes * blocks // programs)
    run = functools.partial(read_blocks, programs=programs, block=block, steps=steps)
    jax.block_until_ready(run(x))
    return steps * programs * block * 4, min(timed(lambda: run(x))[1] for _ in range(repeats))
