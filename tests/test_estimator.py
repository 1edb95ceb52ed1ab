"""The scikit-learn style LDA estimator on a small sparse count matrix with known topics."""

import numpy as np
import pytest
import scipy.sparse

from saberjax import LDA
from saberjax.corpus import from_count_matrix
from saberjax.estimator import NotFittedError

NUM_TOPICS, BLOCK, NUM_DOCS = 3, 10, 60
PARAMS = dict(num_topics=NUM_TOPICS, alpha=0.1, iterations=40, backend="xla", seed=1)


def block_topic_counts(seed=0) -> scipy.sparse.csr_matrix:
    """Documents of 40 tokens, each from one topic; topic k uses words k*BLOCK .. +BLOCK-1."""
    rng = np.random.default_rng(seed)
    topics = np.arange(NUM_DOCS) % NUM_TOPICS
    words = topics[:, None] * BLOCK + rng.integers(0, BLOCK, (NUM_DOCS, 40))
    counts = np.zeros((NUM_DOCS, NUM_TOPICS * BLOCK), np.int64)
    np.add.at(counts, (np.repeat(np.arange(NUM_DOCS), 40), words.ravel()), 1)
    return scipy.sparse.csr_matrix(counts)


@pytest.fixture(scope="module")
def fitted():
    return LDA(**PARAMS).fit(block_topic_counts())


def test_fit_learns_the_block_topics_and_transform_finds_them(fitted):
    X = block_topic_counts()
    assert fitted.components_.shape == fitted.topic_word_.shape == (NUM_TOPICS, NUM_TOPICS * BLOCK)
    np.testing.assert_allclose(fitted.topic_word_.sum(axis=1), 1.0, rtol=1e-5)
    normalised = fitted.components_ / fitted.components_.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(normalised, fitted.topic_word_, rtol=1e-5)
    block_of_topic = fitted.topic_word_.reshape(NUM_TOPICS, NUM_TOPICS, BLOCK).sum(2).argmax(1)
    assert sorted(block_of_topic) == list(range(NUM_TOPICS))
    theta = fitted.transform(X)
    assert theta.shape == (NUM_DOCS, NUM_TOPICS) and theta.dtype == np.float32
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-6)
    true_block = np.arange(NUM_DOCS) % NUM_TOPICS
    np.testing.assert_array_equal(block_of_topic[theta.argmax(axis=1)], true_block)


def test_fit_transform_equals_fit_then_transform(fitted):
    X = block_topic_counts()
    np.testing.assert_array_equal(LDA(**PARAMS).fit_transform(X), fitted.transform(X))


def test_score_and_perplexity_are_held_out_document_completion(fitted):
    X = block_topic_counts(seed=7)
    score, perplexity = fitted.score(X), fitted.perplexity(X)
    held_out_tokens = X.sum() // 2
    assert np.isclose(perplexity, np.exp(-score / held_out_tokens), rtol=1e-6)
    assert perplexity < 1.2 * BLOCK < NUM_TOPICS * BLOCK  # knows each document's block
    corpus = from_count_matrix(X, fitted.model_.vocab)
    assert fitted.score(corpus) == score


def test_params_follow_the_sklearn_protocol():
    lda = LDA(num_topics=7, beta=0.1)
    params = lda.get_params()
    assert params == dict(num_topics=7, alpha=None, optimize_alpha_every=10, burn_in=0, beta=0.1,
                          seed_words=None, seed_weight=100.0, init_window_topics=None, iterations=100,
                          seed=0, backend="auto", model_format="auto", chunk_tokens=None,
                          num_devices=0, callback=None,
                          verbose=0)  # each setting once: scikit-learn's names are not repeated
    clone = type(lda)(**lda.get_params(deep=False))  # what sklearn.base.clone does
    assert clone.get_params() == params and clone is not lda
    assert lda.set_params(iterations=5, alpha=0.2) is lda
    assert (lda.iterations, lda.alpha) == (5, 0.2)
    with pytest.raises(ValueError, match="unknown parameters"):
        lda.set_params(n_topics=3)
    assert not hasattr(lda, "components_")
    with pytest.raises(NotFittedError, match="call fit first"):
        lda.transform(block_topic_counts())


def test_save_load_round_trip_and_vocabulary(fitted, tmp_path):
    X = block_topic_counts()
    with pytest.warns(UserWarning, match="saving a model without its words"):
        fitted.save(tmp_path / "lda")
    loaded = LDA.load(tmp_path / "lda")
    np.testing.assert_array_equal(loaded.transform(X), fitted.transform(X))
    assert loaded.get_params() == dict(LDA(**PARAMS).get_params(), backend="auto")
    vocabulary = [f"word{i}" for i in range(NUM_TOPICS * BLOCK)]
    stopped = LDA(**PARAMS, callback=lambda iteration, metrics, state: iteration == 2)
    stopped.fit(X, vocabulary=vocabulary)
    assert stopped.model_.vocab == tuple(vocabulary) and len(stopped.metrics_) == 2
    with pytest.raises(ValueError, match="vocabulary applies to count matrices"):
        stopped.fit(from_count_matrix(X), vocabulary=vocabulary)


def test_scikit_learn_names_read_and_write_the_one_setting():
    lda = LDA(n_components=5, random_state=3)
    assert lda.get_params()["num_topics"] == 5 == lda.n_components
    assert "n_components" not in lda.get_params() and lda.get_params()["seed"] == 3
    lda.set_params(num_topics=6)
    assert lda.n_components == 6
    lda.set_params(max_iter=7)
    assert lda.get_params()["iterations"] == 7


@pytest.mark.parametrize("params, message", [
    (dict(alpha=float("inf")), "alpha=inf: must be a finite number"),
    (dict(doc_topic_prior=float("nan")), "alpha=nan: must be a finite number"),
    (dict(beta=-1.0), "beta=-1.0: must be positive"),
    (dict(topic_word_prior=float("inf")), "beta=inf: must be a finite number"),
    (dict(n_components=2.5), "num_topics=2.5: must be an integer"),
    (dict(max_iter=-3), "iterations=-3: must be at least 1"),
    (dict(iterations=True), "iterations=True: must be an integer"),
    (dict(random_state=-1), "seed=-1: must be at least 0"),
    (dict(num_devices="all"), "num_devices='all': must be an integer"),
    (dict(verbose=-1), "verbose=-1: must be an integer, at least 0"),
    (dict(callback=3), "callback=3: must be callable"),
])
def test_parameters_out_of_range_are_refused_by_fit_naming_the_setting(params, message):
    with pytest.raises(ValueError, match=message):
        LDA(**params).fit(block_topic_counts())  # refused before training


def test_a_model_fitted_without_words_says_so_where_words_are_needed(fitted, tmp_path):
    assert not fitted.model_.has_words and not hasattr(fitted, "feature_names_in_")
    with pytest.raises(ValueError, match="text cannot be matched to a model without words: it "
                                         "was fitted on a count matrix whose 30 columns"):
        fitted.transform(["w1 w2 w3"])
    with pytest.warns(UserWarning, match="without its words"):
        fitted.save(tmp_path / "unnamed")
    loaded = LDA.load(tmp_path / "unnamed")
    assert not loaded.model_.has_words and not hasattr(loaded, "feature_names_in_")
