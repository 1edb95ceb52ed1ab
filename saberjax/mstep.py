"""The M-step's reference math (plain JAX): word-topic counts B, topic totals, B-hat and its trees.

    B[v, k]       tokens of word v with topic k
    totals[k]     sum over v of B[v, k]
    B-hat[v, k]   (B[v, k] + beta) / (totals[k] + V beta), 0 in padding columns; with seed
                  words (saberjax.seeding) (B[v, k] + beta_kv) / (totals[k] + sum_v beta_kv)
    trees         the W-ary sampling trees over each row of alpha_k B-hat[v, k] (saberjax.tree)

The Pallas kernels (saberjax.pallas.word_topic_count, saberjax.pallas.bhat_tree) compute the
same things and are tested against these functions.  B-hat and the trees are row-wise given the
totals, so they can be computed for any block of B's rows (a device's share of the vocabulary)
once the totals are known; `num_words` is then the whole vocabulary's V.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from saberjax.layout import Chunk
from saberjax.seeding import SeedPrior
from saberjax.state import BHAT_DTYPE
from saberjax.tree import weighted_tree


def count_word_topic(chunk: Chunk, topics: jax.Array, word_topic: jax.Array) -> jax.Array:
    """B plus the (word, topic) counts of the chunk's real tokens."""
    real = jnp.arange(chunk.padded_tokens) < chunk.num_tokens
    return word_topic.at[chunk.word, topics.astype(jnp.int32)].add(real.astype(jnp.int32))


def topic_totals(word_topic: jax.Array) -> jax.Array:
    """Each topic's total count: the column sums of B (int32)."""
    return word_topic.sum(axis=0)


def bhat_denominator(totals: jax.Array, num_words: int, beta,
                     seeds: SeedPrior | None = None) -> jax.Array:
    """Each topic's B-hat denominator, topic total + V beta (float32), plus the topic's seed
    prior (seeds.topic_weights) when seeded."""
    denominator = totals.astype(jnp.float32) + num_words * beta
    return denominator if seeds is None else denominator + seeds.topic_weights(totals.shape[0])


def _bhat_values(word_topic: jax.Array, denominator: jax.Array, num_topics: int,
                 beta) -> jax.Array:
    """(B + beta) / denominator in float32, 0 in padding columns."""
    real_topic = jnp.arange(word_topic.shape[1]) < num_topics
    return jnp.where(real_topic, (word_topic + beta) / denominator, 0.0).astype(jnp.float32)


def float32_bhat(word_topic: jax.Array, totals: jax.Array, num_topics: int, beta,
                 num_words: int | None = None, seeds: SeedPrior | None = None) -> jax.Array:
    """B-hat = (B + beta) / (topic totals + V beta) in float32, 0 in padding columns, or with
    seeds (over B's rows) (B + beta_kv) / (topic totals + sum_v beta_kv).

    num_words: the vocabulary's V (None: B's rows are the whole vocabulary)."""
    denominator = bhat_denominator(totals, num_words or word_topic.shape[0], beta, seeds)
    bhat = _bhat_values(word_topic, denominator, num_topics, beta)
    if seeds is None:
        return bhat
    return seeded_rows(word_topic, bhat, (), denominator, None, num_topics, beta, seeds)[0]


def bhat_and_tree(word_topic: jax.Array, totals: jax.Array, alpha: jax.Array, num_topics: int,
                  beta, num_words: int | None = None, seeds: SeedPrior | None = None,
                  first_row=0, dtype=BHAT_DTYPE):
    """B-hat in dtype and the levels of the sampling trees over alpha_k B-hat_vk above it, top
    first, summed in float32 from the values B-hat holds times alpha [K_pad] (so a tree walk's
    last level adds up to the node above it).  seeds: the seed words' prior over the model's
    rows, of which B holds rows first_row, first_row + 1, ... (seeded_rows)."""
    denominator = bhat_denominator(totals, num_words or word_topic.shape[0], beta, seeds)
    bhat = _bhat_values(word_topic, denominator, num_topics, beta).astype(dtype)
    tree = weighted_tree(bhat, alpha)
    if seeds is None:
        return bhat, tree
    return seeded_rows(word_topic, bhat, tree, denominator, alpha, num_topics, beta, seeds,
                       first_row)


def seeded_rows(word_topic: jax.Array, bhat: jax.Array, tree: tuple[jax.Array, ...],
                denominator: jax.Array, alpha: jax.Array | None, num_topics: int, beta,
                seeds: SeedPrior, first_row=0):
    """(B-hat, tree levels) with the rows the seed prior touches recomputed from beta_kv:
    (B_vk + beta + seeds' weight) / denominator, and their trees over alpha_k B-hat_vk
    (alpha None: no tree).  B's rows are the model's rows first_row, first_row + 1, ... (a
    device's share; a traced index inside shard_map); seeded rows outside them are skipped."""
    rows = jnp.asarray(seeds.rows, jnp.int32) - first_row
    inside = (rows >= 0) & (rows < word_topic.shape[0])
    counts = word_topic[jnp.where(inside, rows, 0)]
    values = _bhat_values(counts + seeds.row_weights(word_topic.shape[1]), denominator,
                          num_topics, beta).astype(bhat.dtype)
    target = jnp.where(inside, rows, word_topic.shape[0])  # past the end: dropped
    bhat = bhat.at[target].set(values, mode="drop")
    if alpha is None:
        return bhat, tree
    levels = weighted_tree(values, alpha)
    return bhat, tuple(level.at[target].set(new, mode="drop")
                       for level, new in zip(tree, levels))


def model_arrays(word_topic: jax.Array, alpha: jax.Array, num_topics: int, beta,
                 seeds: SeedPrior | None = None):
    """(topic totals, B-hat, its tree levels top first) of counts B and prior alpha."""
    totals = topic_totals(word_topic)
    return (totals, *bhat_and_tree(word_topic, totals, alpha, num_topics, beta, seeds=seeds))
