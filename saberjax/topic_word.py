"""topic_word, B-hat transposed, of counts B on the host: what a saved model holds beside B
and what TopicModel.topic_word forms (numpy, a thread per core, in cache-sized tiles).
"""

from __future__ import annotations

import concurrent.futures

import numpy as np

from saberjax.platform import cpu_cores
from saberjax.seeding import SeedPrior

TOPIC_WORD_TILE = (256, 1024)  # words x topics topic_word_from_counts computes at a time


def topic_word_from_counts(word_topic_counts: np.ndarray, beta: float,
                           seeds: SeedPrior | None = None) -> np.ndarray:
    """B-hat transposed: (B + beta) / (topic totals + V beta), K x V float32 (C order); with
    seed words (over word ids) (B + beta_kv) / (topic totals + sum_v beta_kv).

    Computed in float64 and rounded once (np.divide into the float32 result) over a thread per
    core (numpy releases the GIL), each taking ranges of words a TOPIC_WORD_TILE at a time: the
    tile's float64 sums stay in cache, in a buffer of the thread's, and the quotients land in
    the transpose as runs of the tile's words (whole count rows at a time leave the cache at
    large K). The topic totals are summed per range, in int64, so exactly.
    """
    counts = np.asarray(word_topic_counts)
    num_words, num_topics = counts.shape
    tile_words, tile_topics = TOPIC_WORD_TILE
    cores = cpu_cores()
    step = tile_words * max(1, -(-num_words // (tile_words * 4 * cores)))  # ~4 ranges a core
    ranges = [slice(first, min(first + step, num_words)) for first in range(0, num_words, step)]
    topic_word = np.empty((num_topics, num_words), np.float32)

    def fill(words: slice) -> None:
        buffer = np.empty((tile_words, min(tile_topics, num_topics)), np.float64)
        for first in range(words.start, words.stop, tile_words):
            last = min(first + tile_words, words.stop)
            for topic in range(0, num_topics, tile_topics):
                topics = slice(topic, topic + tile_topics)
                tile = counts[first:last, topics]
                sums = np.add(tile, beta, out=buffer[: tile.shape[0], : tile.shape[1]])
                np.divide(sums, denominators[topics], out=topic_word[topics, first:last].T)

    with concurrent.futures.ThreadPoolExecutor(cores) as pool:
        totals = sum(pool.map(lambda words: counts[words].sum(axis=0, dtype=np.int64), ranges),
                     np.zeros(num_topics, np.int64))
        denominators = totals + num_words * beta
        if seeds is not None:
            denominators = denominators + seeds.topic_weights(num_topics).astype(np.float64)
        list(pool.map(fill, ranges))
    if seeds is not None:  # the seeded cells' numerators
        rows = np.asarray(seeds.rows)
        topic_word[:, rows] = ((counts[rows].T + beta + seeds.row_weights(num_topics).T)
                               / denominators[:, None])
    return topic_word
