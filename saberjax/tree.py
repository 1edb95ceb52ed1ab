"""The W-ary sampling tree (W = 32): draw k with probability proportional to alpha_k B-hat[v, k].

The leaves are B-hat's row times the prior alpha (one weight per column, shared by every row):
the tree's levels hold sums of those products, and a walk forms the products of the 32
leaves it reads, so no second [V, K] array of leaves is stored.

Layout for one word v (paper section 3.2, "W-ary sampling tree"), drawn for K = 1,000::

    level 0 (top)     [ s0  s1 ... s31 ]                 32 node sums (one row per word)
                         |   \\
    leaves            [ a0 b0 ... a31 b31 | ... ]        ceil32(K) = 1,024 columns

Every level is a multiple of 32 wide and node i of a level is the sum of children
32*i .. 32*i+31 of the level below; the leaves are B-hat times alpha, so the tree costs only
about K/31 extra floats per word.  Levels are padded with zeros (zero-weight nodes are never
chosen), so any K from 2 to 65,536 and beyond works; depth = ceil(log32(ceil32(K))).

Sampling walks from the top: at each level load the node's 32 children, prefix-sum them, pick
the first child whose running sum exceeds the remaining mass x, subtract what lies before it,
and descend.  Storing subtree sums rather than global prefix sums (the paper's variant) keeps
float32 rounding local to 32 numbers, so large K loses no precision.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

WIDTH = 32


def padded_width(n: int) -> int:
    """n rounded up to a multiple of WIDTH."""
    return -(-n // WIDTH) * WIDTH


def level_widths(num_leaves: int) -> tuple[int, ...]:
    """Widths of the levels above the leaves, top first ((), for 32 leaves or fewer)."""
    widths = []
    width = padded_width(num_leaves)
    while width > WIDTH:
        width = padded_width(-(-width // WIDTH))
        widths.append(width)
    return tuple(reversed(widths))


def build_tree(leaves: jax.Array) -> tuple[jax.Array, ...]:
    """Upper levels (top first) of the trees of every row of `leaves` [V, multiple of 32]."""
    levels = []
    below = leaves
    for _ in level_widths(leaves.shape[1]):
        below = _level_above(below)
        levels.append(below)
    return tuple(reversed(levels))


def _level_above(below: jax.Array) -> jax.Array:
    """The level above `below` [V, multiple of 32]: each 32 nodes' lane_sums total, padded
    with zeros to a multiple of 32."""
    sums = lane_sums(below.reshape(below.shape[0], below.shape[1] // WIDTH, WIDTH))[-1][..., 0]
    return jnp.pad(sums, ((0, 0), (0, padded_width(sums.shape[1]) - sums.shape[1])))


def weighted_leaves(leaves: jax.Array, weights: jax.Array) -> jax.Array:
    """The trees' leaves: leaves [..., K_pad] (B-hat) times weights [K_pad] (alpha), float32."""
    return leaves.astype(jnp.float32) * weights


def leaf_level(leaves: jax.Array, weights: jax.Array) -> jax.Array:
    """The level just above the leaves of the trees over weights * leaves [V, K_pad > 32]
    (build_tree(weighted_leaves(leaves, weights))[-1]); the reference of
    saberjax.pallas.bhat_tree.leaf_level."""
    return _level_above(weighted_leaves(leaves, weights))


def weighted_tree(leaves: jax.Array, weights: jax.Array,
                  level_of_leaves=leaf_level) -> tuple[jax.Array, ...]:
    """build_tree(weighted_leaves(leaves, weights)), the level above the leaves by
    level_of_leaves (leaf_level, or a kernel of its contract) and the levels above it from
    that one."""
    if not level_widths(leaves.shape[1]):
        return ()
    level = level_of_leaves(leaves, weights)
    return build_tree(level) + (level,)


def tree_totals(tree: tuple[jax.Array, ...], leaves: jax.Array, weights: jax.Array) -> jax.Array:
    """Total mass of every row's tree: the sum of its top level (of the weighted leaves when
    the tree has no level above them)."""
    top = tree[0] if tree else weighted_leaves(leaves, weights)
    return lane_sums(top.astype(jnp.float32))[-1][..., 0]


def lane_sums(values: jax.Array) -> list[jax.Array]:
    """Pairwise sums of the last axis (a power of two wide, 32 in the samplers): [values,
    16 pair sums, 8, 4, 2, total].

    A fixed butterfly order, like a warp reduction, so every token's sums are the same floats
    however tokens are batched.
    """
    levels = [values]
    while levels[-1].shape[-1] > 1:
        half = levels[-1].shape[-1] // 2
        levels.append(levels[-1][..., :half] + levels[-1][..., half:])
    return levels


def pairwise_sum(values: jax.Array) -> jax.Array:
    """The sum of the last axis in the order lane_sums fixes (zeros padding it to a power of
    two): the same floats whichever reduction kernel a compiler picks, where jnp.sum leaves
    the order to the kernel (XLA's GPU autotuning chooses among kernels that add in other
    orders)."""
    width = values.shape[-1]
    padding = (1 << max(0, width - 1).bit_length()) - width
    padded = jnp.pad(values, [(0, 0)] * (values.ndim - 1) + [(0, padding)])
    return lane_sums(padded)[-1][..., 0]


def search_block(values: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Along the last axis of `values` [..., 32] (non-negative) find the lane where mass x falls.

    The first lane whose inclusive prefix sum exceeds x (a lane of weight zero never does), or,
    when rounding leaves x at or past the total, the last lane with weight.  Returns (lane,
    mass before the lane, at most x).  Only a scan, reductions and selects: the same code runs
    inside the Pallas kernel (Triton lowers it; it replaced a butterfly-tree descent that cost
    the kernel ten reductions a search, NOTES.md).
    """
    lanes = jnp.arange(values.shape[-1], dtype=jnp.int32)
    prefix = jnp.cumsum(values, axis=-1)
    lane = jnp.sum((prefix <= x[..., None]).astype(jnp.int32), axis=-1)
    lane = jnp.minimum(lane, jnp.max(jnp.where(values > 0, lanes, 0), axis=-1))
    before = jnp.sum(jnp.where(lanes == lane[..., None], prefix - values, 0.0), axis=-1)
    return lane, jnp.minimum(before, x)


def descend(level_widths: tuple[int, ...], load_children, x: jax.Array) -> jax.Array:
    """The leaf where mass x falls, walking a tree down from its top level.

    level_widths: the widths of the levels, top first, leaves last.  load_children(level,
    children, inside) returns the values [..., 32] of the node ids `children` of that level
    (zeros where not `inside`, i.e. past the level's width), so the same walk serves arrays
    (tree_sample) and a Pallas kernel's refs.
    """
    lanes = jnp.arange(WIDTH, dtype=jnp.int32)
    node = jnp.zeros(x.shape, jnp.int32)
    for level, width in enumerate(level_widths):
        children = node[..., None] * WIDTH + lanes
        lane, before = search_block(load_children(level, children, children < width), x)
        x = x - before
        node = node * WIDTH + lane
    return node


def descend_excluding(level_widths: tuple[int, ...], load_children, x: jax.Array,
                      excluded: jax.Array, excluded_mass: jax.Array) -> jax.Array:
    """descend for a mass x in [0, total - excluded_mass) through the tree without leaf
    `excluded` (whose mass is excluded_mass): every node on the path to that leaf is read less
    excluded_mass (clamped at 0 against rounding), so it is one walk, as descend's."""
    shift = WIDTH.bit_length() - 1
    depth = len(level_widths)

    def load_without(level, children, inside):
        values = load_children(level, children, inside)
        on_path = children == (excluded >> (shift * (depth - 1 - level)))[..., None]
        return jnp.where(on_path, jnp.maximum(values - excluded_mass[..., None], 0.0), values)

    return descend(level_widths, load_without, x)


def tree_sample(tree: tuple[jax.Array, ...], leaves: jax.Array, weights: jax.Array,
                rows: jax.Array, uniforms: jax.Array, excluded: jax.Array | None = None
                ) -> jax.Array:
    """Draw one leaf per (row, uniform) pair with probability proportional to
    weights * leaves[row], leaving out leaf `excluded` of each draw where given.

    `rows`, `uniforms` and `excluded` have any (equal) shape; so does the result.
    """
    levels = tuple(tree) + (leaves,)
    widths = tuple(level.shape[1] for level in levels)

    def load_children(level, children, inside):
        column = jnp.where(inside, children, 0)
        values = levels[level][rows[..., None], column].astype(jnp.float32)
        if level == len(tree):
            values = weighted_leaves(values, weights[column])
        return jnp.where(inside, values, 0)

    total = tree_totals(tree, leaves, weights)[rows]
    if excluded is None:
        return descend(widths, load_children, uniforms * total)
    removed = weighted_leaves(leaves[rows, excluded], weights[excluded])
    return descend_excluding(widths, load_children, uniforms * jnp.maximum(total - removed, 0.0),
                             excluded, removed)
