"""take_from_row: gather from a row held by the program, through shared memory on the GPU.

Pallas-Triton gives a kernel no shared memory, and a gather from a global-memory row touches one
L1 sector per distinct 32 bytes (NOTES.md: the E-step was L1-bound on its B-hat gathers).
Triton's `tt.gather` gathers from a register tensor: its GPU lowering stores the tensor to
shared memory and reads the indexed elements back, one bank access per lane (the paper's
shared-memory B-hat row).  jax 0.11.2 has no Pallas lowering that emits it, so this module
defines a primitive with one: `row[indices]` for a 1-D power-of-two row and int32 indices of any
shape (flattened for tt.gather, which wants equal ranks).  Outside a Triton kernel (interpret
mode, XLA) the primitive is jnp.take, so the reference semantics are the plain gather.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax._src.interpreters import mlir
from jax._src.lib.mlir import ir
from jax._src.lib.triton import dialect as tt_dialect
from jax._src.pallas.triton import lowering as triton_lowering
from jax.extend import core as jex_core

__all__ = ["take_from_row"]

take_from_row_p = jex_core.Primitive("take_from_row")


def take_from_row(row, indices):
    """row[indices] (row: 1-D, power-of-two length; indices: int32, in range, any shape)."""
    if row.ndim != 1 or row.shape[0] & (row.shape[0] - 1):
        raise ValueError(f"take_from_row needs a 1-D power-of-two row, got shape {row.shape}")
    return take_from_row_p.bind(row, indices.astype(jnp.int32))


def _take(row, indices):
    """row[indices] as one lax.gather (jnp.take is a jit whose cached lowering, in interpret
    mode, was reused for operands of another dtype)."""
    return jax.lax.gather(
        row, indices[..., None],
        jax.lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,),
                                       start_index_map=(0,)),
        slice_sizes=(1,), mode=jax.lax.GatherScatterMode.CLIP)


take_from_row_p.def_impl(_take)
take_from_row_p.def_abstract_eval(
    lambda row, indices: jax.core.ShapedArray(indices.shape, row.dtype))
mlir.register_lowering(take_from_row_p, mlir.lower_fun(_take, multiple_results=False))


def _triton_lowering(ctx, row, indices):
    """tt.gather on the flattened indices, reshaped back to their shape."""
    [row_aval, index_aval] = ctx.avals_in
    size = math.prod(index_aval.shape)
    element = triton_lowering._dtype_to_ir_type(row_aval.dtype)
    index_element = triton_lowering._dtype_to_ir_type(index_aval.dtype)
    flat = indices
    if index_aval.ndim != 1:
        flat = tt_dialect.reshape(ir.RankedTensorType.get([size], index_element),
                                  indices)
    gathered = tt_dialect.gather(row, flat, 0)
    if index_aval.ndim == 1:
        return gathered
    return tt_dialect.reshape(
        ir.RankedTensorType.get(list(index_aval.shape), element), gathered)


triton_lowering.triton_lowering_rules[take_from_row_p] = _triton_lowering
