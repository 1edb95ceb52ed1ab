"""The E-step over the sparse word-topic model as a Pallas (Triton) kernel; reference:
saberjax.sparse_sampler (its docstring has the three terms).

One program (one warp) samples a tile: up to chunk.tile_tokens consecutive word-major tokens of
one word (Chunk.tile_start), so the word's row of B stays hot in L1 while its tiles run.  A
word with a dense row (the most frequent words, SparseModel.dense_bhat) runs the dense
kernel's steps over that B-hat row and its tree (saberjax.pallas.sampler: term 1 one load per
nonzero of A_d, terms 2 and 3 one descent of the row's tree).  Any other word's tile searches
its sparse row (topics, counts and term 2's prefix sums): term 1's lookups search one bucket
of the row (sparse_rows.RowBuckets: about two entries), term 2's draw the whole row, with as
many halvings as the row's length needs (a rare word's row is short).  Token t of the tile
is row t of [tile, 32] arrays:

    term 1    the nonzeros of the document row A_d, 32 lanes a block, each lane a weighted
              reservoir over the products A_dk (B_vk + beta) / D_k, B_vk found by a binary
              search of its bucket of the word's row; the own topic z's mass joins lane 0
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

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from saberjax import rng
from saberjax.layout import Chunk
from saberjax.pallas import default_interpret, scatter, warp
from saberjax.pallas.sampler import _row_topics, _token_state
from saberjax.sparse_rows import SparseModel, bisect
from saberjax.sparse_sampler import own_topic_mass
from saberjax.state import ChunkState, unpack_pairs
from saberjax.tree import WIDTH, descend_excluding, search_block


def _kernel(token_base_ref, key_ref, alpha_ref, denominator_ref, beta_ref, prior_total_ref,
            tile_start_ref, word_ref, doc_ref, doc_major_pos_ref, doc_start_ref, a_nnz_ref,
            a_pairs_ref, old_topics_ref, row_start_ref, row_topics_ref, row_counts_ref,
            bucket_base_ref, bucket_shift_ref, bucket_steps_ref, bucket_start_ref,
            row_prefix_ref, row_mass_ref, dense_tree_total_ref, *refs, tile_tokens: int,
            block_tokens: int, level_widths: tuple[int, ...], dense_level_widths: tuple[int, ...],
            padded_topics: int):
    """Sample the tokens of tile program_id (see the module docstring)."""
    # refs: the prior tree's levels and leaves, the dense rows' tree levels and B-hat rows,
    # two zeroed arrays aliased to the outputs, the outputs
    level_refs = refs[:len(level_widths)]
    dense_level_refs = refs[len(level_widths):-4]
    topics_ref, doc_major_topics_ref = refs[-2:]
    lanes = warp.lane_offsets()
    first, end = tile_start_ref[pl.program_id(0)], tile_start_ref[pl.program_id(0) + 1]

    @pl.when(first < end)  # tiles past the last are empty
    def _():
        positions = first + jnp.arange(tile_tokens, dtype=jnp.int32)
        real = positions < end
        word = word_ref[first]
        low, high = row_start_ref[word], row_start_ref[word + 1]
        # halvings for a range of the row's length (one spare: log2 of a float)
        steps = jnp.log2((high - low).astype(jnp.float32) + 1.0).astype(jnp.int32) + 2
        bucket_base, bucket_shift = bucket_base_ref[word], bucket_shift_ref[word]
        bucket_steps = bucket_steps_ref[word]
        doc = plgpu.load(doc_ref.at[positions], mask=real, other=0)
        doc_major_pos = plgpu.load(doc_major_pos_ref.at[positions], mask=real, other=0)
        start = plgpu.load(doc_start_ref.at[doc], mask=real, other=0)
        nnz = plgpu.load(a_nnz_ref.at[doc], mask=real, other=0)
        own = plgpu.load(old_topics_ref.at[positions], mask=real, other=0).astype(jnp.int32)
        state = _token_state(token_base_ref, key_ref, doc_major_pos, real, block_tokens)
        beta = beta_ref[0]

        def search_prefix(target, mask):
            """First position of the word's row whose prefix sum exceeds target, elementwise;
            the row's end where none."""
            def load(position, searching):
                return plgpu.load(row_prefix_ref.at[position], mask=searching & mask, other=0,
                                  eviction_policy="evict_last")
            zeros = jnp.zeros(target.shape, jnp.int32)
            return bisect(load, zeros + low, zeros + high, lambda value: value <= target, steps)

        def word_count(topics, mask):
            """(position of each topic in the word's row, B_v,topic: 0 where absent): a
            search of the topic's bucket (sparse_rows.RowBuckets)."""
            slot = bucket_base + (topics >> bucket_shift)
            bucket_low = plgpu.load(bucket_start_ref.at[slot], mask=mask, other=0)
            bucket_high = plgpu.load(bucket_start_ref.at[slot + 1], mask=mask, other=0)

            def load(position, searching):
                return plgpu.load(row_topics_ref.at[position], mask=searching & mask, other=0,
                                  eviction_policy="evict_last")
            position = bisect(load, bucket_low, bucket_high, lambda value: value < topics,
                              bucket_steps)
            inside = mask & (position < bucket_high)
            # the topic and the count load side by side
            found = inside & (plgpu.load(row_topics_ref.at[position], mask=inside,
                                         other=-1) == topics)
            count = plgpu.load(row_counts_ref.at[position], mask=inside, other=0)
            return position, jnp.where(found, count, 0)

        def load_block(block):
            offsets = block * WIDTH + lanes[None, :]
            inside = offsets < nnz[:, None]
            pairs = plgpu.load(a_pairs_ref.at[start[:, None] + offsets], mask=inside, other=0)
            topics, counts = unpack_pairs(pairs, padded_topics)
            return inside, topics, counts.astype(jnp.float32)

        def visit_block(block, carry):
            lane_mass, kept_topics, own_counts, (inside, topics, counts) = carry
            following = load_block(block + 1)
            is_own = topics == own[:, None]
            own_counts = own_counts + jnp.where(is_own, counts, 0.0)
            other = inside & ~is_own
            _, counts_in_word = word_count(topics, other)
            denominators = plgpu.load(denominator_ref.at[topics], mask=other, other=1.0)
            products = jnp.where(other, counts * (counts_in_word.astype(jnp.float32) + beta)
                                 / denominators, 0.0)
            lane_mass = lane_mass + products
            keep = (rng.uniform(state, rng.STREAM_BLOCK + block)[:, None] * lane_mass
                    < products)
            return lane_mass, jnp.where(keep, topics, kept_topics), own_counts, following

        def sparse_row_topics():
            """The tile's topics drawn over the word's sparse row (the module docstring)."""
            lane_mass, kept_topics, own_counts, _ = jax.lax.fori_loop(
                0, jnp.max((nnz + WIDTH - 1) // WIDTH), visit_block,
                (jnp.zeros((tile_tokens, WIDTH), jnp.float32),
                 jnp.zeros((tile_tokens, WIDTH), jnp.int32),
                 jnp.zeros((tile_tokens, WIDTH), jnp.float32), load_block(0)))
            own_count = jnp.sum(own_counts, axis=1)  # one lane holds it: exact
            own_position, own_word_count = word_count(own, real)
            own_alpha = plgpu.load(alpha_ref.at[own], mask=real, other=0.0)
            own_denominator = plgpu.load(denominator_ref.at[own], mask=real, other=1.0)
            own_mass = own_topic_mass(own_count, own_alpha, own_word_count.astype(jnp.float32),
                                      beta, own_denominator)
            first_lane = lanes[None, :] == 0
            lane_mass = lane_mass + jnp.where(first_lane, own_mass[:, None], 0.0)
            keep_own = (rng.uniform(state, rng.STREAM_OWN)
                        * warp.pick_lane(lane_mass, jnp.zeros_like(own)) < own_mass)
            kept_topics = jnp.where(first_lane & keep_own[:, None], own[:, None], kept_topics)
            doc_mass = jnp.sum(lane_mass, axis=1)

            # term 2 without the own topic's entry
            counted = real & (own_word_count > 0)
            own_entry = plgpu.load(row_prefix_ref.at[own_position], mask=counted, other=0.0)
            before_own = plgpu.load(row_prefix_ref.at[own_position - 1],
                                    mask=counted & (own_position > low), other=0.0)
            own_weight = jnp.where(counted, own_entry - before_own, 0.0)
            row_mass = jnp.maximum(row_mass_ref[word] - own_weight, 0.0)
            # term 3 without the own topic's leaf
            own_prior = own_alpha * plgpu.load(level_refs[-1].at[0, own], mask=real, other=0.0)
            prior_mass = jnp.maximum(prior_total_ref[0] - own_prior, 0.0)

            branch = rng.uniform(state, rng.STREAM_BRANCH) * (doc_mass + row_mass + prior_mass)
            u_position = rng.uniform(state, rng.STREAM_POSITION)
            lane, _ = search_block(lane_mass, u_position * doc_mass)
            from_doc = warp.pick_lane(kept_topics, lane)
            take_row = real & (branch >= doc_mass) & (branch < doc_mass + row_mass)
            take_prior = real & (branch >= doc_mass + row_mass)

            def row_topic():
                x = u_position * row_mass
                x = jnp.where(x >= before_own, x + own_weight, x)
                position = search_prefix(x, take_row)
                last = high - 1
                position = jnp.where(position >= high,
                                     jnp.where(last == own_position, last - 1, last), position)
                return plgpu.load(row_topics_ref.at[position], mask=take_row, other=0)

            def load_children(level, children, inside):
                mask = take_prior[:, None] & inside
                values = plgpu.load(level_refs[level].at[0, children], mask=mask, other=0.0)
                if level == len(level_widths) - 1:
                    values = values * plgpu.load(alpha_ref.at[children], mask=mask, other=0.0)
                return values

            none = lambda: jnp.zeros((tile_tokens,), jnp.int32)  # noqa: E731
            from_row = jax.lax.cond(jnp.max(take_row.astype(jnp.int32)) > 0, row_topic, none)
            from_prior = jax.lax.cond(
                jnp.max(take_prior.astype(jnp.int32)) > 0,
                lambda: descend_excluding(level_widths, load_children, u_position * prior_mass,
                                          own, own_prior), none)
            return jnp.where(take_prior, from_prior, jnp.where(take_row, from_row, from_doc))

        topic = jax.lax.cond(
            word < dense_tree_total_ref.shape[0],
            lambda: _row_topics(a_pairs_ref, alpha_ref, denominator_ref, dense_tree_total_ref,
                                dense_level_refs, dense_level_widths, "sum", lanes, word, own,
                                start, nnz, state, real),
            sparse_row_topics)
        plgpu.store(topics_ref.at[positions], topic.astype(topics_ref.dtype), mask=real)
        scatter(doc_major_topics_ref, doc_major_pos, topic.astype(topics_ref.dtype), real)


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
    inputs = (jnp.reshape(chunk.token_base, (-1,)).astype(jnp.uint32),
              jnp.reshape(key, (1,)).astype(jnp.uint32), model.alpha.astype(jnp.float32),
              model.bhat_denominator, jnp.reshape(model.beta, (1,)).astype(jnp.float32),
              jnp.reshape(model.prior_total, (1,)), chunk.tile_start, chunk.word, chunk.doc,
              chunk.doc_major_pos, chunk.doc_start, chunk_state.a_nnz, chunk_state.a_pairs,
              chunk_state.topics, rows.row_start, rows.topics, rows.counts, *model.buckets,
              model.row_prefix,
              model.row_mass, model.dense_tree_total, *levels, *dense_levels)
    topics = jax.ShapeDtypeStruct(chunk_state.topics.shape, chunk_state.topics.dtype)
    doc_major = jax.ShapeDtypeStruct(chunk_state.a_pairs.shape, chunk_state.topics.dtype)
    return pl.pallas_call(
        kernel,
        out_shape=(topics, doc_major),
        grid=(chunk.tile_start.shape[0] - 1,),
        input_output_aliases={len(inputs): 0, len(inputs) + 1: 1},  # padding keeps the zeros
        name="saber_sparse_sample",
        compiler_params=plgpu.CompilerParams(num_warps=num_warps, num_stages=num_stages),
        interpret=default_interpret() if interpret is None else interpret,
    )(*inputs, jnp.zeros_like(chunk_state.topics), jnp.zeros(doc_major.shape, doc_major.dtype))
