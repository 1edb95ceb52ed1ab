"""The plain-JAX segmented count (saberjax.segmented_count): its table of counts and its sort of
(document, topic) pairs rebuild the same A."""

import jax
import numpy as np
import pytest
from test_sparse_sampler import scatters

from saberjax import segmented_count
from saberjax.layout import padded_doc_start
from saberjax.state import unpack_pairs


def doc_major(seed: int, num_topics: int, topic_dtype):
    """Doc-major (doc, topics, doc_start, num_tokens) of random documents, some empty, padded
    as a chunk is (a padding document after the real ones, more padding rows after it)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 12, 40) * (rng.random(40) < 0.8)
    num_tokens, padded_tokens = int(lengths.sum()), int(lengths.sum()) + 13
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    doc_start = padded_doc_start(offsets, padded_tokens, len(lengths) + 5)
    doc = np.concatenate([np.repeat(np.arange(len(lengths)), lengths),
                          np.full(padded_tokens - num_tokens, len(lengths))]).astype(np.int32)
    topics = rng.integers(0, num_topics, padded_tokens).astype(topic_dtype)
    return doc, topics, doc_start, np.int32(num_tokens)


# the two counts compiled whole, as the E-step holds them (run op by op, each of their many
# small operations compiles for every shape of the tests' documents)
count_in_table, count_by_sorting = (
    jax.jit(count, static_argnames=("num_topics", "wide"))
    for count in (segmented_count._count_in_table, segmented_count._count_by_sorting))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("num_topics, topic_dtype", [(2, np.int16), (9, np.int16),
                                                     (300, np.int32)])
def test_the_table_of_counts_and_the_sort_give_the_same_pairs(seed, num_topics, topic_dtype):
    doc, topics, doc_start, num_tokens = doc_major(seed, num_topics, topic_dtype)
    table = count_in_table(doc, topics, doc_start, num_tokens, num_topics, wide=False)
    by_sorting = count_by_sorting(doc, topics, doc_start, num_tokens, num_topics, wide=False)
    for mine, theirs in zip(table, by_sorting):
        assert mine.dtype == theirs.dtype
        np.testing.assert_array_equal(mine, theirs)
    # and they are the documents' counts, topics increasing at each segment's front
    pair_topics, counts = map(np.asarray, unpack_pairs(table[0], num_topics))
    for d in range(len(doc_start) - 1):
        tokens = topics[doc_start[d]:doc_start[d + 1]][doc[doc_start[d]:doc_start[d + 1]] == d]
        tokens = tokens[:max(0, num_tokens - doc_start[d])]
        values, expected = np.unique(tokens, return_counts=True)
        nnz = int(table[1][d])
        assert nnz == len(values)
        np.testing.assert_array_equal(pair_topics[doc_start[d]:][:nnz], values)
        np.testing.assert_array_equal(counts[doc_start[d]:][:nnz], expected)


def test_a_table_with_more_cells_than_positions_is_not_built(monkeypatch):
    doc, topics, doc_start, num_tokens = doc_major(0, 2, np.int16)
    assert (len(doc_start) - 1) * 2 <= len(topics) < (len(doc_start) - 1) * 300
    chosen = []
    for name in ("_count_in_table", "_count_by_sorting"):
        monkeypatch.setattr(segmented_count, name,
                            lambda *args, name=name: chosen.append(name))
    segmented_count.segmented_count(doc, topics, doc_start, num_tokens, 2)
    segmented_count.segmented_count(doc, topics, doc_start, num_tokens, 300)
    assert chosen == ["_count_in_table", "_count_by_sorting"]


@pytest.mark.parametrize("count", ["_count_in_table", "_count_by_sorting"])
def test_the_counts_stores_declare_unique_indices(count):
    """The pairs' stores declare unique indices (segmented_count.distinct_targets), which
    XLA's deterministic mode runs as plain stores (test_sparse_sampler.scatters)."""
    doc, topics, doc_start, num_tokens = doc_major(0, 9, np.int32)
    text = jax.jit(getattr(segmented_count, count), static_argnums=(4, 5)).lower(
        doc, topics, doc_start, num_tokens, 9, False).as_text()
    stores = [unique for unique, combines in scatters(text) if not combines]
    assert len(stores) == 1 and all(stores)
