"""The rate at which a GPU serves random gathers of 2-byte values, each from a sector of its
own, by the size of the array gathered from: what an E-step's B-hat lookups get from L2 (an
array that fits the L2) or HBM (one that does not), the rate roofline.py's L2 term assumes
(docs/measurements/sparse_model.md).  Each setting sums `gathers` bfloat16 values at
pseudo-random positions (a multiplicative hash of the position's index, computed in the
same fused program, so no index array is read) and prints one JSON line: the array's bytes,
the milliseconds (median of `repeats` after a compiling call) and the sectors a second times
32 bytes (each gather counted as one 32 B sector: positions spread over more sectors than
gathers, so nearly every gather is a sector of its own).

    PYTHONPATH=$PWD python3 tools/gather_rate.py --megabytes=4,16,32,48,96,2048
"""

from __future__ import annotations

import functools
import json

import jax
import jax.numpy as jnp
from absl import app, flags

from saberjax import timing

FLAGS = flags.FLAGS
flags.DEFINE_string("megabytes", "4,16,32,48,96,2048", "Sizes of the array gathered from.")
flags.DEFINE_integer("gathers", 1 << 28, "Gathers a call.")
flags.DEFINE_integer("repeats", 5, "Timed calls of each size (the median is reported).")

SECTOR = 32


@functools.partial(jax.jit, static_argnames=("gathers",))
def gathered_sum(values: jax.Array, gathers: int) -> jax.Array:
    """The sum of `gathers` values at hashed positions (Knuth's multiplicative hash)."""
    index = jax.lax.iota(jnp.uint32, gathers) * jnp.uint32(2654435761)
    positions = (index % jnp.uint32(values.shape[0])).astype(jnp.int32)
    return jnp.sum(values[positions].astype(jnp.float32))


def main(argv):
    del argv
    for megabytes in (int(size) for size in FLAGS.megabytes.split(",")):
        values = jnp.ones((megabytes << 19,), jnp.bfloat16)  # 2 bytes a value
        seconds = timing.median_seconds(lambda: gathered_sum(values, FLAGS.gathers),
                                        FLAGS.repeats)
        print(json.dumps({"device": jax.devices()[0].device_kind, "array_MB": megabytes,
                          "gathers": FLAGS.gathers, "ms": round(1e3 * seconds, 3),
                          "sector_TB_per_s": round(FLAGS.gathers * SECTOR / seconds / 1e12, 2),
                          "value_GB_per_s": round(FLAGS.gathers * 2 / seconds / 1e9, 1)}),
              flush=True)


if __name__ == "__main__":
    app.run(main)
