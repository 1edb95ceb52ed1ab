"""The training state: immutable pytrees of arrays, nothing hidden.

`TrainState` holds, per chunk, the topic assignments z (word-major) and the sparse doc-topic
matrix A (doc-major, each document's (topic, count) pairs compacted at the front of its
segment, `a_nnz` pairs per document, each pair packed in one uint32: see pack_pairs), and the
model: the word-topic counts B, the per-topic totals, B-hat (bfloat16, BHAT_DTYPE), the
document-topic prior alpha (one value per topic: learned by saberjax.prior, or the same for
every topic) and the W-ary sampling trees over alpha_k B-hat_vk (float32).  Topic columns are
padded to a multiple of 32 (the tree width); padding columns are zero in every array.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from saberjax.tree import padded_width

# B-hat is stored in bfloat16.  Its rows are what the E-step gathers from L1 while a word's
# tiles run, and halving them cuts the cache lines a 32-lane gather touches and lets more rows
# stay in L1, faster at every K measured (docs/measurements/kernels.md); it also shrinks the
# model by a quarter.  A draw's probabilities change by at most 2^-9 relative; held-out scores
# stay within the seed-to-seed spread (docs/measurements/quality.md).  The trees above B-hat
# stay float32.
BHAT_DTYPE = jnp.bfloat16


def pair_topic_bits(num_topics: int) -> int:
    """Low bits of a packed A pair that hold its topic: enough for every padded topic column."""
    return (padded_width(num_topics) - 1).bit_length()


def max_pair_count(num_topics: int) -> int:
    """The largest count a packed A pair holds (its high bits): 65,535 or more for K <= 65,536,
    so a document may have that many tokens."""
    return (1 << (32 - pair_topic_bits(num_topics))) - 1


# A's wide pairs: a complex64 each, the topic its real part and the count its imaginary part,
# both float32 integers, exact up to 2^24 (a 64-bit pair without JAX's 64-bit mode).
WIDE_PAIR_DTYPE = jnp.complex64
MAX_WIDE_PAIR_COUNT = 1 << 24


def needs_wide_pairs(longest_document: int, num_topics: int) -> bool:
    """Whether A's pairs must be wide (pack_pairs) for documents of up to longest_document
    tokens at num_topics topics: a count exceeds what the packed uint32 holds."""
    return int(longest_document) > max_pair_count(num_topics)


def check_document_lengths(doc_lengths) -> None:
    """Raise ValueError naming the first document with more tokens than any A pair can count
    (MAX_WIDE_PAIR_COUNT; one longer than max_pair_count(K) needs wide pairs)."""
    too_long = np.flatnonzero(np.asarray(doc_lengths) > MAX_WIDE_PAIR_COUNT)
    if too_long.size:
        doc = int(too_long[0])
        raise ValueError(
            f"document {doc} has {int(doc_lengths[doc]):,} tokens, but a document may have at "
            f"most {MAX_WIDE_PAIR_COUNT:,} (A's counts are exact float32 integers); split "
            f"longer documents")


def pair_dtype(wide: bool):
    """The dtype of A's pairs: uint32 packed, or WIDE_PAIR_DTYPE."""
    return WIDE_PAIR_DTYPE if wide else jnp.uint32


def pack_pairs(topics: jax.Array, counts: jax.Array, num_topics: int,
               wide: bool = False) -> jax.Array:
    """A's (topic, count) pairs as uint32 count << pair_topic_bits | topic, or (wide) as
    complex64 topic + i count.

    One 4-byte word instead of an int16 topic and an int32 count: a third less memory, and
    one load per nonzero in the E-step, a faster Pallas kernel (docs/measurements/kernels.md).
    Wide pairs (8 bytes) hold counts beyond max_pair_count(num_topics) (needs_wide_pairs): the
    plan takes them where a document is that long.
    """
    if wide:
        return jax.lax.complex(topics.astype(jnp.float32), counts.astype(jnp.float32))
    return ((counts.astype(jnp.uint32) << pair_topic_bits(num_topics))
            | topics.astype(jnp.uint32))


def unpack_pairs(pairs: jax.Array, num_topics: int) -> tuple[jax.Array, jax.Array]:
    """(topics, counts), both int32, of A pairs, packed or wide (by their dtype)."""
    if jnp.iscomplexobj(pairs):
        return pairs.real.astype(jnp.int32), pairs.imag.astype(jnp.int32)
    bits = pair_topic_bits(num_topics)
    return ((pairs & ((1 << bits) - 1)).astype(jnp.int32), (pairs >> bits).astype(jnp.int32))


class ChunkState(NamedTuple):
    """What one chunk learns: z and the sparse A of its documents.  A chunk store's states
    are z alone (a_pairs and a_nnz None): A is a function of z (esca.state_of_topics)."""

    topics: jax.Array  # [T_pad] topic of each word-major token
    a_pairs: jax.Array  # uint32 (wide: complex64) [T_pad] doc-major; document d's (topic,
    # count) pairs (pack_pairs) at its segment's front, topics increasing (the rest of the
    # segment, and padding, hold 0)
    a_nnz: jax.Array  # int32 [D_pad] nonzeros of each document


class Model(NamedTuple):
    """The global part of the state, on the device for the whole run."""

    word_topic: jax.Array  # int32 [V, K_pad] B
    topic_totals: jax.Array  # int32 [K_pad] column sums of B
    bhat: jax.Array  # BHAT_DTYPE [V, K_pad] (B + beta) / (totals + V beta); padding columns 0
    tree: tuple[jax.Array, ...]  # float32 [V, width] upper levels of the trees over
    # alpha_k B-hat_vk, top first (the leaves are B-hat times alpha, formed as they are read)
    tree_total: jax.Array  # float32 [V] sum of each row of alpha_k B-hat_vk as the tree adds it
    alpha: jax.Array  # float32 [K_pad] the document-topic prior alpha_k; 0 in padding columns
    bhat_denominator: jax.Array  # float32 [K_pad] topic total + V beta, B-hat's denominators


class TrainState(NamedTuple):
    chunks: tuple[ChunkState, ...]
    model: Model
    iteration: jax.Array  # int32 scalar: completed ESCA iterations
    seed: jax.Array  # uint32 scalar
