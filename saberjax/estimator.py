"""A scikit-learn style estimator over saberjax training and inference (sklearn not required).

    lda = LDA(num_topics=20, iterations=200).fit(counts)      # documents x words counts
    theta = lda.transform(new_counts)                          # [D, K], rows sum to 1
    lda.components_, lda.topic_word_, lda.perplexity(test_counts)

It follows sklearn.decomposition.LatentDirichletAllocation's conventions: its parameter names
are accepted (n_components, max_iter, doc_topic_prior, topic_word_prior, random_state, each
another name of one of saberjax's settings, read and written through to it), its fitted
attributes are set (components_, n_iter_, n_features_in_, feature_names_in_ when the columns
have names, get_feature_names_out), and constructor arguments are kept as plain attributes
returned by get_params (one name per setting: saberjax's), so sklearn.base.clone, Pipeline
(after a CountVectorizer) and grid searches work when scikit-learn is installed.  Settings are
checked in fit, as scikit-learn does, against trainer.TrainConfig's ranges.

In a Pipeline, the CountVectorizer's words reach the model through fit's vocabulary:

    pipeline = Pipeline([("counts", CountVectorizer()), ("lda", LDA(n_components=20))])
    pipeline.fit(texts, lda__vocabulary=pipeline["counts"])   # fitted before LDA.fit runs
    pipeline["lda"].save("runs/texts")                          # vocab.txt: the words
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import numbers
import warnings
from collections.abc import Mapping

import numpy as np

from saberjax.config import TrainConfig
from saberjax.corpus import (Corpus, corpus_from_documents, from_count_matrix,
                             split_document_halves)
from saberjax.evaluate import HeldOutScore, model_heldout_loglik
from saberjax.inference import in_model_vocabulary, is_text_documents
from saberjax.model import TopicModel
from saberjax.trainer import train


# saberjax's defaults, defined once in TrainConfig.
_CONFIG = TrainConfig()
# What a fit trains with and load restores: the model's settings and the iterations, as
# opposed to where training runs.
_MODEL_SETTINGS = (*TrainConfig.model_settings(), "iterations")
# scikit-learn's names -> saberjax's
SKLEARN_NAMES = dict(n_components="num_topics", max_iter="iterations", doc_topic_prior="alpha",
               topic_word_prior="beta", random_state="seed")


def _other_name(setting: str) -> property:
    """scikit-learn's name of a setting: a property reading and writing it (None leaves it as
    it is, so that an argument left out changes nothing)."""
    def write(self, value):
        if value is not None:
            setattr(self, setting, value)
    return property(lambda self: getattr(self, setting), write,
                    doc=f"scikit-learn's name of {setting}")


class NotFittedError(ValueError, AttributeError):
    """The estimator was used before fit (same bases as sklearn's NotFittedError)."""


class LDA:
    """Latent Dirichlet allocation trained by saberjax's ESCA sampler.

    num_topics, alpha (None: 50 / num_topics; where alpha is learned, its starting value),
    optimize_alpha_every, burn_in, beta, seed_weight, init_window_topics, iterations, seed,
    backend, model_format, chunk_tokens, num_devices: as in config.TrainConfig.  seed_words (guided topics,
    saberjax.seeding): a mapping topic -> its seed words, e.g. {0: ["space", "nasa"], 3:
    ["game", "team"]}, or JSON text or the path of a seed-word file, as --seed_words takes.
    callback(iteration, metrics, state) is called after every training iteration and stops
    training by returning True.  verbose=N prints a progress line (Mtoken/s, ETA, latest
    held-out score) to stderr every N iterations and after the last (0: none).

    scikit-learn's names are other names of saberjax's settings: n_components (num_topics),
    max_iter (iterations), doc_topic_prior (alpha), topic_word_prior (beta), random_state
    (seed: an int, or a numpy RandomState / Generator an int is drawn from in fit).  Each
    reads and writes its setting (None leaves it as it is), and get_params shows the setting
    once, by saberjax's name; giving both names different values is an error in fit.  The defaults
    stay saberjax's (alpha = 50 / K and beta = 0.01, not sklearn's 1 / K; 100 iterations).

    Fitted attributes: model_ (the TopicModel), metrics_ (per-iteration training metrics),
    n_iter_ (iterations run), n_features_in_ (vocabulary size), feature_names_in_ (the
    vocabulary, when the input named its columns: a Corpus, fit's vocabulary or a DataFrame),
    components_, topic_word_.  A model fitted without its words (a bare count matrix) is
    saved with placeholders (w0, w1, ...) and cannot match text or other corpora by word.
    """

    def __init__(self, num_topics: int = _CONFIG.num_topics, alpha: float | None = _CONFIG.alpha,
                 optimize_alpha_every: int = _CONFIG.optimize_alpha_every,
                 burn_in: int = _CONFIG.burn_in, beta: float = _CONFIG.beta,
                 seed_words=_CONFIG.seed_words, seed_weight: float = _CONFIG.seed_weight,
                 init_window_topics: int | None = _CONFIG.init_window_topics,
                 iterations: int = _CONFIG.iterations,
                 seed: int = _CONFIG.seed, backend: str = _CONFIG.backend,
                 model_format: str = _CONFIG.model_format,
                 chunk_tokens: int | None = _CONFIG.chunk_tokens,
                 num_devices: int = _CONFIG.num_devices, callback=None,
                 verbose: int = 0, n_components: int | None = None, max_iter: int | None = None,
                 doc_topic_prior: float | None = None, topic_word_prior: float | None = None,
                 random_state=None):
        self.num_topics = num_topics
        self.alpha = alpha
        self.optimize_alpha_every = optimize_alpha_every
        self.burn_in = burn_in
        self.beta = beta
        self.seed_words = seed_words
        self.seed_weight = seed_weight
        self.init_window_topics = init_window_topics
        self.iterations = iterations
        self.seed = seed
        self.backend = backend
        self.model_format = model_format
        self.chunk_tokens = chunk_tokens
        self.num_devices = num_devices
        self.callback = callback
        self.verbose = verbose
        # a setting given by both names, checked in fit (scikit-learn's estimators check
        # nothing when they are made): (name, its value, scikit-learn's name, its value)
        self._given_twice = []
        for alias, value in dict(n_components=n_components, max_iter=max_iter,
                                 doc_topic_prior=doc_topic_prior,
                                 topic_word_prior=topic_word_prior,
                                 random_state=random_state).items():
            name = SKLEARN_NAMES[alias]
            if value is not None and getattr(self, name) is not getattr(_CONFIG, name):
                self._given_twice.append((name, getattr(self, name), alias, value))
            setattr(self, alias, value)

    n_components = _other_name("num_topics")
    max_iter = _other_name("iterations")
    doc_topic_prior = _other_name("alpha")
    topic_word_prior = _other_name("beta")
    random_state = _other_name("seed")

    def __sklearn_tags__(self):
        """scikit-learn's description of the estimator (asked only by scikit-learn >= 1.6, so
        it is importable then): a transformer of non-negative count matrices, dense or
        sparse, needing no target."""
        from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags

        return Tags(estimator_type=None, target_tags=TargetTags(required=False),
                    transformer_tags=TransformerTags(preserves_dtype=[]),  # theta is float32
                    input_tags=InputTags(positive_only=True, sparse=True))

    @classmethod
    def _param_names(cls) -> list[str]:
        """Every constructor argument, scikit-learn's names of settings included."""
        return [name for name in inspect.signature(cls.__init__).parameters if name != "self"]

    def get_params(self, deep: bool = True) -> dict:
        """The constructor arguments, each setting once by saberjax's name (scikit-learn's
        names read the same values); deep is accepted for sklearn (no sub-estimators)."""
        return {name: getattr(self, name) for name in self._param_names()
                if name not in SKLEARN_NAMES}

    def set_params(self, **params) -> LDA:
        """Set constructor arguments by name; returns self."""
        unknown = set(params) - set(self._param_names())
        if unknown:
            raise ValueError(f"unknown parameters {sorted(unknown)} for LDA; valid: "
                             f"{self._param_names()}")
        for name, value in params.items():
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        changed = {name: value for name, value in self.get_params().items()
                   if value is not _DEFAULTS[name] and value != _DEFAULTS[name]}
        return f"LDA({', '.join(f'{k}={v!r}' for k, v in changed.items())})"

    def _config(self) -> TrainConfig:
        """The training settings (ValueError naming the first out of range, as TrainConfig
        does), after the estimator's own are checked."""
        for name, given, alias, value in self._given_twice:
            if getattr(self, name) is value and given != value:  # neither set again since
                raise ValueError(f"LDA: {name}={given!r} and its scikit-learn name "
                                 f"{alias}={value!r} disagree; give one of them")
        if self.callback is not None and not callable(self.callback):
            raise ValueError(f"callback={self.callback!r}: must be callable (or None)")
        if isinstance(self.verbose, bool) or not isinstance(self.verbose, numbers.Integral) \
                or self.verbose < 0:
            raise ValueError(f"verbose={self.verbose!r}: must be an integer, at least 0")
        settings = dict(self.get_params(), seed=_seed_of(self.seed),
                        seed_words=_seed_words_text(self.seed_words))
        return TrainConfig(**{field.name: settings[field.name]
                              for field in dataclasses.fields(TrainConfig)
                              if field.name in settings})

    @staticmethod
    def _corpus(X, vocabulary) -> tuple[Corpus, bool]:
        """The training documents of fit's X (see fit), and whether their words have names."""
        if isinstance(X, Corpus):
            if vocabulary is not None:
                raise ValueError("vocabulary applies to count matrices; a Corpus has its own")
            return X, True
        if is_text_documents(X):  # tokenised by saberjax.text's rules, words named
            if vocabulary is not None:
                raise ValueError("vocabulary applies to count matrices; raw documents are "
                                 "tokenised into a vocabulary of their own")
            return corpus_from_documents(X, source="documents"), True
        if hasattr(vocabulary, "get_feature_names_out"):  # a fitted CountVectorizer
            vocabulary = list(vocabulary.get_feature_names_out())
        columns = getattr(X, "columns", None)  # a pandas DataFrame names its columns
        if vocabulary is None and columns is not None and all(
                isinstance(column, str) for column in columns):
            vocabulary = list(columns)
        return from_count_matrix(X, vocabulary), vocabulary is not None

    def fit(self, X, y=None, vocabulary=None) -> LDA:
        """Train on X: a saberjax Corpus, raw document strings (a list, or an Arrow, pandas
        or datasets column: tokenised and given a vocabulary by saberjax.text's default
        rules, as corpus_from_documents does), or a documents x words count matrix (dense,
        scipy.sparse, e.g. CountVectorizer output, or a DataFrame of counts) whose columns
        are named by `vocabulary` (the words, or the fitted CountVectorizer that made X) or
        the DataFrame's columns."""
        del y  # unsupervised; accepted for pipelines
        config = self._config()
        corpus, named_columns = self._corpus(X, vocabulary)
        result = train(corpus, config, callback=self.callback, verbose=int(self.verbose))
        self._set_model(dataclasses.replace(
            result.model, metrics=tuple(result.metrics),
            config=dict(result.model.config, words_named=named_columns)))
        return self

    def _set_model(self, model: TopicModel) -> None:
        """The fitted attributes of a model (fit's, or a loaded one's)."""
        self.model_ = model
        self.metrics_ = list(model.metrics)
        self.n_iter_ = len(model.metrics)
        self.n_features_in_ = model.num_words
        if model.has_words:
            self.feature_names_in_ = np.array(model.vocab, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

    def fit_transform(self, X, y=None, vocabulary=None) -> np.ndarray:
        """fit, then the topic proportions of the training documents."""
        return self.fit(X, y, vocabulary).transform(X)

    def _fitted_model(self) -> TopicModel:
        try:
            return self.model_
        except AttributeError:
            raise NotFittedError("this LDA is not fitted yet; call fit first") from None

    def transform(self, X) -> np.ndarray:
        """Topic proportions [D, K] (float32, rows sum to 1) by EM fold-in with the topics
        fixed; X: a Corpus (words matched by string), raw document strings (a list, or an
        Arrow, pandas or datasets column; tokenised against the fitted vocabulary, words it
        lacks are counted in a warning) or
        a count matrix over the fitted vocabulary.  Empty documents get the uniform prior
        mean."""
        return self._fitted_model().transform(self._checked_columns(X),
                                              num_devices=self.num_devices)

    def _checked_columns(self, X):
        """X, once a count matrix's columns are checked to be as many as the fitted words
        (in scikit-learn's words, which its checks look for)."""
        model = self._fitted_model()
        if not (isinstance(X, Corpus) or is_text_documents(X)):
            columns = np.shape(X)[1:]
            if columns != (model.num_words,):
                raise ValueError(f"X has {columns[0] if columns else 0} features, but "
                                 f"{type(self).__name__} is expecting {model.num_words} "
                                 f"features as input (the words it was fitted on)")
        return X

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """Names of transform's output columns, one per topic: "lda0", "lda1", ... (as
        scikit-learn names a decomposition's components)."""
        del input_features  # the output does not depend on the input's names
        return np.array([f"lda{k}" for k in range(self._fitted_model().num_topics)],
                        dtype=object)

    @property
    def components_(self) -> np.ndarray:
        """K x V topic-word pseudo-counts, training counts + beta (beta_kv with seed words),
        like sklearn's components_; each row normalised is topic_word_."""
        model = self._fitted_model()
        components = (model.dense_word_topic_counts().T + model.beta).astype(np.float32)
        if model.seed_prior is not None:
            rows = np.asarray(model.seed_prior.rows)
            components[:, rows] += model.seed_prior.row_weights(model.num_topics).T
        return components

    @property
    def topic_word_(self) -> np.ndarray:
        """K x V topic-word distributions, rows sum to 1."""
        return self._fitted_model().topic_word

    def _heldout_score(self, X) -> HeldOutScore:
        """Document completion: theta fitted to one half of each document's tokens (seeded by
        the training seed), the other half scored; X as in transform."""
        model = self._fitted_model()
        documents = in_model_vocabulary(model, self._checked_columns(X))
        if not isinstance(documents, Corpus):
            documents = from_count_matrix(documents, model.vocab)
        return model_heldout_loglik(
            model, *split_document_halves(documents, model.config.get("seed", 0)))

    def score(self, X, y=None) -> float:
        """Total held-out log-likelihood of X's documents (higher is better), by document
        completion rather than sklearn's variational bound."""
        del y
        result = self._heldout_score(X)
        return result.loglik_per_token * result.tokens

    def perplexity(self, X) -> float:
        """exp(-held-out log-likelihood per token) of X by document completion."""
        return self._heldout_score(X).perplexity

    def save(self, directory):
        """Write the fitted model directory (TopicModel.save: its config holds the training
        settings and corpus fingerprint, metrics.jsonl the training metrics); a model fitted
        without its words is saved with a warning that text cannot be matched to it."""
        model = self._fitted_model()
        if not model.has_words:
            warnings.warn(f"{directory}: saving a model without its words (vocab.txt holds w0, "
                          f"w1, ...), so text cannot be matched to it; fit with vocabulary= "
                          f"the words or the fitted CountVectorizer (in a Pipeline: "
                          f"fit(texts, lda__vocabulary=pipeline['counts']))", stacklevel=2)
        return model.save(directory)

    @classmethod
    def load(cls, directory) -> LDA:
        """An estimator around a model saved by save or launch/train.py.  The model's settings
        (num_topics, alpha, beta, iterations, seed) come from its config; the execution
        settings (backend, chunk_tokens, num_devices) keep their defaults."""
        model = TopicModel.load(directory)
        params = {name: model.config[name] for name in _MODEL_SETTINGS if name in model.config}
        estimator = cls(**params)
        estimator._set_model(model)
        return estimator


_DEFAULTS = {name: parameter.default
             for name, parameter in inspect.signature(LDA.__init__).parameters.items()}


def _seed_words_text(seed_words):
    """seed_words as TrainConfig holds it: a mapping as JSON text, anything else as it is."""
    if isinstance(seed_words, Mapping):
        return json.dumps({str(topic): list(words) for topic, words in seed_words.items()})
    return seed_words


def _seed_of(seed):
    """The seed as an int where it is a numpy RandomState or Generator (scikit-learn's
    random_state: an int is drawn from it, as sklearn's check_random_state would use it);
    any other value as it is, for TrainConfig to check."""
    if isinstance(seed, np.random.RandomState):
        return int(seed.randint(np.iinfo(np.int32).max))
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(np.iinfo(np.int32).max))
    return seed
