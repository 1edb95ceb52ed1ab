"""The sparse word-topic model on the device: B as sorted (topic, count) rows per word, and what
the sparse E-step (saberjax.sparse_sampler) draws from, plain JAX.

With the token left out, the sampler's p(k) splits along B's sparsity::

    p(k)  proportional to  A_dk B-hat_vk  +  alpha_k B_vk / D_k  +  alpha_k beta / D_k
                           term 1            term 2                 term 3

(D_k = n_k + V beta, B-hat_vk = (B_vk + beta) / D_k).  Term 1 has one entry per nonzero of
the document's row A_d, each looking B_vk up in the word's row; term 2 one entry per nonzero
of the word's row B_v, drawn by a search of the row's prefix sums (`row_prefix`); term 3 is
the same for every word: one W-ary tree over K for the whole model (saberjax.tree).  No array
of the model has V x K cells: the rows hold at most as many nonzeros as the device has
tokens, so the model's size follows the corpus, not K.

The hybrid part: the rows of the most frequent words (a device's first rows: its words by
decreasing frequency) are also kept dense, as many as DENSE_ROW_BYTES holds (`dense_counts`),
so that term 1's lookups of the tokens of those words, most of the corpus, are one load
instead of a search; a rare word's row is short, and its search takes few steps.

The M-step (count_rows) is a segmented count over the word-ordered tokens: the (row, topic)
pairs sorted and run-length counted, the same shuffle-free count as A's rebuild.  Row sums in
float32 run as a segmented scan in a fixed order, so the model is the same floats whatever
the chunking or the device count.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from saberjax.layout import Chunk
from saberjax.mstep import bhat_denominator
from saberjax.tree import build_tree, tree_totals, weighted_leaves


# Bytes of a device's dense rows of B (int32, K_pad each) for the most frequent words.
DENSE_ROW_BYTES = 1 << 32


def dense_row_count(num_rows: int, padded_topics: int, dense_row_bytes: int = DENSE_ROW_BYTES
                    ) -> int:
    """Rows of B kept dense: as many of the first rows as dense_row_bytes holds, at least one
    (so the array has a shape every kernel takes)."""
    return max(1, min(num_rows, dense_row_bytes // (4 * padded_topics)))


class SparseRows(NamedTuple):
    """B's rows as compressed sparse rows of fixed capacity (one device's words).

    Row r's nonzeros are at row_start[r] .. row_start[r + 1] - 1, topics increasing, counts
    positive; entries from row_start[-1] on are empty (topic = padded K, count 0)."""

    row_start: jax.Array  # int32 [rows + 1]
    topics: jax.Array  # int32 [capacity]
    counts: jax.Array  # int32 [capacity]

    @property
    def num_rows(self) -> int:
        return self.row_start.shape[0] - 1


class SparseModel(NamedTuple):
    """The sparse model: B's rows, the topic totals and prior, term 2's per-row prefix sums and
    term 3's global tree (the module docstring)."""

    word_topic: SparseRows  # B
    topic_totals: jax.Array  # int32 [K_pad] column sums of B
    alpha: jax.Array  # float32 [K_pad] the document-topic prior; 0 in padding columns
    bhat_denominator: jax.Array  # float32 [K_pad] D_k = n_k + V beta
    beta: jax.Array  # float32 scalar, the topic-word prior
    row_prefix: jax.Array  # float32 [capacity] inclusive prefix sums of alpha_k B_vk / D_k
    # within each row (0 past the rows)
    row_mass: jax.Array  # float32 [rows] each row's total of term 2
    prior_leaves: jax.Array  # float32 [1, K_pad] beta / D_k, 0 in padding columns
    prior_tree: tuple[jax.Array, ...]  # float32 [1, width] levels over alpha_k beta / D_k
    prior_total: jax.Array  # float32 [1] the tree's total mass
    dense_counts: jax.Array  # int32 [dense rows, K_pad] B's first rows, dense (the hybrid part)


def count_rows(chunk: Chunk, topics: jax.Array, num_rows: int, padded_topics: int) -> SparseRows:
    """B's sparse rows of a chunk's real tokens (chunk.word: rows < num_rows) with their
    word-major topics: (row, topic) pairs sorted and counted in runs.  Capacity: the chunk's
    padded tokens (a row has no more nonzeros than tokens)."""
    size = chunk.padded_tokens
    real = jnp.arange(size) < chunk.num_tokens
    rows, topics = sort_by_row_then_topic(jnp.where(real, chunk.word, num_rows),
                                          topics.astype(jnp.int32), num_rows, padded_topics)
    counted = rows < num_rows  # padding sorts last
    new_pair = counted & ((jnp.arange(size) == 0) | (rows != jnp.roll(rows, 1))
                          | (topics != jnp.roll(topics, 1)))
    slot = jnp.cumsum(new_pair, dtype=jnp.int32) - 1
    first_of_pair = jnp.where(new_pair, slot, size)
    pair_topics = jnp.full(size, padded_topics, jnp.int32).at[first_of_pair].set(
        topics, mode="drop")
    pair_rows = jnp.full(size, num_rows, jnp.int32).at[first_of_pair].set(rows, mode="drop")
    counts = jnp.zeros(size, jnp.int32).at[jnp.where(counted, slot, size)].add(1, mode="drop")
    row_start = jnp.searchsorted(pair_rows, jnp.arange(num_rows + 1, dtype=jnp.int32),
                                 side="left").astype(jnp.int32)
    return SparseRows(row_start, pair_topics, counts)


def sort_by_row_then_topic(rows: jax.Array, topics: jax.Array, num_rows: int,
                           padded_topics: int) -> tuple[jax.Array, jax.Array]:
    """(row, topic) pairs (rows <= num_rows, topics < padded_topics) sorted by row, then topic.

    One uint32 key row * K_pad + topic where it fits, else two stable sorts of one key (by
    topic, then by row): single-key sorts are radix sorts on a GPU, where a two-key sort
    compares.  Both give the same order."""
    rows, topics = rows.astype(jnp.uint32), topics.astype(jnp.uint32)
    if (num_rows + 1) * padded_topics <= 2**32:
        key = jnp.sort(rows * jnp.uint32(padded_topics) + topics)
        return ((key // padded_topics).astype(jnp.int32),
                (key % padded_topics).astype(jnp.int32))
    topics, rows = jax.lax.sort((topics, rows), num_keys=1, is_stable=True)
    rows, topics = jax.lax.sort((rows, topics), num_keys=1, is_stable=True)
    return rows.astype(jnp.int32), topics.astype(jnp.int32)


def nonzero_rows(rows: SparseRows) -> jax.Array:
    """The row of every entry of B's sparse rows (int32 [capacity]; num_rows past the rows)."""
    positions = jnp.arange(rows.topics.shape[0], dtype=jnp.int32)
    return (jnp.searchsorted(rows.row_start, positions, side="right") - 1).astype(jnp.int32)


def topic_totals(rows: SparseRows, padded_topics: int) -> jax.Array:
    """Each topic's total count over the rows (int32 [K_pad])."""
    return jnp.zeros(padded_topics, jnp.int32).at[rows.topics].add(rows.counts, mode="drop")


def segmented_prefix_sum(values: jax.Array, segment: jax.Array) -> jax.Array:
    """Inclusive prefix sums of values restarting where `segment` changes (a scan of fixed
    order: the same floats on any device)."""
    starts = jnp.concatenate([jnp.ones(1, bool), segment[1:] != segment[:-1]])

    def combine(left, right):
        left_sum, left_start = left
        right_sum, right_start = right
        return jnp.where(right_start, right_sum, left_sum + right_sum), left_start | right_start

    return jax.lax.associative_scan(combine, (values, starts))[0]


def model_from_totals(rows: SparseRows, totals: jax.Array, alpha: jax.Array, num_topics: int,
                      beta: float, num_words: int, dense_row_bytes: int = DENSE_ROW_BYTES
                      ) -> SparseModel:
    """The sparse model of B's rows given the topic totals of all of B (summed over devices),
    the prior alpha [K_pad] and the vocabulary's V; dense_row_bytes: the dense rows' bytes
    (dense_row_count)."""
    padded_topics = totals.shape[0]
    denominator = bhat_denominator(totals, num_words, beta)
    filled = jnp.arange(rows.topics.shape[0]) < rows.row_start[-1]
    topic = jnp.where(filled, rows.topics, 0)
    weight = jnp.where(filled, alpha[topic] * rows.counts.astype(jnp.float32)
                       / denominator[topic], 0.0)
    row_of_entry = nonzero_rows(rows)
    row_prefix = segmented_prefix_sum(weight, row_of_entry)
    num_dense = dense_row_count(rows.num_rows, padded_topics, dense_row_bytes)
    dense_counts = jnp.zeros((num_dense, padded_topics), jnp.int32).at[
        jnp.where(filled & (row_of_entry < num_dense), row_of_entry, num_dense),
        rows.topics].set(rows.counts, mode="drop")
    ends = rows.row_start[1:]
    row_mass = jnp.where(ends > rows.row_start[:-1], row_prefix[jnp.maximum(ends - 1, 0)], 0.0)
    real_topic = jnp.arange(padded_topics) < num_topics
    prior_leaves = jnp.where(real_topic, jnp.float32(beta) / denominator, 0.0)[None, :]
    prior_tree = build_tree(weighted_leaves(prior_leaves, alpha))
    return SparseModel(rows, totals, alpha, denominator, jnp.float32(beta), row_prefix,
                       row_mass, prior_leaves, prior_tree,
                       tree_totals(prior_tree, prior_leaves, alpha), dense_counts)


def find_in_rows(rows: SparseRows, row: jax.Array, topic: jax.Array, steps=None
                 ) -> tuple[jax.Array, jax.Array]:
    """(position of `topic` in `row` of B, B_row,topic: 0 where absent), elementwise over
    arrays of equal shape: a binary search of the row's ascending topics (`steps` halvings:
    search_steps, None: enough for any row)."""
    low, high = rows.row_start[row], rows.row_start[row + 1]
    position = lower_bound(rows.topics, low, high, topic, steps)
    clamped = jnp.minimum(position, rows.topics.shape[0] - 1)
    found = (position < high) & (rows.topics[clamped] == topic)
    return position, jnp.where(found, rows.counts[clamped], 0)


def search_steps(rows: SparseRows) -> jax.Array:
    """Halvings a binary search of any row needs: the bit length of the longest row."""
    longest = jnp.max(rows.row_start[1:] - rows.row_start[:-1])
    return 32 - jax.lax.clz(longest.astype(jnp.int32))


def lower_bound(values: jax.Array, low: jax.Array, high: jax.Array, target,
                steps=None) -> jax.Array:
    """The first position p in low .. high with values[p] >= target (high where none),
    elementwise: `steps` halvings (None: enough for any range of values)."""
    return bisect(_clamped_load(values), low, high, lambda value: value < target,
                  _enough_steps(values) if steps is None else steps)


def upper_bound(values: jax.Array, low: jax.Array, high: jax.Array, target,
                steps=None) -> jax.Array:
    """The first position p in low .. high with values[p] > target (high where none)."""
    return bisect(_clamped_load(values), low, high, lambda value: value <= target,
                  _enough_steps(values) if steps is None else steps)


def _clamped_load(values: jax.Array):
    return lambda positions, searching: values[jnp.minimum(positions, values.shape[0] - 1)]


def _enough_steps(values: jax.Array) -> int:
    return max(int(values.shape[0]).bit_length(), 1)


def bisect(load, low, high, before, steps):
    """The first position p in low .. high where before(value at p) is false (high where
    none), for `before` true on a prefix of every range: `steps` halvings, each reading
    load(positions, searching) (values at positions, needed only where searching), so the
    same search runs over arrays and inside a Pallas kernel."""

    def halve(_, bounds):
        low, high = bounds
        middle = (low + high) // 2
        searching = low < high
        go_right = before(load(middle, searching))
        return (jnp.where(searching & go_right, middle + 1, low),
                jnp.where(searching & ~go_right, middle, high))

    return jax.lax.fori_loop(0, steps, halve, (low, high))[0]
