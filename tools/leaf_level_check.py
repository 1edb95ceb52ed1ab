"""The trees' lowest level of the sparse model's dense rows on a GPU: the Pallas kernel
(saberjax.pallas.bhat_tree.leaf_level) against XLA's compiled reference (tree.leaf_level), on
random rows of the real shape (NYTimes at K = 100,000: 21,474 dense bf16 rows).  Prints one
JSON line: for each kernel setting its mismatches against the reference (floats not equal
bit for bit) and its milliseconds, and the reference's (docs/measurements/sparse_model.md).
On a CPU, whose XLA fuses the products into the first sums, the kernel (interpret mode)
differs from the compiled reference by design (pallas/NOTES.md).

    PYTHONPATH=$PWD python3 tools/leaf_level_check.py --rows=21474 --padded_topics=100000 \
        --settings='block_columns=2048;block_columns=4096;block_columns=4096,num_warps=8'
"""

from __future__ import annotations

import functools
import json

import jax
import jax.numpy as jnp
from absl import app, flags

import knob_args  # tools/, beside this script
from saberjax import timing
from saberjax.pallas.bhat_tree import leaf_level as kernel
from saberjax.tree import leaf_level

FLAGS = flags.FLAGS
flags.DEFINE_integer("rows", 21_474, "Dense rows.")
flags.DEFINE_integer("padded_topics", 100_000, "Columns of a row (a multiple of 32).")
flags.DEFINE_string("settings", "block_columns=2048",
                    "';'-separated keyword settings of the kernel (knob_args.parse: "
                    "name=value, comma-separated).")
flags.DEFINE_integer("repeats", 5, "Timed calls of each (the median is reported).")


def milliseconds(program, repeats: int) -> float:
    """Median milliseconds of program() after a compiling call (timing.median_seconds)."""
    return round(1e3 * timing.median_seconds(program, repeats), 3)


def main(argv):
    del argv
    leaves_key, weights_key = jax.random.split(jax.random.key(0))
    # B-hat's values: beta / D_k and (B_vk + beta) / D_k, a few decades apart
    leaves = jnp.exp(jax.random.uniform(leaves_key, (FLAGS.rows, FLAGS.padded_topics),
                                        minval=-14.0, maxval=-4.0)).astype(jnp.bfloat16)
    weights = jax.random.gamma(weights_key, 0.5, (FLAGS.padded_topics,)) * 0.2
    reference = jax.jit(leaf_level)
    expected = reference(leaves, weights)
    record = {"device": jax.devices()[0].device_kind, "rows": FLAGS.rows,
              "padded_topics": FLAGS.padded_topics,
              "reference_ms": milliseconds(functools.partial(reference, leaves, weights),
                                           FLAGS.repeats)}
    for setting in FLAGS.settings.split(";"):
        program = functools.partial(kernel, leaves, weights, **knob_args.parse(setting))
        record[f"mismatches[{setting}]"] = int(jnp.sum(program() != expected))
        record[f"ms[{setting}]"] = milliseconds(program, FLAGS.repeats)
    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    app.run(main)
