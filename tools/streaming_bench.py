"""Streaming against in-memory training, and streaming at scale on one or more devices; JSON
lines.

    # NYTimes shape, K=1,000: resident, then streamed with a budget 4x smaller than the corpus
    python launch/synth.py --preset=nytimes --output=/tmp/nyt
    python tools/streaming_bench.py --corpus=/tmp/nyt --num_topics=1000 --budget_fraction=0.25
    # ClueWeb shape, 2 billion tokens, K=5,000 under a 16 GB device budget
    python launch/synth.py --preset=clueweb --num_docs=5600000 --output=/tmp/clueweb
    python tools/streaming_bench.py --corpus=/tmp/clueweb --num_topics=5000 \\
        --device_memory_gb=16 --iterations=3 --skip_resident
    # the same streamed on 1 and on 4 devices (each device streams its own chunks under the
    # budget): Mtoken/s and the speed-up over one device
    python tools/streaming_bench.py --corpus=/tmp/clueweb --num_topics=5000 \
        --device_memory_gb=16 --iterations=3 --skip_resident --num_devices=1,4

The budget fraction is applied to what the corpus needs on the device beyond the model
(device bytes per token, from XLA's memory analysis, times tokens).  Throughput excludes the
first iteration; host memory is the process's peak resident set.
"""

from __future__ import annotations

import json
import pathlib
import resource
import sys
import time

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax
import numpy as np
from absl import app, flags

from saberjax import corpus as corpus_io
from saberjax import execution, trainer
from saberjax.state import Hyperparams

FLAGS = flags.FLAGS
flags.DEFINE_string("corpus", None, "Native corpus folder.", required=True)
flags.DEFINE_integer("num_topics", 1000, "K.")
flags.DEFINE_integer("iterations", 6, "Iterations per run (the first is not timed).")
flags.DEFINE_float("budget_fraction", 0.25, "Streamed run: device budget beyond the model, as "
                   "a fraction of what the whole corpus needs.")
flags.DEFINE_float("device_memory_gb", None, "Streamed run: this budget instead.")
flags.DEFINE_bool("skip_resident", False, "Only the streamed run.")
flags.DEFINE_string("backend", "auto", "Backend.")
flags.DEFINE_list("num_devices", ["1"], "Device counts of the streamed runs (a budget each).")


def run(corpus, num_devices: int = 1, **settings) -> dict:
    config = trainer.TrainConfig(num_topics=FLAGS.num_topics, iterations=FLAGS.iterations,
                                 backend=FLAGS.backend, num_devices=num_devices, **settings)
    start = time.perf_counter()
    result = trainer.train(corpus, config)
    timed = result.metrics[1:] or result.metrics
    seconds = sum(m["seconds"] for m in timed)
    record = dict(settings, devices=num_devices, streamed=result.model.config["streamed"],
                  num_chunks=result.model.config["num_chunks"],
                  mtoken_per_s=corpus.num_tokens * len(timed) / seconds / 1e6,
                  iteration_seconds=[round(m["seconds"], 3) for m in result.metrics],
                  init_seconds=result.init_seconds, compile_seconds=result.compile_seconds,
                  wall_seconds=time.perf_counter() - start)
    if record["streamed"]:
        record.update({name: [round(m[name], 3) for m in result.metrics]
                       for name in ("transfer_seconds", "waited_seconds", "write_back_seconds")})
        record["mean_transfer_seconds"] = float(np.mean(record["transfer_seconds"][1:]))
    return record


def main(argv):
    del argv
    start = time.perf_counter()
    corpus = corpus_io.load_native(FLAGS.corpus)
    load_seconds = time.perf_counter() - start
    hyper = Hyperparams.create(FLAGS.num_topics)
    per_token = execution.device_bytes_per_token(corpus, hyper)
    model_gb = execution.model_bytes(corpus.num_words, hyper.padded_topics) / 1e9
    print(json.dumps(dict(corpus=FLAGS.corpus, D=corpus.num_docs, T=corpus.num_tokens,
                          V=corpus.num_words, K=FLAGS.num_topics, load_seconds=load_seconds,
                          device=jax.devices()[0].device_kind,
                          device_bytes_per_token=per_token, model_gb=model_gb)), flush=True)
    resident = None
    if not FLAGS.skip_resident:
        resident = run(corpus)
        print(json.dumps(dict(run="resident", **resident)), flush=True)
    budget = FLAGS.device_memory_gb or (
        model_gb + FLAGS.budget_fraction * corpus.num_tokens * per_token / 1e9)
    one_device = None
    for count in (int(n) for n in FLAGS.num_devices):
        record = run(corpus, count, device_memory_gb=budget)
        peak_host_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9
        if resident and count == 1:  # transfer time not lengthening the iteration was hidden
            seconds = [corpus.num_tokens / (r["mtoken_per_s"] * 1e6) for r in (record, resident)]
            record.update(
                ratio_to_resident=record["mtoken_per_s"] / resident["mtoken_per_s"],
                transfer_hidden_fraction=1 - max(seconds[0] - seconds[1], 0)
                / record["mean_transfer_seconds"])
        if count == 1:
            one_device = record["mtoken_per_s"]
        elif one_device:
            record["speedup_vs_one_device"] = record["mtoken_per_s"] / one_device
        print(json.dumps(dict(run="streamed", peak_host_gb=peak_host_gb,
                              peak_host_bytes_per_token=peak_host_gb * 1e9 / corpus.num_tokens,
                              **record)), flush=True)


if __name__ == "__main__":
    app.run(main)
