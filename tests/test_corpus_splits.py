"""saberjax.corpus.splits: train/test split by document and document halves, pinned per seed."""

import os

import numpy as np
import pytest
from corpus_helpers import tiny_corpus

from saberjax.corpus import Corpus, load_bundled, split_document_halves, train_test_split


def one_token_docs(num_docs: int) -> Corpus:
    """Doc i is the single token i, so a split's word_ids reveal the original doc indices."""
    return Corpus(np.arange(num_docs + 1), np.arange(num_docs), [f"w{i}" for i in range(num_docs)])


def test_train_test_split_partitions_documents_keeping_order():
    train, test = train_test_split(one_token_docs(1000), 0.25, seed=3)
    assert (train.num_docs, test.num_docs) == (750, 250)
    assert np.all(np.diff(train.word_ids) > 0) and np.all(np.diff(test.word_ids) > 0)
    np.testing.assert_array_equal(np.sort(np.concatenate([train.word_ids, test.word_ids])),
                                  np.arange(1000))


def test_train_test_split_is_pinned_per_seed():
    # Pinned values: the split must not drift across numpy versions or platforms.
    assert train_test_split(one_token_docs(10), 0.3, seed=0)[1].word_ids.tolist() == [1, 2, 3]
    first = train_test_split(one_token_docs(500), 0.2, seed=1)[1]
    again = train_test_split(one_token_docs(500), 0.2, seed=1)[1]
    other = train_test_split(one_token_docs(500), 0.2, seed=2)[1]
    np.testing.assert_array_equal(first.word_ids, again.word_ids)
    assert not np.array_equal(first.word_ids, other.word_ids)


@pytest.mark.parametrize("fraction, num_test", [(0.0, 0), (0.25, 2), (0.35, 4), (0.99, 10)])
def test_train_test_split_sizes_round_the_test_fraction(fraction, num_test):
    train, test = train_test_split(one_token_docs(10), fraction)
    assert (train.num_docs, test.num_docs) == (10 - num_test, num_test)


@pytest.mark.parametrize("fraction", [-0.1, 1.0, 1.5])
def test_train_test_split_rejects_fractions_outside_0_1(fraction):
    with pytest.raises(ValueError, match="test_fraction"):
        train_test_split(tiny_corpus(), fraction)


def test_document_halves_partition_each_document():
    corpus = load_bundled("kos")
    observed, held_out = split_document_halves(corpus, seed=0)
    lengths = corpus.doc_lengths()
    np.testing.assert_array_equal(observed.doc_lengths(), (lengths + 1) // 2)
    np.testing.assert_array_equal(held_out.doc_lengths(), lengths // 2)
    assert observed.vocab == held_out.vocab == corpus.vocab

    def doc_word_totals(*parts):
        keys = np.concatenate([np.repeat(np.arange(p.num_docs), p.doc_lengths()) * p.num_words
                               + p.word_ids for p in parts])
        return np.unique(keys, return_counts=True)

    for expected, actual in zip(doc_word_totals(corpus), doc_word_totals(observed, held_out)):
        np.testing.assert_array_equal(actual, expected)


def test_document_halves_keep_token_order_and_one_token_documents():
    corpus = Corpus(np.array([0, 1, 6, 6, 9]), np.array([4, 0, 1, 2, 3, 4, 0, 2, 4]),
                    [f"w{i}" for i in range(5)])
    observed, held_out = split_document_halves(corpus, seed=5)
    np.testing.assert_array_equal(observed.doc_lengths(), [1, 3, 0, 2])
    np.testing.assert_array_equal(held_out.doc_lengths(), [0, 2, 0, 1])
    assert observed.word_ids[0] == 4
    for half in (observed, held_out):
        for d in range(half.num_docs):
            assert np.all(np.diff(half.word_ids[half.doc_offsets[d]:half.doc_offsets[d + 1]]) > 0)


def test_document_halves_are_pinned_per_seed():
    corpus = Corpus(np.array([0, 10]), np.arange(10), [f"w{i}" for i in range(10)])
    # Pinned values: the split must not drift across numpy versions or platforms.
    assert split_document_halves(corpus, seed=0)[0].word_ids.tolist() == [1, 3, 5, 6, 7]
    kos = load_bundled("kos")
    first, again, other = (split_document_halves(kos, seed)[0].word_ids for seed in (1, 1, 2))
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_document_halves_do_not_depend_on_how_documents_are_cut_into_pieces(monkeypatch):
    """The documents are dealt in pieces on threads: any cut gives the halves of one sort by
    (document, random key) over the whole corpus."""
    import saberjax.corpus.splits as splits

    rng = np.random.default_rng(4)
    lengths = rng.integers(0, 40, 3000)
    lengths[[0, 1500, 2999]] = 0
    corpus = Corpus(np.concatenate([[0], np.cumsum(lengths)]),
                    rng.integers(0, 50, lengths.sum()), [f"w{i}" for i in range(50)])
    doc_of_token = np.repeat(np.arange(corpus.num_docs, dtype=np.uint64), lengths)
    keys = (doc_of_token << np.uint64(32)) | (splits._random_keys(7, corpus.num_tokens)
                                              >> np.uint64(32))
    rank_in_doc = np.arange(corpus.num_tokens) - np.repeat(corpus.doc_offsets[:-1], lengths)
    observed = np.empty(corpus.num_tokens, bool)
    observed[np.argsort(keys, kind="stable")] = rank_in_doc % 2 == 0
    monkeypatch.setattr(os, "cpu_count", lambda: 16)  # up to 16 pieces
    for piece_tokens in (1 << 30, 997, 64, 1):
        monkeypatch.setattr(splits, "MIN_PIECE_TOKENS", piece_tokens)
        halves = split_document_halves(corpus, seed=7)
        np.testing.assert_array_equal(halves[0].word_ids, corpus.word_ids[observed])
        np.testing.assert_array_equal(halves[1].word_ids, corpus.word_ids[~observed])
