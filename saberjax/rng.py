"""Counter-based random numbers keyed by (seed, iteration, global token id).

Every random draw of training is a pure function of the seed, the iteration number and the
token's global id (its position in the corpus in document order).  Nothing depends on the
chunking, the order tokens are visited in, the device count or the backend, so the XLA path and
the Pallas kernels consume the same stream and one seed gives one model.

The mixer is a 32-bit integer hash (xor, shift, multiply on uint32 only), which lowers to Triton
as well as to XLA.  Token ids may exceed 2**32, so they enter as a (low, high) word pair.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

_GOLDEN = np.uint32(0x9E3779B9)
_MUL_1 = np.uint32(0x7FEB352D)
_MUL_2 = np.uint32(0x846CA68B)
_HIGH_WORD_SALT = np.uint32(0x85EBCA6B)
_STREAM_SALT = np.uint32(0xC2B2AE35)
_UNIFORM_SCALE = np.float32(2.0**-24)

# Stream numbers: each random quantity a token draws in one iteration gets its own stream.
STREAM_BRANCH = 0  # sparse part or tree part
STREAM_POSITION = 1  # where in the chosen part
STREAM_INIT = 2  # initial topic
STREAM_BLOCK = 3  # block b of a document's nonzeros uses stream STREAM_BLOCK + b
STREAM_OWN = 1 << 20  # the token's own topic in the sparse part's reservoir (past every block)
STREAM_INIT_WINDOW = STREAM_OWN + 1  # a window's initial topics (esca.initial_topics)


def mix32(x):
    """A strong 32-bit avalanche hash (Wellons' lowbias32); works on numpy and jax uint32."""
    x = x ^ (x >> 16)
    x = x * _MUL_1
    x = x ^ (x >> 15)
    x = x * _MUL_2
    return x ^ (x >> 16)


def iteration_key(seed, iteration):
    """The uint32 key of one (seed, iteration) pair; iteration 0 is initialisation."""
    seed = jnp.asarray(seed, jnp.uint32)
    iteration = jnp.asarray(iteration, jnp.uint32)
    return mix32(mix32(seed ^ _GOLDEN) + iteration)


def token_hash(key, token_lo, token_hi):
    """Per-token uint32 state from the iteration key and the 64-bit global token id."""
    return mix32(key ^ mix32(token_lo ^ mix32(token_hi + _HIGH_WORD_SALT)))


def uniform(state, stream):
    """A float32 uniform in [0, 1) for one stream of a token's hash state (24 random bits)."""
    bits = mix32(state + jnp.asarray(stream, jnp.uint32) * _STREAM_SALT)
    return (bits >> 8).astype(jnp.float32) * _UNIFORM_SCALE


def split_token_id(token_id: int) -> tuple[np.uint32, np.uint32]:
    """The (low, high) uint32 words of a host-side 64-bit token id."""
    return np.uint32(token_id & 0xFFFFFFFF), np.uint32(token_id >> 32)


def global_token_ids(base_lo, base_hi, local_ids):
    """(low, high) uint32 words of base + local_ids, computed without 64-bit integers."""
    local = jnp.asarray(local_ids).astype(jnp.uint32)
    lo = base_lo + local
    hi = base_hi + (lo < local).astype(jnp.uint32)
    return lo, hi
