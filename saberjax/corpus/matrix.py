"""Corpora from documents x words count matrices, dense or scipy.sparse (scipy is never
imported here: a sparse matrix implies it is)."""

from __future__ import annotations

import sys

import numpy as np

from saberjax.corpus.core import MAX_COUNT, Corpus, from_entries
from saberjax.errors import CorpusFormatError

def from_count_matrix(X, vocab=None, name: str = "", keep_empty: bool = False) -> Corpus:
    """A corpus from a documents x words count matrix: dense array or any scipy.sparse format.

    Counts must be non-negative integers (integer, bool or integral float dtype); a document's
    tokens are ordered by word id. vocab defaults to ("w0", "w1", ...). Empty rows are dropped
    (with a warning) unless keep_empty, which keeps one document per row (inference).
    """
    rows, cols, values, (num_docs, num_words) = count_matrix_entries(X)
    _check_counts(rows, cols, values)
    vocab = tuple(f"w{i}" for i in range(num_words)) if vocab is None else tuple(vocab)
    if len(vocab) != num_words:
        raise CorpusFormatError(
            f"vocab has {len(vocab)} words but the count matrix has {num_words} columns")
    nonzero = values != 0
    return from_entries(rows[nonzero].astype(np.int64), cols[nonzero],
                        values[nonzero].astype(np.int64), num_docs, vocab, name,
                        "count matrix", keep_empty)


def count_matrix_entries(X) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int]]:
    """(rows, columns, values, shape) of the entries of a documents x words matrix, dense array
    (its nonzeros; NaN and negative entries count as nonzero) or any scipy.sparse format (its
    stored entries), in row-major order."""
    sparse = sys.modules.get("scipy.sparse")  # a sparse matrix implies scipy is imported
    if sparse is not None and sparse.issparse(X):
        entries = X.tocoo()
        order = np.lexsort((entries.col, entries.row))
        return entries.row[order], entries.col[order], entries.data[order], entries.shape
    entries = np.asarray(X)
    if entries.ndim != 2:
        raise CorpusFormatError(
            f"count matrix must be 2-D (documents x words), got shape {entries.shape}")
    rows, cols = np.nonzero(entries)
    return rows, cols, entries[rows, cols], entries.shape


def _check_counts(rows: np.ndarray, cols: np.ndarray, values: np.ndarray) -> None:
    """Rejects any stored entry that is not an integer in 0..MAX_COUNT, naming the first."""
    kind = values.dtype.kind
    if kind not in "biuf":
        raise CorpusFormatError(
            f"count matrix dtype {values.dtype} is not integer, bool or float")
    if kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~(np.isfinite(values) & (values >= 0) & (values <= MAX_COUNT)
                    & (values == np.floor(values)))
    else:
        bad = (values < 0) | (values > MAX_COUNT)
    if bad.any():
        first = np.flatnonzero(bad)[np.lexsort((cols[bad], rows[bad]))[0]]
        raise CorpusFormatError(
            f"count matrix entry at row {rows[first]}, column {cols[first]} (0-based) is "
            f"{values[first]!r}; counts must be integers in 0..{MAX_COUNT}")
