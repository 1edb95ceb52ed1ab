"""saberjax.corpus.matrix: corpora from dense and scipy.sparse count matrices."""

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse
from corpus_helpers import COUNTS, VOCAB, WORD_IDS, assert_same_corpus, write_uci

from saberjax.corpus import CorpusFormatError, from_count_matrix, load_uci


@pytest.mark.parametrize("make_matrix", [
    lambda counts: counts,
    lambda counts: counts.astype(np.float32),
    lambda counts: counts.tolist(),
    scipy.sparse.csr_matrix,
    scipy.sparse.csc_matrix,
    scipy.sparse.coo_array,
], ids=["dense", "dense-float", "list", "csr", "csc", "coo"])
def test_count_matrix_gives_same_corpus_as_uci(tmp_path, make_matrix):
    corpus = from_count_matrix(make_matrix(COUNTS), VOCAB)
    assert_same_corpus(corpus, load_uci(write_uci(tmp_path)))


def test_count_matrix_coo_duplicates_and_explicit_zeros_add_up(tmp_path):
    rows, cols = np.nonzero(COUNTS)
    counts = COUNTS[rows, cols]
    # every entry split into ones, shuffled, plus an explicit zero
    rows, cols = np.repeat(rows, counts), np.repeat(cols, counts)
    order = np.random.default_rng(0).permutation(rows.size)
    matrix = scipy.sparse.coo_matrix(
        (np.append(np.ones(rows.size), 0), (np.append(rows[order], 2), np.append(cols[order], 3))),
        shape=COUNTS.shape)
    assert_same_corpus(from_count_matrix(matrix, VOCAB), load_uci(write_uci(tmp_path)))


@pytest.mark.parametrize("bad_value", [-1, 1.5, np.nan, np.inf, 2.0**40])
@pytest.mark.parametrize("sparse", [False, True])
def test_count_matrix_rejects_bad_counts_naming_row_and_column(bad_value, sparse):
    matrix = COUNTS.astype(float)
    matrix[2, 1] = bad_value
    matrix[2, 3] = bad_value
    with pytest.raises(CorpusFormatError, match=r"row 2, column 1 \(0-based\)"):
        from_count_matrix(scipy.sparse.csr_matrix(matrix) if sparse else matrix)


def test_count_matrix_rejects_non_numeric_and_non_2d_input():
    with pytest.raises(CorpusFormatError, match="dtype"):
        from_count_matrix(np.array([["a", "b"]]))
    with pytest.raises(CorpusFormatError, match="2-D"):
        from_count_matrix(np.ones(3))


def test_count_matrix_vocab_must_match_columns():
    with pytest.raises(CorpusFormatError, match="3 words but the count matrix has 4 columns"):
        from_count_matrix(COUNTS, VOCAB[:3])


def test_count_matrix_defaults_vocab_and_drops_empty_rows():
    with pytest.warns(UserWarning, match="count matrix: dropped 1 empty document"):
        corpus = from_count_matrix(np.vstack([COUNTS[:1], np.zeros(4, int), COUNTS[1:]]))
    assert corpus.vocab == ("w0", "w1", "w2", "w3")
    assert corpus.dropped_empty_docs == 1
    np.testing.assert_array_equal(corpus.word_ids, WORD_IDS)


def test_count_matrix_keeps_empty_rows_when_asked():
    """One document per row (inference), empty ones included, without a warning."""
    matrix = np.vstack([np.zeros(4, int), COUNTS[:1], np.zeros(4, int), COUNTS[1:]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        corpus = from_count_matrix(matrix, keep_empty=True)
    assert corpus.num_docs == 5 and corpus.dropped_empty_docs == 0
    np.testing.assert_array_equal(np.diff(corpus.doc_offsets), matrix.sum(axis=1))
    np.testing.assert_array_equal(corpus.word_ids, WORD_IDS)


def test_importing_corpus_module_does_not_import_scipy():
    # Imports the saberjax.corpus package without saberjax's __init__, so only its own imports
    # count.
    package = Path(__file__).resolve().parents[1] / "saberjax"
    code = ("import sys, types\n"
            "package = sys.modules['saberjax'] = types.ModuleType('saberjax')\n"
            f"package.__path__ = [{str(package)!r}]\n"
            "import saberjax.corpus\n"
            "print('scipy' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"
