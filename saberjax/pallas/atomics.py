"""Integer atomics for Pallas (Triton) kernels that are right on jax 0.11.2, also in interpret mode.

jax 0.11.2's `plgpu.atomic_add` on an int32 vector compiles to a float add (`atom.add.f32`: it
checks the value's type, a tensor, for being an integer); in interpret mode its atomics keep only
one of the lanes that hit the same element, and exchange does not run at all.  atomic_add and
atomic_swap lower to Triton's integer `atomic_rmw` add and xchg at GPU scope, acquire-release
by default (which also publishes the thread's earlier stores GPU-wide, what a CTA barrier alone
does not do for atomics done in L2) or relaxed (much cheaper), and in interpret mode act lane
by lane in row-major order, returning each lane the value it would have seen then: one order a
GPU may take.  The indices must be integer arrays or scalars (no slices), as in
`ref.at[row, columns]`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax._src import core as jax_core
from jax._src import tree_util
from jax._src.lib.triton import dialect as tt_dialect
from jax._src.pallas import primitives as pallas_primitives
from jax._src.pallas.triton import lowering as triton_lowering
from jax._src.state import discharge as state_discharge
from jax._src.state import indexing
from jax._src.state import primitives as state_primitives

__all__ = ["atomic_add", "atomic_swap"]

atomic_rmw_p = jax_core.Primitive("saber_atomic_rmw")


SEMANTICS = {"relaxed": tt_dialect.MemSemantic.RELAXED,
             "acq_rel": tt_dialect.MemSemantic.ACQUIRE_RELEASE}


def _atomic(ref, indices, values, mask, operation: str, semantic: str):
    if not jnp.issubdtype(ref.dtype, jnp.integer):
        raise TypeError(f"saberjax atomics are for integer refs, not {ref.dtype}")
    if semantic not in SEMANTICS:
        raise ValueError(f"semantic must be one of {sorted(SEMANTICS)}, got {semantic!r}")
    ref, transforms = state_primitives.get_ref_and_transforms(ref, indices, "atomic")
    args_flat, args_tree = tree_util.tree_flatten((ref, transforms, values, mask))
    return atomic_rmw_p.bind(*args_flat, args_tree=args_tree, operation=operation,
                             semantic=semantic)


def atomic_add(ref, indices, values, *, mask=None, semantic: str = "acq_rel"):
    """Atomically ref[indices] += values where mask; returns the old values.

    semantic "acq_rel" orders the thread's other memory accesses around the atomic (a fence
    each time: costly), "relaxed" only makes the add itself atomic (enough for counting).
    """
    return _atomic(ref, indices, values, mask, "add", semantic)


def atomic_swap(ref, indices, values, *, mask=None, semantic: str = "acq_rel"):
    """Atomically ref[indices] = values where mask; returns the old values (semantic: as
    atomic_add's)."""
    return _atomic(ref, indices, values, mask, "swap", semantic)


atomic_rmw_p.def_effectful_abstract_eval(pallas_primitives._swap_abstract_eval)


@state_discharge.register_discharge_rule(atomic_rmw_p)
def _discharge(ctx, *args_flat, args_tree, operation, semantic):
    """Interpret mode: the lanes one after another in row-major order."""
    del semantic  # one program runs at a time
    ref, transforms, values, mask = args_tree.unflatten(args_flat)
    (indexer,) = transforms
    if any(isinstance(index, indexing.Slice) for index in indexer.indices):
        raise NotImplementedError("saberjax atomics take integer indices, not slices")
    # staged, not folded, where the kernel passes constants (a folded constant is a const of
    # the discharged jaxpr, which a loop's body must not have)
    values = jax.lax.optimization_barrier(jnp.asarray(values))
    positions = tuple(jnp.broadcast_to(jax.lax.optimization_barrier(jnp.asarray(index)),
                                       values.shape) for index in indexer.indices)
    flat = jnp.ravel_multi_index(positions, ref.shape, mode="clip").ravel()
    lane_values = values.ravel().astype(ref.dtype)
    active = jnp.ones(flat.shape, bool) if mask is None else mask.ravel()
    lanes = jax.lax.iota(jnp.int32, flat.shape[0])  # not arange: a constant fails in loops
    same = (flat[:, None] == flat[None, :]) & active[None, :]  # [lane, other lane]
    earlier = same & (lanes[None, :] < lanes[:, None])
    table = ref.ravel()
    if operation == "add":
        old = table[flat] + jnp.sum(jnp.where(earlier, lane_values[None, :], 0), axis=1)
        table = table.at[flat].add(jnp.where(active, lane_values, 0))
    else:
        last_earlier = jnp.max(jnp.where(earlier, lanes[None, :], -1), axis=1)
        old = jnp.where(last_earlier >= 0, lane_values[last_earlier], table[flat])
        last = active & ~jnp.any(same & (lanes[None, :] > lanes[:, None]), axis=1)
        table = table.at[jnp.where(last, flat, table.shape[0])].set(lane_values, mode="drop")
    return ((table.reshape(ref.shape),) + (None,) * (len(args_flat) - 1),
            old.reshape(values.shape))


def _lowering(ctx, *args_flat, args_tree, operation, semantic):
    """Triton's integer atomic_rmw (GPU scope) on the indexed pointers."""
    (block_info, *_) = ctx.block_infos
    pointers, (indexer,), values, mask = args_tree.unflatten(args_flat)
    *_, values_aval, mask_aval = args_tree.unflatten(ctx.avals_in)
    pointers = triton_lowering._compute_pointers_from_indices(pointers, block_info, indexer)
    values = triton_lowering._ensure_ir_value(values, values_aval)
    if mask is not None:
        mask = triton_lowering._ensure_ir_value(mask, mask_aval)
    kind = {"add": tt_dialect.RMWOp.ADD, "swap": tt_dialect.RMWOp.XCHG}[operation]
    return triton_lowering._atomic_rmw(kind, pointers, values, mask=mask,
                                       semantic=SEMANTICS[semantic])


triton_lowering.triton_lowering_rules[atomic_rmw_p] = _lowering
