"""The trained model: topics learned by LDA (TopicModel) and what they answer: top words,
B-hat's rows and columns, a word's topics, new documents' topic proportions.

A model is saved as a directory (model.npz, vocab.txt, config.json, metrics.jsonl) and loaded
back by saberjax.model_files, which holds the formats.  Loading a model loads no part of the
training engine.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from saberjax import model_files
from saberjax import sparse_word_topic as swt
from saberjax.config import DEFAULT_EM_ITERATIONS, SEED_WEIGHT
from saberjax.model_files import ModelFormatError
from saberjax.relevance import relevant_ids
from saberjax.seeding import SeedPrior, seed_prior
from saberjax.sparse_word_topic import SparseWordTopic
from saberjax.topic_word import topic_word_from_counts


def top_ids(weights, n: int) -> np.ndarray:
    """Ids of the n largest entries of every row of `weights`, largest first, ties to the lower
    id (lax.top_k's order)."""
    return np.asarray(jax.lax.top_k(jnp.asarray(weights), n)[1])


@dataclasses.dataclass(frozen=True, eq=False)
class TopicModel:
    """Topics learned by LDA: word-topic counts, priors and vocabulary, with what training
    knew: its settings and corpus provenance (config) and per-iteration records (metrics)."""

    word_topic_counts: np.ndarray | SparseWordTopic  # int32 [V, K], dense or by nonzeros
    alpha: np.ndarray  # float64 [K] the document-topic prior; a number stands for every topic
    beta: float
    vocab: tuple[str, ...]
    config: dict = dataclasses.field(default_factory=dict)
    metrics: tuple[dict, ...] = ()

    def __post_init__(self):
        if isinstance(self.word_topic_counts, SparseWordTopic):
            swt.validated(self.word_topic_counts)
        elif np.ndim(self.word_topic_counts) != 2:
            raise ValueError(f"word_topic_counts must be a V x K matrix or a SparseWordTopic, "
                             f"got shape {list(np.shape(self.word_topic_counts))}")
        if self.word_topic_counts.shape[0] != len(self.vocab):
            raise ValueError(f"model has {self.word_topic_counts.shape[0]} word rows but "
                             f"{len(self.vocab)} vocabulary words")
        alpha = np.asarray(self.alpha, np.float64)
        if alpha.ndim == 0:
            alpha = np.full(self.num_topics, float(alpha))
        if alpha.shape != (self.num_topics,) or not np.all(alpha > 0):
            raise ValueError(f"alpha must be {self.num_topics} positive values (one per topic) "
                             f"or one positive number, got shape {list(alpha.shape)}")
        object.__setattr__(self, "alpha", alpha)

    @property
    def num_topics(self) -> int:
        return self.word_topic_counts.shape[1]

    @property
    def num_words(self) -> int:
        return self.word_topic_counts.shape[0]

    @property
    def is_sparse(self) -> bool:
        """Whether B is held by its nonzeros (a SparseWordTopic) rather than as V x K."""
        return isinstance(self.word_topic_counts, SparseWordTopic)

    def word_topic_rows(self, words) -> np.ndarray:
        """int32 [len(words), K]: B's rows of some words, from either form."""
        if self.is_sparse:
            return swt.rows(self.word_topic_counts, words)
        return np.asarray(self.word_topic_counts[np.asarray(words, np.int64)], np.int32)

    def bhat_rows(self, words) -> np.ndarray:
        """float32 [len(words), K]: B-hat's rows of some words, topic_word[:, words].T, the
        same values: bhat_floor with bhat_entries(words) set over it."""
        out = np.tile(self.bhat_floor, (np.size(words), 1))
        row, topics, values = self.bhat_entries(words)
        out[row, topics] = values
        return out

    def bhat_entries(self, words) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row, topic, value float32) [n]: the cells of topic_word[:, words].T where B is
        nonzero, row i being words[i]'s, with their values (count + beta) / (n_k + V beta) in
        float64 rounded once, as topic_word has them. With bhat_floor they are the
        words' rows, in bytes of the nonzeros: what fold-in sends a device for a sparse
        model."""
        if self.is_sparse:
            row, topics, counts = swt.row_entries(self.word_topic_counts, words)
        else:
            rows = self.word_topic_rows(words)
            row, topics = np.nonzero(rows)
            counts = rows[row, topics]
        row, topics, numerators = self._seeded_cells(words, row, topics, counts + self.beta)
        values = np.divide(numerators, self._denominators[topics], dtype=np.float64)
        return row, topics, values.astype(np.float32)

    def _seeded_cells(self, words, row, topics, numerators):
        """(row, topic, numerator) of cells of words' rows (row i: words[i]'s) with the seed
        prior's cells added: their weight joins the numerator of a cell listed, and a seeded
        cell not listed is appended with beta + its weight."""
        if self.seed_prior is None:
            return row, topics, numerators
        words = np.asarray(words, np.int64).ravel()
        seeded_rows = np.asarray(self.seed_prior.rows, np.int64)
        at = np.minimum(np.searchsorted(seeded_rows, words), len(seeded_rows) - 1)
        which = np.flatnonzero(seeded_rows[at] == words)
        extra = self.seed_prior.row_weights(self.num_topics)[at[which]].astype(np.float64)
        seed_row, seed_topic = np.nonzero(extra)
        seed_weight, seed_row = extra[seed_row, seed_topic], which[seed_row]
        keys = np.asarray(row, np.int64) * self.num_topics + topics
        seed_keys = seed_row * self.num_topics + seed_topic
        listed = np.isin(seed_keys, keys)
        numerators = np.asarray(numerators, np.float64).copy()
        position = {key: index for index, key in enumerate(keys.tolist())}
        for key, weight in zip(seed_keys[listed].tolist(), seed_weight[listed]):
            numerators[position[key]] += weight
        return (np.concatenate([row, seed_row[~listed]]),
                np.concatenate([topics, seed_topic[~listed]]),
                np.concatenate([numerators, self.beta + seed_weight[~listed]]))

    def topic_word_rows(self, topics) -> np.ndarray:
        """float32 [len(topics), V]: topic_word[topics], the same values, V per topic rather
        than K x V: each topic's floor with its nonzero cells set over it."""
        distinct, inverse = np.unique(np.asarray(topics, np.int64).ravel(), return_inverse=True)
        if self.is_sparse:
            b = self.word_topic_counts
            asked = np.isin(b.topics, distinct)
            words = np.repeat(np.arange(self.num_words), np.diff(b.indptr))[asked]
            row = np.searchsorted(distinct, b.topics[asked])
            counts = b.counts[asked]
        else:
            columns = self.word_topic_counts[:, distinct]
            words, row = np.nonzero(columns)
            counts = columns[words, row]
        out = np.repeat(self.bhat_floor[distinct][:, None], self.num_words, axis=1)
        out[row, words] = np.divide(counts + self.beta, self._denominators[distinct[row]],
                                    dtype=np.float64)
        if self.seed_prior is not None:  # the seeded cells of these topics
            rows = np.asarray(self.seed_prior.rows, np.int64)
            weights = self.seed_prior.row_weights(self.num_topics)[:, distinct]
            values = np.divide(self.word_topic_rows(rows)[:, distinct] + self.beta + weights,
                               self._denominators[distinct], dtype=np.float64)
            seeded, topic = np.nonzero(weights)
            out[topic, rows[seeded]] = values[seeded, topic]
        return out[inverse]

    @functools.cached_property
    def bhat_floor(self) -> np.ndarray:
        """float32 [K]: topic_word's value where B is 0, beta / (n_k + V beta), rounded as
        topic_word rounds it."""
        return np.divide(self.beta, self._denominators, dtype=np.float64).astype(np.float32)

    @functools.cached_property
    def topic_totals(self) -> np.ndarray:
        """int64 [K]: the training tokens of every topic, n_k (B's column sums)."""
        if self.is_sparse:
            return swt.topic_totals(self.word_topic_counts)
        return self.word_topic_counts.sum(axis=0, dtype=np.int64)

    @functools.cached_property
    def _denominators(self) -> np.ndarray:
        """float64 [K]: n_k + V beta (plus each topic's seed prior), topic_word's
        denominators."""
        denominators = self.topic_totals + self.num_words * self.beta
        if self.seed_prior is not None:
            denominators = denominators + self.seed_prior.topic_weights(self.num_topics)
        return denominators

    @property
    def has_words(self) -> bool:
        """Whether vocab holds the words of the training documents: not for a model fitted on
        a count matrix whose columns were not named (config's words_named is false), whose
        vocab holds the placeholders w0, w1, ... (corpus.from_count_matrix)."""
        return bool(self.config.get("words_named", True))

    @property
    def topic_word(self) -> np.ndarray:
        """K x V topic-word distributions, each row summing to 1. Formed whole, from either
        form of B: what works on a sparse model reads topic_word_rows (by topic) or bhat_rows
        (by word) instead."""
        return topic_word_from_counts(self.dense_word_topic_counts(), self.beta,
                                      self.seed_prior)

    @functools.cached_property
    def seed_prior(self) -> SeedPrior | None:
        """The seed words' prior the model was trained with (over word ids; config seed_words
        and seed_weight), or None."""
        if not self.config.get("seed_words"):
            return None
        return seed_prior(self.config["seed_words"], self.config.get("seed_weight", SEED_WEIGHT),
                          self.vocab, self.num_topics, warn=False)

    def dense_word_topic_counts(self) -> np.ndarray:
        """int32 [V, K]: B as a dense matrix (formed from the nonzeros of a sparse model)."""
        return swt.to_dense(self.word_topic_counts) if self.is_sparse else self.word_topic_counts

    def topic_shares(self) -> np.ndarray:
        """Fraction of training tokens assigned to each topic."""
        totals = self.topic_totals.astype(np.float64)
        return totals / max(totals.sum(), 1.0)

    def top_word_ids(self, n: int) -> np.ndarray:
        """int [K, min(n, V)]: every topic's words of most training tokens (so of highest
        probability), most first, ties to the lower word id."""
        return self._top_words_and_counts(n)[0]

    def _top_words_and_counts(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(top_word_ids(n), their counts [K, n]) from either form of B: top_k over dense B's
        columns, a sort of the nonzeros by topic for sparse B (sparse_word_topic.top_words);
        both order the same way."""
        n = min(n, self.num_words)
        if self.is_sparse:
            return swt.top_words(self.word_topic_counts, n)
        order = top_ids(self.word_topic_counts.T, n)
        return order, self.word_topic_counts[order, np.arange(self.num_topics)[:, None]]

    def top_words(self, n: int = 10, with_weights: bool = False,
                  relevance: float | None = None
                  ) -> list[list[str]] | list[list[tuple[str, float]]]:
        """The n most probable words of every topic, largest first, ties to the lower word id.

        with_weights: each word as a (word, probability) pair instead, the probability
        p(word | topic) = topic_word[k, v] (the same float32 value, as a Python float), like
        gensim's show_topic and tomotopy's get_topic_words. Only the n entries are computed,
        not the K x V topic_word.  relevance: lambda in [0, 1], the n most relevant words
        instead (saberjax.relevance; 1 ranks as without it, lower values favour words
        particular to the topic, 0.6 as pyLDAvis suggests).
        """
        if relevance is None and self.seed_prior is None:
            order, counts = self._top_words_and_counts(n)
        else:  # ranked by topic_word (the seed prior included) or by relevance
            dense = self.dense_word_topic_counts()
            order = (relevant_ids(dense, self.beta, self.seed_prior, n, relevance)
                     if relevance is not None else
                     top_ids(self._probability_order(dense), min(n, self.num_words)))
            counts = dense[order, np.arange(self.num_topics)[:, None]]
        if not with_weights:
            return [[self.vocab[v] for v in row] for row in order.tolist()]
        numerators = counts + self.beta
        if self.seed_prior is not None:
            numerators = numerators + self.seed_prior.cell_weights(
                order, np.arange(self.num_topics)[:, None], self.num_topics)
        weights = np.divide(numerators, self._denominators[:, None],
                            dtype=np.float64).astype(np.float32)
        return [[(self.vocab[v], float(weight)) for v, weight in zip(row, row_weights)]
                for row, row_weights in zip(order.tolist(), weights.tolist())]

    def _probability_order(self, dense: np.ndarray) -> np.ndarray:
        """K x V weights in the order of topic_word's rows for dense counts B: the counts plus
        the seed words' prior."""
        weights = dense.T.astype(np.float32)
        weights[:, list(self.seed_prior.rows)] += self.seed_prior.row_weights(self.num_topics).T
        return weights

    def word_topics(self, word: str, minimum_probability: float = 0.0) -> list[tuple[int, float]]:
        """The topics of one vocabulary word as (topic, weight) pairs, largest weight first (ties
        to the lower topic id), only those with weight >= minimum_probability; KeyError naming
        the word when the vocabulary lacks it. Like gensim's get_term_topics.

        weight = p(topic | word) = (n_wk + beta) / (n_w + K beta), with n_wk the word's training
        tokens in topic k and n_w = sum_k n_wk: the smoothed share of the word's tokens that
        topic k holds, so the weights sum to 1 over the topics (with seed words, beta_kw in
        place of beta). It is Bayes' rule on topic_word
        with each topic's prior proportional to its smoothed size, n_k + V beta, the
        denominator of topic_word. gensim's get_term_topics returns p(word | topic) instead (its
        exp(E[log beta_kw]), in topic order), which does not sum to 1 over topics and ranks a
        small topic with few tokens of the word above a large topic holding most of them; that
        value is topic_word[:, v] here.
        """
        index = self._word_index.get(word)
        if index is None:
            raise KeyError(f"{word!r} is not in the model's vocabulary ({self.num_words:,} words)")
        counts = self.word_topic_rows([index])[0].astype(np.float64)
        if self.seed_prior is not None:  # beta_kv - beta of the word's cells
            counts += self.seed_prior.cell_weights(index, np.arange(self.num_topics),
                                                   self.num_topics)
        weights = (counts + self.beta) / (counts.sum() + self.num_topics * self.beta)
        order = np.argsort(-weights, kind="stable")
        return [(int(k), float(weights[k])) for k in order if weights[k] >= minimum_probability]

    @functools.cached_property
    def _word_index(self) -> dict[str, int]:
        """Word string -> word id (the first, should the vocabulary repeat a word)."""
        index = {}
        for v, word in enumerate(self.vocab):
            index.setdefault(word, v)
        return index

    def transform(self, documents, iterations: int = DEFAULT_EM_ITERATIONS,
                  batch_slots: int | None = None, num_devices: int = 0) -> np.ndarray:
        """Topic proportions [D, K] of new documents, the topics fixed: a Corpus, a list of
        raw document strings (tokenised against this model's vocabulary; words it lacks are
        counted in a warning) or a count matrix whose columns are this model's vocabulary;
        see inference.infer_topics.  Inference, which plans the device's memory, is imported
        here: loading a model loads no part of the engine."""
        from saberjax import inference  # noqa: PLC0415

        return inference.infer_topics(self, documents, iterations, batch_slots, num_devices)

    def to_pyldavis(self, documents, iterations: int = DEFAULT_EM_ITERATIONS) -> dict:
        """What pyLDAvis.prepare takes, as keyword arguments, for these documents (as
        transform takes them): pyLDAvis.prepare(**model.to_pyldavis(corpus)); see
        saberjax.ldavis.  pyLDAvis itself is not needed."""
        from saberjax import ldavis  # noqa: PLC0415 (fold-in: the engine, as transform)

        return ldavis.prepare_arguments(self, documents, iterations)

    def save(self, directory, arrays=None) -> pathlib.Path:
        """Write model.npz, vocab.txt, config.json and metrics.jsonl into `directory` (each
        atomically; model_files.write_model).  arrays: a model.npz that write_arrays wrote
        for a model with these arrays, on the same file system: it is moved into the
        directory instead of written again."""
        return model_files.write_model(self, directory, arrays)

    def write_arrays(self, path) -> None:
        """Write model.npz, the model's arrays (word_topic_counts, topic_word, alpha, beta; B
        by its nonzeros and no topic_word where model_files.stores_sparse says so), to `path`
        atomically: the file of that name in a saved model directory."""
        model_files.write_arrays(self, path)

    @classmethod
    def load(cls, directory) -> "TopicModel":
        """Read a model directory written by `save` (any format version up to this one);
        ModelFormatError, naming the file, when one is missing, cut short or not a model's."""
        fields = model_files.read_model(directory)
        try:
            return cls(*fields)
        except ValueError as error:
            raise ModelFormatError(f"{pathlib.Path(directory)}: {error}") from error

