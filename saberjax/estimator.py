"""A scikit-learn style estimator over saberjax training and inference (sklearn not required).

    lda = LDA(num_topics=20, iterations=200).fit(counts)      # documents x words counts
    theta = lda.transform(new_counts)                          # [D, K], rows sum to 1
    lda.components_, lda.topic_word_, lda.perplexity(test_counts)

It follows sklearn.decomposition.LatentDirichletAllocation's conventions: its parameter names
are accepted (n_components, max_iter, doc_topic_prior, topic_word_prior, random_state, each an
alias of saberjax's own), its fitted attributes are set (components_, n_iter_, n_features_in_,
feature_names_in_ when the columns have names, get_feature_names_out), and constructor
arguments are kept as plain attributes returned by get_params, so sklearn.base.clone, Pipeline
(after a CountVectorizer) and grid searches work when scikit-learn is installed.  Settings are
checked in fit, as scikit-learn does.
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np

from saberjax.config import TrainConfig
from saberjax.corpus import Corpus, from_count_matrix, split_document_halves
from saberjax.evaluate import HeldOutScore, heldout_loglik
from saberjax.inference import in_model_vocabulary, is_text_documents
from saberjax.model import TopicModel
from saberjax.trainer import train


# saberjax's defaults, defined once in TrainConfig.
_CONFIG = TrainConfig()
# What a fit trains with and load restores: the model's settings and the iterations, as
# opposed to where training runs.
_MODEL_SETTINGS = (*TrainConfig.model_settings(), "iterations")
# scikit-learn's names -> saberjax's, with saberjax's default (an alias left None defers to it)
_ALIASES = {alias: (name, getattr(_CONFIG, name)) for alias, name in dict(
    n_components="num_topics", max_iter="iterations", doc_topic_prior="alpha",
    topic_word_prior="beta", random_state="seed").items()}


class NotFittedError(ValueError, AttributeError):
    """The estimator was used before fit (same bases as sklearn's NotFittedError)."""


class LDA:
    """Latent Dirichlet allocation trained by saberjax's ESCA sampler.

    num_topics, alpha (None: 50 / num_topics; where alpha is learned, its starting value),
    optimize_alpha_every, burn_in, beta, iterations, seed, backend, chunk_tokens, num_devices:
    as in config.TrainConfig.  callback(iteration, metrics, state) is called
    after every training iteration and stops training by returning True.  verbose=N prints a
    progress line (Mtoken/s, ETA, latest held-out score) to stderr every N iterations and after
    the last (0: none).

    scikit-learn's names are aliases: n_components (num_topics), max_iter (iterations),
    doc_topic_prior (alpha), topic_word_prior (beta), random_state (seed: an int, or a
    numpy RandomState / Generator an int is drawn from).  An alias left None defers to
    saberjax's parameter; giving both with different values is an error in fit.  The
    defaults stay saberjax's (alpha = 50 / K and beta = 0.01, not sklearn's 1 / K; 100
    iterations).

    Fitted attributes: model_ (the TopicModel), metrics_ (per-iteration training metrics),
    n_iter_ (iterations run), n_features_in_ (vocabulary size), feature_names_in_ (the
    vocabulary, when the input named its columns: a Corpus, fit's vocabulary or a DataFrame),
    components_, topic_word_.
    """

    def __init__(self, num_topics: int = _CONFIG.num_topics, alpha: float | None = _CONFIG.alpha,
                 optimize_alpha_every: int = _CONFIG.optimize_alpha_every,
                 burn_in: int = _CONFIG.burn_in, beta: float = _CONFIG.beta, iterations: int = _CONFIG.iterations,
                 seed: int = _CONFIG.seed, backend: str = _CONFIG.backend,
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
        self.iterations = iterations
        self.seed = seed
        self.backend = backend
        self.chunk_tokens = chunk_tokens
        self.num_devices = num_devices
        self.callback = callback
        self.verbose = verbose
        self.n_components = n_components
        self.max_iter = max_iter
        self.doc_topic_prior = doc_topic_prior
        self.topic_word_prior = topic_word_prior
        self.random_state = random_state

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
        return [name for name in inspect.signature(cls.__init__).parameters if name != "self"]

    def get_params(self, deep: bool = True) -> dict:
        """The constructor arguments (deep is accepted for sklearn; there are no sub-estimators)."""
        return {name: getattr(self, name) for name in self._param_names()}

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

    def _settings(self) -> dict:
        """saberjax's settings with the scikit-learn aliases resolved (see the class doc)."""
        settings = {name: getattr(self, name) for name in _MODEL_SETTINGS}
        for alias, (name, default) in _ALIASES.items():
            value = getattr(self, alias)
            if value is None:
                continue
            if alias == "random_state":
                value = _seed_of(value)
            if settings[name] not in (default, value):
                raise ValueError(f"LDA: {name}={settings[name]!r} and its scikit-learn alias "
                                 f"{alias}={getattr(self, alias)!r} disagree; give one of them")
            settings[name] = value
        return settings

    @staticmethod
    def _corpus(X, vocabulary) -> tuple[Corpus, bool]:
        """The training documents of fit's X (see fit), and whether their words have names."""
        if isinstance(X, Corpus):
            if vocabulary is not None:
                raise ValueError("vocabulary applies to count matrices; a Corpus has its own")
            return X, True
        if is_text_documents(X):
            raise TypeError("LDA.fit takes counts (a Corpus or a documents x words matrix, "
                            "e.g. CountVectorizer's); put a CountVectorizer before it for text")
        columns = getattr(X, "columns", None)  # a pandas DataFrame names its columns
        if vocabulary is None and columns is not None and all(
                isinstance(column, str) for column in columns):
            vocabulary = list(columns)
        return from_count_matrix(X, vocabulary), vocabulary is not None

    def fit(self, X, y=None, vocabulary=None) -> LDA:
        """Train on X: a saberjax Corpus, or a documents x words count matrix (dense,
        scipy.sparse, e.g. CountVectorizer output, or a DataFrame of counts) with
        `vocabulary` (or the DataFrame's columns) naming its columns."""
        del y  # unsupervised; accepted for pipelines
        corpus, named_columns = self._corpus(X, vocabulary)
        config_fields = {field.name for field in dataclasses.fields(TrainConfig)}
        params = dict(self.get_params(), **self._settings())
        config = TrainConfig(**{name: value for name, value in params.items()
                                if name in config_fields})
        result = train(corpus, config, callback=self.callback, verbose=int(self.verbose))
        self._set_model(dataclasses.replace(result.model, metrics=tuple(result.metrics)),
                        named_columns)
        return self

    def _set_model(self, model: TopicModel, named_columns: bool) -> None:
        """The fitted attributes of a model (fit's, or a loaded one's)."""
        self.model_ = model
        self.metrics_ = list(model.metrics)
        self.n_iter_ = len(model.metrics)
        self.n_features_in_ = model.num_words
        if named_columns:
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
        fixed; X: a Corpus (words matched by string), a list of raw document strings
        (tokenised against the fitted vocabulary; words it lacks are counted in a warning) or
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
        """K x V topic-word pseudo-counts, training counts + beta, like sklearn's components_;
        each row normalised is topic_word_."""
        model = self._fitted_model()
        return (model.word_topic_counts.T + model.beta).astype(np.float32)

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
        return heldout_loglik(model.topic_word,
                              *split_document_halves(documents, model.config.get("seed", 0)),
                              model.alpha)

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
        settings and corpus fingerprint, metrics.jsonl the training metrics)."""
        return self._fitted_model().save(directory)

    @classmethod
    def load(cls, directory) -> LDA:
        """An estimator around a model saved by save or launch/train.py.  The model's settings
        (num_topics, alpha, beta, iterations, seed) come from its config; the execution
        settings (backend, chunk_tokens, num_devices) keep their defaults."""
        model = TopicModel.load(directory)
        params = {name: model.config[name] for name in _MODEL_SETTINGS if name in model.config}
        estimator = cls(**params)
        estimator._set_model(model, named_columns=True)
        return estimator


_DEFAULTS = {name: parameter.default
             for name, parameter in inspect.signature(LDA.__init__).parameters.items()}


def _seed_of(random_state) -> int:
    """An int seed from scikit-learn's random_state: an int, or a numpy RandomState or
    Generator (an int is drawn from it, as sklearn's check_random_state would use it)."""
    if isinstance(random_state, (int, np.integer)):
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(np.iinfo(np.int32).max))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(np.iinfo(np.int32).max))
    raise ValueError(f"random_state must be None, an int, a numpy RandomState or Generator, "
                     f"got {random_state!r}")
