"""B's sparse rows of streamed chunks: every token's (row, topic) kept as the chunks pass, then
counted once at the end of the iteration.

Streaming by documents (saberjax.streaming, the chunk store) runs slot after slot against a
model held fixed for the iteration; the dense model adds each slot's tokens into partial
counts B_d.  The sparse model's rows cannot be added into in place (a row's nonzeros move as
topics appear), so each device keeps its streamed tokens' keys instead, packed at the front
of a fixed capacity (the padded tokens of its slots)::

    slot 0: rows, topics of its real tokens  -> keys[0 : n0]
    slot 1:                                  -> keys[n0 : n0 + n1]     ...

and the iteration's end gathers every device's keys (all_gather: 8 bytes a token) and counts
them into B's whole rows on every device (sparse_rows.count_rows: the (row, topic) pairs
sorted and counted in runs), the same rows whatever the chunking or the device count.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from saberjax import sparse_rows
from saberjax.segmented_count import store_distinct


class TokenKeys(NamedTuple):
    """The (row of B, topic) of every real token of a device's streamed chunks so far, packed
    at the front; entries from `filled` on are free."""

    rows: jax.Array  # int32 [capacity]
    topics: jax.Array  # int32 [capacity]
    filled: jax.Array  # int32 scalar


class _Tokens(NamedTuple):
    """The tokens sparse_rows.count_rows reads: their rows (`word`), real ones first."""

    word: jax.Array
    num_tokens: jax.Array

    @property
    def padded_tokens(self) -> int:
        return self.word.shape[0]


def empty(capacity: int) -> TokenKeys:
    """Keys of no token, room for `capacity`."""
    return TokenKeys(jnp.zeros(capacity, jnp.int32), jnp.zeros(capacity, jnp.int32),
                     jnp.int32(0))


def appended(keys: TokenKeys, chunk, topics: jax.Array) -> TokenKeys:
    """keys with a chunk's real tokens (chunk.word: rows of B) and their word-major topics
    after them.  The chunk's padding is written too and overwritten by the next chunk: the
    capacity holds every chunk's padded tokens, so the slice never runs past it."""
    start = (keys.filled,)
    return TokenKeys(lax.dynamic_update_slice(keys.rows, chunk.word.astype(jnp.int32), start),
                     lax.dynamic_update_slice(keys.topics, topics.astype(jnp.int32), start),
                     keys.filled + chunk.num_tokens.astype(jnp.int32))


def gathered(keys: TokenKeys, axis_names) -> TokenKeys:
    """Every device's keys along axis_names (inside shard_map), packed device after device:
    an all_gather, then each device's real keys moved to the end of the ones before."""
    rows, topics, filled = (lax.all_gather(array, axis_names) for array in keys)
    devices, capacity = filled.shape[0], keys.rows.shape[0]
    first = jnp.cumsum(filled) - filled
    position = jnp.arange(capacity, dtype=jnp.int32)
    target = (first[:, None] + position[None, :]).ravel()
    kept = (position[None, :] < filled[:, None]).ravel()

    def packed(values):
        return store_distinct(jnp.zeros(devices * capacity, jnp.int32), target, kept,
                              values.ravel())

    return TokenKeys(packed(rows), packed(topics), jnp.sum(filled, dtype=jnp.int32))


def counted(keys: TokenKeys, num_rows: int, padded_topics: int) -> sparse_rows.SparseRows:
    """B's sparse rows (num_rows of them) of the keys' tokens, capacity the keys'."""
    return sparse_rows.count_rows(_Tokens(keys.rows, keys.filled), keys.topics, num_rows,
                                  padded_topics)
