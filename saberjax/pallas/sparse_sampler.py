"""The E-step over the sparse word-topic model as a Pallas (Triton) kernel; reference:
saberjax.sparse_sampler (its docstring has the three terms).

One program (one warp) samples a tile: up to chunk.tile_tokens consecutive word-major tokens of
one word (Chunk.tile_start), so the word's row of B stays hot in L1 while its tiles run.  A
word with a dense row (the most frequent words, SparseModel.dense_bhat) runs the dense
kernel's steps over that B-hat row and its tree (saberjax.pallas.sampler: term 1 one load per
nonzero of A_d, terms 2 and 3 one descent of the row's tree), its own topic's mass from B_vz
found in its sparse row (as the reference).  Any other word's tile looks in its sparse row
(topics, counts and term 2's prefix sums): a lookup of B_vk reads the directory slot of k's
bucket (sparse_rows.RowBuckets: at most one entry a bucket on average) and scans the row's
topics from there to the first at or past k, about two scattered loads, the count read only
where k is found; term 2's draw searches the whole row, with as many halvings as the row's
length needs (a rare word's row is short).  Token t of the tile is row t of [tile, 32]
arrays:

    term 1    the nonzeros of the document row A_d, 32 lanes a block, each lane a weighted
              reservoir over the products A_dk / D_k (B_vk + beta), A_dk / D_k read beside
              the pairs (pair_weights) and B_vk found by a scan from its bucket of the word's
              row; the own topic z's mass joins lane 0
    term 2    a search of the row's prefix sums of alpha_k B_vk / D_k, z's entry skipped
              (only when a token of the tile draws from it)
    term 3    a descent of the global W-ary tree over alpha_k beta / D_k, z's leaf skipped
              (tree.descend_excluding; only when a token of the tile draws from it)

The uniforms, the reservoirs, the products and term 2's search are the reference's (rng
streams, tree.search_block, sparse_rows.bisect), and a lookup finds the entry the reference's
search of the bucket finds, so on the same inputs a token gets the same topic up to float
rounding (the order in which Triton adds the lane masses).  Each new topic is stored at its
word-major position and at its doc-major position (the shuffle folded in), as the dense
kernel does.
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
from saberjax.sparse_rows import SparseModel, bisect
from saberjax.sparse_sampler import own_topic_mass
from saberjax.state import ChunkState, unpack_pairs


class _ModelRefs(NamedTuple):
    """The kernel's refs of the model and the document rows, after tile_inputs' (the order of
    sample_and_shuffle's inputs)."""
    alpha: object
    denominator: object
    beta: object
    prior_total: object
    a_pairs: object
    pair_weights: object
    row_start: object
    row_topics: object
    row_counts: object
    bucket_base: object
    bucket_shift: object
    bucket_start: object
    row_prefix: object
    row_mass: object
    dense_tree_total: object


class _Row(NamedTuple):
    """A word's sparse row: its entries low .. high - 1 of the model's rows, the halvings a
    search of the whole row needs, and its buckets (sparse_rows.RowBuckets)."""
    low: jax.Array
    high: jax.Array
    steps: jax.Array
    bucket_base: jax.Array
    bucket_shift: jax.Array


def _kernel(*refs, tile_tokens: int, block_tokens: int, level_widths: tuple[int, ...],
            dense_level_widths: tuple[int, ...], padded_topics: int):
    """Sample the tokens of tile program_id (see the module docstring)."""
    # refs: tile_inputs', _ModelRefs', the prior tree's levels and leaves, the dense rows' tree
    # levels and B-hat rows, two zeroed arrays aliased to the outputs, the outputs
    model_end = TILE_INPUTS + len(_ModelRefs._fields)
    model = _ModelRefs(*refs[TILE_INPUTS:model_end])
    level_refs = refs[model_end:model_end + len(level_widths)]
    dense_level_refs = refs[model_end + len(level_widths):-4]

    def draw(tile):
        def own_mass(own_count, own_alpha, own_bhat, own_denominator):
            """The own topic's mass from B_vz, found in the word's sparse row (B-hat held in
            bfloat16 loses B_vz - 1 + beta where B_vz = 1)."""
            del own_bhat
            _, own_word_count = _word_count(model, _word_row(model, tile.word), tile.own,
                                            tile.real)
            return own_topic_mass(own_count, own_alpha, own_word_count.astype(jnp.float32),
                                  model.beta[0], own_denominator)

        return jax.lax.cond(
            tile.word < model.dense_tree_total.shape[0],
            lambda: row_topics(model.a_pairs, model.alpha, model.denominator,
                               model.dense_tree_total, dense_level_refs, dense_level_widths,
                               "sum", tile, own_mass),
            lambda: _sparse_row_topics(model, level_refs, level_widths, padded_topics, tile))

    sample_tile(refs[:TILE_INPUTS], refs[-2:], draw, tile_tokens=tile_tokens,
                block_tokens=block_tokens)


def _sparse_row_topics(model: _ModelRefs, level_refs, level_widths: tuple[int, ...],
                       padded_topics: int, tile: Tile):
    """New topics of a tile's tokens drawn over the tile word's sparse row and the global
    tree (the module docstring's three terms)."""
    word, own, real, state, beta = tile.word, tile.own, tile.real, tile.state, model.beta[0]
    row = _word_row(model, word)

    def products(topics, pair_weights, inside, is_own):
        """Term 1's products A_dk / D_k (B_vk + beta), A_dk / D_k the pairs' weights."""
        other = inside & ~is_own
        _, counts_in_word = _word_count(model, row, topics, other)
        return jnp.where(other, pair_weights * (counts_in_word.astype(jnp.float32) + beta),
                         0.0)

    lane_mass, kept_topics, own_count = sparse_lanes(model.a_pairs, padded_topics, tile,
                                                     products, model.pair_weights)
    own_position, own_word_count = _word_count(model, row, own, real)
    own_alpha = plgpu.load(model.alpha.at[own], mask=real, other=0.0)
    own_denominator = plgpu.load(model.denominator.at[own], mask=real, other=1.0)
    own_mass = own_topic_mass(own_count, own_alpha, own_word_count.astype(jnp.float32), beta,
                              own_denominator)
    lane_mass, kept_topics = join_own_topic(lane_mass, kept_topics, own_mass, tile)
    doc_mass = jnp.sum(lane_mass, axis=1)
    before_own, own_weight = _own_entry(model, row, own_position, real & (own_word_count > 0))
    row_mass = jnp.maximum(model.row_mass[word] - own_weight, 0.0)  # term 2 without z's entry
    own_prior = own_alpha * plgpu.load(level_refs[-1].at[0, own], mask=real, other=0.0)
    prior_mass = jnp.maximum(model.prior_total[0] - own_prior, 0.0)  # term 3 without z's leaf

    branch = rng.uniform(state, rng.STREAM_BRANCH) * (doc_mass + row_mass + prior_mass)
    u_position = rng.uniform(state, rng.STREAM_POSITION)
    from_doc = lane_topic(lane_mass, kept_topics, u_position * doc_mass)
    take_row = real & (branch >= doc_mass) & (branch < doc_mass + row_mass)
    take_prior = real & (branch >= doc_mass + row_mass)
    from_row = jax.lax.cond(
        jnp.max(take_row.astype(jnp.int32)) > 0,
        lambda: _row_topic(model, row, u_position * row_mass, own_position, before_own,
                           own_weight, take_row),
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
                model.bucket_base[word], model.bucket_shift[word])


def _word_count(model: _ModelRefs, row: _Row, topics, mask):
    """(position of each topic in the word's row: its first entry at or past the topic, the
    row's end where none; B_v,topic: 0 where absent), elementwise where `mask`: a scan of the
    row's topics from the directory slot of the topic's bucket (sparse_rows.RowBuckets), each
    element stopping at its first entry at or past its topic, so a lookup reads one slot and
    as many entries as its bucket holds before the topic, plus one."""
    slot = row.bucket_base + (topics >> row.bucket_shift)
    position = plgpu.load(model.bucket_start.at[slot], mask=mask, other=0)

    def any_scanning(scan):
        """Whether any element still scans (reduced one axis at a time: the Triton lowering
        of a reduction over several axes fails)."""
        flags = scan[1].astype(jnp.int32)
        while flags.ndim:
            flags = jnp.max(flags, axis=-1)
        return flags > 0

    def step(scan):
        position, scanning, found = scan
        entry = plgpu.load(model.row_topics.at[position], mask=scanning, other=0,
                           eviction_policy="evict_last")
        found = found | (scanning & (entry == topics))
        passing = scanning & (entry < topics)
        position = jnp.where(passing, position + 1, position)
        return position, passing & (position < row.high), found

    position, _, found = jax.lax.while_loop(
        any_scanning, step,
        (position, mask & (position < row.high), jnp.zeros(topics.shape, jnp.bool_)))
    return position, plgpu.load(model.row_counts.at[position], mask=found, other=0)


def _own_entry(model: _ModelRefs, row: _Row, own_position, counted):
    """(the row's prefix sum before the own topic's entry, that entry's weight alpha_z B_vz /
    D_z: 0 where not `counted`, the own topic absent from the row)."""
    own_entry = plgpu.load(model.row_prefix.at[own_position], mask=counted, other=0.0)
    before_own = plgpu.load(model.row_prefix.at[own_position - 1],
                            mask=counted & (own_position > row.low), other=0.0)
    return before_own, jnp.where(counted, own_entry - before_own, 0.0)


def _row_topic(model: _ModelRefs, row: _Row, x, own_position, before_own, own_weight, take):
    """Term 2's topic for mass x of the row without the own topic's entry (skipped by moving x
    past it): a search of the row's prefix sums for the `take` tokens."""
    x = jnp.where(x >= before_own, x + own_weight, x)

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


def pair_weights(a_pairs, denominator):
    """A_dk / D_k of every pair of A (float32, as long as the pairs; any value past a
    document's nonzeros): term 1's products of a sparse row are these times B_vk + beta, so
    the kernel reads them beside the pairs instead of gathering each D_k."""
    topics, counts = unpack_pairs(a_pairs, denominator.shape[0])
    return counts.astype(jnp.float32) / denominator[jnp.minimum(topics,
                                                                denominator.shape[0] - 1)]


@functools.partial(jax.jit, static_argnames=("num_warps", "num_stages", "interpret"))
def sample_and_shuffle(chunk: Chunk, chunk_state: ChunkState, model: SparseModel, key, *,
                       num_warps: int = 1, num_stages: int = 1, interpret: bool | None = None):
    """New topic of every word-major token of a chunk (padding tokens get topic 0) and the same
    topics at their doc-major positions; the contract of
    saberjax.sparse_sampler.sample_and_shuffle.  num_warps, num_stages: Triton's;
    interpret=None: interpret unless on a GPU."""
    rows = model.word_topic
    levels = tuple(model.prior_tree) + (model.prior_leaves,)
    dense_levels = tuple(model.dense_tree) + (model.dense_bhat,)
    kernel = functools.partial(
        _kernel, tile_tokens=chunk.tile_tokens, block_tokens=chunk.block_tokens,
        level_widths=tuple(level.shape[1] for level in levels),
        dense_level_widths=tuple(level.shape[1] for level in dense_levels),
        padded_topics=model.topic_totals.shape[0])
    inputs = (*tile_inputs(chunk, chunk_state, key),
              *_ModelRefs(model.alpha.astype(jnp.float32), model.bhat_denominator,
                          jnp.reshape(model.beta, (1,)).astype(jnp.float32),
                          jnp.reshape(model.prior_total, (1,)), chunk_state.a_pairs,
                          pair_weights(chunk_state.a_pairs, model.bhat_denominator),
                          rows.row_start, rows.topics, rows.counts, model.buckets.base,
                          model.buckets.shift, model.buckets.start,
                          model.row_prefix, model.row_mass, model.dense_tree_total),
              *levels, *dense_levels)
    return call_sampler(kernel, inputs, chunk, chunk_state, name="saber_sparse_sample",
                        num_warps=num_warps, num_stages=num_stages, interpret=interpret)
