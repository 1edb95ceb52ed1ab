"""32-lane ("warp") primitives for use inside Pallas kernels, bit-identical to saberjax.tree.

`saberjax.tree.lane_sums` and `search_block` slice values and gather along the lane axis,
which the Triton lowering rejects.  These versions halve the lane axis with `jnp.split` (a
reshape and a Triton split, i.e. lane i meets lane i + half, exactly the reference butterfly)
and pick the lane of each row with a masked sum over an iota, so every float is added in the
same order as the reference and a token draws the same topic on either path.
"""

from __future__ import annotations

import jax.numpy as jnp

from saberjax.tree import WIDTH


def lane_sums(values):
    """Butterfly sums of the last axis (width 32): [values, 16 pair sums, 8, 4, 2, total]."""
    levels = [values]
    while levels[-1].shape[-1] > 1:
        low, high = jnp.split(levels[-1], 2, axis=-1)
        levels.append(low + high)
    return levels


def lane_total(values):
    """The butterfly total of each row of `values` [N, 32]."""
    return lane_sums(values)[-1][:, 0]


def pick_lane(values, lane):
    """values[n, lane[n]] for every row n, as a masked sum (exact: one nonzero term)."""
    lanes = jnp.arange(values.shape[-1], dtype=jnp.int32)
    return jnp.sum(jnp.where(lanes[None, :] == lane[:, None], values, 0), axis=-1)


def search_block(values, x):
    """Lane of each row of `values` [N, 32] where mass x [N] falls, and the mass before it.

    The same walk down the butterfly tree as `saberjax.tree.search_block`: take the upper half
    when x is at least the lower half's mass and the upper half has mass.
    """
    levels = lane_sums(values)
    lane = jnp.zeros(x.shape, jnp.int32)
    before = jnp.zeros_like(x)
    for level in reversed(levels[:-1]):
        low_half, high_half = jnp.split(level, 2, axis=-1)
        low, high = pick_lane(low_half, lane), pick_lane(high_half, lane)
        upper = (x - before >= low) & (high > 0)
        before = jnp.where(upper, before + low, before)
        lane = jnp.where(upper, lane + low_half.shape[-1], lane)
    return lane, before


def lane_offsets():
    """0 .. 31 as int32, the lane index of a 32-wide block."""
    return jnp.arange(WIDTH, dtype=jnp.int32)
