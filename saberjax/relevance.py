"""Relevance ranking of a topic's words (Sievert & Shirley 2014, pyLDAvis's lambda slider).

    relevance(w, k | lambda) = lambda log phi_kw + (1 - lambda) log(phi_kw / p_w)

with phi_kw = p(w | k), the model's topic_word (seed words' prior included), and p_w the
word's share of the training tokens, smoothed as (n_w + beta) / (N + V beta) so that a word
no training token holds has a finite lift.  lambda = 1 ranks by probability (the plain top
words); lambda = 0 by lift, which favours words particular to the topic; Sievert & Shirley's
user study found lambda about 0.6 best for interpreting topics.

The scores are float64 and computed a block of topics at a time (TOPIC_BLOCK_CELLS cells), so
no K x V float64 array is held; ties go to the lower word id, as in TopicModel.top_words.
"""

from __future__ import annotations

import numpy as np

from saberjax.seeding import SeedPrior

TOPIC_BLOCK_CELLS = 1 << 24


def check_relevance(relevance: float) -> float:
    """relevance as a float in [0, 1], else a ValueError naming it."""
    if isinstance(relevance, bool) or not isinstance(relevance, (int, float, np.floating)) \
            or not 0 <= relevance <= 1:
        raise ValueError(f"relevance must be a number in [0, 1] (lambda), got {relevance!r}")
    return float(relevance)


def relevant_ids(word_topic_counts: np.ndarray, beta: float, seeds: SeedPrior | None,
                 n: int, relevance: float) -> np.ndarray:
    """int [K, n]: each topic's n most relevant word ids at lambda = relevance, most relevant
    first, ties to the lower id."""
    relevance = check_relevance(relevance)
    counts = np.asarray(word_topic_counts)
    num_words, num_topics = counts.shape
    word_totals = counts.sum(axis=1, dtype=np.int64)
    log_share = np.log((word_totals + beta) / (word_totals.sum() + num_words * beta))
    topic_totals = counts.sum(axis=0, dtype=np.int64).astype(np.float64) + num_words * beta
    extra = None
    if seeds is not None:
        topic_totals += seeds.topic_weights(num_topics)
        extra = seeds.row_weights(num_topics)
    block = max(1, TOPIC_BLOCK_CELLS // max(num_words, 1))
    top = np.empty((num_topics, min(n, num_words)), np.int64)
    for first in range(0, num_topics, block):
        topics = slice(first, min(first + block, num_topics))
        numerators = counts[:, topics].T.astype(np.float64) + beta
        if extra is not None:
            numerators[:, list(seeds.rows)] += extra[:, topics].T
        scores = np.log(numerators / topic_totals[topics, None]) - (1 - relevance) * log_share
        top[topics] = largest_ids(scores, top.shape[1])
    return top


def largest_ids(scores: np.ndarray, n: int) -> np.ndarray:
    """Ids of the n largest entries of every row of float scores, largest first, ties to the
    lower id (exactly: every entry tied with the n-th is a candidate)."""
    if n == 0:
        return np.empty((scores.shape[0], 0), np.int64)
    kth = -np.partition(-scores, n - 1, axis=1)[:, n - 1]
    rows = []
    for row, threshold in zip(scores, kth):
        candidates = np.flatnonzero(row >= threshold)
        rows.append(candidates[np.lexsort((candidates, -row[candidates]))][:n])
    return np.stack(rows)
