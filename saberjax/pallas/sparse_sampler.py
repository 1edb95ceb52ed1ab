"""The E-step over the sparse word-topic model as a Pallas (Triton) kernel; reference:
saberjax.sparse_sampler (its docstring has the three terms).

One program (one warp) samples a tile: up to chunk.tile_tokens consecutive word-major tokens of
one word (Chunk.tile_start), so the word's row of B stays hot in L1 while its tiles run.  A
word with a dense row (the most frequent words, SparseModel.dense_bhat) runs the dense
kernel's steps over that B-hat row and its tree (saberjax.pallas.sampler: term 1 one load per
nonzero of A_d, terms 2 and 3 one descent of the row's tree), its own topic's mass from B_vz
recovered from B-hat_vz (saberjax.sparse_sampler.count_of_bhat, as the reference).  Any other
word's tile looks its topics up in its sparse row: term 1's lookups read a window of slots
of the row's table (sparse_rows.RowTables: independent loads, one round of latency), or,
for a row without a table, search one bucket of the row (sparse_rows.RowBuckets: about two
entries); the own topic's count B_vz is looked up the same way (term 2's mass drops its
entry's weight alpha_z B_vz / D_z), and only where a token of the tile draws from term 2 do
its own topic's bucket search (the entry's position, to skip it) and the search of the
whole row run, with as many halvings as the row's length needs (a rare word's row is
short).  Token t of the tile is row t of [tile, 32] arrays:

    term 1    the nonzeros of the document row A_d, 32 lanes a block, each lane a weighted
              reservoir over the products A_dk (B_vk + beta) / D_k, B_vk read from the
              row's table (or its bucket); the own topic z's mass joins lane 0
    term 2    a search of the row's prefix sums of alpha_k B_vk / D_k, z's entry skipped
              (only when a token of the tile draws from it)
    term 3    a descent of the global W-ary tree over alpha_k beta / D_k, z's leaf skipped
              (tree.descend_excluding; only when a token of the tile draws from it)

The uniforms, the reservoirs and the searches are the reference's (rng streams, tree.search_block,
sparse_rows.bisect), so on the same inputs a token gets the same topic up to float rounding
(the order in which Triton adds the lane masses).  Each new topic is stored at its word-major
position and at its doc-major position (the shuffle folded in), as the dense kernel does.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.experimental.pallas import triton as plgpu

from saberjax import rng
from saberjax.layout import Chunk
from saberjax.pallas.sampler import (TILE_INPUTS, Tile, call_sampler, join_own_topic,
                                     lane_topic, row_topics, sample_tile, sparse_lanes,
                                     tile_inputs, tree_topic)
from saberjax.sparse_rows import (DISPLACEMENT_BITS, ROW_TABLE_WINDOW, SparseModel, bisect,
                                  table_match)
from saberjax.sparse_sampler import count_of_bhat, own_topic_mass, row_mass_without_own
from saberjax.state import ChunkState


class _ModelRefs(NamedTuple):
    """The kernel's refs of the model and the document rows, after tile_inputs' (the order of
    sample_and_shuffle's inputs)."""
    alpha: object
    denominator: object
    beta: object
    prior_total: object
    a_pairs: object
    row_start: object
    row_topics: object
    row_counts: object
    bucket_base: object
    bucket_shift: object
    bucket_steps: object
    bucket_start: object
    table_base: object
    table_shift: object
    table_window: object
    table_slots: object
    row_prefix: object
    row_mass: object
    dense_tree_total: object


class _Row(NamedTuple):
    """A word's sparse row: its entries low .. high - 1 of the model's rows, the halvings a
    search of the whole row needs, its buckets (sparse_rows.RowBuckets) and its table
    (sparse_rows.RowTables)."""
    low: jax.Array
    high: jax.Array
    steps: jax.Array
    bucket_base: jax.Array
    bucket_shift: jax.Array
    bucket_steps: jax.Array
    table_base: jax.Array
    table_shift: jax.Array
    table_window: jax.Array


def _kernel(*refs, tile_tokens: int, block_tokens: int, level_widths: tuple[int, ...],
            dense_level_widths: tuple[int, ...], padded_topics: int, table_window: int,
            tile_index=None):
    """Sample the tokens of tile tile_index, program_id's if None (see the module docstring)."""
    # refs: tile_inputs', _ModelRefs', the prior tree's levels and leaves, the dense rows' tree
    # levels and B-hat rows, two zeroed arrays aliased to the outputs, the outputs
    model_end = TILE_INPUTS + len(_ModelRefs._fields)
    model = _ModelRefs(*refs[TILE_INPUTS:model_end])
    level_refs = refs[model_end:model_end + len(level_widths)]
    dense_level_refs = refs[model_end + len(level_widths):-4]

    def own_mass(own_count, own_alpha, own_bhat, own_denominator):
        """The own topic's mass from B_vz recovered from B-hat_vz (count_of_bhat)."""
        return own_topic_mass(own_count, own_alpha,
                              count_of_bhat(own_bhat, own_denominator, model.beta[0]),
                              model.beta[0], own_denominator)

    def draw(tile):
        return jax.lax.cond(
            tile.word < model.dense_tree_total.shape[0],
            lambda: row_topics(model.a_pairs, model.alpha, model.denominator,
                               model.dense_tree_total, dense_level_refs, dense_level_widths,
                               "sum", tile, own_mass),
            lambda: _sparse_row_topics(model, level_refs, level_widths, padded_topics,
                                       table_window, tile))

    sample_tile(refs[:TILE_INPUTS], refs[-2:], draw, tile_tokens=tile_tokens,
                block_tokens=block_tokens, tile_index=tile_index)


def _sparse_row_topics(model: _ModelRefs, level_refs, level_widths: tuple[int, ...],
                       padded_topics: int, table_window: int, tile: Tile):
    """New topics of a tile's tokens drawn over the tile word's sparse row and the global
    tree (the module docstring's three terms)."""
    word, own, real, state, beta = tile.word, tile.own, tile.real, tile.state, model.beta[0]
    row = _word_row(model, word)
    in_table = (row.table_window > 0) & (row.table_window <= table_window)

    def products(count_in_word):
        """Term 1's products A_dk (B_vk + beta) / D_k, B_vk by count_in_word(topics, mask)."""
        def block_products(topics, counts, inside, is_own):
            other = inside & ~is_own
            denominators = plgpu.load(model.denominator.at[topics], mask=other, other=1.0)
            return jnp.where(other, counts * (count_in_word(topics, other).astype(jnp.float32)
                                              + beta) / denominators, 0.0)
        return block_products

    def table_count(topics, mask):
        return _table_count(model, row, topics, mask, table_window)

    def bucket_count(topics, mask):
        return _word_count(model, row, topics, mask)[1]

    # term 1's block loop once for a row with a table and once for one without, so that the
    # table's loop holds none of the bucket search's values (DESIGN.md, "Row tables"); the
    # own topic's count B_vz looked up the same way after it
    lane_mass, kept_topics, own_count = jax.lax.cond(
        in_table,
        lambda: sparse_lanes(model.a_pairs, padded_topics, tile, products(table_count)),
        lambda: sparse_lanes(model.a_pairs, padded_topics, tile, products(bucket_count)))
    own_word_count = jax.lax.cond(in_table, lambda: table_count(own, real),
                                  lambda: bucket_count(own, real))
    own_alpha = plgpu.load(model.alpha.at[own], mask=real, other=0.0)
    own_denominator = plgpu.load(model.denominator.at[own], mask=real, other=1.0)
    own_mass = own_topic_mass(own_count, own_alpha, own_word_count.astype(jnp.float32), beta,
                              own_denominator)
    lane_mass, kept_topics = join_own_topic(lane_mass, kept_topics, own_mass, tile)
    doc_mass = jnp.sum(lane_mass, axis=1)
    # term 2 without z's entry
    row_mass = row_mass_without_own(model.row_mass[word], own_alpha, own_word_count,
                                    own_denominator)
    own_prior = own_alpha * plgpu.load(level_refs[-1].at[0, own], mask=real, other=0.0)
    prior_mass = jnp.maximum(model.prior_total[0] - own_prior, 0.0)  # term 3 without z's leaf

    branch = rng.uniform(state, rng.STREAM_BRANCH) * (doc_mass + row_mass + prior_mass)
    u_position = rng.uniform(state, rng.STREAM_POSITION)
    from_doc = lane_topic(lane_mass, kept_topics, u_position * doc_mass)
    take_row = real & (branch >= doc_mass) & (branch < doc_mass + row_mass)
    take_prior = real & (branch >= doc_mass + row_mass)
    from_row = jax.lax.cond(
        jnp.max(take_row.astype(jnp.int32)) > 0,
        lambda: _row_topic(model, row, u_position * row_mass, own, own_word_count, take_row),
        lambda: jnp.zeros(own.shape, jnp.int32))
    from_prior = tree_topic(level_refs, model.alpha, level_widths, 0, take_prior,
                            lambda: u_position * prior_mass, own, lambda: own_prior)
    return jnp.where(take_prior, from_prior, jnp.where(take_row, from_row, from_doc))


def _word_row(model: _ModelRefs, word) -> _Row:
    """The word's sparse row."""
    low, high = model.row_start[word], model.row_start[word + 1]
    return _Row(low, high,
                # halvings for a range of the row's length (one spare: log2 of a float)
                jnp.log2((high - low).astype(jnp.float32) + 1.0).astype(jnp.int32) + 2,
                model.bucket_base[word], model.bucket_shift[word], model.bucket_steps[word],
                model.table_base[word], model.table_shift[word], model.table_window[word])


def _table_count(model: _ModelRefs, row: _Row, topics, mask, window: int):
    """B_v,topic (0 where absent), elementwise, from the word's table (sparse_rows.RowTables,
    the row has one of at most `window` slots a lookup): the slots from each topic's home,
    all loaded before any is compared (sparse_rows.find_in_table)."""
    shift = row.table_shift
    home = row.table_base + (topics >> shift)
    named = topics & ((1 << shift) - 1)
    values = [plgpu.load(model.table_slots.at[home + offset],
                         mask=mask & (offset < row.table_window), other=0,
                         eviction_policy="evict_last") for offset in range(window)]
    count = jnp.zeros(topics.shape, jnp.int32)
    for offset, value in enumerate(values):
        count = jnp.where(table_match(value, offset, named, shift),
                          value >> (shift + DISPLACEMENT_BITS), count)
    return count


def _word_count(model: _ModelRefs, row: _Row, topics, mask):
    """(position of each topic in the word's row, B_v,topic: 0 where absent), elementwise: a
    search of the topic's bucket (sparse_rows.RowBuckets)."""
    slot = row.bucket_base + (topics >> row.bucket_shift)
    bucket_low = plgpu.load(model.bucket_start.at[slot], mask=mask, other=0)
    bucket_high = plgpu.load(model.bucket_start.at[slot + 1], mask=mask, other=0)

    def load(position, searching):
        return plgpu.load(model.row_topics.at[position], mask=searching & mask, other=0,
                          eviction_policy="evict_last")
    position = bisect(load, bucket_low, bucket_high, lambda value: value < topics,
                      row.bucket_steps)
    inside = mask & (position < bucket_high)
    # the topic and the count load side by side
    found = inside & (plgpu.load(model.row_topics.at[position], mask=inside,
                                 other=-1) == topics)
    count = plgpu.load(model.row_counts.at[position], mask=inside, other=0)
    return position, jnp.where(found, count, 0)


def _row_topic(model: _ModelRefs, row: _Row, x, own, own_word_count, take):
    """Term 2's topic for mass x of the row without the own topic's entry, for the `take`
    tokens: the own topic's entry found by a search of its bucket, x moved past it, then a
    search of the row's prefix sums."""
    own_position = _word_count(model, row, own, take)[0]
    counted = take & (own_word_count > 0)
    own_entry = plgpu.load(model.row_prefix.at[own_position], mask=counted, other=0.0)
    before_own = plgpu.load(model.row_prefix.at[own_position - 1],
                            mask=counted & (own_position > row.low), other=0.0)
    x = jnp.where(counted & (x >= before_own), x + (own_entry - before_own), x)

    def load(position, searching):
        return plgpu.load(model.row_prefix.at[position], mask=searching & take, other=0,
                          eviction_policy="evict_last")
    zeros = jnp.zeros(x.shape, jnp.int32)
    position = bisect(load, zeros + row.low, zeros + row.high, lambda value: value <= x,
                      row.steps)
    # rounding can leave x at the row's end: the last entry that is not the own topic
    last = row.high - 1
    position = jnp.where(position >= row.high,
                         jnp.where(last == own_position, last - 1, last), position)
    return plgpu.load(model.row_topics.at[position], mask=take, other=0)


@functools.partial(jax.jit, static_argnames=("zero_doc_major", "num_warps", "num_stages",
                                             "table_window", "tile_queues", "queue_programs",
                                             "claim_tiles", "max_registers", "interpret"))
def sample_and_shuffle(chunk: Chunk, chunk_state: ChunkState, model: SparseModel, key, *,
                       zero_doc_major: bool = True, num_warps: int = 1, num_stages: int = 1,
                       table_window: int = ROW_TABLE_WINDOW, tile_queues: int = 0,
                       queue_programs: int = 20, claim_tiles: int = 4,
                       max_registers: int | None = None, interpret: bool | None = None):
    """New topic of every word-major token of a chunk (padding tokens get topic 0) and the same
    topics at their doc-major positions; the contract of
    saberjax.sparse_sampler.sample_and_shuffle (zero_doc_major as the dense kernel's,
    saberjax.pallas.sampler).  num_warps, num_stages: Triton's; table_window: the slots a
    lookup in a row's table loads (a row whose table needs more searches its bucket);
    tile_queues, queue_programs, claim_tiles: the tiles claimed claim_tiles at a time from
    tile_queues queues (one an SM) by queue_programs programs a queue (the programs an SM
    holds at the kernel's registers: 20 at 96; saberjax.pallas.tile_queues; tile_queues 0:
    one program a tile), the same topics either way; max_registers: a cap on a thread's
    registers (saberjax.pallas.registers; None: ptxas's choice, which the claims' loop
    raises); interpret=None: interpret unless on a GPU."""
    rows = model.word_topic
    levels = tuple(model.prior_tree) + (model.prior_leaves,)
    dense_levels = tuple(model.dense_tree) + (model.dense_bhat,)
    kernel = functools.partial(
        _kernel, tile_tokens=chunk.tile_tokens, block_tokens=chunk.block_tokens,
        level_widths=tuple(level.shape[1] for level in levels),
        dense_level_widths=tuple(level.shape[1] for level in dense_levels),
        padded_topics=model.topic_totals.shape[0], table_window=table_window)
    inputs = (*tile_inputs(chunk, chunk_state, key),
              *_ModelRefs(model.alpha.astype(jnp.float32), model.bhat_denominator,
                          jnp.reshape(model.beta, (1,)).astype(jnp.float32),
                          jnp.reshape(model.prior_total, (1,)), chunk_state.a_pairs,
                          rows.row_start, rows.topics, rows.counts, *model.buckets,
                          *model.tables, model.row_prefix, model.row_mass, model.dense_tree_total),
              *levels, *dense_levels)
    return call_sampler(kernel, inputs, chunk, chunk_state, name="saber_sparse_sample",
                        num_warps=num_warps, num_stages=num_stages, interpret=interpret,
                        zero_doc_major=zero_doc_major, tile_queues=tile_queues,
                        queue_programs=queue_programs, claim_tiles=claim_tiles,
                        max_registers=max_registers or None)
