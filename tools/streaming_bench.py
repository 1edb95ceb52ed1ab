"""Streaming against in-memory training, from host memory and from a chunk store on disk, on
one or more devices; JSON lines.

    # NYTimes shape, K=1,000: resident, then streamed with a budget 4x smaller than the corpus
    python launch/synth.py --preset=nytimes --output=/tmp/nyt
    python tools/streaming_bench.py --corpus=/tmp/nyt --num_topics=1000 --budget_fraction=0.25
    # ClueWeb shape, 2 billion tokens, K=5,000 under a 16 GB device budget: streamed from a
    # chunk store under a 16 GB host budget, then from host memory, in one process
    python launch/synth.py --preset=clueweb --num_docs=5600000 --output=/tmp/clueweb
    python tools/streaming_bench.py --corpus=/tmp/clueweb --num_topics=5000 \\
        --device_memory_gb=16 --iterations=3 --skip_resident --disk --host_memory_gb=16
    # the same streamed from host memory on 1 and on 4 devices (each device streams its own
    # chunks under the budget): Mtoken/s and the speed-up over one device
    python tools/streaming_bench.py --corpus=/tmp/clueweb --num_topics=5000 \\
        --device_memory_gb=16 --iterations=3 --skip_resident --num_devices=1,4

Runs go in this order: from disk (--disk; --disk_runs=2 runs again on the store the first
built), from host memory (unless --skip_memory; its host budget is all the memory
available), resident (unless --skip_resident).  peak_anon_gb is the run's own peak of
anonymous resident memory (sampled while it lasts: what the budget bounds; a memory-mapped
corpus and the page cache are file pages), peak_rss_gb the process's peak resident set so
far (the disk run's own, since it goes first).  The last line compares the runs: disk
against host memory, streamed against resident.

The budget fraction is applied to what the corpus needs on the device beyond the model
(device bytes per token, from XLA's memory analysis, times tokens).  Throughput excludes the
first iteration; setup_seconds runs from the training call to the first iteration's start
(layout or chunk store, placing, initialisation, compilation).  With --disk the first line
also gives the disk's write and read rates in the store's folder (a file of --disk_probe_gb
written and fsynced, dropped from the page cache, read back) and the host-to-device and
device-to-host copy rates, against which bytes_put_per_token and bytes_written_per_token
give the transfer floor of each run (transfer_floor_mtoken_per_s).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import resource
import sys
import threading
import time

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax
import numpy as np
from absl import app, flags

from saberjax import chunk_store, cli, timing, trainer
from saberjax.execution import memory
from saberjax.execution.plan import plan
from saberjax import corpus as corpus_io
from saberjax.config import Hyperparams

FLAGS = flags.FLAGS if __name__ == "__main__" else flags.FlagValues()  # tests: their own
_flag = dict(flag_values=FLAGS)
flags.DEFINE_string("corpus", None, "Native corpus folder.", required=True, **_flag)
flags.DEFINE_integer("num_topics", 1000, "K.", lower_bound=2, **_flag)
flags.DEFINE_integer("iterations", 6, "Iterations per run (the first is not timed).",
                     lower_bound=1, **_flag)
flags.DEFINE_float("budget_fraction", 0.25, "Streamed runs: device budget beyond the model, "
                   "as a fraction of what the whole corpus needs.", lower_bound=0, **_flag)
flags.DEFINE_float("device_memory_gb", None, "Streamed runs: this device budget instead.",
                   lower_bound=0, **_flag)
flags.DEFINE_bool("skip_resident", False, "No resident run.", **_flag)
flags.DEFINE_bool("skip_memory", False, "No run streamed from host memory.", **_flag)
flags.DEFINE_bool("disk", False, "Also stream from a chunk store on disk, under "
                  "--host_memory_gb (one device).", **_flag)
flags.DEFINE_float("host_memory_gb", None, "The disk run's host memory budget (default: a "
                   "fraction of the memory available; the run from host memory may use all "
                   "of it).", lower_bound=0, **_flag)
flags.DEFINE_string("chunk_store", None, "Folder of the disk run's chunk store (default: "
                    "chunk_store/ in the cache folder).", **_flag)
flags.DEFINE_integer("disk_runs", 1, "Disk runs (the later ones reuse the store).",
                     lower_bound=1, **_flag)
flags.DEFINE_float("disk_probe_gb", 2.0, "Size of the file that measures the disk's rates "
                   "(0: not measured).", lower_bound=0, **_flag)
flags.DEFINE_enum("backend", "auto", ["auto", "xla", "pallas"], "Backend.", **_flag)
flags.DEFINE_list("num_devices", ["1"], "Device counts of the runs streamed from host memory "
                  "(a budget each).", **_flag)


class PeakMemory:
    """Peak anonymous resident memory of this process (memory.anonymous_host_memory,
 bytes), sampled every `period` seconds while the `with` block runs."""

    def __init__(self, period: float = 0.05):
        self.period, self.anon = period, 0
        self._stop = threading.Event()

    def _sample(self) -> None:
        self.anon = max(self.anon, memory.anonymous_host_memory())

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self._sample()

    def __enter__(self) -> "PeakMemory":
        self._sample()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def disk_rates(folder: pathlib.Path, size_gb: float) -> dict:
    """Write and read rates (GB/s) of a file of size_gb in `folder`: written in blocks of up to
    64 MB and fsynced, dropped from the page cache (posix_fadvise), read back, deleted."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f".saberjax-disk-probe-{os.getpid()}"
    size = max(int(size_gb * 1e9), 1 << 20)
    block = np.frombuffer(os.urandom(min(size, 1 << 26)), np.uint8)
    blocks = size // block.size
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            start = time.perf_counter()
            for _ in range(blocks):
                os.write(fd, block)
            os.fsync(fd)
            write_seconds = time.perf_counter() - start
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            buffer = np.empty(block.size, np.uint8)
            start = time.perf_counter()
            for index in range(blocks):
                os.preadv(fd, [buffer], index * block.size)
            read_seconds = time.perf_counter() - start
        finally:
            os.close(fd)
    finally:
        path.unlink(missing_ok=True)
    size = blocks * block.size
    return dict(disk_folder=str(folder), disk_probe_gb=size / 1e9,
                disk_write_gb_per_s=size / write_seconds / 1e9,
                disk_read_gb_per_s=size / read_seconds / 1e9)


def copy_rates(size_bytes: int = 1 << 28) -> dict:
    """Host-to-device (from pageable and from pinned host memory) and device-to-host copy
    rates (GB/s) of size_bytes, the best of three."""
    host = np.ones(size_bytes, np.uint8)
    device = jax.devices()[0]
    on_device = jax.sharding.SingleDeviceSharding(device)
    pinned = jax.block_until_ready(jax.device_put(host, on_device.with_memory_kind(
        "pinned_host")))

    def best(copy, prepare=lambda: None) -> float:
        seconds = []
        for _ in range(3):
            source = jax.block_until_ready(prepare())
            start = time.perf_counter()
            jax.block_until_ready(copy(source))
            seconds.append(time.perf_counter() - start)
        return size_bytes / min(seconds) / 1e9

    placed = jax.block_until_ready(jax.device_put(host, on_device))
    return dict(h2d_pageable_gb_per_s=best(lambda _: jax.device_put(host, on_device)),
                h2d_pinned_gb_per_s=best(lambda _: jax.device_put(pinned, on_device)),
                d2h_gb_per_s=best(np.asarray, lambda: placed + 1))


def run(corpus, mode: str, num_devices: int = 1, **settings) -> dict:
    """One training run's figures (mode: resident, memory or disk)."""
    config = trainer.TrainConfig(num_topics=FLAGS.num_topics, iterations=FLAGS.iterations,
                                 backend=FLAGS.backend, num_devices=num_devices, **settings)
    first_end = []
    phases = timing.Phases()
    with PeakMemory() as memory, phases.recording():
        start = time.perf_counter()
        result = trainer.train(corpus, config, callback=lambda iteration, record, state: (
            first_end.append(time.perf_counter()) if not first_end else None))
        wall = time.perf_counter() - start
    timed = result.metrics[1:] or result.metrics
    seconds = sum(m["seconds"] for m in timed)
    model_config = result.model.config
    record = dict(run=mode, devices=num_devices, streamed=model_config["streamed"],
                  stored=model_config["stored"], num_chunks=model_config["num_chunks"],
                  mtoken_per_s=corpus.num_tokens * len(timed) / seconds / 1e6,
                  iteration_seconds=[round(m["seconds"], 3) for m in result.metrics],
                  setup_seconds=first_end[0] - start - result.metrics[0]["seconds"],
                  layout_seconds=phases.seconds.get("layout", 0.0),
                  init_seconds=result.init_seconds, compile_seconds=result.compile_seconds,
                  wall_seconds=wall,
                  peak_rss_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9,
                  peak_anon_gb=memory.anon / 1e9,
                  peak_anon_bytes_per_token=memory.anon / corpus.num_tokens, **settings)
    if record["streamed"]:
        record.update({name: [round(m[name], 3) for m in result.metrics]
                       for name in ("transfer_seconds", "waited_seconds", "write_back_seconds")})
        record["mean_transfer_seconds"] = float(np.mean(record["transfer_seconds"][1:] or
                                                        record["transfer_seconds"]))
        for name in ("bytes_put", "bytes_written"):
            record[f"{name}_per_token"] = timed[-1][name] / corpus.num_tokens
    return record


def store_bytes_on_disk(directory: pathlib.Path) -> int:
    """Bytes the chunk store's files take on the disk (allocated blocks)."""
    return sum((directory / name).stat().st_blocks * 512 for name in chunk_store.OWN_NAMES
               if (directory / name).is_file())


def main(argv):
    del argv
    start = time.perf_counter()
    corpus = corpus_io.load_native(FLAGS.corpus)
    load_seconds = time.perf_counter() - start
    hyper = Hyperparams.create(FLAGS.num_topics)
    per_token = memory.device_bytes_per_token(corpus, hyper)
    model_gb = memory.model_bytes(corpus.num_words, hyper.padded_topics) / 1e9
    budget = FLAGS.device_memory_gb or (
        model_gb + FLAGS.budget_fraction * corpus.num_tokens * per_token / 1e9)
    store = pathlib.Path(FLAGS.chunk_store or chunk_store.default_directory()).absolute()
    host_budget = memory.host_memory_budget(FLAGS.host_memory_gb)
    if FLAGS.disk and not plan(corpus, hyper, 1, device_memory_gb=budget, stream=True,
                               host_memory_gb=FLAGS.host_memory_gb,
                               chunk_store_dir=store).stored:
        raise app.UsageError(f"a host budget of {host_budget / 1e9:.3g} GB holds this corpus "
                             f"and its states in memory: give the disk run a smaller "
                             f"--host_memory_gb")
    header = dict(corpus=FLAGS.corpus, D=corpus.num_docs, T=corpus.num_tokens,
                  V=corpus.num_words, K=FLAGS.num_topics, load_seconds=load_seconds,
                  device=jax.devices()[0].device_kind, host_cpus=os.cpu_count(),
                  host_available_gb=memory.available_host_memory() / 1e9,
                  process_anon_gb=memory.anonymous_host_memory() / 1e9,
                  device_bytes_per_token=per_token, model_gb=model_gb, device_budget_gb=budget)
    if FLAGS.disk:
        header.update(copy_rates())
        if FLAGS.disk_probe_gb:
            header.update(disk_rates(store.parent, FLAGS.disk_probe_gb))
    print(json.dumps(header), flush=True)

    records = []

    def report(record: dict) -> dict:
        if "bytes_put_per_token" in record and "h2d_pinned_gb_per_s" in header:
            put_rate = header["h2d_pageable_gb_per_s" if record["stored"]
                              else "h2d_pinned_gb_per_s"]
            record["transfer_floor_mtoken_per_s"] = 1e3 / max(
                record["bytes_put_per_token"] / put_rate,
                record["bytes_written_per_token"] / header["d2h_gb_per_s"])
        print(json.dumps(record), flush=True)
        records.append(record)
        return record

    for _ in range(FLAGS.disk_runs if FLAGS.disk else 0):
        record = run(corpus, "disk", device_memory_gb=budget, host_memory_gb=FLAGS.host_memory_gb,
                     chunk_store=str(store))
        record.update(store_bytes_per_token=store_bytes_on_disk(store) / corpus.num_tokens)
        report(record)
    for count in ([] if FLAGS.skip_memory else [int(n) for n in FLAGS.num_devices]):
        report(run(corpus, "memory", count, device_memory_gb=budget,
                   host_memory_gb=memory.available_host_memory() / 1e9))
    if not FLAGS.skip_resident:
        report(run(corpus, "resident"))

    def rate(mode: str, devices: int = 1) -> float | None:
        return next((r["mtoken_per_s"] for r in reversed(records)
                     if r["run"] == mode and r["devices"] == devices), None)

    summary = {}
    with contextlib.suppress(TypeError, ZeroDivisionError):
        summary["disk_to_memory"] = rate("disk") / rate("memory")
    with contextlib.suppress(TypeError, ZeroDivisionError):
        summary["memory_to_resident"] = rate("memory") / rate("resident")
    for count in (int(n) for n in FLAGS.num_devices[1:]):
        with contextlib.suppress(TypeError, ZeroDivisionError):
            summary[f"memory_speedup_{count}_devices"] = rate("memory", count) / rate("memory")
    print(json.dumps(dict(run="summary", **summary)), flush=True)


if __name__ == "__main__":
    cli.run_main(main)
