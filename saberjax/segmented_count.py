"""Shuffle and segmented count (SSC, paper section 3.3): rebuild the sparse A of a chunk.

Shuffle: each token's new topic moves from its word-major position to its doc-major position
through the precomputed pointers.  Segmented count: inside each document's segment count the
topics and write the (topic, count) pairs (packed, saberjax.state.pack_pairs), in increasing
topic order, at the segment's front.
This is the plain-JAX reference; it sorts (document, topic) pairs, which the Pallas kernel
avoids by counting inside each segment.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from saberjax.layout import Chunk
from saberjax.state import pack_pairs, pair_dtype


def shuffle_to_doc_major(values: jax.Array, doc_major_pos: jax.Array,
                         size: int | None = None) -> jax.Array:
    """Place word-major values at their doc-major positions (distinct pointers) in an array of
    `size` (None: as long as values), 0 elsewhere."""
    return jnp.zeros(size or values.shape[0], values.dtype).at[doc_major_pos].set(
        values, unique_indices=True, mode="drop")


def distinct_targets(targets: jax.Array, kept: jax.Array, end: int) -> jax.Array:
    """Indices of a scatter that stores (no combining), one a value: `targets` where `kept`
    (distinct there, each below `end`), else end + the value's position, so that the others
    are dropped each at a place of its own (uint32: no wrap-around of negatives).  With every
    index distinct the store can be declared unique_indices, which XLA's deterministic mode
    (compilation.COMPILER_OPTIONS) runs as plain stores; a store whose indices may repeat it
    runs as a sort of the indices and a scan of the values."""
    positions = jnp.arange(targets.shape[0], dtype=jnp.uint32)
    return jnp.where(kept, targets.astype(jnp.uint32), jnp.uint32(end) + positions)


def store_distinct(base: jax.Array, targets: jax.Array, kept: jax.Array, values: jax.Array,
                   *inner: jax.Array) -> jax.Array:
    """base with `values` stored at rows `targets` (and the further indices `inner`, for a
    base of more axes) where `kept`, distinct there, the others dropped: a store declared
    unique_indices (distinct_targets)."""
    rows = distinct_targets(targets, kept, base.shape[0])
    return base.at[(rows, *inner)].set(values, mode="drop", unique_indices=True)


def sort_by_doc_then_topic(doc: jax.Array, topics: jax.Array, num_docs: int):
    """(doc, topic) pairs (doc < num_docs) sorted by document, then topic.

    One uint32 key doc * 2**bits + topic when it fits (three times faster on CPU than a
    two-key sort), else a two-key sort; both give the same order.
    """
    topic_bits = jnp.iinfo(topics.dtype).bits - 1  # topics are non-negative
    if num_docs << topic_bits <= 2**32:
        key = jnp.sort((doc.astype(jnp.uint32) << topic_bits) | topics.astype(jnp.uint32))
        return (key >> topic_bits).astype(doc.dtype), (key & (2**topic_bits - 1)).astype(topics.dtype)
    return jax.lax.sort((doc, topics), num_keys=2)


def segmented_count(doc: jax.Array, topics: jax.Array, doc_start: jax.Array, num_tokens,
                    num_topics: int, wide: bool = False):
    """Per-document (topic, count) pairs of doc-major (doc, topic) arrays, packed (pack_pairs;
    wide: as wide pairs).

    Returns (a_pairs, a_nnz): document d's pairs are at doc_start[d] + j for j < a_nnz[d],
    topics increasing; the rest of its segment holds 0.  Positions from num_tokens on (the
    padding document) are not counted, so its row is empty.  Counted in a table of every
    document's topic counts when it has no more cells than there are positions, else by
    sorting (document, topic) pairs; both give the same arrays.
    """
    small_table = (doc_start.shape[0] - 1) * num_topics <= topics.shape[0]
    count = _count_in_table if small_table else _count_by_sorting
    return count(doc, topics, doc_start, num_tokens, num_topics, wide)


def _count_in_table(doc, topics, doc_start, num_tokens, num_topics: int, wide: bool):
    """segmented_count from a [documents, topics] table of counts: no sort, and the table's
    cells are at most the positions."""
    size, num_docs = topics.shape[0], doc_start.shape[0] - 1
    counted = jnp.arange(size) < num_tokens
    table = jnp.zeros((num_docs, num_topics), jnp.int32).at[
        jnp.where(counted, doc, num_docs), topics.astype(jnp.int32)].add(1, mode="drop")
    present = table > 0
    slot = doc_start[:-1, None] + jnp.cumsum(present, axis=1, dtype=jnp.int32) - 1
    pairs = pack_pairs(jnp.arange(num_topics, dtype=jnp.int32)[None, :], table, num_topics,
                       wide)
    a_pairs = store_distinct(jnp.zeros(size, pair_dtype(wide)), slot.ravel(), present.ravel(),
                             pairs.ravel())
    return a_pairs, present.sum(axis=1, dtype=jnp.int32)


def _count_by_sorting(doc, topics, doc_start, num_tokens, num_topics: int, wide: bool):
    """segmented_count by sorting the (document, topic) pairs."""
    size = topics.shape[0]
    doc, topics = sort_by_doc_then_topic(doc, topics, doc_start.shape[0])
    position = jnp.arange(size)
    counted = position < num_tokens  # the padding document is last, so it sorts last
    new_pair = counted & ((position == 0) | (doc != jnp.roll(doc, 1))
                          | (topics != jnp.roll(topics, 1)))
    pair_index = jnp.cumsum(new_pair.astype(jnp.int32)) - 1
    segment_start = doc_start[doc]
    slot = segment_start + pair_index - pair_index[segment_start]
    pair_topics = store_distinct(jnp.zeros(size, jnp.int32), slot, new_pair,
                                 topics.astype(jnp.int32))
    counts = jnp.zeros(size, jnp.int32).at[jnp.where(counted, slot, size)].add(1, mode="drop")
    a_nnz = jnp.zeros(doc_start.shape[0] - 1, jnp.int32).at[doc].add(new_pair.astype(jnp.int32))
    return pack_pairs(pair_topics, counts, num_topics, wide), a_nnz


def rebuild_doc_topic(chunk: Chunk, doc_major_topics: jax.Array, num_topics: int,
                      wide: bool = False):
    """SSC reference: the chunk's A (a_pairs, a_nnz; wide: as wide pairs) from its doc-major
    topics (shuffle_to_doc_major of the word-major ones, each < num_topics)."""
    doc = shuffle_to_doc_major(chunk.doc, chunk.doc_major_pos)
    return segmented_count(doc, doc_major_topics, chunk.doc_start, chunk.num_tokens, num_topics,
                           wide)
