"""The learned document-topic prior: alpha_k re-estimated from the documents' topic counts.

Minka's fixed point for the Dirichlet-multinomial, computed from histograms as in Wallach's
thesis and Mallet, and run the way tomotopy runs it (`optim_interval`, its default):

    alpha_k  <-  alpha_k  sum_d [psi(A_dk + alpha_k) - psi(alpha_k)]
                        / sum_d [psi(n_d + alpha_0) - psi(alpha_0)],      alpha_0 = sum_k alpha_k

Both sums see the documents only through two histograms: how many documents hold n tokens of
topic k (`count_histogram`, from the sparse A) and how many hold n tokens (`length_histogram`,
fixed for a corpus), and psi(n + a) - psi(a) = sum_{i<n} 1 / (a + i) is a cumulative sum over
n.  The histograms are integers, counted exactly on each device and summed over the mesh, so
the update computes the same floats on any chunking, streaming or device count.

Each update runs FIXED_POINT_ROUNDS rounds (tomotopy's 10) and keeps every alpha_k at least
MIN_ALPHA (a topic no document uses would otherwise reach 0, where the sampler never draws it
again).  The count histogram has one column per count up to the longest document's length, but
at most HISTOGRAM_CELLS cells in all; when K makes that fewer columns than counts occur, the
counts past the last column are taken as the last column's.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from saberjax.state import unpack_pairs
from saberjax.tree import pairwise_sum

FIXED_POINT_ROUNDS = 10
MIN_ALPHA = 1e-5
# Cells of the per-topic count histogram: 64 MB of int32, exact for every count of wiki25k
# (longest document 14,264 tokens) at K = 1,024.
HISTOGRAM_CELLS = 1 << 24


def histogram_width(longest_document: int, padded_topics: int) -> int:
    """Columns of the count histogram (counts 0 .. width - 1): one per possible count, within
    HISTOGRAM_CELLS cells."""
    return int(max(2, min(longest_document + 1, HISTOGRAM_CELLS // padded_topics)))


def length_histogram(doc_lengths) -> np.ndarray:
    """int32 [longest + 1]: how many documents have each length (length 0 included)."""
    lengths = np.asarray(doc_lengths, np.int64)
    return np.bincount(lengths, minlength=int(lengths.max(initial=0)) + 1).astype(np.int32)


def count_histogram(a_pairs: jax.Array, histogram: jax.Array) -> jax.Array:
    """histogram [K_pad, width] (int32) plus the packed A pairs' counts: one per (topic, count)
    of a nonzero pair (counts past the last column in the last column)."""
    topics, counts = unpack_pairs(a_pairs, histogram.shape[0])
    # the empty slots (count 0) go to a row past the last, which the scatter drops, so they
    # cost no atomic add (all of them on one cell made the pass 40x slower)
    rows = jnp.where(counts > 0, topics, histogram.shape[0])
    column = jnp.minimum(counts, histogram.shape[1] - 1)
    return histogram.at[rows, column].add(1, mode="drop")


def _digamma_steps(alpha: jax.Array, width: int) -> jax.Array:
    """psi(n + alpha) - psi(alpha) for n = 0 .. width - 1 along a new last axis (float32)."""
    steps = 1.0 / (alpha[..., None] + jnp.arange(width - 1, dtype=jnp.float32))
    return jnp.concatenate([jnp.zeros((*alpha.shape, 1), jnp.float32),
                            jnp.cumsum(steps, axis=-1)], axis=-1)


def fixed_point(alpha: jax.Array, counts: jax.Array, lengths: jax.Array,
                num_topics: int) -> jax.Array:
    """alpha [K_pad] after FIXED_POINT_ROUNDS rounds of Minka's update from the count histogram
    [K_pad, width] and the length histogram [longest + 1]; padding columns stay 0, and alpha is
    unchanged when there is no document to learn from."""
    real = jnp.arange(alpha.shape[0]) < num_topics
    counts = counts.astype(jnp.float32)
    lengths = lengths.astype(jnp.float32)

    def round_(_, alpha):
        numerator = pairwise_sum(counts * _digamma_steps(alpha, counts.shape[1]))
        denominator = pairwise_sum(lengths * _digamma_steps(pairwise_sum(alpha),
                                                            lengths.shape[0]))
        updated = jnp.maximum(alpha * numerator / denominator, MIN_ALPHA)
        return jnp.where(real & (denominator > 0), updated, alpha)

    return jax.lax.fori_loop(0, FIXED_POINT_ROUNDS, round_, alpha.astype(jnp.float32))


def is_due(iteration, every: int, burn_in: int):
    """Whether alpha is re-estimated after `iteration`: every `every` iterations (0: never),
    once more than `burn_in` have run.  iteration: an int (a bool back) or a traced integer
    inside jit (a traced bool back, for lax.cond)."""
    if not every:
        return False
    return (iteration > burn_in) & (iteration % every == 0)
