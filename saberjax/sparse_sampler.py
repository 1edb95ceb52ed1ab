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
B-hat_vk over k != z, drawn from the row's tree (mass S2 + S3); its own topic's mass takes
B_vz recovered from B-hat_vz (count_of_bhat: exact below 128, where B-hat_vz D_z - 1 alone
would cancel to B-hat's rounding at B_vz = 1).  Any other word looks B_vk up
in its row's table (sparse_rows.RowTables: a fixed window of slots from the topic's home),
or for a row without a table by a binary search of the topic's bucket of its sparse row
(sparse_rows.RowBuckets), B_vz of the own topic z among them; its term 2's mass drops z's
entry's weight alpha_z B_vz / D_z, and its draw searches the row's prefix sums with z's
entry (found by a search of its bucket) skipped by moving the draw past it; its term 3 walks
the global tree with z's leaf skipped (tree.descend_excluding).
A first uniform picks the part with probability (S1 + own) : S2 : S3; a second locates the
draw in it.  Every sum runs in a fixed order per
token, so a draw depends on nothing but the token and the model.
"""

from __future__ import annotations

import jax.numpy as jnp

from saberjax import sampler, segmented_count
from saberjax.layout import Chunk
from saberjax.sampler import _map_in_order
from saberjax.sparse_rows import (SparseModel, count_in_row, find_in_bucket, search_steps,
                                  upper_bound)
from saberjax.state import ChunkState
from saberjax.tree import tree_sample

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


def count_of_bhat(bhat, denominator, beta):
    """B_vz recovered from a dense row's B-hat_vz = (B_vz + beta) / D_z as held (bfloat16:
    8 significant bits, relative rounding at most 2**-8): B-hat_vz D_z - beta, rounded to the
    nearest count where B-hat_vz D_z < 127.5, since B_vz + beta < 128 is off by less than half
    a count there (exact), and as it is above (B-hat's relative rounding, as every other
    topic's mass carries)."""
    held = bhat * denominator
    return jnp.where(held < 127.5, jnp.floor(held - beta + 0.5), held - beta)


def row_mass_without_own(row_mass, own_alpha, own_word_count, own_denominator):
    """Term 2's mass S2 of a row without the own topic's entry alpha_z B_vz / D_z (the
    entry's weight as sparse_build.model_from_totals computes it, from B_vz alone, so that the
    entry's position in the row is needed only where a token draws from term 2)."""
    own_weight = jnp.where(own_word_count > 0, own_alpha * own_word_count.astype(jnp.float32)
                           / own_denominator, 0.0)
    return jnp.maximum(row_mass - own_weight, 0.0)


def row_draw(model: SparseModel, row, own_position, own_word_count, x, steps=None):
    """Term 2's topic for mass x in [0, S2) of each row, the own topic's entry (at
    own_position; absent where own_word_count is 0) skipped by moving x past its weight as
    the prefix sums hold it (`steps`: halvings of the search, sparse_rows.search_steps)."""
    rows = model.word_topic
    low, high = rows.row_start[row], rows.row_start[row + 1]
    counted = own_word_count > 0
    before_own = jnp.where(counted & (own_position > low),
                           model.row_prefix[jnp.maximum(own_position - 1, 0)], 0.0)
    own_entry = jnp.where(counted, model.row_prefix[own_position], 0.0)
    x = jnp.where(counted & (x >= before_own), x + (own_entry - before_own), x)
    position = upper_bound(model.row_prefix, low, high, x, steps)
    # rounding can leave x at the row's end: the last entry that is not the own topic
    last = high - 1
    position = jnp.where(position >= high,
                         jnp.where(last == own_position, last - 1, last), position)
    return rows.topics[jnp.clip(position, 0, rows.topics.shape[0] - 1)]


def _sparse_row_parts(model: SparseModel, word, own, own_position, own_word_count, own_alpha,
                      u_position, steps):
    """Terms 2 and 3 of a sparse row without the own topic: (S2, S3, term 2's topic, term 3's
    topic), each topic drawn at u_position times its part's mass."""
    # term 2 without the own topic's entry (B_vz >= 1: the token is counted in it)
    row_mass = row_mass_without_own(model.row_mass[word], own_alpha, own_word_count,
                                    model.bhat_denominator[own])
    # term 3 without the own topic's leaf
    prior_mass = jnp.maximum(model.prior_total[0] - own_alpha * model.prior_leaves[0, own], 0.0)
    from_row = row_draw(model, word, own_position, own_word_count, u_position * row_mass,
                        steps)
    from_prior = tree_sample(model.prior_tree, model.prior_leaves, model.alpha,
                             jnp.zeros_like(word), u_position, excluded=own)
    return row_mass, prior_mass, from_row, from_prior


def sample_chunk(chunk: Chunk, chunk_state: ChunkState, model: SparseModel, key):
    """New topic of every word-major token of a chunk (padding tokens get topic 0); chunk.word
    holds rows of model.word_topic."""
    padded_topics = model.topic_totals.shape[0]
    num_dense = model.dense_bhat.shape[0]
    read_block = sampler._doc_block_reader(chunk_state, padded_topics)
    tokens = sampler._chunk_tokens(chunk, chunk_state, key)
    rows, beta, denominator = model.word_topic, model.beta, model.bhat_denominator
    steps = search_steps(rows)

    def draw(batch):
        word, own, state = chunk.word[batch], tokens.own[batch], tokens.state[batch]
        u_position = tokens.u_position[batch]
        dense_word = word < num_dense
        dense_row = jnp.minimum(word, num_dense - 1)

        def products(topics, counts, inside):
            """Term 1's products: B-hat_vk from the dense row, else B_vk from the sparse
            row's table (or its bucket, for a row without one)."""
            searched = inside & ~dense_word[:, None]
            word_counts = count_in_row(rows, model.buckets, model.tables,
                                       jnp.broadcast_to(word[:, None], topics.shape),
                                       jnp.where(searched, topics, padded_topics))
            return counts * jnp.where(
                dense_word[:, None], model.dense_bhat[dense_row[:, None], topics].astype(
                    jnp.float32), (word_counts.astype(jnp.float32) + beta) / denominator[topics])

        lane_mass, kept_topics, own_count = sampler._doc_lanes(
            read_block, chunk.doc_start[chunk.doc[batch]], tokens.doc_nnz[batch], own, state,
            jnp.max(tokens.blocks[batch]), products)
        # B_vz as term 1 finds it (table or bucket); the entry's position for term 2's draw
        own_word_count = count_in_row(rows, model.buckets, model.tables, word, own)
        own_position = find_in_bucket(rows, model.buckets, word, own)[0]
        own_alpha = model.alpha[own]
        own_bhat = model.dense_bhat[dense_row, own].astype(jnp.float32)
        own_mass = own_topic_mass(own_count, own_alpha, jnp.where(
            dense_word, count_of_bhat(own_bhat, denominator[own], beta),
            own_word_count.astype(jnp.float32)), beta, denominator[own])
        doc_mass, from_doc = sampler._lanes_draw(lane_mass, kept_topics, own, own_mass, state,
                                                 u_position)
        # a dense row: terms 2 and 3 as one, the row's tree without the own topic's leaf
        tree_mass = sampler.dense_mass(model.dense_tree_total[dense_row], own_alpha, own_bhat)
        from_tree = tree_sample(model.dense_tree, model.dense_bhat, model.alpha, dense_row,
                                u_position, excluded=own)
        row_mass, prior_mass, from_row, from_prior = _sparse_row_parts(
            model, word, own, own_position, own_word_count, own_alpha, u_position, steps)
        branch = tokens.u_branch[batch] * jnp.where(dense_word, doc_mass + tree_mass,
                                                    doc_mass + row_mass + prior_mass)
        return jnp.where(branch < doc_mass, from_doc,
                         jnp.where(dense_word, from_tree,
                                   jnp.where(branch < doc_mass + row_mass, from_row,
                                             from_prior)))

    topics = _map_in_order(draw, jnp.argsort(tokens.blocks), BATCH)
    return jnp.where(tokens.positions < chunk.num_tokens, topics, 0).astype(
        chunk_state.topics.dtype)


def sample_and_shuffle(chunk: Chunk, chunk_state: ChunkState, model: SparseModel, key, *,
                       zero_doc_major: bool = True):
    """The E-step's new topics, word-major and shuffled to doc-major (as long as A, 0 where no
    token of the chunk is, with or without zero_doc_major: the kernels' option)."""
    del zero_doc_major  # the shuffle scatters into zeros
    topics = sample_chunk(chunk, chunk_state, model, key)
    return topics, segmented_count.shuffle_to_doc_major(topics, chunk.doc_major_pos,
                                                        chunk_state.a_pairs.shape[0])
