"""The sparsity-aware E-step sampler (paper section 2.3 and 3.2), plain-JAX reference.

For a token of word v in document d whose current topic is z, p(k) is proportional to
(A_dk + alpha_k) B-hat_vk with the token itself left out of the counts (alpha one value per
topic, Model.alpha), as a collapsed Gibbs sampler leaves it out: A_dz - 1, and for topic z
B-hat without the token, (B_vz - 1 + beta) / (n_z - 1 + V beta) (own_topic_mass).  Counting
the token in its own topic would make it stick there: a word seen once has B-hat about
(1 + beta) / beta times larger in its current topic than in any other.  Split as

    sparse part  P_k = A_dk B-hat_vk over the nonzeros of A_d but z,      S = sum_k P_k
    own topic    P_z = (A_dz - 1 + alpha_z) B-hat_vz without the token,   added to S
    dense part   alpha_k B-hat_vk for k != z, drawn from word v's W-ary tree with z's leaf
                 skipped (tree.descend_excluding),  Q = tree_total_v - alpha_z B-hat_vz

A first uniform picks the sparse part with probability S / (S + Q); a second locates the
draw inside the chosen part.  The nonzeros of A_d are visited 32 at a time, like the paper's
warp, in a single pass, and each of the 32 lanes runs its own weighted reservoir over the
products it sees (nonzeros lane, lane + 32, lane + 64, ...): it adds the product to its running
mass and keeps the product's topic with probability product / running mass.  When the pass
ends, a lane is chosen with probability lane mass / S (a search of the 32 lane masses) and its
kept topic is the draw: exact, since lane l and its kept nonzero j come out with probability
(mass_l / S) (P_j / mass_l) = P_j / S.  The lanes may share one uniform per block: only the
chosen lane's choices matter, and its uniforms are independent from block to block.  So a
block costs its products, 32 additions and 32 comparisons, with no sum across lanes (a warp's
shuffles in the kernel); nothing is stored per block and nothing is read twice.  All float sums
run in a fixed order per token, so a token's draw does not depend on how the corpus is chunked
or batched.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from saberjax import rng, segmented_count
from saberjax.layout import Chunk
from saberjax.state import ChunkState, Model, unpack_pairs
from saberjax.tree import WIDTH, lane_sums, search_block, tree_sample

# Tokens sampled per vectorised batch (their [batch, 32] blocks stay in cache).
BATCH = 8192


def token_hash_state(chunk: Chunk, key, positions):
    """The per-iteration random state of word-major tokens at `positions` of a chunk."""
    return rng.token_hash(key, *chunk.token_ids(chunk.doc_major_pos[positions]))


def _map_in_order(fn, order: jax.Array, batch: int, with_index: bool = False):
    """fn applied to batches of token positions taken in `order`, results put back in place.

    Processing order only groups similar tokens into batches (so loop bounds and branches
    are shared within a batch); each token's result depends on nothing but the token.
    With `with_index`, fn also receives the batch's index.  `order` may hold the out-of-range
    position `size` (it also pads the last batch): fn's reads of it clamp, its result is dropped.
    """
    size = order.shape[0]
    num_batches = -(-size // batch)
    padded = jnp.pad(order, (0, num_batches * batch - size), constant_values=size)
    padded = padded.reshape(num_batches, batch)
    if with_index:
        results = jax.lax.map(lambda xs: fn(*xs), (jnp.arange(num_batches), padded))
    else:
        results = jax.lax.map(fn, padded)
    positions = padded.reshape(-1)
    return jax.tree_util.tree_map(
        lambda r: segmented_count.store_distinct(jnp.zeros(size, r.dtype), positions,
                                                 positions < size, r.reshape(-1)),
        results)


def own_topic_mass(own_count, alpha, bhat, denominator):
    """The mass of a token's own (current) topic z without the token: (A_dz - 1 + alpha_z) times
    B-hat_vz without it, (B_vz - 1 + beta) / (n_z - 1 + V beta), which is
    (B-hat_vz D_z - 1) / (D_z - 1) for B-hat's denominator D_z = n_z + V beta (the token is
    one of B_vz and n_z, so both stay non-negative; clamped against B-hat's rounding)."""
    bhat_without = (jnp.maximum(bhat * denominator - 1.0, 0.0)
                    / jnp.maximum(denominator - 1.0, 1e-30))
    return (jnp.maximum(own_count - 1.0, 0.0) + alpha) * bhat_without


def dense_mass(tree_total, alpha, bhat):
    """The prior part's mass without the token's own topic z: the tree's total less the leaf
    alpha_z B-hat_vz (own_topic_mass holds all of z)."""
    return jnp.maximum(tree_total - bhat * alpha, 0.0)


class _Tokens(NamedTuple):
    """A chunk's word-major tokens: positions, their documents' nonzeros and 32-blocks of
    them, random states, the branch and position uniforms, and own (current) topics."""
    positions: jax.Array
    doc_nnz: jax.Array
    blocks: jax.Array
    state: jax.Array
    u_branch: jax.Array
    u_position: jax.Array
    own: jax.Array


def _chunk_tokens(chunk: Chunk, chunk_state: ChunkState, key) -> _Tokens:
    """The per-token inputs of a chunk's draws."""
    positions = jnp.arange(chunk.padded_tokens, dtype=jnp.int32)
    doc_nnz = chunk_state.a_nnz[chunk.doc]
    state = token_hash_state(chunk, key, positions)
    return _Tokens(positions, doc_nnz, (doc_nnz + WIDTH - 1) // WIDTH, state,
                   rng.uniform(state, rng.STREAM_BRANCH), rng.uniform(state, rng.STREAM_POSITION),
                   chunk_state.topics.astype(jnp.int32))


def _doc_block_reader(chunk_state: ChunkState, padded_topics: int):
    """read(starts): the topics and float counts of the 32 nonzeros of A from each start (one
    spare block of padding, so that a 32-wide slice never runs off the end)."""
    a_topics, a_counts = unpack_pairs(jnp.pad(chunk_state.a_pairs, (0, WIDTH)), padded_topics)
    a_counts = a_counts.astype(jnp.float32)
    slice_block = jax.vmap(lambda array, start: jax.lax.dynamic_slice(array, (start,), (WIDTH,)),
                           in_axes=(None, 0))
    return lambda starts: (slice_block(a_topics, starts), slice_block(a_counts, starts))


def _doc_lanes(read_block, start, nnz, own, state, num_blocks, products):
    """The 32 lanes' weighted reservoirs over the documents' nonzeros but the own topic:
    (lane masses, kept topics, A_dz).  products(topics, counts, inside): a block's products
    (kept only inside the row and off the own topic)."""
    lanes = jnp.arange(WIDTH, dtype=jnp.int32)

    def visit_block(block, carry):
        lane_mass, kept_topics, own_counts = carry
        offset = block * WIDTH
        topics, counts = read_block(start + offset)
        inside = offset + lanes < nnz[:, None]
        is_own = topics == own[:, None]
        own_counts = own_counts + jnp.where(inside & is_own, counts, 0.0)
        block_products = jnp.where(inside & ~is_own, products(topics, counts, inside), 0.0)
        lane_mass = lane_mass + block_products
        keep = rng.uniform(state, rng.STREAM_BLOCK + block)[:, None] * lane_mass < block_products
        return lane_mass, jnp.where(keep, topics, kept_topics), own_counts

    lane_mass, kept_topics, own_counts = jax.lax.fori_loop(
        0, num_blocks, visit_block,
        (jnp.zeros((*own.shape, WIDTH), jnp.float32), jnp.zeros((*own.shape, WIDTH), jnp.int32),
         jnp.zeros((*own.shape, WIDTH), jnp.float32)))
    return lane_mass, kept_topics, jnp.sum(own_counts, axis=1)  # one lane holds A_dz: exact


def _lanes_draw(lane_mass, kept_topics, own, own_mass, state, u_position):
    """The own topic's whole mass joined to lane 0's reservoir as one more product, then the
    lane masses' total S and the topic drawn at u_position * S: (S, topic)."""
    lane_mass = lane_mass.at[:, 0].add(own_mass)
    keep_own = rng.uniform(state, rng.STREAM_OWN) * lane_mass[:, 0] < own_mass
    kept_topics = kept_topics.at[:, 0].set(jnp.where(keep_own, own, kept_topics[:, 0]))
    total = lane_sums(lane_mass)[-1][:, 0]
    lane, _ = search_block(lane_mass, u_position * total)
    return total, jnp.take_along_axis(kept_topics, lane[:, None], axis=1)[:, 0]


def sample_chunk(chunk: Chunk, chunk_state: ChunkState, model: Model, key):
    """New topic of every word-major token of a chunk (padding tokens get topic 0).

    Pass one (tokens batched by their number of 32-blocks of nonzeros) computes the sparse
    mass S, flips the branch coin and, for sparse-branch tokens, finds the topic; pass two runs
    the tree search for the dense-branch tokens only.
    """
    read_block = _doc_block_reader(chunk_state, model.bhat.shape[1])
    tokens = _chunk_tokens(chunk, chunk_state, key)

    def sparse_pass(batch):
        word, own, state = chunk.word[batch], tokens.own[batch], tokens.state[batch]
        # (row, column) indexing: a flat int32 offset would overflow once V x K >= 2**31
        lane_mass, kept_topics, own_count = _doc_lanes(
            read_block, chunk.doc_start[chunk.doc[batch]], tokens.doc_nnz[batch], own, state,
            jnp.max(tokens.blocks[batch]), lambda topics, counts, inside: counts * model.bhat[
                word[:, None], topics].astype(jnp.float32))
        own_bhat = model.bhat[word, own].astype(jnp.float32)
        own_mass = own_topic_mass(own_count, model.alpha[own], own_bhat,
                                  model.bhat_denominator[own])
        total, sparse_topic = _lanes_draw(lane_mass, kept_topics, own, own_mass, state,
                                          tokens.u_position[batch])
        dense = dense_mass(model.tree_total[word], model.alpha[own], own_bhat)
        return tokens.u_branch[batch] * (total + dense) < total, sparse_topic

    take_sparse, sparse_topics = _map_in_order(sparse_pass, jnp.argsort(tokens.blocks), BATCH)
    # The dense-branch tokens, gathered to the front; batches past them are skipped.
    num_dense = jnp.sum(~take_sparse)
    dense_order = jnp.nonzero(~take_sparse, size=chunk.padded_tokens,
                              fill_value=chunk.padded_tokens)[0]

    def dense_pass(batch_index, batch):
        return jax.lax.cond(
            batch_index * BATCH < num_dense,
            lambda: tree_sample(model.tree, model.bhat, model.alpha, chunk.word[batch],
                                tokens.u_position[batch], excluded=tokens.own[batch]),
            lambda: jnp.zeros(batch.shape, jnp.int32))

    dense_topics = _map_in_order(dense_pass, dense_order, BATCH, with_index=True)
    topics = jnp.where(take_sparse, sparse_topics, dense_topics)
    return jnp.where(tokens.positions < chunk.num_tokens, topics, 0).astype(
        chunk_state.topics.dtype)


def sample_and_shuffle(chunk: Chunk, chunk_state: ChunkState, model: Model, key, *,
                       zero_doc_major: bool = True):
    """The E-step's new topics, word-major and shuffled to doc-major (the A rebuild's input;
    as long as A, 0 where no token of the chunk is).  zero_doc_major=False lets an
    implementation leave those positions unset (saberjax.pallas.sampler); this one scatters
    into zeros either way."""
    del zero_doc_major
    topics = sample_chunk(chunk, chunk_state, model, key)
    return topics, segmented_count.shuffle_to_doc_major(topics, chunk.doc_major_pos,
                                                        chunk_state.a_pairs.shape[0])
