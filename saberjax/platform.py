"""Process-level JAX settings that must be made before jax starts."""

from __future__ import annotations

import os

_HOST_DEVICES_FLAG = "--xla_force_host_platform_device_count"


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
