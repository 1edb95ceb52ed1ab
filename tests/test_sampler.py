"""The ESCA E-step draws exactly from p(k) proportional to (A_dk + alpha_k) B-hat_vk, the token
itself left out of A and B."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import goodness_of_fit_pvalue, one_document_state

from saberjax import esca, rng, sampler
from saberjax.config import Hyperparams
from saberjax.corpus import Corpus
from saberjax.layout import build_layout

DRAWS = 100_000


def draws_for_fixed_row(num_topics: int, nonzeros: int, alpha: float, seed: int = 0,
                        asymmetric: bool = False, own_count: int | None = None):
    """DRAWS tokens of one word in one document whose A row is fixed by hand, every token now
    in one topic of the row (its own), under the prior alpha for every topic, or (asymmetric)
    alpha times a random factor per topic.  The word's count in the own topic is own_count
    (None: random, at least 1, as the token is one of them).

    Returns (samples, exact p, A row and B-hat row without the token, alpha of every topic).
    """
    rng_np = np.random.default_rng(seed)
    num_words = 3
    corpus = Corpus(np.array([0, DRAWS], np.int64), np.zeros(DRAWS, np.int32),
                    tuple(f"w{i}" for i in range(num_words)))
    chunk = jax.device_put(build_layout(corpus).chunks[0])
    hyper = Hyperparams.create(num_topics, alpha=alpha)
    counts = np.zeros((num_words, hyper.padded_topics), np.int32)
    counts[:, :num_topics] = rng_np.integers(0, 50, (num_words, num_topics))
    topics = np.sort(rng_np.choice(num_topics, nonzeros, replace=False))
    own = topics[nonzeros // 2]
    counts[0, own] = max(counts[0, own], 1) if own_count is None else own_count
    alpha = np.full(num_topics, alpha, np.float32)
    if asymmetric:
        alpha *= rng_np.gamma(0.5, 2.0, num_topics).astype(np.float32)
    padded_alpha = np.zeros(hyper.padded_topics, np.float32)
    padded_alpha[:num_topics] = alpha
    model = esca.model_from_counts(jnp.asarray(counts), jnp.asarray(padded_alpha), hyper)

    doc_counts = rng_np.integers(1, 8, nonzeros)
    state = one_document_state(chunk, topics, doc_counts, own, num_topics, hyper.topic_dtype)
    key = rng.iteration_key(seed, 1)
    samples = jax.jit(sampler.sample_chunk)(chunk, state, model, key)
    a_row = np.zeros(num_topics)
    a_row[topics] = doc_counts
    a_row[own] -= 1
    bhat_row = np.asarray(model.bhat[0, :num_topics], np.float64)
    denominator = float(model.bhat_denominator[own])
    assert np.isclose(denominator, counts[:, own].sum() + num_words * hyper.beta)
    counted = (a_row + np.eye(num_topics)[own] + alpha) * bhat_row
    bhat_row[own] = (bhat_row[own] * denominator - 1) / (denominator - 1)
    exact = (a_row + alpha) * bhat_row
    return np.asarray(samples[:DRAWS]), exact, a_row, bhat_row, alpha, counted


@pytest.mark.parametrize("num_topics,nonzeros,alpha,asymmetric", [
    (2, 1, 0.5, False),  # one nonzero, one 32-block
    (100, 70, 0.5, False),  # three 32-blocks of nonzeros, two-level tree
    (1000, 40, 0.05, False),  # sparse row, dense part dominant
    (2000, 300, 1.0, False),  # ten blocks, three-level tree
    (6000, 200, 0.05, False),  # a three-level tree, dense part dominant
    (100, 10, 0.5, True),  # a learned prior: one alpha_k per topic
    (2000, 40, 0.05, True),  # three-level trees over alpha_k B-hat_vk, dense part dominant
])
def test_sampler_matches_exact_distribution(num_topics, nonzeros, alpha, asymmetric):
    samples, exact, a_row, bhat_row, alpha, counted = draws_for_fixed_row(
        num_topics, nonzeros, alpha, asymmetric=asymmetric)
    assert goodness_of_fit_pvalue(samples, exact) > 1e-4
    # The test has power: doubling the dense part's prior mass is detected, and so is a prior
    # taken as the same for every topic.
    if a_row.any():  # (else the whole mass is the prior part, and doubling it changes nothing)
        assert goodness_of_fit_pvalue(samples, (a_row + 2 * alpha) * bhat_row) < 1e-6
    if asymmetric:
        assert goodness_of_fit_pvalue(samples, (a_row + alpha.mean()) * bhat_row) < 1e-6


def test_sampler_leaves_the_token_out_of_its_own_topics_counts():
    """A word seen twice in its topic: counted with the token, that topic's B-hat is twice
    what it is without; the draws follow the latter."""
    samples, exact, _, _, _, counted = draws_for_fixed_row(100, 10, 0.5, seed=5, own_count=2)
    assert goodness_of_fit_pvalue(samples, exact) > 1e-4
    assert goodness_of_fit_pvalue(samples, counted) < 1e-6


def test_sampler_uses_both_parts_in_the_right_proportion():
    samples, exact, a_row, bhat_row, _, _ = draws_for_fixed_row(100, 10, 2.0, seed=3)
    sparse_mass = (a_row * bhat_row).sum() / exact.sum()
    from_zero_rows = np.isin(samples, np.flatnonzero(a_row == 0)).mean()
    dense_share_of_zero_rows = (2.0 * bhat_row[a_row == 0]).sum() / exact.sum()
    assert abs(from_zero_rows - dense_share_of_zero_rows) < 5 * np.sqrt(0.25 / DRAWS)
    assert 0.05 < sparse_mass < 0.95
