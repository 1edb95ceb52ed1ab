"""The GPU timeline of resident iterations: which kernels and collectives run when, on which
stream, for one device, and every device's long kernels on the trace's one clock
(jax.profiler's trace, summarised here so that what comes back is a short text), with NCCL's
channels as the launchers set them (cli.NCCL_CHANNELS).  Shows whether a collective overlaps
compute, and which device the others wait for at a collective (docs/measurements/multi_gpu.md).

    python tools/iteration_profile.py --corpus=/tmp/two_axis_nytimes --num_topics=10000 \
        --partition=words --num_devices=4 --trace_dir=/tmp/profile
    python tools/iteration_profile.py ... --partition=hybrid --mesh=2x2 --hosts_exchange=topics
"""

from __future__ import annotations

import collections
import os

import jax
from absl import app, flags

from saberjax import cli
from saberjax.config import Hyperparams
from saberjax.corpus import load_corpus
from saberjax.execution.placement import place

import kernel_timeline  # tools/, beside this script

FLAGS = flags.FLAGS
flags.DEFINE_string("corpus", None, "Corpus path (load_corpus).", required=True)
flags.DEFINE_integer("num_topics", 10000, "K.")
flags.DEFINE_string("backend", "pallas", "Backend of the hot ops.")
flags.DEFINE_string("partition", "words", "Partition of the mesh.")
flags.DEFINE_integer("num_devices", 0, "Devices (0: all).")
flags.DEFINE_string("mesh", None, "The two-axis mesh, HOSTSxGPUS (partition hybrid).")
flags.DEFINE_string("hosts_exchange", "auto", "What crosses the hosts axis (hybrid).")
flags.DEFINE_integer("warmup", 4, "Iterations before the traced ones.")
flags.DEFINE_integer("traced", 2, "Iterations traced.")
flags.DEFINE_string("trace_dir", "/tmp/iteration_profile", "Where the trace is written.")
flags.DEFINE_integer("device", 0, "The GPU whose timeline is printed.")
flags.DEFINE_float("shortest_us", 20.0, "Kernels shorter than this are summed, not listed.")
flags.DEFINE_float("every_gpu_us", 150.0,
                   "Every GPU's kernels at least this long are listed, one clock for all.")


def _short(name: str) -> str:
    return name if len(name) <= 70 else name[:67] + "..."


def _line(start, duration, stream, name, first) -> str:
    """An event's start and end (ms from first), its ms, stream and kernel."""
    return (f"{(start - first) / 1e6:8.3f} {(start + duration - first) / 1e6:8.3f} "
            f"{duration / 1e6:6.3f} {stream[:22]:22s} {_short(name)}")


def main(_):
    os.environ.setdefault(cli.NCCL_CHANNELS_ENV, cli.NCCL_CHANNELS)  # as the launchers run
    corpus = load_corpus(FLAGS.corpus)
    placed = place(corpus, Hyperparams.create(FLAGS.num_topics, backend=FLAGS.backend),
                   FLAGS.num_devices, partition=FLAGS.partition, mesh=FLAGS.mesh,
                   hosts_exchange=FLAGS.hosts_exchange)
    state = placed.init(0)
    step = placed.compile(state)
    for _ in range(FLAGS.warmup):
        state = step(state)
    jax.block_until_ready(state)
    kernel_timeline.traced_events(
        lambda: kernel_timeline.repeated(step, state, FLAGS.traced), FLAGS.trace_dir)
    every = kernel_timeline.gpu_events(FLAGS.trace_dir)
    events = every.get(FLAGS.device)
    if events is None:
        print("no plane of GPU", FLAGS.device)
        return
    first = events[0][0]
    small = collections.defaultdict(lambda: [0, 0.0])
    print(f"GPU {FLAGS.device}: {len(events)} kernels over "
          f"{(events[-1][0] + events[-1][1] - first) / 1e6:.2f} ms ({FLAGS.traced} iterations)")
    print("start_ms  end_ms   ms     stream                 kernel")
    for start, duration, stream, name in events:
        if duration / 1e3 < FLAGS.shortest_us:
            small[stream][0] += 1
            small[stream][1] += duration / 1e6
            continue
        print(_line(start, duration, stream, name, first))
    for stream, (count, ms) in small.items():
        print(f"shorter than {FLAGS.shortest_us} us on {stream}: {count} kernels, {ms:.3f} ms")
    busy = collections.defaultdict(float)
    for _, duration, stream, _ in events:
        busy[stream] += duration / 1e6
    print("busy ms by stream:", {k: round(v, 3) for k, v in busy.items()})
    print(f"every GPU's kernels of at least {FLAGS.every_gpu_us} us, ms from GPU "
          f"{FLAGS.device}'s first:")
    for gpu, gpu_events in sorted(every.items()):
        for start, duration, stream, name in gpu_events:
            if duration / 1e3 >= FLAGS.every_gpu_us:
                print(f"GPU {gpu}", _line(start, duration, stream, name, first))


if __name__ == "__main__":
    app.run(main)
