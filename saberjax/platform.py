"""Process-level JAX settings that must be made before jax starts."""

from __future__ import annotations

import ctypes
import os

_HOST_DEVICES_FLAG = "--xla_force_host_platform_device_count"
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc mallopt parameters
REUSED_BLOCK_BYTES = 1 << 30  # freed blocks up to this size are kept for reuse
C_INT_MAX = 2**31 - 1


def cpu_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the OS has one)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, cores or 1)


def use_every_cpu_core() -> None:
    """Expose one XLA CPU device per core, so that CPU runs spread chunks over all cores.

    XLA runs each CPU computation on one thread; several host devices run concurrently.  Has no
    effect once jax has started, nor when XLA_FLAGS already sets the device count; on a GPU
    host the extra CPU devices are unused.
    """
    flags = os.environ.get("XLA_FLAGS", "")
    if _HOST_DEVICES_FLAG not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {_HOST_DEVICES_FLAG}={cpu_cores()}".strip()


def reuse_freed_memory() -> None:
    """Keep the memory the process frees for its next allocations instead of handing it back
    to the OS (glibc malloc: blocks under REUSED_BLOCK_BYTES come from the heap, which is
    never trimmed).

    A start-up is a sequence of large temporary arrays (parsing, layout, model); fresh pages
    cost a page fault each, about 1 ms per MB on a virtual machine, so the layout's arrays
    built in the loader's freed buffers come about twice as fast (wiki25k's layout on two
    cores: 1.64 -> 0.88 s in a fresh process).  The peak memory is unchanged, but memory is
    only returned when the process exits.  No effect without glibc.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, REUSED_BLOCK_BYTES)
    mallopt(_M_TRIM_THRESHOLD, C_INT_MAX)  # mallopt takes a C int: larger values wrap
