"""The learned prior: Minka's fixed point from exact histograms equals the update computed
document by document, recovers a known alpha, and gives the same model on any mesh, chunking
or streaming, resumed or not."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import needs_local_devices, random_corpus

from saberjax import prior, trainer
from saberjax.state import pack_pairs


def minka_by_document(alpha: np.ndarray, doc_topic: np.ndarray, rounds: int) -> np.ndarray:
    """The fixed point in float64 from the documents' topic counts [D, K], digamma differences
    summed term by term: psi(n + a) - psi(a) = sum_{i<n} 1 / (a + i)."""
    def digamma_difference(n, a):
        return sum(1.0 / (a + i) for i in range(int(n)))

    lengths = doc_topic.sum(axis=1)
    for _ in range(rounds):
        denominator = sum(digamma_difference(n, alpha.sum()) for n in lengths)
        numerator = np.array([sum(digamma_difference(n, alpha[k]) for n in doc_topic[:, k])
                              for k in range(len(alpha))])
        alpha = np.maximum(alpha * numerator / denominator, prior.MIN_ALPHA)
    return alpha


def histograms(doc_topic: np.ndarray, padded_topics: int, width: int):
    """(count histogram through prior.count_histogram of the packed pairs, length histogram)."""
    docs, topics = np.nonzero(doc_topic)
    pairs = pack_pairs(jnp.asarray(topics), jnp.asarray(doc_topic[docs, topics]), padded_topics)
    pairs = jnp.concatenate([pairs, jnp.zeros(17, jnp.uint32)])  # empty slots count nothing
    counts = prior.count_histogram(pairs, jnp.zeros((padded_topics, width), jnp.int32))
    return counts, prior.length_histogram(doc_topic.sum(axis=1))


def test_count_histogram_counts_every_nonzero_pair_once():
    doc_topic = np.random.default_rng(0).poisson(1.5, (50, 7))
    counts, lengths = histograms(doc_topic, 32, doc_topic.max() + 1)
    expected = np.zeros((32, doc_topic.max() + 1), np.int64)
    for k in range(7):
        np.add.at(expected[k], doc_topic[:, k][doc_topic[:, k] > 0], 1)
    np.testing.assert_array_equal(counts, expected)
    np.testing.assert_array_equal(lengths, np.bincount(doc_topic.sum(axis=1)))


def test_count_histogram_adds_each_chunk_to_what_is_there():
    """Counts past the width fall in the last column, and a second chunk's pairs add to the
    first's."""
    doc_topic = np.random.default_rng(3).geometric(0.02, (300, 7)) - 1  # counts up to ~400
    width = 150
    assert width < doc_topic.max()
    counts, _ = histograms(doc_topic[100:], 32, width)
    docs, topics = np.nonzero(doc_topic[:100])
    pairs = pack_pairs(jnp.asarray(topics), jnp.asarray(doc_topic[:100][docs, topics]), 32)
    counts = prior.count_histogram(pairs, counts)
    expected = np.zeros((32, width), np.int64)
    for k in range(7):
        column = np.minimum(doc_topic[:, k], width - 1)
        np.add.at(expected[k], column[doc_topic[:, k] > 0], 1)
    np.testing.assert_array_equal(counts, expected)


def test_tail_counts_count_the_entries_past_each_column():
    histogram = jnp.asarray([[0, 3, 0, 2, 1], [4, 0, 0, 0, 0]], jnp.int32)
    np.testing.assert_array_equal(prior.tail_counts(histogram), [[6, 3, 3, 1], [0, 0, 0, 0]])


def test_fixed_point_from_histograms_is_the_update_document_by_document():
    rng = np.random.default_rng(1)
    doc_topic = rng.poisson(rng.gamma(0.4, 3.0, 6), (80, 6))
    alpha = np.full(6, 0.5)
    counts, lengths = histograms(doc_topic, 32, doc_topic.max() + 1)
    padded = jnp.zeros(32).at[:6].set(alpha)
    got = np.asarray(prior.fixed_point(padded, counts, jnp.asarray(lengths), 6))
    expected = minka_by_document(alpha, doc_topic, prior.FIXED_POINT_ROUNDS)
    np.testing.assert_allclose(got[:6], expected, rtol=2e-5)
    assert not np.any(got[6:])  # padding topics keep alpha 0
    assert np.ptp(expected) > 0.1 * expected.mean()  # the update does move alpha apart


def test_fixed_point_recovers_the_alpha_documents_were_drawn_from():
    rng = np.random.default_rng(2)
    true_alpha = np.array([0.05, 0.2, 0.5, 1.0, 3.0])
    theta = rng.dirichlet(true_alpha, 4000)
    doc_topic = np.stack([rng.multinomial(60, row) for row in theta])
    counts, lengths = histograms(doc_topic, 32, 61)
    alpha = jnp.zeros(32).at[:5].set(0.5)
    for _ in range(30):
        alpha = prior.fixed_point(alpha, counts, jnp.asarray(lengths), 5)
    np.testing.assert_allclose(np.asarray(alpha)[:5], true_alpha, rtol=0.1)
    # and a wrong prior is told apart: the estimate is not the starting value
    assert abs(float(alpha[4]) - 0.5) > 1.0


def test_counts_past_the_histogram_width_fall_in_its_last_column():
    doc_topic = np.array([[40, 1], [3, 0]])
    counts, _ = histograms(doc_topic, 32, 8)
    assert int(counts[0, 7]) == 1 and int(counts[0, 3]) == 1 and int(counts[1, 1]) == 1
    assert prior.histogram_width(14_264, 1024) == 14_265
    assert prior.histogram_width(14_264, 10_016) == prior.HISTOGRAM_CELLS // 10_016


def test_alpha_is_learned_when_due_only():
    assert [i for i in range(1, 31) if prior.is_due(i, 10, 0)] == [10, 20, 30]
    assert [i for i in range(1, 31) if prior.is_due(i, 10, 10)] == [20, 30]
    assert not any(prior.is_due(i, 0, 0) for i in range(1, 31))


PLACEMENTS = [dict(num_devices=1), dict(num_devices=2), dict(num_devices=1, chunk_tokens=3000),
              dict(num_devices=2, partition="words"), "streamed"]


@pytest.fixture(scope="module")
def corpus():
    return random_corpus(num_docs=400, num_words=60, mean_length=40, seed=8)


def learned(corpus, placement) -> trainer.TrainResult:
    config = dict(num_topics=12, iterations=5, backend="xla", optimize_alpha_every=2, seed=3)
    if placement == "streamed":
        from saberjax.execution import memory  # noqa: PLC0415
        from saberjax.config import Hyperparams  # noqa: PLC0415

        per_token = memory.device_bytes_per_token(corpus, Hyperparams.create(12))
        budget = memory.model_bytes(60, 32) + 3 * corpus.num_tokens / 6 * per_token
        placement = dict(num_devices=1, device_memory_gb=budget / 1e9)
    return trainer.train(corpus, trainer.TrainConfig(**config, **placement))


@pytest.mark.parametrize("placement", PLACEMENTS[1:])
def test_the_learned_alpha_and_model_are_bit_identical_on_any_placement(corpus, placement):
    if isinstance(placement, dict):
        needs_local_devices(placement["num_devices"])
    expected, got = learned(corpus, PLACEMENTS[0]), learned(corpus, placement)
    if placement == "streamed":
        assert got.model.config["streamed"]
    assert np.ptp(expected.model.alpha) > 0
    np.testing.assert_array_equal(got.model.alpha, expected.model.alpha)
    np.testing.assert_array_equal(got.model.word_topic_counts, expected.model.word_topic_counts)


def test_learning_alpha_changes_the_model_and_saves_its_alpha(corpus, tmp_path):
    fixed = trainer.train(corpus, trainer.TrainConfig(num_topics=12, iterations=5, backend="xla",
                                                      optimize_alpha_every=0, seed=3))
    assert np.ptp(fixed.model.alpha) == 0  # the float32 of 50 / K that training used
    np.testing.assert_allclose(fixed.model.alpha, 50 / 12, rtol=1e-7)
    result = learned(corpus, PLACEMENTS[0])
    assert not np.array_equal(result.model.word_topic_counts, fixed.model.word_topic_counts)
    from saberjax.model import TopicModel  # noqa: PLC0415

    loaded = TopicModel.load(result.model.save(tmp_path / "model"))
    np.testing.assert_array_equal(loaded.alpha, result.model.alpha)


def test_the_fixed_point_leaves_no_float_sum_to_the_compiler():
    """Its sums run in the order pairwise_sum fixes: a float reduce_sum's order is the
    kernel's, and XLA's GPU autotuning picks among kernels adding in other orders (two
    compilations of the learned prior's program gave two alphas)."""
    jaxpr = jax.make_jaxpr(prior.fixed_point, static_argnums=3)(
        jnp.ones(8, jnp.float32), jnp.ones((8, 5), jnp.int32), jnp.ones(7, jnp.int32), 6)

    def float_sums(jaxpr):
        for equation in jaxpr.eqns:
            if (equation.primitive.name == "reduce_sum"
                    and jnp.issubdtype(equation.outvars[0].aval.dtype, jnp.floating)):
                yield equation
            for param in equation.params.values():
                for sub in param if isinstance(param, tuple) else (param,):
                    sub = getattr(sub, "jaxpr", sub)  # a closed jaxpr's
                    if hasattr(sub, "eqns"):
                        yield from float_sums(sub)

    assert list(float_sums(jaxpr.jaxpr)) == []
