"""The ESCA E-step draws exactly from p(k) proportional to (A_dk + alpha) B-hat_vk."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import goodness_of_fit_pvalue

from saberjax import esca, rng, sampler
from saberjax.corpus import Corpus
from saberjax.layout import build_layout
from saberjax.state import ChunkState, Hyperparams, pack_pairs

DRAWS = 100_000


def draws_for_fixed_row(num_topics: int, nonzeros: int, alpha: float, seed: int = 0):
    """DRAWS tokens of one word in one document whose A row is fixed by hand.

    Returns (samples, exact p, A row, B-hat row).
    """
    rng_np = np.random.default_rng(seed)
    num_words = 3
    corpus = Corpus(np.array([0, DRAWS], np.int64), np.zeros(DRAWS, np.int32),
                    tuple(f"w{i}" for i in range(num_words)))
    chunk = jax.device_put(build_layout(corpus).chunks[0])
    hyper = Hyperparams.create(num_topics, alpha)
    counts = np.zeros((num_words, hyper.padded_topics), np.int32)
    counts[:, :num_topics] = rng_np.integers(0, 50, (num_words, num_topics))
    model = esca.model_from_counts(jnp.asarray(counts), hyper)

    topics = np.sort(rng_np.choice(num_topics, nonzeros, replace=False))
    doc_counts = rng_np.integers(1, 8, nonzeros)
    a_topics = np.zeros(chunk.padded_tokens, np.int32)
    a_counts = np.zeros(chunk.padded_tokens, np.int32)
    a_topics[:nonzeros], a_counts[:nonzeros] = topics, doc_counts
    a_nnz = np.zeros(chunk.padded_docs, np.int32)
    a_nnz[0] = nonzeros
    state = ChunkState(jnp.zeros(chunk.padded_tokens, hyper.topic_dtype),
                       pack_pairs(jnp.asarray(a_topics), jnp.asarray(a_counts), num_topics),
                       jnp.asarray(a_nnz))
    key = rng.iteration_key(seed, 1)
    samples = jax.jit(sampler.sample_chunk, static_argnums=4)(chunk, state, model, key, alpha)
    a_row = np.zeros(num_topics)
    a_row[topics] = doc_counts
    bhat_row = np.asarray(model.bhat[0, :num_topics], np.float64)
    exact = (a_row + alpha) * bhat_row
    return np.asarray(samples[:DRAWS]), exact, a_row, bhat_row


@pytest.mark.parametrize("num_topics,nonzeros,alpha", [
    (2, 1, 0.5),  # one nonzero, one 32-block
    (100, 70, 0.5),  # three 32-blocks of nonzeros, two-level tree
    (1000, 40, 0.05),  # sparse row, dense part dominant
    (2000, 300, 1.0),  # ten blocks, three-level tree
    (6000, 200, 0.05),  # a three-level tree, dense part dominant
])
def test_sampler_matches_exact_distribution(num_topics, nonzeros, alpha):
    samples, exact, a_row, bhat_row = draws_for_fixed_row(num_topics, nonzeros, alpha)
    assert goodness_of_fit_pvalue(samples, exact) > 1e-4
    # The test has power: doubling the dense part's prior mass is detected.
    assert goodness_of_fit_pvalue(samples, (a_row + 2 * alpha) * bhat_row) < 1e-6


def test_sampler_uses_both_parts_in_the_right_proportion():
    samples, exact, a_row, bhat_row = draws_for_fixed_row(100, 10, 2.0, seed=3)
    sparse_mass = (a_row * bhat_row).sum() / exact.sum()
    from_zero_rows = np.isin(samples, np.flatnonzero(a_row == 0)).mean()
    dense_share_of_zero_rows = (2.0 * bhat_row[a_row == 0]).sum() / exact.sum()
    assert abs(from_zero_rows - dense_share_of_zero_rows) < 5 * np.sqrt(0.25 / DRAWS)
    assert 0.05 < sparse_mass < 0.95
