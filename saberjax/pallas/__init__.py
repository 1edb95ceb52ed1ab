"""Pallas (Triton) GPU kernels of saberjax; `kernels.BACKEND` is esca's "pallas" backend.

sampler.py (E-step), segmented_count.py (A rebuild), warp.py (32-lane sums and searches inside
kernels), kernels.py (the backend), check_gpu.py (agreement and timings on a GPU), NOTES.md.
"""

import jax


def default_interpret() -> bool:
    """Run kernels in interpret mode (sequential XLA ops) unless the default backend is a GPU."""
    return jax.default_backend() != "gpu"
