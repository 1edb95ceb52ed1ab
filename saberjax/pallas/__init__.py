"""Pallas (Triton) GPU kernels of saberjax; `kernels` holds the "pallas" backend's operations
(saberjax.backend).

sampler.py (E-step and shuffle), segmented_count.py (A rebuild), word_topic_count.py (B count),
bhat_tree.py (topic totals, B-hat and trees), atomics.py (integer atomics), warp.py (32-lane sums
and searches inside kernels), kernels.py (the backend), NOTES.md; tools/check_gpu.py checks them
against the XLA path and times them on a GPU.
"""

import jax
import jax.numpy as jnp
from jax.experimental.pallas import triton as plgpu


def default_interpret() -> bool:
    """Run kernels in interpret mode (sequential XLA ops) unless the default backend is a GPU."""
    return jax.default_backend() != "gpu"


def scatter(ref, index, values, mask):
    """ref[index] = values where mask (1-D ref); masked lanes are pointed past the end of ref.

    On a GPU masked lanes touch no memory anyway; interpret mode writes the old value back at
    every masked lane, and with repeated indices that write-back can win over a real store.
    """
    plgpu.store(ref.at[jnp.where(mask, index, ref.shape[0])], values, mask=mask)
