"""The M-step's reference math (plain JAX): word-topic counts B, topic totals, B-hat and its trees.

    B[v, k]       tokens of word v with topic k
    totals[k]     sum over v of B[v, k]
    B-hat[v, k]   (B[v, k] + beta) / (totals[k] + V beta), 0 in padding columns
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
from saberjax.state import BHAT_DTYPE
from saberjax.tree import build_tree, weighted_leaves


def count_word_topic(chunk: Chunk, topics: jax.Array, word_topic: jax.Array) -> jax.Array:
    """B plus the (word, topic) counts of the chunk's real tokens."""
    real = jnp.arange(chunk.padded_tokens) < chunk.num_tokens
    return word_topic.at[chunk.word, topics.astype(jnp.int32)].add(real.astype(jnp.int32))


def topic_totals(word_topic: jax.Array) -> jax.Array:
    """Each topic's total count: the column sums of B (int32)."""
    return word_topic.sum(axis=0)


def bhat_denominator(totals: jax.Array, num_words: int, beta) -> jax.Array:
    """Each topic's B-hat denominator, topic total + V beta (float32)."""
    return totals.astype(jnp.float32) + num_words * beta


def float32_bhat(word_topic: jax.Array, totals: jax.Array, num_topics: int, beta,
                 num_words: int | None = None) -> jax.Array:
    """B-hat = (B + beta) / (topic totals + V beta) in float32, 0 in padding columns.

    num_words: the vocabulary's V (None: B's rows are the whole vocabulary)."""
    real_topic = jnp.arange(word_topic.shape[1]) < num_topics
    denominator = bhat_denominator(totals, num_words or word_topic.shape[0], beta)
    return jnp.where(real_topic, (word_topic + beta) / denominator, 0.0).astype(jnp.float32)


def bhat_and_tree(word_topic: jax.Array, totals: jax.Array, alpha: jax.Array, num_topics: int,
                  beta, num_words: int | None = None, dtype=BHAT_DTYPE):
    """B-hat in dtype and the levels of the sampling trees over alpha_k B-hat_vk above it, top
    first, summed in float32 from the values B-hat holds times alpha [K_pad] (so a tree walk's
    last level adds up to the node above it)."""
    bhat = float32_bhat(word_topic, totals, num_topics, beta, num_words).astype(dtype)
    return bhat, build_tree(weighted_leaves(bhat, alpha))


def model_arrays(word_topic: jax.Array, alpha: jax.Array, num_topics: int, beta):
    """(topic totals, B-hat, its tree levels top first) of counts B and prior alpha."""
    totals = topic_totals(word_topic)
    return (totals, *bhat_and_tree(word_topic, totals, alpha, num_topics, beta))
