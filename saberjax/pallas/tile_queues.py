"""A sampling kernel's tiles shared out to the SMs in runs of consecutive tiles (tile queues).

One program a tile, in launch order, puts the tiles running at once on an SM (up to 32
one-warp programs) in different words once the words are shorter than the tiles in flight on
the whole GPU: consecutive programs go to different SMs, so each SM's L1 holds pieces of
many B-hat rows and a gather into a row mostly misses there.  With tile queues the chunk's
tiles are cut into `queues` runs of consecutive tiles, about equal in tokens (queue_bounds),
a queue for each SM (132 on an H100 or H200); a program reads the SM it runs on (%smid) and
claims the next claim_tiles tiles of that SM's queue (an atomic add on the queue's counter)
until the queue is spent, then goes on to the following queues (modulo their number) until
every queue is spent.  The programs running at once on an SM thus draw consecutive tiles,
mostly of one word, whose row its L1 keeps.

Every tile is drawn once, by whichever program claims it, and a tile's topics depend on the
tile alone, so the topics are the one-program-a-tile kernel's, bit for bit, whatever the
number of SMs, the programs an SM holds or the order in which they claim.

The claim uses no shared memory: XLA launches a kernel that uses any (a scalar atomic's
value is handed to the warp's lanes through it) preferring shared memory to L1
(cuFuncSetCacheConfig), which leaves the B-hat gathers a small L1 and the kernel about
twice as slow (docs/measurements/sparse_model.md, branch sparse10).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from saberjax.pallas import warp
from saberjax.pallas.atomics import atomic_add

__all__ = ["queue_bounds", "queue_counters", "visit_queues"]

COUNTER_STRIDE = 32  # int32s: each queue's counter in a 128-byte line of its own


def queue_bounds(tile_start: jax.Array, queues: int) -> jax.Array:
    """int32[queues + 1]: the first tile of each queue and the tiles' count, the tiles
    (Chunk.tile_start's) cut where the tokens before a tile pass a multiple of a queue's
    share (total tokens / queues)."""
    num_tiles = tile_start.shape[0] - 1
    share = tile_start[-1] // queues + 1
    targets = jnp.arange(queues + 1, dtype=jnp.int32) * share  # < 2^31: share * queues
    bounds = jnp.searchsorted(tile_start[:-1], targets, side="left").astype(jnp.int32)
    return bounds.at[0].set(0).at[-1].set(num_tiles)


def queue_counters(queues: int) -> jax.Array:
    """The queues' counters (visit_queues' counters_ref) before the kernel: zeros, one a
    COUNTER_STRIDE int32s, so the SMs' atomic adds do not share a line of L2."""
    return jnp.zeros((queues * COUNTER_STRIDE,), jnp.int32)


def _sm_id(interpret: bool) -> jax.Array:
    """The SM the program runs on (%smid); in interpret mode, where the programs run one after
    another, the programs' count less one less the program's id (the first program starts
    at the last queue, so the walk over the queues wraps around)."""
    if interpret:
        return pl.num_programs(0) - 1 - pl.program_id(0)
    # a one-element vector of an unused operand: Pallas lowers a scalar result to a 0-d
    # tensor, and Triton's vector inline assembly needs a vector operand
    (smid,) = plgpu.elementwise_inline_asm(
        "mov.u32 $0, %smid;", args=[jnp.zeros((1,), jnp.int32)], constraints="=r,r", pack=1,
        result_shape_dtypes=[jax.ShapeDtypeStruct((1,), jnp.int32)])
    return jnp.max(smid)


def visit_queues(visit, bounds_ref, counters_ref, *, interpret: bool, claim_tiles: int = 1):
    """visit(tile) for every tile this program claims (the module docstring), claim_tiles
    consecutive tiles a claim: from its SM's queue, then the following ones, until all are
    spent.  bounds_ref: queue_bounds'; counters_ref: queue_counters' when the kernel starts."""
    queues = bounds_ref.shape[0] - 1
    home = _sm_id(interpret) % queues
    first_lane = warp.lane_offsets() == 0

    def claim(step):
        """(the first tile claimed from queue home + step, the queue's end): a vector atomic
        of the first lane alone, its value to every lane by a maximum over the lanes (a warp
        shuffle, where a scalar atomic's goes through shared memory)."""
        queue = (home + step) % queues
        claimed = atomic_add(
            counters_ref, jnp.full(first_lane.shape, queue * COUNTER_STRIDE, jnp.int32),
            jnp.full(first_lane.shape, claim_tiles, jnp.int32), mask=first_lane,
            semantic="relaxed")
        return (bounds_ref[queue] + jnp.max(jnp.where(first_lane, claimed, 0)),
                bounds_ref[queue + 1])

    def step_queues(carry):
        step, tile, end = carry
        inside = tile < end
        step = jnp.where(inside, step, step + 1)  # a queue found spent: on to the next one
        following = claim(step)  # issued before this claim's tiles are drawn

        def visit_claimed(claimed, carry):
            visit(claimed)
            return carry

        @pl.when(inside)
        def _():
            if claim_tiles == 1:
                visit(tile)
            else:
                jax.lax.fori_loop(tile, jnp.minimum(tile + claim_tiles, end), visit_claimed, 0)
        return (step, *following)

    jax.lax.while_loop(lambda carry: carry[0] < queues, step_queues,
                       (jnp.int32(0), *claim(jnp.int32(0))))
