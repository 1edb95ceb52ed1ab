"""The E-step over the sparse word-topic model (saberjax.sparse_rows), plain-JAX reference.

A token of word v (its row of B) in document d whose current topic is z draws k with
probability proportional to (A_dk + alpha_k) B-hat_vk, the token left out of its own topic's
counts: the distribution of saberjax.sampler, split in three parts besides the own topic::

    own topic  (A_dz - 1 + alpha_z) (B_vz - 1 + beta) / (D_z - 1)
    term 1     A_dk (B_vk + beta) / D_k    over the nonzeros k != z of A_d   (mass S1)
    term 2     alpha_k B_vk / D_k          over the nonzeros k != z of B_v   (mass S2)
    term 3     alpha_k beta / D_k          over every topic k != z           (mass S3)

Term 1 runs as the dense sampler's sparse part (32 lanes of weighted reservoirs over A_d's
nonzeros, the own topic joining lane 0), each product looking B_vk up in the word's row.  A
word with a dense row (SparseModel.dense_bhat: the most frequent words) draws as the dense
sampler does: term 1 reads B-hat_vk from that row, and terms 2 and 3 are one part, alpha_k
B-hat_vk over k != z, drawn from the row's tree (mass S2 + S3).  Any other word looks B_vk up
by a binary search of the topic's bucket of its sparse row (sparse_rows.RowBuckets); its
term 2 searches the row's prefix sums (the own topic's entry skipped by moving the draw past
it) and its term 3 walks the global tree with z's leaf skipped (tree.descend_excluding).
A first uniform picks the part with probability (S1 + own) : S2 : S3; a second locates the
draw in it.  Every sum runs in a fixed order per
token, so a draw depends on nothing but the token and the model.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from saberjax import rng, sampler, segmented_count
from saberjax.layout import Chunk
from saberjax.sampler import _map_in_order, token_hash_state
from saberjax.sparse_rows import SparseModel, find_in_bucket, search_steps, upper_bound
from saberjax.state import ChunkState, unpack_pairs
from saberjax.tree import WIDTH, lane_sums, search_block, tree_sample

# Tokens drawn per vectorised batch: a token's lookups are a chain of dependent gathers, so
# wide batches keep a GPU's memory system busy (and on a CPU their [batch, 32] blocks stay
# within a few MB).
BATCH = 1 << 16


def own_topic_mass(own_count, alpha, own_word_count, beta, denominator):
    """The own topic z's mass without the token: (A_dz - 1 + alpha_z) (B_vz - 1 + beta) /
    (D_z - 1) (the token is one of A_dz, B_vz and n_z)."""
    return ((jnp.maximum(own_count - 1.0, 0.0) + alpha)
            * jnp.maximum(own_word_count - 1.0 + beta, 0.0)
            / jnp.maximum(denominator - 1.0, 1e-30))


def row_draw(model: SparseModel, row, own_position, own_weight, x, steps=None):
    """Term 2's topic for mass x in [0, S2) of each row, the own topic's entry (at
    own_position, weight own_weight as the prefix sums hold it) skipped (`steps`: halvings of
    the search, sparse_rows.search_steps)."""
    rows = model.word_topic
    low, high = rows.row_start[row], rows.row_start[row + 1]
    before_own = jnp.where(own_position > low,
                           model.row_prefix[jnp.maximum(own_position - 1, 0)], 0.0)
    x = jnp.where(x >= before_own, x + own_weight, x)
    position = upper_bound(model.row_prefix, low, high, x, steps)
    # rounding can leave x at the row's end: the last entry that is not the own topic
    last = high - 1
    position = jnp.where(position >= high,
                         jnp.where(last == own_position, last - 1, last), position)
    return rows.topics[jnp.clip(position, 0, rows.topics.shape[0] - 1)]


def sample_chunk(chunk: Chunk, chunk_state: ChunkState, model: SparseModel, key):
    """New topic of every word-major token of a chunk (padding tokens get topic 0); chunk.word
    holds rows of model.word_topic."""
    padded_topics = model.topic_totals.shape[0]
    num_dense = model.dense_bhat.shape[0]
    lanes = jnp.arange(WIDTH, dtype=jnp.int32)
    a_topics, a_counts = unpack_pairs(jnp.pad(chunk_state.a_pairs, (0, WIDTH)), padded_topics)
    a_counts = a_counts.astype(jnp.float32)
    slice_block = jax.vmap(lambda array, start: jax.lax.dynamic_slice(array, (start,), (WIDTH,)),
                           in_axes=(None, 0))
    positions = jnp.arange(chunk.padded_tokens, dtype=jnp.int32)
    doc_nnz = chunk_state.a_nnz[chunk.doc]
    token_blocks = (doc_nnz + WIDTH - 1) // WIDTH
    token_state = token_hash_state(chunk, key, positions)
    u_branch = rng.uniform(token_state, rng.STREAM_BRANCH)
    u_position = rng.uniform(token_state, rng.STREAM_POSITION)
    old_topics = chunk_state.topics.astype(jnp.int32)
    rows, beta, denominator = model.word_topic, model.beta, model.bhat_denominator
    steps = search_steps(rows)

    def draw(batch):
        word = chunk.word[batch]
        dense_word = word < num_dense
        dense_row = jnp.minimum(word, num_dense - 1)
        start = chunk.doc_start[chunk.doc[batch]]
        nnz = doc_nnz[batch]
        state = token_state[batch]
        own = old_topics[batch]

        def visit_block(block, carry):
            lane_mass, kept_topics, own_counts = carry
            offset = block * WIDTH
            topics = slice_block(a_topics, start + offset)
            counts = slice_block(a_counts, start + offset)
            inside = offset + lanes < nnz[:, None]
            is_own = topics == own[:, None]
            own_counts = own_counts + jnp.where(inside & is_own, counts, 0.0)
            searched = inside & ~dense_word[:, None]
            _, word_counts = find_in_bucket(rows, model.buckets,
                                            jnp.broadcast_to(word[:, None], topics.shape),
                                            jnp.where(searched, topics, padded_topics))
            bhat = jnp.where(dense_word[:, None],
                             model.dense_bhat[dense_row[:, None], topics].astype(jnp.float32),
                             (word_counts.astype(jnp.float32) + beta) / denominator[topics])
            products = jnp.where(inside & ~is_own, counts * bhat, 0.0)
            lane_mass = lane_mass + products
            keep = rng.uniform(state, rng.STREAM_BLOCK + block)[:, None] * lane_mass < products
            return lane_mass, jnp.where(keep, topics, kept_topics), own_counts

        lane_mass, kept_topics, own_counts = jax.lax.fori_loop(
            0, jnp.max(token_blocks[batch]), visit_block,
            (jnp.zeros((*batch.shape, WIDTH), jnp.float32),
             jnp.zeros((*batch.shape, WIDTH), jnp.int32),
             jnp.zeros((*batch.shape, WIDTH), jnp.float32)))
        own_count = jnp.sum(own_counts, axis=1)  # A_dz: one lane holds it, the sum is exact
        own_position, own_word_count = find_in_bucket(rows, model.buckets, word, jnp.where(
            dense_word, padded_topics, own))
        own_alpha = model.alpha[own]
        own_bhat = model.dense_bhat[dense_row, own].astype(jnp.float32)
        own_mass = jnp.where(
            dense_word, sampler.own_topic_mass(own_count, own_alpha, own_bhat, denominator[own]),
            own_topic_mass(own_count, own_alpha, own_word_count.astype(jnp.float32), beta,
                           denominator[own]))
        lane_mass = lane_mass.at[:, 0].add(own_mass)
        keep_own = rng.uniform(state, rng.STREAM_OWN) * lane_mass[:, 0] < own_mass
        kept_topics = kept_topics.at[:, 0].set(jnp.where(keep_own, own, kept_topics[:, 0]))
        doc_mass = lane_sums(lane_mass)[-1][:, 0]
        lane, _ = search_block(lane_mass, u_position[batch] * doc_mass)
        from_doc = jnp.take_along_axis(kept_topics, lane[:, None], axis=1)[:, 0]

        # a dense row: terms 2 and 3 as one, the row's tree without the own topic's leaf
        tree_mass = sampler.dense_mass(model.dense_tree_total[dense_row], own_alpha, own_bhat)
        from_tree = tree_sample(model.dense_tree, model.dense_bhat, model.alpha, dense_row,
                                u_position[batch], excluded=own)
        # a sparse row: term 2 without the own topic's entry (B_vz >= 1: the token is counted
        # in it), term 3 without the own topic's leaf
        own_entry = model.row_prefix[own_position]
        before_own = jnp.where(own_position > rows.row_start[word],
                               model.row_prefix[jnp.maximum(own_position - 1, 0)], 0.0)
        own_weight = jnp.where(own_word_count > 0, own_entry - before_own, 0.0)
        row_mass = jnp.maximum(model.row_mass[word] - own_weight, 0.0)
        prior_mass = jnp.maximum(model.prior_total[0] - own_alpha
                                 * model.prior_leaves[0, own], 0.0)
        from_row = row_draw(model, word, own_position, own_weight, u_position[batch] * row_mass,
                            steps)
        from_prior = tree_sample(model.prior_tree, model.prior_leaves, model.alpha,
                                 jnp.zeros_like(word), u_position[batch], excluded=own)

        branch = u_branch[batch] * jnp.where(dense_word, doc_mass + tree_mass,
                                             doc_mass + row_mass + prior_mass)
        return jnp.where(branch < doc_mass, from_doc,
                         jnp.where(dense_word, from_tree,
                                   jnp.where(branch < doc_mass + row_mass, from_row,
                                             from_prior)))

    topics = _map_in_order(draw, jnp.argsort(token_blocks), BATCH)
    return jnp.where(positions < chunk.num_tokens, topics, 0).astype(chunk_state.topics.dtype)


def sample_and_shuffle(chunk: Chunk, chunk_state: ChunkState, model: SparseModel, key):
    """The E-step's new topics, word-major and shuffled to doc-major (as long as A)."""
    topics = sample_chunk(chunk, chunk_state, model, key)
    return topics, segmented_count.shuffle_to_doc_major(topics, chunk.doc_major_pos,
                                                        chunk_state.a_pairs.shape[0])
