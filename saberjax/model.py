"""The trained model as an artifact: a directory with model.npz, vocab.txt and config.json.

    model.npz    topic_word (K x V float32, rows sum to 1), word_topic_counts (V x K int32),
                 alpha (K float64: the document-topic prior of every topic; a scalar in
                 format version 1), beta, format_version; or, where dense B would be large
                 (stores_sparse), B as compressed sparse rows by word (format version 3:
                 word_topic_indptr, word_topic_topics, word_topic_values, num_topics) and no
                 topic_word
    vocab.txt    one word per line, line i = word id i
    config.json  every training setting, the corpus fingerprint, the format version
    metrics.jsonl  the training run's per-iteration records, one JSON object a line

Every file is written to a temporary name and renamed into place, so a reader never sees a
half-written model.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import json
import os
import pathlib
import zipfile

import jax
import jax.numpy as jnp
import numpy as np

from saberjax import sparse_word_topic as swt
from saberjax.config import DEFAULT_EM_ITERATIONS, SEED_WEIGHT
from saberjax.files import atomic_write, write_npz
from saberjax.platform import cpu_cores
from saberjax.relevance import relevant_ids
from saberjax.seeding import SeedPrior, seed_prior
from saberjax.sparse_word_topic import SparseWordTopic

FORMAT_VERSION = 3  # 2: alpha one value per topic; 3: B may be stored sparse
DENSE_FORMAT_VERSION = 2  # what a model.npz holding dense B is written as
SPARSE_FILE_BYTES = 1 << 26  # bytes of dense B from which model.npz may store B sparse
SPARSE_KEYS = ("word_topic_indptr", "word_topic_topics", "word_topic_values", "num_topics")
TOPIC_WORD_TILE = (256, 1024)  # words x topics topic_word_from_counts computes at a time


def top_ids(weights, n: int) -> np.ndarray:
    """Ids of the n largest entries of every row of `weights`, largest first, ties to the lower
    id (lax.top_k's order)."""
    return np.asarray(jax.lax.top_k(jnp.asarray(weights), n)[1])


def topic_word_from_counts(word_topic_counts: np.ndarray, beta: float,
                           seeds: SeedPrior | None = None) -> np.ndarray:
    """B-hat transposed: (B + beta) / (topic totals + V beta), K x V float32 (C order); with
    seed words (over word ids) (B + beta_kv) / (topic totals + sum_v beta_kv).

    Computed in float64 and rounded once (np.divide into the float32 result) over a thread per
    core (numpy releases the GIL), each taking ranges of words a TOPIC_WORD_TILE at a time: the
    tile's float64 sums stay in cache, in a buffer of the thread's, and the quotients land in
    the transpose as runs of the tile's words (whole count rows at a time leave the cache at
    large K). The topic totals are summed per range, in int64, so exactly.
    """
    counts = np.asarray(word_topic_counts)
    num_words, num_topics = counts.shape
    tile_words, tile_topics = TOPIC_WORD_TILE
    cores = cpu_cores()
    step = tile_words * max(1, -(-num_words // (tile_words * 4 * cores)))  # ~4 ranges a core
    ranges = [slice(first, min(first + step, num_words)) for first in range(0, num_words, step)]
    topic_word = np.empty((num_topics, num_words), np.float32)

    def fill(words: slice) -> None:
        buffer = np.empty((tile_words, min(tile_topics, num_topics)), np.float64)
        for first in range(words.start, words.stop, tile_words):
            last = min(first + tile_words, words.stop)
            for topic in range(0, num_topics, tile_topics):
                topics = slice(topic, topic + tile_topics)
                tile = counts[first:last, topics]
                sums = np.add(tile, beta, out=buffer[: tile.shape[0], : tile.shape[1]])
                np.divide(sums, denominators[topics], out=topic_word[topics, first:last].T)

    with concurrent.futures.ThreadPoolExecutor(cores) as pool:
        totals = sum(pool.map(lambda words: counts[words].sum(axis=0, dtype=np.int64), ranges),
                     np.zeros(num_topics, np.int64))
        denominators = totals + num_words * beta
        if seeds is not None:
            denominators = denominators + seeds.topic_weights(num_topics).astype(np.float64)
        list(pool.map(fill, ranges))
    if seeds is not None:  # the seeded cells' numerators
        rows = np.asarray(seeds.rows)
        topic_word[:, rows] = ((counts[rows].T + beta + seeds.row_weights(num_topics).T)
                               / denominators[:, None])
    return topic_word


def stores_sparse(num_words: int, num_topics: int, nonzeros: int) -> bool:
    """Whether model.npz holds B as compressed sparse rows: when dense B would take
    SPARSE_FILE_BYTES or more and the CSR fewer bytes than it (see DESIGN.md)."""
    dense = swt.dense_nbytes(num_words, num_topics)
    return dense >= SPARSE_FILE_BYTES and swt.sparse_nbytes(num_words, nonzeros) < dense


def model_file_bytes(num_words: int, num_topics: int, num_tokens: int) -> int:
    """At most the size of model.npz for a model trained on num_tokens tokens (each fills one
    cell of B at most): dense B and topic_word, 4 bytes a cell each, or B's CSR where
    stores_sparse (the rest of a model directory is small beside them)."""
    nonzeros = min(num_tokens, num_words * num_topics)
    if stores_sparse(num_words, num_topics, nonzeros):
        return swt.sparse_nbytes(num_words, nonzeros)
    return 2 * swt.dense_nbytes(num_words, num_topics)


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
        atomically).  arrays: a model.npz that write_arrays wrote for a model with these
        arrays, on the same file system: it is moved into the directory instead of written
        again."""
        directory = pathlib.Path(directory)
        if arrays is None:
            self.write_arrays(directory / "model.npz")
        else:
            directory.mkdir(parents=True, exist_ok=True)
            os.replace(arrays, directory / "model.npz")
        atomic_write(directory / "vocab.txt",
                     lambda f: f.write("".join(w + "\n" for w in self.vocab)), mode="w")
        config = dict(self.config, format_version=self._file_format_version(),
                      num_topics=self.num_topics,
                      num_words=self.num_words, beta=self.beta)
        atomic_write(directory / "config.json",
                     lambda f: json.dump(config, f, indent=2, sort_keys=True), mode="w")
        atomic_write(directory / "metrics.jsonl", lambda f: f.writelines(
            json.dumps(record) + "\n" for record in self.metrics), mode="w")
        return directory

    def write_arrays(self, path) -> None:
        """Write model.npz, the model's arrays (word_topic_counts, topic_word, alpha, beta; B
        by its nonzeros and no topic_word where stores_sparse says so), to `path` atomically:
        the file of that name in a saved model directory."""
        atomic_write(pathlib.Path(path), self._write_npz)

    def _stored_sparse(self) -> bool:
        """Whether model.npz holds B by its nonzeros (stores_sparse of this model's B)."""
        nonzeros = (self.word_topic_counts.nnz if self.is_sparse
                    else np.count_nonzero(self.word_topic_counts))
        return stores_sparse(self.num_words, self.num_topics, nonzeros)

    def _file_format_version(self) -> int:
        """The oldest format version that reads this model's model.npz: a dense one stays
        readable by a saberjax that knows no sparse form."""
        return FORMAT_VERSION if self._stored_sparse() else DENSE_FORMAT_VERSION

    def _write_npz(self, file) -> None:
        """model.npz into an open, empty binary file; topic_word is computed while the counts
        are written."""
        common = dict(alpha=lambda: self.alpha, beta=lambda: np.float64(self.beta),
                      format_version=lambda: np.int32(self._file_format_version()))
        if self._stored_sparse():
            b = (self.word_topic_counts if self.is_sparse
                 else swt.from_dense(self.word_topic_counts))
            write_npz(file.fileno(), dict(
                common, word_topic_indptr=lambda: b.indptr, word_topic_topics=lambda: b.topics,
                word_topic_values=lambda: b.counts, num_topics=lambda: np.int64(b.num_topics)))
            return
        counts = self.dense_word_topic_counts()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            topic_word = pool.submit(topic_word_from_counts, counts, self.beta,
                                     self.seed_prior)
            write_npz(file.fileno(), dict(
                word_topic_counts=lambda: np.asarray(counts, np.int32), **common,
                topic_word=topic_word.result))

    @classmethod
    def load(cls, directory) -> "TopicModel":
        """Read a model directory written by `save` (any format version up to this one);
        ModelFormatError, naming the file, when one is missing, cut short or not a model's."""
        directory = pathlib.Path(directory)
        path = directory / "model.npz"
        if not path.is_file():
            raise ModelFormatError(f"{path}: no model here (expected model.npz from training)")
        try:
            with np.load(path, allow_pickle=False) as arrays:
                version = int(arrays["format_version"]) if "format_version" in arrays else 1
                if version > FORMAT_VERSION:
                    raise ModelFormatError(f"{path}: format version {version} is newer than this "
                                           f"saberjax reads ({FORMAT_VERSION}); upgrade saberjax")
                counts = _read_word_topic_counts(arrays, version)
                alpha, beta = np.asarray(arrays["alpha"], np.float64), float(arrays["beta"])
        except ModelFormatError:
            raise
        except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile) as error:
            raise ModelFormatError(f"{path}: not a readable model ({type(error).__name__}: "
                                   f"{error}); the file is damaged or cut short") from error
        vocab = tuple(_read_model_file(directory / "vocab.txt").splitlines())
        config_path = directory / "config.json"
        config = {}
        if config_path.is_file():
            try:
                config = json.loads(_read_model_file(config_path))
            except json.JSONDecodeError as error:
                raise ModelFormatError(f"{config_path}: not valid JSON ({error})") from error
            if not isinstance(config, dict):
                raise ModelFormatError(f"{config_path}: not a JSON object of settings")
        try:
            metrics = tuple(read_metrics(directory / "metrics.jsonl"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ModelFormatError(f"{directory / 'metrics.jsonl'}: not JSON lines ({error})") \
                from error
        try:
            return cls(counts, alpha, beta, vocab, config, metrics)
        except ValueError as error:
            raise ModelFormatError(f"{directory}: {error}") from error


def _read_word_topic_counts(arrays, version: int) -> np.ndarray | SparseWordTopic:
    """B from an open model.npz: V x K int32, or the SparseWordTopic of a file that holds B
    by its nonzeros (format version 3 and on); ValueError naming what is wrong with one."""
    if "word_topic_counts" in arrays or version < 3 or SPARSE_KEYS[0] not in arrays:
        return np.asarray(arrays["word_topic_counts"], np.int32)
    indptr, topics, values, num_topics = (arrays[key] for key in SPARSE_KEYS)
    if indptr.dtype != np.int64 or topics.dtype != np.int32 or values.dtype != np.int32:
        raise ValueError(f"sparse B has arrays of {indptr.dtype}, {topics.dtype}, "
                         f"{values.dtype}; expected int64, int32, int32")
    return swt.validated(SparseWordTopic(indptr, topics, values, int(num_topics)))


def read_metrics(path) -> list[dict]:
    """The per-iteration records of a metrics.jsonl file ([] when there is none)."""
    path = pathlib.Path(path)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class ModelFormatError(ValueError):
    """A model directory that cannot be read; the message names the file at fault."""


def _read_model_file(path: pathlib.Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ModelFormatError(f"{path}: cannot read ({error})") from error
