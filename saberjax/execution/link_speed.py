"""How fast the links of a mesh axis move bytes, measured on the mesh: what
plan.hosts_exchange weighs the bytes between hosts with, and each axis's bandwidth in bench's
records (iteration_measures)."""

from __future__ import annotations

import math
import statistics

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding

from saberjax import compilation, processes
from saberjax.execution.mesh import by_device
from saberjax.timing import timed

# a device's bytes in the probe of plan.hosts_exchange, by platform: enough to near a GPU
# link's bandwidth, little on the CPU of a test
PROBE_BYTES = dict(gpu=64 << 20, cpu=1 << 20)


def axis_bytes_per_second(mesh: Mesh, axis: str, num_bytes: int, repeats: int = 3) -> float:
    """Bytes a device receives a second over `axis` in a reduce-scatter of num_bytes of int32
    a device, then an all-gather of the result (the shape of the model's reduction), timed
    `repeats` times after a compiling run; the median run of the slowest process, so that
    every process gets the same figure and decides alike from it.  An axis of one device
    moves nothing: infinitely fast."""
    size = mesh.shape[axis]
    if size == 1:
        return math.inf
    rows = max(num_bytes // 4 // 1024 // size, 1) * size
    spec = by_device(mesh)
    zeros = compilation.jit(lambda: jnp.zeros((mesh.size, rows, 1024), jnp.int32),
                            out_shardings=NamedSharding(mesh, spec))

    def collectives(x):
        rows_of_axis = jax.lax.psum_scatter(x[0], axis, scatter_dimension=0, tiled=True)
        return jax.lax.all_gather(rows_of_axis, axis, axis=0, tiled=True)[None]

    program = compilation.jit(jax.shard_map(collectives, mesh=mesh, in_specs=spec,
                                            out_specs=spec))
    times = []
    for _ in range(repeats + 1):
        argument = jax.block_until_ready(zeros())
        times.append(timed(lambda: program(argument))[1])
    microseconds = processes.largest(max(round(statistics.median(times[1:]) * 1e6), 1))
    return 2 * rows * 1024 * 4 * (size - 1) / size / (microseconds * 1e-6)
