"""The topic totals, B-hat and its sampling trees in two Pallas (Triton) passes over B;
reference: saberjax.mstep.model_arrays (XLA: a column reduction for the totals, B-hat in one
pass, then each tree level by reading B-hat).

Totals: a program adds up `rows_per_program` rows of `block_columns` columns in registers
(`rows_per_load` rows a load) and adds the column sums into the totals with one relaxed integer
atomic each, which a single pass over B at the memory's bandwidth needs (XLA's column
reduction of B does not reach it: docs/measurements/kernels.md).

B-hat: a program takes `block_columns` columns of one word's row of B: it computes B-hat there,
stores it, and stores the 32-wide sums of the same values times alpha, the tree level just
above the leaves, so B-hat is never read back.  The levels above that one are 1/32 of the size
and come from tree.build_tree (XLA).  In all, two reads of B and one write of B-hat, against
XLA's three reads and one write (B for the totals, B for B-hat, B-hat for the tree; the times
of both are in docs/measurements/kernels.md).
The 32-wide sums are added in Triton's order, not the reference's butterfly, so the two trees
differ by float rounding (the tree walk tolerates it: tree.search_block takes the last lane
with weight when x reaches the children's total).

leaf_level: the level above the leaves of trees over rows already stored (the sparse model's
dense rows, saberjax.sparse_build), in the reference's butterfly order (warp.lane_sums), so
the same floats as tree.leaf_level compiled for a GPU: a program loads `block_columns`
consecutive values of one row, coalesced, where XLA's loop fusion has each thread read a
group of 32 values.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from saberjax.mstep import bhat_and_tree as bhat_and_tree_reference
from saberjax.mstep import bhat_denominator, seeded_rows
from saberjax.mstep import model_arrays as model_arrays_reference
from saberjax.pallas import default_interpret, warp
from saberjax.pallas.atomics import atomic_add
from saberjax.seeding import SeedPrior
from saberjax.state import BHAT_DTYPE
from saberjax.tree import WIDTH, build_tree, padded_width

__all__ = ["bhat_and_tree", "leaf_level", "model_arrays", "model_arrays_reference",
           "topic_totals"]


# Rows per program of the totals kernel by default: enough for at most TOTALS_PROGRAMS programs
# and for at most COLUMN_ATOMICS atomic adds onto one column's total (adds to one address
# serialise, so many programs over few columns wait on each other: docs/measurements/kernels.md).
TOTALS_PROGRAMS = 4096
COLUMN_ATOMICS = 800


def _totals_kernel(word_topic_ref, zero_totals_ref, totals_ref, *, rows_per_program: int,
                   block_columns: int, rows_per_load: int):
    """Add the column sums of row block program_id(0), column block program_id(1), to totals."""
    del zero_totals_ref  # aliased to totals_ref
    num_words = word_topic_ref.shape[0]
    columns = pl.program_id(1) * block_columns + jnp.arange(block_columns, dtype=jnp.int32)
    inside = columns < word_topic_ref.shape[1]
    first = pl.program_id(0) * rows_per_program
    offsets = jnp.arange(rows_per_load, dtype=jnp.int32)

    def add_rows(step, sums):
        rows = first + step * rows_per_load + offsets
        mask = (rows < num_words)[:, None] & inside[None, :]
        block = plgpu.load(word_topic_ref.at[rows[:, None], columns[None, :]], mask=mask,
                           other=0)
        return sums + jnp.sum(block, axis=0)

    rows = jnp.minimum(rows_per_program, num_words - first)
    steps = (rows + rows_per_load - 1) // rows_per_load
    sums = jax.lax.fori_loop(0, steps, add_rows, jnp.zeros((block_columns,), jnp.int32))
    atomic_add(totals_ref, columns, sums, mask=inside, semantic="relaxed")


def _bhat_kernel(word_topic_ref, denominator_ref, alpha_ref, beta_ref, zero_level_ref, bhat_ref,
                 level_ref, *, block_columns: int, num_topics: int):
    """B-hat and the 32-wide sums of alpha_k B-hat_vk of columns block program_id(1) of word
    program_id(0)."""
    del zero_level_ref  # aliased to level_ref: sums past the last block stay 0
    word, block = pl.program_id(0), pl.program_id(1)
    columns = block * block_columns + jnp.arange(block_columns, dtype=jnp.int32)
    inside = columns < word_topic_ref.shape[1]
    counts = plgpu.load(word_topic_ref.at[word, columns], mask=inside, other=0)
    denominator = plgpu.load(denominator_ref.at[columns], mask=inside, other=1.0)
    bhat = jnp.where(columns < num_topics,
                     (counts.astype(jnp.float32) + beta_ref[0]) / denominator, 0.0)
    bhat = bhat.astype(bhat_ref.dtype)  # the tree sums what B-hat holds, as the reference
    plgpu.store(bhat_ref.at[word, columns], bhat, mask=inside)
    bhat = bhat.astype(jnp.float32) * plgpu.load(alpha_ref.at[columns], mask=inside, other=0.0)
    groups = block * (block_columns // WIDTH) + jnp.arange(block_columns // WIDTH,
                                                           dtype=jnp.int32)
    sums = jnp.sum(jnp.reshape(bhat, (block_columns // WIDTH, WIDTH)), axis=1)
    plgpu.store(level_ref.at[word, groups], sums, mask=groups < level_ref.shape[1])


def _leaf_level_kernel(leaves_ref, weights_ref, level_ref, *, block_columns: int):
    """The butterfly sums of weights * leaves over the 32-wide groups of columns block
    program_id(1) of row program_id(0) (zeros past the leaves: the level's padding)."""
    row, block = pl.program_id(0), pl.program_id(1)
    columns = block * block_columns + jnp.arange(block_columns, dtype=jnp.int32)
    inside = columns < leaves_ref.shape[1]
    leaves = plgpu.load(leaves_ref.at[row, columns], mask=inside, other=0)
    weighted = leaves.astype(jnp.float32) * plgpu.load(weights_ref.at[columns], mask=inside,
                                                       other=0.0)
    sums = warp.lane_total(jnp.reshape(weighted, (block_columns // WIDTH, WIDTH)))
    groups = block * (block_columns // WIDTH) + jnp.arange(block_columns // WIDTH,
                                                           dtype=jnp.int32)
    plgpu.store(level_ref.at[row, groups], sums, mask=groups < level_ref.shape[1])


@functools.partial(jax.jit, static_argnames=("block_columns", "num_warps", "interpret"))
def leaf_level(leaves: jax.Array, weights: jax.Array, *, block_columns: int = 2048,
               num_warps: int = 4, interpret: bool | None = None) -> jax.Array:
    """The level just above the leaves of the trees over weights * leaves [V, K_pad > 32]
    (float32 [V, padded_width(K_pad / 32)]): tree.leaf_level's floats, each product rounded
    before the butterfly adds it, as XLA's GPU backend computes the reference (its CPU
    backend fuses the first sums' multiplications into them).

    block_columns: the columns of a program (a power of two, at least 32); num_warps:
    Triton's; interpret=None: interpret unless on a GPU.
    """
    num_rows, num_leaves = leaves.shape
    level_shape = (num_rows, padded_width(num_leaves // WIDTH))
    block_columns = _block_columns(level_shape[1] * WIDTH, block_columns)
    if num_rows == 0:
        return jnp.zeros(level_shape, jnp.float32)
    return pl.pallas_call(
        functools.partial(_leaf_level_kernel, block_columns=block_columns),
        out_shape=jax.ShapeDtypeStruct(level_shape, jnp.float32),
        grid=(num_rows, pl.cdiv(level_shape[1] * WIDTH, block_columns)),
        name="saber_leaf_level",
        compiler_params=plgpu.CompilerParams(num_warps=num_warps, num_stages=1),
        interpret=default_interpret() if interpret is None else interpret,
    )(leaves, weights.astype(jnp.float32))


def _block_columns(padded_topics: int, block_columns: int) -> int:
    """The column block of a program: block_columns, or all columns when fewer."""
    return min(block_columns, pl.next_power_of_2(padded_topics))


@functools.partial(jax.jit, static_argnames=("block_columns", "rows_per_program",
                                             "rows_per_load", "num_warps", "interpret"))
def topic_totals(word_topic: jax.Array, *, block_columns: int = 1024,
                 rows_per_program: int | None = None, rows_per_load: int = 8,
                 num_warps: int = 4, interpret: bool | None = None) -> jax.Array:
    """The column sums of B (int32).

    Same contract as saberjax.mstep.topic_totals.  block_columns (a power of two, at least 32)
    and num_warps (Triton's) default to the fastest measured on an H200 (NOTES.md);
    rows_per_load is the rows of B a program loads at once (loads in flight together);
    rows_per_program (a multiple of rows_per_load) defaults to the fewest that keep within
    TOTALS_PROGRAMS programs and COLUMN_ATOMICS adds per column.  interpret=None: interpret
    unless on a GPU.
    """
    num_words, padded_topics = word_topic.shape
    block_columns = _block_columns(padded_topics, block_columns)
    if rows_per_program is None:
        cells = num_words * pl.cdiv(padded_topics, block_columns)
        rows_per_program = rows_per_load * max(
            pl.cdiv(cells, rows_per_load * TOTALS_PROGRAMS),
            pl.cdiv(num_words, rows_per_load * COLUMN_ATOMICS))
    return pl.pallas_call(
        functools.partial(_totals_kernel, rows_per_program=rows_per_program,
                          block_columns=block_columns, rows_per_load=rows_per_load),
        out_shape=jax.ShapeDtypeStruct((padded_topics,), word_topic.dtype),
        grid=(pl.cdiv(num_words, rows_per_program), pl.cdiv(padded_topics, block_columns)),
        input_output_aliases={1: 0},
        name="saber_topic_totals",
        compiler_params=plgpu.CompilerParams(num_warps=num_warps, num_stages=1),
        interpret=default_interpret() if interpret is None else interpret,
    )(word_topic, jnp.zeros((padded_topics,), word_topic.dtype))


@functools.partial(jax.jit, static_argnames=("num_topics", "num_words", "seeds",
                                             "block_columns", "num_warps", "interpret"))
def bhat_and_tree(word_topic: jax.Array, totals: jax.Array, alpha: jax.Array, num_topics: int,
                  beta, num_words: int | None = None, seeds: SeedPrior | None = None,
                  first_row=0, *, block_columns: int = 1024, num_warps: int = 4,
                  interpret: bool | None = None):
    """(B-hat, the levels of its trees over alpha_k B-hat_vk, top first) of rows of B given the
    topic totals and the prior alpha [K_pad].

    Same contract as saberjax.mstep.bhat_and_tree (num_words: the vocabulary's V, None: B's
    rows are the whole vocabulary; seeds and first_row: the seed words' prior, whose few rows
    mstep.seeded_rows sets after the kernel's pass); knobs as in topic_totals.
    """
    rows, padded_topics = word_topic.shape
    if padded_topics <= WIDTH:  # a one-level tree: B-hat is all there is
        return bhat_and_tree_reference(word_topic, totals, alpha, num_topics, beta, num_words,
                                       seeds, first_row)
    block_columns = _block_columns(padded_topics, block_columns)
    denominator = bhat_denominator(totals, num_words or rows, beta, seeds)
    level_shape = (rows, padded_width(padded_topics // WIDTH))
    bhat, level = pl.pallas_call(
        functools.partial(_bhat_kernel, block_columns=block_columns, num_topics=num_topics),
        out_shape=(jax.ShapeDtypeStruct(word_topic.shape, BHAT_DTYPE),
                   jax.ShapeDtypeStruct(level_shape, jnp.float32)),
        grid=(rows, pl.cdiv(padded_topics, block_columns)),
        input_output_aliases={4: 1},
        name="saber_bhat_tree",
        compiler_params=plgpu.CompilerParams(num_warps=num_warps, num_stages=1),
        interpret=default_interpret() if interpret is None else interpret,
    )(word_topic, denominator, alpha.astype(jnp.float32), jnp.reshape(jnp.float32(beta), (1,)),
      jnp.zeros(level_shape, jnp.float32))
    tree = build_tree(level) + (level,)
    if seeds is None:
        return bhat, tree
    return seeded_rows(word_topic, bhat, tree, denominator, alpha, num_topics, beta, seeds,
                       first_row)


def model_arrays(word_topic: jax.Array, alpha: jax.Array, num_topics: int, beta,
                 seeds: SeedPrior | None = None, *, block_columns: int = 1024,
                 rows_per_program: int | None = None, rows_per_load: int = 8,
                 num_warps: int = 4, interpret: bool | None = None):
    """(topic totals, B-hat, its tree levels top first) of B and prior alpha: topic_totals,
    then bhat_and_tree (same contract as saberjax.mstep.model_arrays)."""
    knobs = dict(block_columns=block_columns, num_warps=num_warps, interpret=interpret)
    totals = topic_totals(word_topic, rows_per_program=rows_per_program,
                          rows_per_load=rows_per_load, **knobs)
    return (totals, *bhat_and_tree(word_topic, totals, alpha, num_topics, beta, seeds=seeds,
                                   **knobs))
