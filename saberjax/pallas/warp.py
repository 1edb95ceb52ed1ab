"""32-lane ("warp") primitives for use inside Pallas kernels, bit-identical to saberjax.tree.

`saberjax.tree.lane_sums` slices the lane axis, which the Triton lowering rejects.  This
version halves it with `jnp.split` (a reshape and a Triton split, i.e. lane i meets lane
i + half, exactly the reference butterfly), so every float is added in the same order as the
reference; `pick_lane` reads one lane of each row with a masked sum over an iota.
`saberjax.tree.search_block` needs no counterpart: it lowers as it is.
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


def lane_offsets():
    """0 .. 31 as int32, the lane index of a 32-wide block."""
    return jnp.arange(WIDTH, dtype=jnp.int32)
