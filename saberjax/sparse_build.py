"""The sparse model (sparse_rows.SparseModel) built from B's rows, once an iteration: the rows'
prefix sums, bucket directory and tables, the dense rows' B-hat and trees, and the prior's
tree, plain JAX.

Most of the build is passes over arrays as long as the rows' capacity (a device's tokens),
while B's nonzeros, after the first iterations, are a fraction of it.  The build runs on the
shortest prefix of the entries that holds them (capacity // share for a share of
sparse_rows.COMPACTION, a prefix of at least its min_entries; a lax.switch on the nonzeros),
or on the whole capacity where none does, and pads the arrays as long as the entries back to
the capacity.  Every way gives the same model: the entries past the nonzeros are empty, the
row tables are sized for the whole capacity (sparse_rows.row_tables), and the prefix sums'
scan (jax.lax.associative_scan) combines position i's terms in the same order whatever the
array's length.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from saberjax.mstep import bhat_denominator
from saberjax.segmented_count import store_distinct
from saberjax.sparse_rows import (COMPACTION, DENSE_ROW_BYTES, DENSE_ROW_DTYPE,
                                  ROW_TABLE_BYTES, ROW_TABLE_SPREAD, ROW_TABLE_WINDOW,
                                  Compaction, SparseModel, SparseRows, dense_row_count,
                                  nonzero_rows, on_nonzero_prefix, row_buckets, row_tables,
                                  segmented_prefix_sum)
from saberjax.tree import build_tree, tree_totals, weighted_leaves


def model_from_totals(rows: SparseRows, totals: jax.Array, alpha: jax.Array, num_topics: int,
                      beta: float, num_words: int, dense_row_bytes: int = DENSE_ROW_BYTES,
                      dense_dtype=DENSE_ROW_DTYPE, row_table_bytes: int = ROW_TABLE_BYTES,
                      row_table_window: int = ROW_TABLE_WINDOW,
                      row_table_spread: int = ROW_TABLE_SPREAD,
                      compaction: Compaction = COMPACTION,
                      packed_fill: bool = True) -> SparseModel:
    """The sparse model of B's rows given the topic totals of all of B (summed over devices),
    the prior alpha [K_pad] and the vocabulary's V; dense_row_bytes, dense_dtype: the dense
    rows' bytes and type (sparse_rows.dense_row_count); row_table_*: the row tables'
    (sparse_rows.row_tables); compaction: the entries' prefixes the build may run on
    (sparse_rows.Compaction); packed_fill: the dense rows' (dense_rows)."""
    capacity = rows.topics.shape[0]
    build = functools.partial(
        _model_of_entries, totals=totals, alpha=alpha, num_topics=num_topics, beta=beta,
        num_words=num_words, dense=(dense_row_bytes, dense_dtype, packed_fill),
        tables=(row_table_bytes, row_table_window, row_table_spread, capacity))
    model = on_nonzero_prefix(
        rows, compaction,
        lambda entries: _padded(build(_first_entries(rows, entries)), capacity),
        lambda: build(rows))
    return model._replace(word_topic=rows)


def _first_entries(rows: SparseRows, count: int) -> SparseRows:
    """The rows with their first `count` entries (all their nonzeros where they fit)."""
    return SparseRows(rows.row_start, rows.topics[:count], rows.counts[:count])


def _padded(model: SparseModel, capacity: int) -> SparseModel:
    """A model built on a prefix of the entries with its arrays as long as the entries padded
    to a capacity's: prefix sums past the rows 0, directory slots past the last bucket the
    rows' end (its last slot's value).  The prefix sums are stored whole before the pad (an
    optimization barrier), which XLA would otherwise fuse with the scan's last level, that
    pass then running over the whole capacity."""
    extra = capacity - model.row_prefix.shape[0]
    return model._replace(
        row_prefix=jnp.pad(jax.lax.optimization_barrier(model.row_prefix), (0, extra)),
        buckets=model.buckets._replace(
            start=jnp.pad(model.buckets.start, (0, extra), mode="edge")))


def _model_of_entries(rows: SparseRows, *, totals, alpha, num_topics: int, beta: float,
                      num_words: int, dense: tuple, tables: tuple) -> SparseModel:
    """model_from_totals of rows holding all their nonzeros, without the rows (word_topic
    None); dense: (dense_row_bytes, dense_dtype, packed_fill); tables: row_tables'
    (table_bytes, window, spread, capacity)."""
    dense_row_bytes, dense_dtype, packed_fill = dense
    padded_topics = totals.shape[0]
    denominator = bhat_denominator(totals, num_words, beta)
    filled = jnp.arange(rows.topics.shape[0]) < rows.row_start[-1]
    topic = jnp.where(filled, rows.topics, 0)
    weight = jnp.where(filled, alpha[topic] * rows.counts.astype(jnp.float32)
                       / denominator[topic], 0.0)
    row_of_entry = nonzero_rows(rows)
    row_prefix = segmented_prefix_sum(weight, row_of_entry)
    num_dense = dense_row_count(rows.num_rows, padded_topics, dense_row_bytes, dense_dtype)
    dense_bhat, dense_tree = dense_rows(rows, row_of_entry, denominator, alpha, num_topics, beta,
                                        num_dense, dense_dtype, packed_fill=packed_fill)
    ends = rows.row_start[1:]
    row_mass = jnp.where(ends > rows.row_start[:-1], row_prefix[jnp.maximum(ends - 1, 0)], 0.0)
    real_topic = jnp.arange(padded_topics) < num_topics
    prior_leaves = jnp.where(real_topic, jnp.float32(beta) / denominator, 0.0)[None, :]
    prior_tree = build_tree(weighted_leaves(prior_leaves, alpha))
    return SparseModel(None, row_buckets(rows, row_of_entry, padded_topics),
                       row_tables(rows, row_of_entry, padded_topics, num_dense, *tables),
                       totals, alpha, denominator, jnp.float32(beta), row_prefix,
                       row_mass, prior_leaves, prior_tree,
                       tree_totals(prior_tree, prior_leaves, alpha), dense_bhat, dense_tree,
                       tree_totals(dense_tree, dense_bhat, alpha))


def dense_rows(rows: SparseRows, row_of_entry: jax.Array, denominator: jax.Array,
               alpha: jax.Array, num_topics: int, beta: float, num_dense: int,
               dtype=DENSE_ROW_DTYPE, *,
               packed_fill: bool = True) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    """(B-hat of the first num_dense rows in dtype [num_dense, K_pad], the levels of their
    trees over alpha_k B-hat_vk, summed in float32 from the values B-hat holds): beta / D_k
    everywhere, (B_vk + beta) / D_k at the rows' nonzeros (the values of mstep.float32_bhat),
    0 in padding columns; packed_fill: the rows filled as uint32 pairs of 2-byte values
    (filled_rows)."""
    padded_topics = denominator.shape[0]
    real_topic = jnp.arange(padded_topics) < num_topics
    empty = jnp.where(real_topic, jnp.float32(beta) / denominator, 0.0).astype(dtype)
    in_dense = (jnp.arange(rows.topics.shape[0]) < rows.row_start[-1]) & (row_of_entry
                                                                           < num_dense)
    topic = jnp.where(in_dense, rows.topics, 0)
    bhat = store_distinct(filled_rows(empty, num_dense, packed_fill), row_of_entry, in_dense,
                          ((rows.counts + beta) / denominator[topic]).astype(dtype), topic)
    return bhat, build_tree(weighted_leaves(bhat, alpha))


def filled_rows(value: jax.Array, num_rows: int, packed: bool = True) -> jax.Array:
    """[num_rows, K_pad] rows of `value` [K_pad]; packed: 2-byte values written as uint32
    pairs (twice the bytes a store)."""
    if not packed or value.dtype.itemsize != 2 or value.shape[0] % 2:
        return jnp.broadcast_to(value, (num_rows, value.shape[0]))
    pairs = jax.lax.bitcast_convert_type(value.reshape(-1, 2), jnp.uint32)
    return jax.lax.bitcast_convert_type(jnp.broadcast_to(pairs, (num_rows, pairs.shape[0])),
                                        value.dtype).reshape(num_rows, -1)
