"""saberjax.corpus.core: the Corpus (validation, sizes, subsets, counts, fingerprint) and
align_vocabulary."""

import collections
import tracemalloc

import numpy as np
import pytest
from corpus_helpers import OFFSETS, VOCAB, WORD_IDS, tiny_corpus
from helpers import random_corpus

from saberjax.corpus import Corpus, CorpusFormatError, align_vocabulary, load_bundled
from saberjax.corpus import core as corpus_core


@pytest.mark.parametrize("offsets, word_ids, message", [
    ([], [], "doc_offsets is empty"),
    ([1, 3], [0, 1], r"doc_offsets\[0\] is 1, expected 0"),
    ([0, 3, 2, 4], [0, 1, 2, 3], r"doc_offsets decrease at index 2 \(3 -> 2\)"),
    ([0, 3], [0, 1], r"doc_offsets\[-1\] is 3, expected num_tokens = 2"),
    ([0, 3], [0, 9, 4], r"word_ids\[1\] is 9, outside the vocabulary range \[0, 4\)"),
    ([0, 1], [-1], r"word_ids\[0\] is -1"),
    ([0, 1], [0.5], "word_ids must be a 1-D integer array"),
    ([[0, 1]], [0], "doc_offsets must be a 1-D integer array"),
])
def test_corpus_rejects_inconsistent_arrays(offsets, word_ids, message):
    with pytest.raises(CorpusFormatError, match=message):
        Corpus(np.array(offsets), np.array(word_ids), VOCAB)


def test_corpus_normalises_dtypes_and_freezes_arrays():
    corpus = Corpus(np.array(OFFSETS, np.int32), np.array(WORD_IDS, np.int64), list(VOCAB))
    assert corpus.doc_offsets.dtype == np.int64 and corpus.word_ids.dtype == np.int32
    assert isinstance(corpus.vocab, tuple)
    with pytest.raises(ValueError, match="read-only"):
        corpus.word_ids[0] = 2


def test_corpus_sizes_and_counts():
    corpus = Corpus(np.array(OFFSETS + [8]), np.array(WORD_IDS), VOCAB)  # last doc empty
    assert (corpus.num_docs, corpus.num_tokens, corpus.num_words) == (4, 8, 4)
    np.testing.assert_array_equal(corpus.doc_lengths(), [3, 3, 2, 0])
    np.testing.assert_array_equal(corpus.word_counts(), [3, 3, 1, 1])
    assert corpus.word_counts().dtype == np.int64


def test_subset_takes_documents_in_the_given_order():
    sub = tiny_corpus().subset([2, 0, 2])
    np.testing.assert_array_equal(sub.doc_offsets, [0, 2, 5, 7])
    np.testing.assert_array_equal(sub.word_ids, [1, 2, 1, 1, 3, 1, 2])
    assert sub.vocab == VOCAB and sub.name == "tiny"
    assert tiny_corpus().subset([]).num_docs == 0
    with pytest.raises(IndexError):
        tiny_corpus().subset([3])


def test_subset_copies_runs_of_documents_with_no_memory_beyond_the_result():
    corpus = load_bundled("kos")
    docs = np.concatenate([np.arange(5, 900), [3, 3], np.arange(1000, 3000, 3), [3429, 0]])
    tracemalloc.start()
    try:
        sub = corpus.subset(docs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    expected = np.concatenate([corpus.word_ids[corpus.doc_offsets[d]:corpus.doc_offsets[d + 1]]
                               for d in docs])
    np.testing.assert_array_equal(sub.word_ids, expected)
    assert sub.word_ids.dtype == np.int32 and type(sub.word_ids) is np.ndarray
    assert peak < 2 * sub.word_ids.nbytes  # an index per token took 7 times the result


@pytest.mark.parametrize("workers", [None, 1, 2, 3, 64])
def test_word_counts_are_the_same_on_any_threads_and_blocks(monkeypatch, workers):
    """Counted in pieces on threads, a block at a time (a block of at least V tokens), with a
    last block of another size, or in one block: the counts of one np.bincount."""
    corpus = random_corpus(num_docs=50, num_words=30, seed=3)
    expected = np.bincount(np.asarray(corpus.word_ids), minlength=30)
    assert corpus.num_tokens % 30 and corpus.num_tokens % 40
    for block in (7, 40, 10**6):  # blocks of 30 (V), 40 and all the tokens
        monkeypatch.setattr(corpus_core, "WORD_COUNT_BLOCK", block)
        counts = corpus.word_counts(workers)
        assert counts.dtype == np.int64
        np.testing.assert_array_equal(counts, expected)
    empty = Corpus(np.zeros(1, np.int64), np.zeros(0, np.int32), VOCAB)
    np.testing.assert_array_equal(empty.word_counts(workers), np.zeros(len(VOCAB), np.int64))


def test_doc_word_counts_merge_repeats_sorted_by_doc_then_word():
    corpus = load_bundled("kos").subset(np.arange(0, 3430, 7))
    doc, word, count = corpus.doc_word_counts()
    assert (doc.dtype, word.dtype, count.dtype) == (np.int64, np.int32, np.int32)
    keys = doc * corpus.num_words + word
    assert np.all(np.diff(keys) > 0)
    expected = collections.Counter()
    for d in range(corpus.num_docs):
        tokens = corpus.word_ids[corpus.doc_offsets[d]:corpus.doc_offsets[d + 1]]
        expected.update((d, int(w)) for w in tokens)
    assert dict(zip(zip(doc.tolist(), word.tolist()), count.tolist())) == expected


def test_fingerprint_is_a_fixed_value_across_processes():
    # Pinned: a change here invalidates every cached result keyed by fingerprint.
    assert tiny_corpus().fingerprint() == (
        "b2773285c48e2aae78fba6c64e10f40b507233b5fd09d49aad82216561d49e9d")


def test_fingerprint_ignores_name_and_input_dtypes():
    same = Corpus(np.array(OFFSETS, np.int32), np.array(WORD_IDS, np.int64), VOCAB, name="other")
    assert same.fingerprint() == tiny_corpus().fingerprint()


@pytest.mark.parametrize("offsets, word_ids, vocab", [
    (OFFSETS, [1, 1, 3, 0, 0, 0, 1, 3], VOCAB),  # one token differs
    ([0, 2, 6, 8], WORD_IDS, VOCAB),  # a document boundary moves
    (OFFSETS, WORD_IDS, ("apple", "banana", "cherry", "dates")),  # a word differs
    (OFFSETS, WORD_IDS, VOCAB + ("extra",)),  # the vocabulary grows
    (OFFSETS + [8], WORD_IDS, VOCAB),  # an empty document is added
])
def test_fingerprint_changes_with_tokens_boundaries_or_vocab(offsets, word_ids, vocab):
    changed = Corpus(np.array(offsets), np.array(word_ids), vocab)
    assert changed.fingerprint() != tiny_corpus().fingerprint()


def test_align_vocabulary_maps_words_by_string_and_drops_unknown_ones():
    source = Corpus(np.array([0, 3, 5]), np.array([0, 1, 2, 2, 1]), ("a", "b", "c"))
    with pytest.warns(UserWarning, match="dropped 2 of 5 tokens"):
        aligned = align_vocabulary(source, ("c", "a", "z"))
    assert aligned.vocab == ("c", "a", "z")
    np.testing.assert_array_equal(aligned.doc_offsets, [0, 2, 3])
    np.testing.assert_array_equal(aligned.word_ids, [1, 0, 0])
    assert align_vocabulary(source, source.vocab) is source
