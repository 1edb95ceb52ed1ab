"""The trained model as an artifact: a directory with model.npz, vocab.txt and config.json.

    model.npz    topic_word (K x V float32, rows sum to 1), word_topic_counts (V x K int32),
                 alpha (K float64: the document-topic prior of every topic; a scalar in
                 format version 1), beta, format_version
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

from saberjax.config import DEFAULT_EM_ITERATIONS, SEED_WEIGHT
from saberjax.files import atomic_write, write_npz
from saberjax.platform import cpu_cores
from saberjax.relevance import relevant_ids
from saberjax.seeding import SeedPrior, seed_prior

FORMAT_VERSION = 2  # 2: alpha one value per topic
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


def topic_word_entries(word_topic_counts: np.ndarray, beta: float, word_ids: np.ndarray,
                       seeds: SeedPrior | None = None) -> np.ndarray:
    """float32 [K, N]: topic_word_from_counts(word_topic_counts, beta, seeds)[k, word_ids[k, n]],
    the same values (the same float64 operations rounded once) without the K x V matrix."""
    counts = np.asarray(word_topic_counts)
    denominators = counts.sum(axis=0, dtype=np.int64) + counts.shape[0] * beta
    topics = np.arange(counts.shape[1])[:, None]
    numerators = counts[word_ids, topics] + beta
    if seeds is not None:
        denominators = denominators + seeds.topic_weights(counts.shape[1]).astype(np.float64)
        numerators = numerators + seeds.cell_weights(word_ids, topics, counts.shape[1])
    return (numerators / denominators[:, None]).astype(np.float32)


@dataclasses.dataclass(frozen=True, eq=False)
class TopicModel:
    """Topics learned by LDA: word-topic counts, priors and vocabulary, with what training
    knew: its settings and corpus provenance (config) and per-iteration records (metrics)."""

    word_topic_counts: np.ndarray  # int32 [V, K]
    alpha: np.ndarray  # float64 [K] the document-topic prior; a number stands for every topic
    beta: float
    vocab: tuple[str, ...]
    config: dict = dataclasses.field(default_factory=dict)
    metrics: tuple[dict, ...] = ()

    def __post_init__(self):
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
    def has_words(self) -> bool:
        """Whether vocab holds the words of the training documents: not for a model fitted on
        a count matrix whose columns were not named (config's words_named is false), whose
        vocab holds the placeholders w0, w1, ... (corpus.from_count_matrix)."""
        return bool(self.config.get("words_named", True))

    @property
    def topic_word(self) -> np.ndarray:
        """K x V topic-word distributions, each row summing to 1."""
        return topic_word_from_counts(self.word_topic_counts, self.beta, self.seed_prior)

    @functools.cached_property
    def seed_prior(self) -> SeedPrior | None:
        """The seed words' prior the model was trained with (over word ids; config seed_words
        and seed_weight), or None."""
        if not self.config.get("seed_words"):
            return None
        return seed_prior(self.config["seed_words"], self.config.get("seed_weight", SEED_WEIGHT),
                          self.vocab, self.num_topics, warn=False)

    def topic_shares(self) -> np.ndarray:
        """Fraction of training tokens assigned to each topic."""
        totals = self.word_topic_counts.sum(axis=0).astype(np.float64)
        return totals / max(totals.sum(), 1.0)

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
        if relevance is not None:
            order = relevant_ids(self.word_topic_counts, self.beta, self.seed_prior, n,
                                 relevance)
        else:
            order = top_ids(self._probability_order(), min(n, self.num_words))
        if not with_weights:
            return [[self.vocab[v] for v in row] for row in order]
        weights = topic_word_entries(self.word_topic_counts, self.beta, order, self.seed_prior)
        return [[(self.vocab[v], float(weight)) for v, weight in zip(row, row_weights)]
                for row, row_weights in zip(order.tolist(), weights)]

    def _probability_order(self) -> np.ndarray:
        """K x V weights in the order of topic_word's rows: the counts, plus the seed words'
        prior where seeded."""
        if self.seed_prior is None:
            return self.word_topic_counts.T
        weights = self.word_topic_counts.T.astype(np.float32)
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
        counts = self.word_topic_counts[index].astype(np.float64)
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
        config = dict(self.config, format_version=FORMAT_VERSION, num_topics=self.num_topics,
                      num_words=self.num_words, beta=self.beta)
        atomic_write(directory / "config.json",
                     lambda f: json.dump(config, f, indent=2, sort_keys=True), mode="w")
        atomic_write(directory / "metrics.jsonl", lambda f: f.writelines(
            json.dumps(record) + "\n" for record in self.metrics), mode="w")
        return directory

    def write_arrays(self, path) -> None:
        """Write model.npz, the model's arrays (word_topic_counts, topic_word, alpha, beta),
        to `path` atomically: the file of that name in a saved model directory."""
        atomic_write(pathlib.Path(path), self._write_npz)

    def _write_npz(self, file) -> None:
        """model.npz into an open, empty binary file; topic_word is computed while the counts
        are written."""
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            topic_word = pool.submit(topic_word_from_counts, self.word_topic_counts, self.beta,
                                     self.seed_prior)
            write_npz(file.fileno(), dict(
                word_topic_counts=lambda: np.asarray(self.word_topic_counts, np.int32),
                alpha=lambda: self.alpha, beta=lambda: np.float64(self.beta),
                format_version=lambda: np.int32(FORMAT_VERSION), topic_word=topic_word.result))

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
                counts = np.asarray(arrays["word_topic_counts"], np.int32)
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
