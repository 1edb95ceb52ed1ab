"""The sparse model's build (esca.model_from_totals, the pallas backend on a GPU) at a real shape
without a corpus: B's rows made up on the device (V rows of Zipf-like lengths, nnz nonzeros
in all, in a capacity of entries), the build timed, and a digest of the model it builds.
Run with PYTHONPATH at each of two trees, the same arguments: equal digests say they build
the same model bit for bit (docs/measurements/sparse_model.md).

    PYTHONPATH=$PWD python3 tools/sparse_build_time.py --num_topics=100000 --rows=102660 \
        --capacity=100663296 --nnz=31730915
"""

from __future__ import annotations

import functools
import json
import pathlib
import sys

import jax
import jax.numpy as jnp
from absl import app, flags

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from sparse_bench import state_digest, timed  # noqa: E402 (tools/, beside this script)

from saberjax import esca, sparse_rows  # noqa: E402
from saberjax.config import Hyperparams  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("num_topics", 100_000, "K.")
flags.DEFINE_integer("rows", 102_660, "B's rows (the vocabulary).")
flags.DEFINE_integer("capacity", 100_663_296, "Entries of the rows (a device's tokens).")
flags.DEFINE_integer("nnz", 31_730_915, "B's nonzeros.")
flags.DEFINE_integer("repeats", 5, "Timed builds (the median is reported).")


def made_up_rows(num_rows: int, num_topics: int, padded_topics: int, capacity: int,
                 nnz: int) -> sparse_rows.SparseRows:
    """Rows of lengths about nnz / (rank + 10) (at most num_topics; nnz nonzeros in all,
    give or take the rounding), row r's j-th nonzero at topic floor((j + u) K / length)
    (increasing, distinct) with a count of 1 or more."""
    rank = jnp.arange(num_rows, dtype=jnp.float32)
    share = 1.0 / (rank + 10.0)
    lengths = jnp.minimum(jnp.floor(share * (nnz / jnp.sum(share))), num_topics).astype(jnp.int32)
    row_start = jnp.concatenate([jnp.zeros(1, jnp.int32), jnp.cumsum(lengths)])
    entry = jnp.arange(capacity, dtype=jnp.int32)
    row = jnp.clip(jnp.searchsorted(row_start, entry, side="right") - 1, 0, num_rows - 1)
    inside = entry < row_start[-1]
    uniform_key, count_key = jax.random.split(jax.random.key(0))
    offset = (entry - row_start[row]).astype(jnp.float32) + jax.random.uniform(uniform_key,
                                                                                (capacity,))
    topic = jnp.floor(offset * num_topics / jnp.maximum(lengths[row], 1)).astype(jnp.int32)
    count = 1 + jnp.floor(jax.random.exponential(count_key, (capacity,)) * 2).astype(jnp.int32)
    return sparse_rows.SparseRows(row_start, jnp.where(inside, topic, padded_topics),
                                  jnp.where(inside, count, 0))


def main(argv):
    del argv
    hyper = Hyperparams.create(FLAGS.num_topics, model_format="sparse")  # pallas on a GPU
    rows = jax.jit(made_up_rows, static_argnums=(0, 1, 2, 3, 4))(
        FLAGS.rows, FLAGS.num_topics, hyper.padded_topics, FLAGS.capacity, FLAGS.nnz)
    alpha = hyper.initial_alpha()
    build = functools.partial(jax.jit(lambda r, a: esca.model_from_totals(
        r, sparse_rows.topic_totals(r, hyper.padded_topics), a, hyper, FLAGS.rows)),
        rows, alpha)
    seconds = timed(build, FLAGS.repeats)
    print(json.dumps({"device": jax.devices()[0].device_kind, "nnz": int(rows.row_start[-1]),
                      "build_ms": round(1e3 * seconds, 3),
                      "model_digest": state_digest(build())}), flush=True)


if __name__ == "__main__":
    app.run(main)
