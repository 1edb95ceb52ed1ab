"""B, the word-topic counts, stored by its nonzeros: compressed sparse rows by word (CSR).

At large K almost every cell of B is zero (the corpus's tokens can fill at most one cell each),
so the model keeps, for each word, only the topics that hold some of its tokens:

    word v's row:  topics[indptr[v]:indptr[v + 1]]  ascending topic ids, no repeats
                   counts[indptr[v]:indptr[v + 1]]  that word's tokens in each, all > 0

    dense B (V x K)            CSR
      word 0: 0 3 0 0 2        indptr  [0, 2, 2, 3]
      word 1: 0 0 0 0 0   ->   topics  [1, 4, 2]
      word 2: 0 0 7 0 0        counts  [3, 2, 7]

A row holds nnz_v entries, so the whole takes 8 (V + 1) + 8 nnz bytes where dense B takes
4 V K. This is the host form (numpy): the form model.npz stores and TopicModel reads; the
training engine hands its sparse state over as one (from_entries, from_dense).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class SparseWordTopic(NamedTuple):
    """V x K word-topic counts as compressed sparse rows by word (see the module docstring)."""

    indptr: np.ndarray  # int64 [V + 1]: word v's entries are [indptr[v], indptr[v + 1])
    topics: np.ndarray  # int32 [nnz]: ascending within each word's row
    counts: np.ndarray  # int32 [nnz]: all > 0
    num_topics: int

    @property
    def num_words(self) -> int:
        return len(self.indptr) - 1

    @property
    def shape(self) -> tuple[int, int]:
        """(V, K), the shape of the dense B this stands for."""
        return self.num_words, self.num_topics

    @property
    def nnz(self) -> int:
        return len(self.topics)

    @property
    def nbytes(self) -> int:
        """Bytes of the three arrays."""
        return self.indptr.nbytes + self.topics.nbytes + self.counts.nbytes


def dense_nbytes(num_words: int, num_topics: int) -> int:
    """Bytes of dense int32 B of that shape."""
    return 4 * num_words * num_topics


def sparse_nbytes(num_words: int, nnz: int) -> int:
    """Bytes of a SparseWordTopic of V words and nnz nonzeros (int64 indptr, int32 pairs)."""
    return 8 * (num_words + 1) + 8 * nnz


def from_dense(word_topic_counts) -> SparseWordTopic:
    """The CSR of a dense V x K count matrix (nonnegative integers); zeros are dropped."""
    counts = np.asarray(word_topic_counts)
    if counts.ndim != 2:
        raise ValueError(f"word-topic counts must be a V x K matrix, got shape "
                         f"{list(counts.shape)}")
    words, topics = np.nonzero(counts)  # row-major: by word, topics ascending within a row
    indptr = np.zeros(counts.shape[0] + 1, np.int64)
    np.cumsum(np.bincount(words, minlength=counts.shape[0]), out=indptr[1:])
    return validated(SparseWordTopic(indptr, topics.astype(np.int32),
                                     counts[words, topics].astype(np.int32), counts.shape[1]))


def from_entries(words, topics, counts, num_words: int, num_topics: int) -> SparseWordTopic:
    """The CSR of (word, topic, count) entries in any order: repeats of a (word, topic) pair are
    summed and zero sums dropped. How a sampler's per-token assignments or a device's sparse
    rows (in whatever order they come) become the model's B."""
    words = np.asarray(words, np.int64).ravel()
    topics = np.asarray(topics, np.int64).ravel()
    counts = np.asarray(counts, np.int64).ravel()
    if not len(words) == len(topics) == len(counts):
        raise ValueError(f"entries differ in length: {len(words)} words, {len(topics)} topics, "
                         f"{len(counts)} counts")
    for name, ids, bound in (("word", words, num_words), ("topic", topics, num_topics)):
        if len(ids) and (ids.min() < 0 or ids.max() >= bound):
            bad = ids[(ids < 0) | (ids >= bound)][0]
            raise ValueError(f"{name} id {bad} outside [0, {bound})")
    cells = words * num_topics + topics
    order = np.argsort(cells, kind="stable")
    cells = cells[order]
    starts = np.flatnonzero(np.r_[True, cells[1:] != cells[:-1]]) if len(cells) else \
        np.zeros(0, np.int64)
    sums = np.add.reduceat(counts[order], starts) if len(cells) else np.zeros(0, np.int64)
    keep = sums != 0
    cells, sums = cells[starts][keep], sums[keep]
    if len(sums) and (sums.min() < 0 or sums.max() > np.iinfo(np.int32).max):
        raise ValueError("entry counts sum to a value outside [0, 2**31) for some word and topic")
    indptr = np.zeros(num_words + 1, np.int64)
    np.cumsum(np.bincount(cells // num_topics, minlength=num_words), out=indptr[1:])
    return SparseWordTopic(indptr, (cells % num_topics).astype(np.int32),
                           sums.astype(np.int32), int(num_topics))


def validated(b: SparseWordTopic) -> SparseWordTopic:
    """`b` itself when its arrays hold a well-formed CSR (dtypes, lengths, indptr starting at 0
    and nondecreasing, topics in [0, K) ascending within each row, counts > 0); ValueError
    naming the first thing wrong otherwise. Run on everything read from a file or handed over
    from the engine: every consumer indexes with these arrays unchecked."""
    indptr, topics, counts = (np.asarray(a) for a in (b.indptr, b.topics, b.counts))
    for name, array, dtype in (("indptr", indptr, np.int64), ("topics", topics, np.int32),
                               ("counts", counts, np.int32)):
        if array.ndim != 1 or array.dtype != dtype:
            raise ValueError(f"sparse word-topic {name} must be 1-d {np.dtype(dtype).name}, got "
                             f"{array.ndim}-d {array.dtype}")
    if not isinstance(b.num_topics, (int, np.integer)) or b.num_topics < 1:
        raise ValueError(f"sparse word-topic num_topics must be a positive integer, got "
                         f"{b.num_topics!r}")
    if len(indptr) < 1 or indptr[0] != 0:
        raise ValueError("sparse word-topic indptr must start at 0")
    if len(topics) != len(counts) or indptr[-1] != len(topics):
        raise ValueError(f"sparse word-topic indptr ends at {indptr[-1]} but there are "
                         f"{len(topics)} topics and {len(counts)} counts")
    steps = np.diff(indptr)
    if len(steps) and steps.min() < 0:
        raise ValueError(f"sparse word-topic indptr decreases at word {int(np.argmin(steps))}")
    if len(topics) and (topics.min() < 0 or topics.max() >= b.num_topics):
        raise ValueError(f"sparse word-topic topics must lie in [0, {b.num_topics}), got "
                         f"{int(topics.min())}..{int(topics.max())}")
    if len(counts) and counts.min() <= 0:
        raise ValueError(f"sparse word-topic counts must be positive, got {int(counts.min())} "
                         f"(entry {int(np.argmin(counts))})")
    row_starts = np.zeros(len(topics), bool)
    row_starts[indptr[:-1][steps > 0]] = True
    descending = np.flatnonzero((np.diff(topics.astype(np.int64)) <= 0) & ~row_starts[1:])
    if len(descending):
        word = int(np.searchsorted(indptr, descending[0], side="right") - 1)
        raise ValueError(f"sparse word-topic topics of word {word} are not strictly ascending")
    return b


def topic_totals(b: SparseWordTopic) -> np.ndarray:
    """int64 [K]: n_k, the training tokens in each topic (B's column sums), exactly."""
    return np.bincount(b.topics, weights=b.counts, minlength=b.num_topics).astype(np.int64)


def row_entries(b: SparseWordTopic, words) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row int64, topic int32, count int32) [n]: the nonzeros of B's rows of some words
    (repeats allowed), row i being words[i]'s, in row order."""
    words = np.asarray(words, np.int64).ravel()
    starts, stops = b.indptr[words], b.indptr[words + 1]
    lengths = stops - starts
    entries = np.repeat(starts - np.r_[0, np.cumsum(lengths)[:-1]], lengths) + \
        np.arange(int(lengths.sum()))
    return np.repeat(np.arange(len(words)), lengths), b.topics[entries], b.counts[entries]


def rows(b: SparseWordTopic, words) -> np.ndarray:
    """int32 [len(words), K]: the dense rows of B for some words (repeats allowed), K per word
    rather than K x V."""
    out = np.zeros((np.size(words), b.num_topics), np.int32)
    row, topics, counts = row_entries(b, words)
    out[row, topics] = counts
    return out


def to_dense(b: SparseWordTopic) -> np.ndarray:
    """int32 [V, K]: dense B. For small models and tests; at large K it is what this form
    avoids."""
    return rows(b, np.arange(b.num_words))


def top_words(b: SparseWordTopic, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(word ids int64 [K, n], their counts int32 [K, n]): each topic's n words of most tokens,
    most first, ties to the lower word id, for n <= V: the order lax.top_k gives over dense
    B's columns. Sorts the nonzeros only; a topic with m < n nonzero words is filled with its
    n - m lowest-id words of count 0, found from its nonzero words alone (the j-th word
    missing from ascending words s_1 < ... < s_m is j + #{i : s_i - (i - 1) <= j}), so
    nothing larger than K x n is formed."""
    num_words, num_topics = b.shape
    if not 0 <= n <= num_words:
        raise ValueError(f"top words: n must be in [0, {num_words}], got {n}")
    words = np.repeat(np.arange(num_words, dtype=np.int64), np.diff(b.indptr))
    topic_starts = np.zeros(num_topics + 1, np.int64)
    np.cumsum(np.bincount(b.topics, minlength=num_topics), out=topic_starts[1:])
    ids = np.zeros((num_topics, n), np.int64)
    counts = np.zeros((num_topics, n), np.int32)
    # by topic, then count descending; a stable sort keeps the CSR's ascending words in ties
    order = np.argsort((b.topics.astype(np.int64) << 31) | (np.iinfo(np.int32).max - b.counts),
                       kind="stable")
    sorted_topics = b.topics[order].astype(np.int64)
    rank = np.arange(len(order)) - topic_starts[sorted_topics]
    kept = rank < n
    ids[sorted_topics[kept], rank[kept]] = words[order][kept]
    counts[sorted_topics[kept], rank[kept]] = b.counts[order][kept]
    nonzero_words = np.diff(topic_starts)
    missing = np.maximum(n - nonzero_words, 0)
    if missing.any():
        order = np.argsort(b.topics, kind="stable")  # by topic, words ascending within each
        sorted_topics = b.topics[order].astype(np.int64)
        free_below = words[order] - (np.arange(len(order)) - topic_starts[sorted_topics])
        keys = sorted_topics * (n + 1) + np.minimum(free_below, n)
        topic = np.repeat(np.arange(num_topics, dtype=np.int64), missing)
        j = np.arange(len(topic)) - np.repeat(np.cumsum(missing) - missing, missing)
        below = np.searchsorted(keys, topic * (n + 1) + j, side="right") - topic_starts[topic]
        ids[topic, nonzero_words[topic] + j] = j + below
    return ids, counts
