"""Document-completion scoring equals a direct computation and ranks models sensibly."""

import numpy as np
from helpers import random_corpus

from saberjax import evaluate
from saberjax.corpus import Corpus, split_document_halves


def direct_score(topic_word, observed, heldout, alpha, em_iterations):
    """The same estimator written as plain per-document numpy loops."""
    num_topics = topic_word.shape[0]
    total = 0.0
    for d in range(observed.num_docs):
        obs = observed.word_ids[observed.doc_offsets[d]:observed.doc_offsets[d + 1]]
        held = heldout.word_ids[heldout.doc_offsets[d]:heldout.doc_offsets[d + 1]]
        theta = np.full(num_topics, 1.0 / num_topics)
        for _ in range(em_iterations):
            responsibility = theta[:, None] * topic_word[:, obs]
            responsibility /= responsibility.sum(axis=0)
            theta = (responsibility.sum(axis=1) + alpha) / (len(obs) + num_topics * alpha)
        total += np.log(theta @ topic_word[:, held]).sum()
    return total / heldout.num_tokens


def test_batched_score_equals_direct_computation():
    corpus = random_corpus(num_docs=30, num_words=40, seed=5)
    observed, heldout = split_document_halves(corpus, seed=1)
    topic_word = np.random.default_rng(0).dirichlet(np.full(40, 0.3), size=7)
    score = evaluate.heldout_loglik(topic_word, observed, heldout, alpha=0.2, em_iterations=20)
    expected = direct_score(topic_word, observed, heldout, 0.2, 20)
    assert abs(score.loglik_per_token - expected) < 1e-4
    assert score.tokens == heldout.num_tokens and score.documents == 30
    assert np.isclose(score.perplexity, np.exp(-expected), rtol=1e-3)


def test_small_batches_give_the_same_score(monkeypatch):
    corpus = random_corpus(num_docs=50, num_words=30, seed=6)
    observed, heldout = split_document_halves(corpus, seed=2)
    topic_word = np.random.default_rng(1).dirichlet(np.full(30, 0.5), size=5)
    whole = evaluate.heldout_loglik(topic_word, observed, heldout, alpha=0.1).loglik_per_token
    monkeypatch.setattr(evaluate, "BATCH_ELEMENTS", 64)  # forces many batches
    batched = evaluate.heldout_loglik(topic_word, observed, heldout, alpha=0.1).loglik_per_token
    assert abs(whole - batched) < 1e-5


def test_true_topics_score_better_than_uniform_topics():
    rng = np.random.default_rng(3)
    num_words, num_topics = 60, 3
    true_topics = np.zeros((num_topics, num_words))
    for k in range(num_topics):  # disjoint vocabularies
        true_topics[k, k * 20:(k + 1) * 20] = 1 / 20
    docs = [rng.choice(num_words, 40, p=true_topics[rng.integers(num_topics)]) for _ in range(40)]
    corpus = Corpus(np.arange(0, 1601, 40), np.concatenate(docs).astype(np.int32),
                    tuple(map(str, range(num_words))))
    observed, heldout = split_document_halves(corpus)
    smoothed = 0.99 * true_topics + 0.01 / num_words
    good = evaluate.heldout_loglik(smoothed, observed, heldout, alpha=0.1).loglik_per_token
    uniform = evaluate.heldout_loglik(np.full((num_topics, num_words), 1 / num_words),
                                      observed, heldout, alpha=0.1).loglik_per_token
    assert good > uniform + 1.0
    assert np.isclose(uniform, -np.log(num_words), atol=1e-5)


def test_a_scorer_prepared_once_scores_any_topics_as_heldout_loglik_does():
    corpus = random_corpus(num_docs=40, num_words=30, seed=7)
    observed, heldout = split_document_halves(corpus, seed=3)
    scorer = evaluate.HeldoutScorer(observed, heldout, 5, 30, em_iterations=10)
    for seed in (1, 2):
        topic_word = np.random.default_rng(seed).dirichlet(np.full(30, 0.5), size=5)
        alpha = np.random.default_rng(seed).uniform(0.05, 0.5, 5)
        once = evaluate.heldout_loglik(topic_word, observed, heldout, alpha, em_iterations=10)
        again = scorer.score(np.asarray(topic_word, np.float32), alpha)
        assert again == once
