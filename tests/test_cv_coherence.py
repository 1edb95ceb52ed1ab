"""c_v coherence (gensim's sliding windows and context vectors) and topic diversity."""

import numpy as np
import pytest

from saberjax import coherence
from saberjax.corpus import Corpus
from saberjax.model import TopicModel


def corpus_of(texts: list[list[str]], vocab: tuple[str, ...]) -> Corpus:
    """A corpus of tokenised texts, tokens in order."""
    ids = [[vocab.index(word) for word in text] for text in texts]
    offsets = np.concatenate([[0], np.cumsum([len(text) for text in ids])]).astype(np.int64)
    return Corpus(offsets, np.array([i for text in ids for i in text], np.int32), vocab)


def ranked(topics: list[list[int]], num_words: int) -> np.ndarray:
    """K x V weights whose top words are each row of topics, in order."""
    weights = np.zeros((len(topics), num_words))
    for k, words in enumerate(topics):
        weights[k, words] = np.arange(len(words), 0, -1)
    return weights


def test_cv_of_a_hand_worked_case():
    """Three one-window documents "a b", "a c", "b c": D(a) = D(b) = 2, D(a, b) = 1 of 3, so
    NPMI(a, b) = log((1/3) / (2/3)^2) / log 3 = log(3/4) / log 3 = x and NPMI(a, a) = 1;
    u_a = (1, x), u_b = (x, 1), v = (1 + x, 1 + x), and both cosines are
    (1 + x) / (sqrt 2 sqrt(1 + x^2))."""
    vocab = ("a", "b", "c")
    corpus = corpus_of([["a", "b"], ["a", "c"], ["b", "c"]], vocab)
    x = np.log(3 / 4) / np.log(3)
    expected = (1 + x) / (np.sqrt(2) * np.sqrt(1 + x * x))
    scores = coherence.cv_coherence(ranked([[0, 1]], 3), corpus, top_n=2)
    assert scores.per_topic[0] == pytest.approx(expected, abs=1e-9)
    assert scores.mean == pytest.approx(0.50492, abs=1e-5)


def test_sliding_windows_count_as_gensim_does():
    """Windows of 3 over "a a b c": [a a b] and [a b c]; leaving the first window, gensim
    drops a (its first occurrence leaves) though another a is still inside, so a counts in
    one window.  A document shorter than the window is one window; an empty one is a window
    holding nothing."""
    vocab = ("a", "b", "c")
    corpus = corpus_of([["a", "a", "b", "c"], ["c", "a"], []], vocab)
    windows = coherence.sliding_windows(corpus, [0, 1, 2], window=3)
    held = [sorted(vocab[w] for w in windows.word_ids[start:stop])
            for start, stop in zip(windows.doc_offsets[:-1], windows.doc_offsets[1:])]
    assert held == [["a", "b"], ["b", "c"], ["a", "c"], []]


def test_cv_equals_gensim_on_the_same_texts():
    """gensim's CoherenceModel(coherence="c_v") on random texts with repeated words, within
    1e-3 (the figures agree to rounding) at its default window and two small ones."""
    pytest.importorskip("gensim")
    from gensim.corpora import Dictionary
    from gensim.models import CoherenceModel

    rng = np.random.default_rng(0)
    vocab = tuple(f"w{i}" for i in range(60))
    texts = [[vocab[i] for i in rng.choice(60, size=int(rng.integers(0, 300)),
                                           p=rng.dirichlet(np.full(60, 0.3)))]
             for _ in range(120)]
    topics = [list(rng.choice(60, 10, replace=False)) for _ in range(4)]
    corpus = corpus_of(texts, vocab)
    for window in (110, 10, 3):
        expected = CoherenceModel(topics=[[vocab[i] for i in t] for t in topics], texts=texts,
                                  dictionary=Dictionary(texts), coherence="c_v",
                                  window_size=window, processes=1).get_coherence_per_topic()
        got = coherence.cv_coherence(ranked(topics, 60), corpus, top_n=10, window=window)
        np.testing.assert_allclose(got.per_topic, expected, atol=1e-3)


def test_topic_diversity():
    """Two topics sharing one of their top 3 words: 5 distinct of 6."""
    counts = np.zeros((6, 2), np.int32)
    counts[[0, 1, 2], 0] = [9, 8, 7]
    counts[[2, 3, 4], 1] = [9, 8, 7]
    model = TopicModel(counts, 0.1, 0.01, tuple("abcdef"))
    assert coherence.topic_diversity(model, top_n=3) == pytest.approx(5 / 6)


def test_cv_is_not_measured_on_bag_of_words(tmp_path):
    """A bag-of-words reference (UCI: the bundled KOS) gets one line saying why; plain text
    is measured."""
    model = TopicModel(np.ones((3, 2), np.int32), 0.1, 0.01, ("a", "b", "c"),
                       dict(corpus_path=None))
    message = coherence.cv_unavailable(model)
    assert "bag-of-words" in message and "--coherence_corpus" in message
    assert len(message.splitlines()) == 1
    text = tmp_path / "docs.txt"
    text.write_text("a b c\nb c a\n")
    assert coherence.cv_unavailable(model, str(text)) is None
