"""How saberjax compiles the programs it runs: jax.jit with the XLA options under which one
compilation computes the same bits as any other.

XLA's GPU compiler times candidate kernels of some operations (autotuning) and keeps the
fastest, a timing race; where the candidates add floats in other orders, two compilations of
one program give other bits, and two trainings of one seed part at the first such sum.
`xla_gpu_deterministic_ops` makes the compiler choose kernels that give the same result on
every compilation and run.  The options reach saberjax's own programs alone (jax.jit's
compiler_options), never the other JAX code of the user's process as XLA_FLAGS would; on a
CPU they change nothing.
"""

from __future__ import annotations

import jax

COMPILER_OPTIONS = {"xla_gpu_deterministic_ops": True}


def jit(fun, **jit_kwargs):
    """jax.jit(fun, **jit_kwargs) compiled with COMPILER_OPTIONS.  For the programs saberjax
    calls at the top: jax refuses compiler options on a jitted function called inside another,
    which compiles as part of the outer program, under its options (so the kernels' and
    esca's jitted steps stay plain jax.jit and the programs calling them use this)."""
    return jax.jit(fun, compiler_options=COMPILER_OPTIONS, **jit_kwargs)
