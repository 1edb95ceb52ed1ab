"""The CSR form of B: conversions agree with the dense matrix and validation names the fault."""

import numpy as np
import pytest

from saberjax import sparse_word_topic as swt


def random_counts(seed=0, num_words=13, num_topics=7, density=0.3):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 50, (num_words, num_topics)).astype(np.int32)
    counts[rng.random(counts.shape) > density] = 0
    counts[3] = 0  # an empty row
    return counts


def test_from_dense_round_trips_and_sums_match_dense():
    dense = random_counts()
    b = swt.from_dense(dense)
    assert b.indptr.dtype == np.int64 and b.topics.dtype == np.int32
    assert b.counts.dtype == np.int32 and b.num_topics == 7 and b.shape == dense.shape
    assert b.nnz == np.count_nonzero(dense)
    np.testing.assert_array_equal(swt.to_dense(b), dense)
    np.testing.assert_array_equal(swt.topic_totals(b), dense.sum(0))
    words = np.array([5, 3, 5, 0, 12])
    np.testing.assert_array_equal(swt.rows(b, words), dense[words])
    assert swt.rows(b, []).shape == (0, 7)


def test_from_entries_sums_repeats_in_any_order():
    dense = random_counts(2)
    words, topics = np.nonzero(dense)
    # each cell split into two entries plus a cancelling pair, shuffled
    w = np.r_[words, words, 0, 0]
    t = np.r_[topics, topics, 1, 1]
    c = np.r_[dense[words, topics] - 1, np.ones(len(words)), 5, -5]
    order = np.random.default_rng(0).permutation(len(w))
    b = swt.from_entries(w[order], t[order], c[order], *dense.shape)
    assert swt.validated(b) is b
    np.testing.assert_array_equal(swt.to_dense(b), dense)
    empty = swt.from_entries([], [], [], 4, 3)
    np.testing.assert_array_equal(swt.to_dense(empty), np.zeros((4, 3)))


def test_from_entries_names_an_id_out_of_range():
    with pytest.raises(ValueError, match="topic id 3 outside"):
        swt.from_entries([0], [3], [1], 2, 3)


def test_bytes_count_the_arrays():
    b = swt.from_dense(random_counts())
    assert b.nbytes == swt.sparse_nbytes(b.num_words, b.nnz)
    assert swt.dense_nbytes(*b.shape) == 4 * 13 * 7


@pytest.mark.parametrize("fault, message", [
    (lambda b: b._replace(indptr=b.indptr.astype(np.int32)), "indptr must be 1-d int64"),
    (lambda b: b._replace(counts=b.counts.astype(np.int64)), "counts must be 1-d int32"),
    (lambda b: b._replace(num_topics=0), "num_topics must be a positive integer"),
    (lambda b: b._replace(indptr=b.indptr + 1), "indptr must start at 0"),
    (lambda b: b._replace(topics=b.topics[:-1]), "indptr ends at"),
    (lambda b: b._replace(indptr=np.r_[0, 2, 1, b.indptr[3:]]), "indptr decreases at word 1"),
    (lambda b: b._replace(topics=np.r_[b.topics[:-1], 9].astype(np.int32)), r"lie in \[0, 4\)"),
    (lambda b: b._replace(counts=np.r_[b.counts[:-1], 0].astype(np.int32)), "must be positive"),
    (lambda b: b._replace(topics=np.r_[3, 1, b.topics[2:]].astype(np.int32)),
     "topics of word 0 are not strictly ascending"),
])
def test_validation_names_what_is_wrong(fault, message):
    dense = np.array([[0, 1, 0, 2], [0, 0, 3, 0], [4, 0, 0, 5]], np.int32)
    good = swt.from_dense(dense)
    assert swt.validated(good) is good
    with pytest.raises(ValueError, match=message):
        swt.validated(fault(good))


@pytest.mark.parametrize("n", [0, 1, 4, 13])
def test_top_words_match_top_k_over_dense_columns(n):
    from saberjax.model import top_ids

    dense = random_counts(3, density=0.25)
    dense[:, 2] = 0  # a topic without words
    dense[5, 4] = dense[7, 4] = 9  # a tie: word 5 before 7
    ids, counts = swt.top_words(swt.from_dense(dense), n)
    expected = top_ids(dense.T, n)
    np.testing.assert_array_equal(ids, expected)
    np.testing.assert_array_equal(counts, np.take_along_axis(dense.T, expected, axis=1))


def test_row_entries_are_the_nonzeros_of_the_rows():
    dense = random_counts(5)
    words = np.array([4, 3, 4, 0])
    row, topics, counts = swt.row_entries(swt.from_dense(dense), words)
    expected_row, expected_topics = np.nonzero(dense[words])
    np.testing.assert_array_equal(row, expected_row)
    np.testing.assert_array_equal(topics, expected_topics)
    np.testing.assert_array_equal(counts, dense[words][expected_row, expected_topics])
