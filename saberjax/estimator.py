"""A scikit-learn style estimator over saberjax training and inference (sklearn not required).

    lda = LDA(num_topics=20, iterations=200).fit(counts)      # documents x words counts
    theta = lda.transform(new_counts)                          # [D, K], rows sum to 1
    lda.components_, lda.topic_word_, lda.perplexity(test_counts)

Constructor arguments are kept as plain attributes and returned by get_params, so
sklearn.base.clone, pipelines and grid searches work when scikit-learn is installed.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys

import numpy as np

from saberjax.corpus import Corpus, align_vocabulary, from_count_matrix, split_document_halves
from saberjax.evaluate import HeldOutScore, heldout_loglik
from saberjax.model import TopicModel
from saberjax.progress import Progress, chain
from saberjax.trainer import TrainConfig, train


# Parameters that define the model (restored by load), as opposed to how training runs.
_MODEL_SETTINGS = ("num_topics", "alpha", "beta", "iterations", "seed")


class NotFittedError(ValueError, AttributeError):
    """The estimator was used before fit (same bases as sklearn's NotFittedError)."""


class LDA:
    """Latent Dirichlet allocation trained by saberjax's ESCA sampler.

    num_topics, alpha (None: 50 / num_topics), beta, iterations, seed, backend, chunk_tokens,
    num_devices: as in trainer.TrainConfig.  callback(iteration, metrics, state) is called
    after every training iteration and stops training by returning True.  verbose=N prints a
    progress line (Mtoken/s, ETA, latest held-out score) to stderr every N iterations and after
    the last (0: none).

    Fitted attributes: model_ (the TopicModel), metrics_ (per-iteration training metrics),
    components_, topic_word_.
    """

    def __init__(self, num_topics: int = 10, alpha: float | None = None, beta: float = 0.01,
                 iterations: int = 100, seed: int = 0, backend: str = "auto",
                 chunk_tokens: int | None = None, num_devices: int = 0, callback=None,
                 verbose: int = 0):
        self.num_topics = num_topics
        self.alpha = alpha
        self.beta = beta
        self.iterations = iterations
        self.seed = seed
        self.backend = backend
        self.chunk_tokens = chunk_tokens
        self.num_devices = num_devices
        self.callback = callback
        self.verbose = verbose

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
        return f"LDA({', '.join(f'{k}={v!r}' for k, v in self.get_params().items())})"

    def fit(self, X, y=None, vocabulary=None) -> LDA:
        """Train on X: a saberjax Corpus, or a documents x words count matrix (dense or
        scipy.sparse, e.g. CountVectorizer output) with `vocabulary` naming its columns."""
        del y  # unsupervised; accepted for pipelines
        if isinstance(X, Corpus):
            if vocabulary is not None:
                raise ValueError("vocabulary applies to count matrices; a Corpus has its own")
            corpus = X
        else:
            corpus = from_count_matrix(X, vocabulary)
        config_fields = {field.name for field in dataclasses.fields(TrainConfig)}
        config = TrainConfig(**{name: value for name, value in self.get_params().items()
                                if name in config_fields})
        progress = (Progress(config.iterations, int(self.verbose),
                             lambda line: print(line, file=sys.stderr)) if self.verbose else None)
        result = train(corpus, config, callback=chain(progress, self.callback))
        self.model_ = dataclasses.replace(result.model, metrics=tuple(result.metrics))
        self.metrics_ = result.metrics
        return self

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
        fixed; X: a Corpus (words matched by string) or a count matrix over the fitted
        vocabulary.  Empty documents get the uniform prior mean."""
        return self._fitted_model().transform(X, num_devices=self.num_devices)

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
        `seed`), the other half scored; X as in transform."""
        model = self._fitted_model()
        documents = (align_vocabulary(X, model.vocab) if isinstance(X, Corpus)
                     else from_count_matrix(X, model.vocab))
        return heldout_loglik(model.topic_word, *split_document_halves(documents, self.seed),
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
        estimator.model_ = model
        return estimator
