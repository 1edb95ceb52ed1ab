"""saberjax.LDA under scikit-learn's conventions: its parameter names, fitted attributes,
clone, Pipeline after CountVectorizer, and scikit-learn's own estimator checks where they apply.

scikit-learn is a test extra only (pyproject.toml); the package never imports it.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse

sklearn = pytest.importorskip("sklearn")
from sklearn.base import clone  # noqa: E402
from sklearn.feature_extraction.text import CountVectorizer  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from helpers import launch, run_launcher  # noqa: E402
from saberjax import LDA  # noqa: E402
from saberjax.estimator import NotFittedError  # noqa: E402

TEXTS = [
    "comet orbit sun planet telescope orbit comet",
    "planet telescope star orbit sun comet",
    "river flood rain delta river bank",
    "rain river delta flood bank water",
    "star telescope planet sun orbit",
    "water rain flood river bank delta",
] * 4


def test_scikit_learn_parameter_names_are_aliases_of_saberjax_settings():
    lda = LDA(n_components=2, max_iter=3, doc_topic_prior=0.5, topic_word_prior=0.05,
              random_state=4, backend="xla")
    theta = lda.fit_transform(CountVectorizer().fit_transform(TEXTS))
    config = lda.model_.config
    assert (config["num_topics"], config["iterations"], config["alpha"], config["beta"],
            config["seed"]) == (2, 3, 0.5, 0.05, 4)
    assert theta.shape == (len(TEXTS), 2) and lda.n_iter_ == 3 == len(lda.metrics_)
    assert lda.n_features_in_ == lda.components_.shape[1] == 12
    assert not hasattr(lda, "feature_names_in_")  # the matrix named no columns
    np.testing.assert_array_equal(lda.get_feature_names_out(), ["lda0", "lda1"])
    with pytest.raises(ValueError, match="num_topics=4 and its scikit-learn name "
                                         "n_components=2 disagree"):
        LDA(num_topics=4, n_components=2).fit(np.ones((2, 3), int))
    with pytest.raises(ValueError, match="seed='seven': must be an integer"):
        LDA(random_state="seven").fit(np.ones((2, 3), int))
    assert LDA(random_state=np.random.RandomState(0))._config().seed == 209652396


def test_clone_and_params_round_trip():
    lda = LDA(n_components=3, max_iter=5, backend="xla")
    copy = clone(lda)
    assert copy is not lda and copy.get_params() == lda.get_params()
    assert repr(lda) == "LDA(num_topics=3, iterations=5, backend='xla')"
    assert lda.set_params(n_components=4).n_components == 4 == lda.get_params()["num_topics"]
    with pytest.raises(NotFittedError):
        lda.get_feature_names_out()


def test_pipeline_after_count_vectorizer_and_raw_text_transform():
    # doc_topic_prior: saberjax's default 50 / K is 25 at K = 2, far too flat a prior for
    # six-word documents (a collapsed sampler, as the E-step is, then mixes the subjects)
    pipeline = Pipeline([("counts", CountVectorizer()),
                         ("lda", LDA(n_components=2, max_iter=20, random_state=0,
                                     doc_topic_prior=0.1, backend="xla"))])
    theta = pipeline.fit_transform(TEXTS)
    assert theta.shape == (len(TEXTS), 2)
    np.testing.assert_allclose(theta.sum(axis=1), 1, rtol=1e-5)
    space, water = theta[0].argmax(), theta[2].argmax()
    assert space != water  # the two subjects get different topics
    np.testing.assert_array_equal(pipeline.get_feature_names_out(), ["lda0", "lda1"])
    np.testing.assert_array_equal(
        pipeline.transform(["a comet and a planet orbit the sun"]).argmax(1), [space])
    # the estimator alone, fitted with the vectorizer's words, reads raw text itself
    counts = pipeline.named_steps["counts"]
    lda = LDA(n_components=2, max_iter=20, random_state=0, backend="xla").fit(
        counts.transform(TEXTS), vocabulary=counts.get_feature_names_out())
    np.testing.assert_array_equal(lda.feature_names_in_, counts.get_feature_names_out())
    with pytest.warns(UserWarning, match="1 of 3 tokens .* outside the model's vocabulary"):
        text_theta = lda.transform(["comet sun spaceship"])
    np.testing.assert_allclose(text_theta, lda.transform(counts.transform(["comet sun"])),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="X has 3 features, but LDA is expecting 12"):
        lda.transform(np.ones((1, 3), int))


def _integer_counts(X):
    """X with fractional entries rounded to the nearest integer, in X's own container."""
    if scipy.sparse.issparse(X):
        rounded = X.tocsr(copy=True)
        rounded.data = np.rint(rounded.data)
        return type(X)(rounded)
    array = np.asarray(X)
    return np.rint(array) if array.dtype.kind == "f" else X


class IntegerCountsLDA(LDA):
    """LDA given scikit-learn's check data rounded to integers: the checks draw fractional
    floats, and saberjax's sampler takes integer counts only (a fraction is an error)."""

    def fit(self, X, y=None, vocabulary=None):
        return super().fit(_integer_counts(X), y, vocabulary)

    def transform(self, X):
        return super().transform(_integer_counts(X))

    def score(self, X, y=None):
        return super().score(_integer_counts(X), y)


# Checks that do not apply, and why.
K_AT_LEAST_2 = "the check sets n_components=1; saberjax trains K >= 2 topics"
OWN_MESSAGE = ("the input is refused with a ValueError in saberjax's words (naming the entry, "
               "dtype or empty corpus), not the wording the check looks for")
SKIPPED_CHECKS = {
    "check_dont_overwrite_parameters": K_AT_LEAST_2,
    "check_methods_sample_order_invariance": K_AT_LEAST_2,
    "check_methods_subset_invariance": K_AT_LEAST_2,
    "check_fit2d_predict1d": K_AT_LEAST_2,
    "check_fit2d_1sample": K_AT_LEAST_2,
    "check_fit2d_1feature": K_AT_LEAST_2,
    "check_complex_data": OWN_MESSAGE,
    "check_dtype_object": "object arrays are refused: counts must be numeric",
    "check_estimators_empty_data_messages": OWN_MESSAGE,
    "check_estimators_nan_inf": OWN_MESSAGE,
    "check_positive_only_tag_during_fit": OWN_MESSAGE,
}


@parametrize_with_checks([IntegerCountsLDA(n_components=2, max_iter=2, backend="xla")],
                         expected_failed_checks=lambda estimator: SKIPPED_CHECKS)
def test_scikit_learn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # dropped empty rows of random check data
        check(estimator)


def test_a_pipeline_keeps_the_vectorizers_words_in_the_saved_model(tmp_path):
    pipeline = Pipeline([("counts", CountVectorizer()),
                         ("lda", LDA(n_components=2, max_iter=20, random_state=0,
                                     doc_topic_prior=0.1, backend="xla"))])
    pipeline.fit(TEXTS, lda__vocabulary=pipeline["counts"])
    words = list(pipeline["counts"].get_feature_names_out())
    np.testing.assert_array_equal(pipeline["lda"].feature_names_in_, words)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a model with its words saves without a warning
        pipeline["lda"].save(tmp_path / "model")
    assert (tmp_path / "model" / "vocab.txt").read_text().split() == words
    (tmp_path / "new.txt").write_text("a comet and a planet orbit the sun\nrain on the river\n")
    launch("infer.py", f"--model={tmp_path / 'model'}", f"--corpus={tmp_path / 'new.txt'}",
           f"--output={tmp_path / 'theta.npy'}")
    np.testing.assert_allclose(np.load(tmp_path / "theta.npy"), pipeline.transform(
        (tmp_path / "new.txt").read_text().splitlines()), rtol=1e-5)


def test_a_model_saved_without_words_says_so_where_text_needs_them(tmp_path):
    pipeline = Pipeline([("counts", CountVectorizer()),
                         ("lda", LDA(n_components=2, max_iter=2, backend="xla"))]).fit(TEXTS)
    with pytest.warns(UserWarning, match="saving a model without its words .* "
                                         r"lda__vocabulary=pipeline\['counts'\]"):
        pipeline["lda"].save(tmp_path / "model")
    (tmp_path / "new.txt").write_text("a comet and a planet orbit the sun\n")
    needing_words = {
        "infer.py": (f"--corpus={tmp_path / 'new.txt'}", f"--output={tmp_path / 'theta.npy'}"),
        "report.py": (f"--coherence_corpus={tmp_path / 'new.txt'}",),
        "evaluate.py": (f"--corpus={tmp_path / 'new.txt'}",)}
    for launcher, flags in needing_words.items():
        result = run_launcher(launcher, f"--model={tmp_path / 'model'}", *flags, timeout=300)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
        assert lines[-1] == (f"error: {tmp_path / 'new.txt'} cannot be matched to a model "
                             f"without words: it was fitted on a count matrix whose 12 columns "
                             f"were not named (its vocabulary is w0, w1, ...); fit it with "
                             f"vocabulary= the words or the fitted CountVectorizer"), launcher
    assert sorted(path.name for path in tmp_path.iterdir()) == ["model", "new.txt"]
