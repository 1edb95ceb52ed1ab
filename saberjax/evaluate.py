"""Held-out log-likelihood by document completion (Wallach et al. 2009), batched and vectorised.

Each test document is split into an observed and a held-out half (corpus.split_document_halves).
With the topics B-hat fixed, theta_d is fitted to the observed half by EM,

    theta_dk  <-  (n_dk + alpha) / (n_d + K alpha),
    n_dk       =  sum over observed words v of d:  count_dv * theta_dk B-hat_vk / sum_j theta_dj B-hat_vj,

starting from the uniform theta, for `em_iterations` rounds (50 by default, as in the
reference measurements in BASELINES.md), and the held-out half is scored by
log sum_k theta_dk B-hat_vk per token.  Work is done on the unique (document, word) pairs,
in fixed-size padded batches so one compiled function serves every batch.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from saberjax.corpus import Corpus

DEFAULT_EM_ITERATIONS = 50
# Upper bound on pairs x topics held at once in a batch (floats).
BATCH_ELEMENTS = 1 << 24


@dataclasses.dataclass(frozen=True)
class HeldOutScore:
    loglik_per_token: float
    perplexity: float
    tokens: int
    documents: int


def _pairs(corpus: Corpus):
    doc, word, count = corpus.doc_word_counts()
    return np.asarray(doc, np.int64), np.asarray(word, np.int32), np.asarray(count, np.float32)


def _batches(pair_doc: np.ndarray, num_docs: int, max_pairs: int, max_docs: int):
    """[first, last) document ranges whose pairs fit one batch (a longer document alone)."""
    first = 0
    pair_offsets = np.searchsorted(pair_doc, np.arange(num_docs + 1))
    while first < num_docs:
        limit = pair_offsets[first] + max_pairs
        last = int(np.searchsorted(pair_offsets, limit, side="right")) - 1
        last = min(max(last, first + 1), first + max_docs, num_docs)
        yield first, last, int(pair_offsets[first]), int(pair_offsets[last])
        first = last


@functools.partial(jax.jit, static_argnames=("num_docs", "em_iterations"))
def _batch_loglik(topics_of_word, obs_doc, obs_word, obs_count, held_doc, held_word, held_count,
                  alpha, num_docs: int, em_iterations: int):
    """Sum of held-out log-likelihoods of one padded batch (padding pairs have count 0)."""
    num_topics = topics_of_word.shape[1]
    phi = topics_of_word[obs_word]  # [pairs, K]
    doc_tokens = jax.ops.segment_sum(obs_count, obs_doc, num_docs)

    def em_round(_, theta):
        mixture = jnp.sum(theta[obs_doc] * phi, axis=1)
        weight = obs_count / jnp.maximum(mixture, 1e-30)
        expected = theta * jax.ops.segment_sum(weight[:, None] * phi, obs_doc, num_docs)
        return (expected + alpha) / (doc_tokens + num_topics * alpha)[:, None]

    theta = jax.lax.fori_loop(0, em_iterations, em_round,
                              jnp.full((num_docs, num_topics), 1.0 / num_topics, jnp.float32))
    mixture = jnp.sum(theta[held_doc] * topics_of_word[held_word], axis=1)
    return jnp.sum(held_count * jnp.log(jnp.maximum(mixture, 1e-30)))


def _padded(array: np.ndarray, size: int) -> np.ndarray:
    return np.pad(array, (0, size - len(array)))


def heldout_loglik(topic_word: jax.Array | np.ndarray, observed: Corpus, heldout: Corpus,
                   alpha: float, em_iterations: int = DEFAULT_EM_ITERATIONS) -> HeldOutScore:
    """Document-completion score of topics `topic_word` [K, V] (rows sum to 1)."""
    if observed.num_docs != heldout.num_docs:
        raise ValueError("observed and held-out halves must hold the same documents")
    topics_of_word = jnp.asarray(topic_word, jnp.float32).T
    num_topics = topics_of_word.shape[1]
    obs_doc, obs_word, obs_count = _pairs(observed)
    held_doc, held_word, held_count = _pairs(heldout)
    max_pairs = max(1, BATCH_ELEMENTS // num_topics)
    max_docs = max(1, min(observed.num_docs, max_pairs // 8))
    held_offsets = np.searchsorted(held_doc, np.arange(heldout.num_docs + 1))
    total = 0.0
    for first, last, lo, hi in _batches(obs_doc, observed.num_docs, max_pairs, max_docs):
        held = slice(int(held_offsets[first]), int(held_offsets[last]))
        size = 1 << (max(hi - lo, held.stop - held.start, 1) - 1).bit_length()
        total += float(_batch_loglik(
            topics_of_word,
            _padded(obs_doc[lo:hi] - first, size), _padded(obs_word[lo:hi], size),
            _padded(obs_count[lo:hi], size),
            _padded(held_doc[held] - first, size), _padded(held_word[held], size),
            _padded(held_count[held], size),
            jnp.float32(alpha), num_docs=max_docs, em_iterations=em_iterations))
    tokens = heldout.num_tokens
    per_token = total / max(tokens, 1)
    return HeldOutScore(per_token, math.exp(-per_token), tokens, heldout.num_docs)
