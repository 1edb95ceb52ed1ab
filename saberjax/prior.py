"""The learned document-topic prior: alpha_k re-estimated from the documents' topic counts.

Minka's fixed point for the Dirichlet-multinomial, computed from histograms as in Wallach's
thesis and Mallet, and run the way tomotopy runs it (`optim_interval`, its default):

    alpha_k  <-  alpha_k  sum_d [psi(A_dk + alpha_k) - psi(alpha_k)]
                        / sum_d [psi(n_d + alpha_0) - psi(alpha_0)],      alpha_0 = sum_k alpha_k

Both sums see the documents only through two histograms: how many documents hold n tokens of
topic k (`count_histogram`, from the sparse A) and how many hold n tokens (`length_histogram`,
fixed for a corpus).  psi(n + a) - psi(a) = sum_{i<n} 1 / (a + i), so a histogram's sum
sum_n c_n [psi(n + a) - psi(a)] is sum_i t_i / (a + i) with t_i = sum_{n>i} c_n, the entries
counted past i (`tail_counts`): integers counted once an update, after which each round is one
division a cell and a sum.  The histograms are integers, counted exactly on each device and
summed over the mesh, so the update computes the same floats on any chunking, streaming or
device count.

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


def tail_counts(histogram: jax.Array) -> jax.Array:
    """float32 [..., width - 1] of an integer histogram [..., width]: column i holds how many
    entries count more than i (t_i = sum_{n>i} c_n, exact integers up to 2^24)."""
    tails = jnp.cumsum(histogram[..., ::-1], axis=-1)[..., ::-1]
    return tails[..., 1:].astype(jnp.float32)


def _padded_to_power_of_two(values: jax.Array) -> jax.Array:
    """values with zero columns appended up to a power-of-two width (pairwise_sum's), once
    rather than every round."""
    width = values.shape[-1]
    padding = (1 << max(0, width - 1).bit_length()) - width
    return jnp.pad(values, [(0, 0)] * (values.ndim - 1) + [(0, padding)])


def _digamma_sums(tails: jax.Array, alpha: jax.Array) -> jax.Array:
    """sum_n c_n [psi(n + alpha) - psi(alpha)] along the last axis, from the histogram's tail
    counts: sum_i t_i / (alpha + i), added in pairwise_sum's order."""
    steps = alpha[..., None] + jnp.arange(tails.shape[-1], dtype=jnp.float32)
    return pairwise_sum(tails / steps)


def fixed_point(alpha: jax.Array, counts: jax.Array, lengths: jax.Array,
                num_topics: int) -> jax.Array:
    """alpha [K_pad] after FIXED_POINT_ROUNDS rounds of Minka's update from the count histogram
    [K_pad, width] and the length histogram [longest + 1]; padding columns stay 0, and alpha is
    unchanged when there is no document to learn from."""
    real = jnp.arange(alpha.shape[0]) < num_topics
    count_tails = _padded_to_power_of_two(tail_counts(counts))
    length_tails = _padded_to_power_of_two(tail_counts(lengths))

    def round_(_, alpha):
        numerator = _digamma_sums(count_tails, alpha)
        denominator = _digamma_sums(length_tails, pairwise_sum(alpha))
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
