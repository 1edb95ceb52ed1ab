"""A model directory on disk: model.npz (by format version), vocab.txt, config.json and
metrics.jsonl, each written to a temporary name and renamed into place (a reader never sees a
half-written model) and read back with errors that name the file at fault.

    model.npz    topic_word (K x V float32, rows sum to 1), word_topic_counts (V x K int32),
                 alpha (K float64: the document-topic prior of every topic; a scalar in
                 format version 1), beta, format_version; or, where dense B would be large
                 (stores_sparse), B as compressed sparse rows by word (format version 3:
                 word_topic_indptr, word_topic_topics, word_topic_values, num_topics) and no
                 topic_word
    vocab.txt    one word per line, line i = word id i
    config.json  every training setting, the corpus fingerprint, the format version
    metrics.jsonl  the training run's per-iteration records, one JSON object a line

The model is saberjax.model.TopicModel, whose save and load call these functions; this
module does not import it.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import pathlib
import zipfile

import numpy as np

from saberjax import sparse_word_topic as swt
from saberjax.files import atomic_write, write_npz
from saberjax.sparse_word_topic import SparseWordTopic
from saberjax.topic_word import topic_word_from_counts

FORMAT_VERSION = 3  # 2: alpha one value per topic; 3: B may be stored sparse
DENSE_FORMAT_VERSION = 2  # what a model.npz holding dense B is written as
SPARSE_FILE_BYTES = 1 << 26  # bytes of dense B from which model.npz may store B sparse
SPARSE_KEYS = ("word_topic_indptr", "word_topic_topics", "word_topic_values", "num_topics")


class ModelFormatError(ValueError):
    """A model directory that cannot be read; the message names the file at fault."""


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


def write_model(model, directory, arrays=None) -> pathlib.Path:
    """Write model.npz, vocab.txt, config.json and metrics.jsonl of `model` into `directory`
    (each atomically).  arrays: a model.npz that write_arrays wrote for a model with these
    arrays, on the same file system: it is moved into the directory instead of written
    again."""
    directory = pathlib.Path(directory)
    if arrays is None:
        write_arrays(model, directory / "model.npz")
    else:
        directory.mkdir(parents=True, exist_ok=True)
        os.replace(arrays, directory / "model.npz")
    atomic_write(directory / "vocab.txt",
                 lambda f: f.write("".join(w + "\n" for w in model.vocab)), mode="w")
    config = dict(model.config, format_version=_file_format_version(model),
                  num_topics=model.num_topics,
                  num_words=model.num_words, beta=model.beta)
    atomic_write(directory / "config.json",
                 lambda f: json.dump(config, f, indent=2, sort_keys=True), mode="w")
    atomic_write(directory / "metrics.jsonl", lambda f: f.writelines(
        json.dumps(record) + "\n" for record in model.metrics), mode="w")
    return directory


def write_arrays(model, path) -> None:
    """Write model.npz, the model's arrays (word_topic_counts, topic_word, alpha, beta; B
    by its nonzeros and no topic_word where stores_sparse says so), to `path` atomically:
    the file of that name in a saved model directory."""
    atomic_write(pathlib.Path(path), lambda file: _write_npz(model, file))


def _stored_sparse(model) -> bool:
    """Whether model.npz holds B by its nonzeros (stores_sparse of the model's B)."""
    nonzeros = (model.word_topic_counts.nnz if model.is_sparse
                else np.count_nonzero(model.word_topic_counts))
    return stores_sparse(model.num_words, model.num_topics, nonzeros)


def _file_format_version(model) -> int:
    """The oldest format version that reads the model's model.npz: a dense one stays
    readable by a saberjax that knows no sparse form."""
    return FORMAT_VERSION if _stored_sparse(model) else DENSE_FORMAT_VERSION


def _write_npz(model, file) -> None:
    """model.npz into an open, empty binary file; topic_word is computed while the counts
    are written."""
    common = dict(alpha=lambda: model.alpha, beta=lambda: np.float64(model.beta),
                  format_version=lambda: np.int32(_file_format_version(model)))
    if _stored_sparse(model):
        b = (model.word_topic_counts if model.is_sparse
             else swt.from_dense(model.word_topic_counts))
        write_npz(file.fileno(), dict(
            common, word_topic_indptr=lambda: b.indptr, word_topic_topics=lambda: b.topics,
            word_topic_values=lambda: b.counts, num_topics=lambda: np.int64(b.num_topics)))
        return
    counts = model.dense_word_topic_counts()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        topic_word = pool.submit(topic_word_from_counts, counts, model.beta,
                                 model.seed_prior)
        write_npz(file.fileno(), dict(
            word_topic_counts=lambda: np.asarray(counts, np.int32), **common,
            topic_word=topic_word.result))


def read_model(directory) -> tuple:
    """(word_topic_counts, alpha, beta, vocab, config, metrics) of a model directory written
    by write_model (any format version up to this one); ModelFormatError, naming the file,
    when one is missing, cut short or not a model's."""
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
    return counts, alpha, beta, vocab, config, metrics


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


def _read_model_file(path: pathlib.Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ModelFormatError(f"{path}: cannot read ({error})") from error
