"""The sparsity-aware E-step sampler (paper section 2.3 and 3.2), plain-JAX reference.

For a token of word v in document d, p(k) is proportional to (A_dk + alpha) B-hat_vk, split as

    sparse part  P_k = A_dk B-hat_vk over the nonzeros of A_d,   S = sum_k P_k
    dense part   alpha B-hat_vk, drawn from word v's W-ary tree,  Q = alpha * tree_total_v

A first uniform picks the sparse part with probability S / (S + Q); a second locates the
draw inside the chosen part.  The nonzeros of A_d are visited 32 at a time, like the paper's
warp: pass one adds up each 32-block (keeping the block sums), pass two walks the block sums to
the block holding the draw and searches inside it.  All float sums run in a fixed order per
token, so a token's draw does not depend on how the corpus is chunked or batched.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from saberjax import rng
from saberjax.layout import Chunk
from saberjax.state import ChunkState, Model
from saberjax.tree import WIDTH, lane_sums, search_block, tree_sample

# Tokens sampled per vectorised batch: bounds the [batch, blocks] working set.
BATCH_ELEMENTS = 1 << 18


def nonzero_blocks(chunk: Chunk, padded_topics: int) -> int:
    """Static bound on the 32-blocks of nonzeros a document of this chunk can have."""
    return -(-min(chunk.max_doc_length, padded_topics) // WIDTH)


def token_uniforms(chunk: Chunk, key, positions):
    """The (branch, position) uniforms of word-major tokens at `positions` of a chunk."""
    lo, hi = rng.global_token_ids(chunk.token_base[0], chunk.token_base[1],
                                  chunk.doc_major_pos[positions])
    state = rng.token_hash(key, lo, hi)
    return rng.uniform(state, rng.STREAM_BRANCH), rng.uniform(state, rng.STREAM_POSITION)


def _map_in_order(fn, order: jax.Array, batch: int):
    """fn applied to batches of token positions taken in `order`, results put back in place.

    Processing order only groups similar tokens into batches (so loop bounds and branches
    are shared within a batch); each token's result depends on nothing but the token.
    """
    size = order.shape[0]
    num_batches = -(-size // batch)
    padded = order[jnp.arange(num_batches * batch) % size]
    results = jax.lax.map(fn, padded.reshape(num_batches, batch))
    return jax.tree_util.tree_map(
        lambda r: jnp.zeros(size, r.dtype).at[padded].set(r.reshape(-1)), results)


def sample_chunk(chunk: Chunk, chunk_state: ChunkState, model: Model, key, alpha: float):
    """New topic of every word-major token of a chunk (padding tokens get topic 0).

    Pass one (tokens batched by their number of 32-blocks of nonzeros) computes the sparse
    mass S, flips the branch coin and, for sparse-branch tokens, finds the topic; pass two runs
    the tree search for the dense-branch tokens only.
    """
    padded_topics = model.bhat.shape[1]
    max_blocks = nonzero_blocks(chunk, padded_topics)
    lanes = jnp.arange(WIDTH, dtype=jnp.int32)
    flat_bhat = model.bhat.reshape(-1)
    # One spare block of padding so that a 32-wide slice never runs off the end.
    a_topics = jnp.pad(chunk_state.a_topics, (0, WIDTH)).astype(jnp.int32)
    a_counts = jnp.pad(chunk_state.a_counts, (0, WIDTH)).astype(jnp.float32)
    slice_block = jax.vmap(lambda array, start: jax.lax.dynamic_slice(array, (start,), (WIDTH,)),
                           in_axes=(None, 0))
    positions = jnp.arange(chunk.padded_tokens, dtype=jnp.int32)
    doc_nnz = chunk_state.a_nnz[chunk.doc]
    token_blocks = (doc_nnz + WIDTH - 1) // WIDTH
    u_branch, u_position = token_uniforms(chunk, key, positions)

    def sparse_pass(batch):
        word = chunk.word[batch]
        start = chunk.doc_start[chunk.doc[batch]]
        nnz = doc_nnz[batch]
        num_blocks = token_blocks[batch]

        def block_products(block):
            """Products and topics of nonzeros 32*block .. 32*block+31 (block: scalar or [N])."""
            offset = jnp.broadcast_to(block * WIDTH, start.shape)
            first = start + offset
            inside = offset[:, None] + lanes < nnz[:, None]
            topics = slice_block(a_topics, first)
            products = slice_block(a_counts, first) * flat_bhat[word[:, None] * padded_topics + topics]
            return jnp.where(inside, products, 0.0), topics

        def add_block(block, carry):
            sums, total = carry
            block_sum = lane_sums(block_products(block)[0])[-1][:, 0]
            return jax.lax.dynamic_update_slice(sums, block_sum[:, None], (0, block)), total + block_sum

        batch_blocks = jnp.max(num_blocks)
        block_sums, sparse_total = jax.lax.fori_loop(
            0, batch_blocks, add_block,
            (jnp.zeros((batch.shape[0], max_blocks), jnp.float32), jnp.zeros(batch.shape, jnp.float32)))
        dense_total = alpha * model.tree_total[word]
        take_sparse = u_branch[batch] * (sparse_total + dense_total) < sparse_total
        x = u_position[batch] * sparse_total

        def find_block(block, carry):
            before, chosen, remainder, found = carry
            block_sum = block_sums[:, block]
            take = ~found & ((before + block_sum > x) | (block == num_blocks - 1))
            return (before + block_sum, jnp.where(take, block, chosen),
                    jnp.where(take, x - before, remainder), found | take)

        _, block, remainder, _ = jax.lax.fori_loop(
            0, batch_blocks, find_block,
            (jnp.zeros_like(x), jnp.zeros_like(nnz), x, jnp.zeros(x.shape, jnp.bool_)))
        products, topics = block_products(block)
        lane, _ = search_block(products, remainder)
        return take_sparse, jnp.take_along_axis(topics, lane[:, None], axis=1)[:, 0]

    def dense_pass(batch):
        dense = ~take_sparse[batch]
        return jax.lax.cond(
            jnp.any(dense),
            lambda: tree_sample(model.tree, model.bhat, chunk.word[batch], u_position[batch]),
            lambda: jnp.zeros(batch.shape, jnp.int32))

    batch = min(chunk.padded_tokens, max(256, BATCH_ELEMENTS // (max_blocks + 2 * WIDTH)))
    take_sparse, sparse_topics = _map_in_order(sparse_pass, jnp.argsort(token_blocks), batch)
    dense_topics = _map_in_order(dense_pass, jnp.argsort(take_sparse), batch)
    topics = jnp.where(take_sparse, sparse_topics, dense_topics)
    return jnp.where(positions < chunk.num_tokens, topics, 0).astype(chunk_state.topics.dtype)
