"""The training state: immutable pytrees of arrays, nothing hidden.

`TrainState` holds, per chunk, the topic assignments z (word-major) and the sparse doc-topic
matrix A (doc-major, each document's (topic, count) pairs compacted at the front of its
segment, `a_nnz` pairs per document), and the model: the word-topic counts B, the per-topic
totals, B-hat and the W-ary sampling trees over B-hat.  Topic columns are padded to a multiple
of 32 (the tree width); padding columns are zero in every array.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from saberjax.tree import padded_width

MAX_INT16_TOPICS = 32_767


@dataclasses.dataclass(frozen=True)
class Hyperparams:
    """Static settings of an ESCA run (hashable, so jit can specialise on them)."""

    num_topics: int
    alpha: float
    beta: float = 0.01
    backend: str = "xla"

    def __post_init__(self):
        if self.num_topics < 2:
            raise ValueError(f"num_topics must be at least 2, got {self.num_topics}")
        if not self.alpha > 0 or not self.beta > 0:
            raise ValueError(f"alpha and beta must be positive, got {self.alpha}, {self.beta}")
        if self.backend not in ("xla", "pallas"):
            raise ValueError(f"backend must be 'xla' or 'pallas', got {self.backend!r}")

    @classmethod
    def create(cls, num_topics: int, alpha: float | None = None, beta: float = 0.01,
               backend: str = "xla") -> "Hyperparams":
        """Settings with the paper's default alpha = 50 / K when alpha is None."""
        alpha = 50.0 / num_topics if alpha is None else float(alpha)
        return cls(int(num_topics), alpha, float(beta), backend)

    @property
    def padded_topics(self) -> int:
        return padded_width(self.num_topics)

    @property
    def topic_dtype(self):
        """int16 topic ids while they fit (halves the bytes of z and A), else int32."""
        return jnp.int16 if self.num_topics <= MAX_INT16_TOPICS else jnp.int32


class ChunkState(NamedTuple):
    """What one chunk learns: z and the sparse A of its documents."""

    topics: jax.Array  # [T_pad] topic of each word-major token
    a_topics: jax.Array  # [T_pad] doc-major; topics of document d's nonzeros at its segment front
    a_counts: jax.Array  # int32 [T_pad] doc-major; their counts
    a_nnz: jax.Array  # int32 [D_pad] nonzeros of each document


class Model(NamedTuple):
    """The global part of the state, on the device for the whole run."""

    word_topic: jax.Array  # int32 [V, K_pad] B
    topic_totals: jax.Array  # int32 [K_pad] column sums of B
    bhat: jax.Array  # float32 [V, K_pad] (B + beta) / (totals + V beta); padding columns 0
    tree: tuple[jax.Array, ...]  # float32 [V, width] upper tree levels, top first
    tree_total: jax.Array  # float32 [V] sum of each B-hat row as the tree adds it up


class TrainState(NamedTuple):
    chunks: tuple[ChunkState, ...]
    model: Model
    iteration: jax.Array  # int32 scalar: completed ESCA iterations
    seed: jax.Array  # uint32 scalar
