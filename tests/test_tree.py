"""The W-ary sampling tree draws exactly from its weighted leaves' distribution, for any K."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import goodness_of_fit_pvalue

from saberjax import tree

DRAWS = 200_000


def draw(weights: np.ndarray, draws: int, seed: int = 0, column_weights=None) -> np.ndarray:
    """Draws from the tree over leaves `weights` times column_weights (None: ones)."""
    pad = tree.padded_width(len(weights)) - len(weights)
    leaves = jnp.asarray(np.pad(weights, (0, pad)))[None]
    column_weights = jnp.asarray(np.pad(np.ones_like(weights) if column_weights is None
                                        else column_weights, (0, pad)))
    levels = tree.build_tree(tree.weighted_leaves(leaves, column_weights))
    uniforms = jax.random.uniform(jax.random.key(seed), (draws,))
    rows = jnp.zeros(draws, jnp.int32)
    return np.asarray(jax.jit(tree.tree_sample)(levels, leaves, column_weights, rows, uniforms))


@pytest.mark.parametrize("num_topics", [2, 31, 100, 1000, 2000])
def test_tree_sample_matches_exact_distribution(num_topics):
    weights = np.random.default_rng(num_topics).gamma(0.3, size=num_topics).astype(np.float32)
    weights[3::7] = 0.0  # zero-weight leaves must never be drawn
    samples = draw(weights, DRAWS)
    assert goodness_of_fit_pvalue(samples, weights) > 1e-4
    wrong = weights.copy()
    wrong[np.argmax(weights)] *= 0.5
    assert goodness_of_fit_pvalue(samples, wrong) < 1e-6


@pytest.mark.parametrize("num_topics", [3, 100, 1000])
def test_tree_sample_draws_leaves_times_column_weights(num_topics):
    """The trees over alpha_k B-hat_vk: p(k) is proportional to leaf times its column's weight,
    not to the leaf alone."""
    rng = np.random.default_rng(num_topics + 1)
    leaves = rng.gamma(0.5, size=num_topics).astype(np.float32)
    alpha = rng.gamma(0.3, size=num_topics).astype(np.float32)
    alpha[1::5] = 0.0
    samples = draw(leaves, DRAWS, column_weights=alpha)
    assert goodness_of_fit_pvalue(samples, leaves * alpha) > 1e-4
    assert goodness_of_fit_pvalue(samples, leaves + 1e-3) < 1e-6


def test_tree_handles_65536_topics():
    num_topics = 65_536
    weights = np.random.default_rng(1).gamma(0.5, size=num_topics).astype(np.float32)
    assert tree.level_widths(num_topics) == (32, 64, 2048)
    samples = draw(weights, DRAWS)
    groups = 64  # pool leaves so that every bin expects many draws
    assert goodness_of_fit_pvalue(samples // (num_topics // groups),
                                  weights.reshape(groups, -1).sum(axis=1)) > 1e-4
    assert np.all(weights[samples] > 0)


def test_level_widths_are_padded_multiples_of_32():
    assert tree.level_widths(2) == ()
    assert tree.level_widths(32) == ()
    assert tree.level_widths(33) == (32,)
    assert tree.level_widths(1024) == (32,)
    assert tree.level_widths(1056) == (32, 64)


def test_search_block_never_picks_zero_weight_lane_even_past_the_total():
    values = jnp.asarray([[0.0, 1.0, 0.0, 2.0] + [0.0] * 28])
    lane, before = tree.search_block(values, jnp.asarray([3.5]))
    assert int(lane[0]) == 3 and float(before[0]) == 1.0
    lane, _ = tree.search_block(values, jnp.asarray([0.0]))
    assert int(lane[0]) == 1


def test_search_block_finds_the_lane_whose_prefix_interval_holds_x():
    rng_np = np.random.default_rng(4)
    values = rng_np.exponential(size=(2000, 32)).astype(np.float32)
    values[rng_np.random(values.shape) < 0.6] = 0.0  # many zero-weight lanes
    values[0] = 0.0
    values[0, 31] = 1.0
    totals = values.astype(np.float64).sum(axis=1)
    x = (rng_np.random(2000) * totals).astype(np.float32)
    x[:50] = totals[:50]  # at the total: rounding must not pick a zero-weight lane
    lane, before = (np.asarray(a) for a in tree.search_block(jnp.asarray(values), jnp.asarray(x)))
    rows = np.arange(2000)
    assert np.all(values[rows, lane] > 0)
    assert np.all(before <= x)
    prefix = np.cumsum(values.astype(np.float64), axis=1)
    inside = x < totals * (1 - 1e-5)
    low, high = (prefix - values)[rows, lane], prefix[rows, lane]
    assert np.all((low[inside] <= x[inside] * (1 + 1e-5)) & (x[inside] < high[inside] * (1 + 1e-5)))
    np.testing.assert_allclose(before[inside], low[inside], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("width", [1, 2, 5, 32, 2041])
def test_pairwise_sum_adds_halves_of_the_zero_padded_row(width):
    values = np.random.default_rng(width).random((3, width), np.float32)
    padded = np.zeros((3, 1 << max(0, width - 1).bit_length()), np.float32)
    padded[:, :width] = values
    while padded.shape[1] > 1:
        half = padded.shape[1] // 2
        padded = padded[:, :half] + padded[:, half:]
    np.testing.assert_array_equal(np.asarray(tree.pairwise_sum(jnp.asarray(values))),
                                  padded[:, 0])
