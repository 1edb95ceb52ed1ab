"""Triton compiler parameters with a cap on the registers a thread of the kernel uses.

Pallas's Triton CompilerParams hold num_warps and num_stages only, and XLA's
`xla_gpu_ptx_compiler_extra_flags=-maxrregcount=N` does not reach a Pallas kernel
(docs/measurements/roofline.md).  A one-warp program's registers set how many programs an SM
holds (65,536 registers over 32 threads each), so the cap is a kernel knob here:
`compiler_params(num_warps, num_stages, max_registers)` gives parameters whose lowering
(registered for CappedParams) puts `nvvm.maxnreg` on the Triton module's kernel function, which
Triton's conversion to LLVM keeps and the NVPTX backend emits as the kernel's `.maxnreg` (ptxas
then spills what does not fit).
"""

from __future__ import annotations

import dataclasses

from jax._src.lib.mlir import ir
from jax._src.pallas import core as pallas_core
from jax._src.pallas.triton import pallas_call_registration
from jax.experimental.pallas import triton as plgpu

__all__ = ["CappedParams", "compiler_params"]


@dataclasses.dataclass(frozen=True)
class CappedParams(plgpu.CompilerParams):
    """plgpu.CompilerParams and the most registers a thread may use."""
    max_registers: int | None = None


def compiler_params(num_warps: int, num_stages: int, max_registers: int | None = None):
    """Triton compiler parameters; with max_registers, ones that cap the kernel's registers."""
    if max_registers is None:
        return plgpu.CompilerParams(num_warps=num_warps, num_stages=num_stages)
    return CappedParams(num_warps=num_warps, num_stages=num_stages,
                        max_registers=max_registers)


def _capped_lowering(ctx, *in_nodes, compiler_params: CappedParams, **params):
    """Pallas's Triton lowering, with `nvvm.maxnreg` set on the module's functions."""
    lowering = pallas_call_registration.lowering
    lower = lowering.lower_jaxpr_to_triton_module

    def lower_capped(*args, **kwargs):
        result = lower(*args, **kwargs)
        cap = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), compiler_params.max_registers)
        for operation in result.module.body.operations:
            operation.attributes["nvvm.maxnreg"] = cap
        return result

    lowering.lower_jaxpr_to_triton_module = lower_capped
    try:
        return pallas_call_registration.pallas_call_lowering(
            ctx, *in_nodes, compiler_params=compiler_params, **params)
    finally:
        lowering.lower_jaxpr_to_triton_module = lower


pallas_core.register_lowering_rule(CappedParams, _capped_lowering, "gpu")
