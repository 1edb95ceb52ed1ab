"""The PDOW layout of a chunk built on the host (layout.build_chunk, then chunk_compact.compact:
what a chunk store's builder threads do) against the same built on a JAX device
(chunk_store.device_slot_builder: layout_device.build_chunk and compact_on_device, on one
device), chunk by chunk, on whatever backend is present; JSON lines.

    # a ClueWeb-shaped corpus built in memory (about 22M tokens, V = 100,000), chunks of
    # about 23M tokens as a 16 GB host budget plans them for the 2.04B-token store
    python tools/layout_device_bench.py --num_docs=250000 --chunk_tokens=23000000
    # a native corpus folder (launch/synth.py --preset=clueweb --num_docs=N --output=DIR),
    # and the whole chunk store built both ways (files compared byte for byte)
    python tools/layout_device_bench.py --corpus=/tmp/clueweb --max_chunks=8 --store

Lines: the corpus and plan; `compile` (the device program's compile time, XLA's temporary
memory for it in bytes a padded token, and its sorts: CUB radix sorts on a GPU, XLA's own
sort elsewhere); one line a chunk (host seconds; device
seconds split into the input's put, the build and the compact chunk's fetch into pinned
memory; Mtoken/s of each; whether the device's arrays equal the host's); a `summary` over
the chunks (the first device chunk is left out of the device rate: it pays for warm-up);
with --store, one line per builder of the whole store (seconds, Mtoken/s) and whether the
files are the same.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import sys
import tempfile
import time

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax
import numpy as np
from absl import app, flags

from saberjax import chunk_compact, chunk_records, chunk_store, cli, layout, layout_device, synth
from saberjax.execution.mesh import BY_DEVICE, make_mesh
from saberjax import corpus as corpus_io
from saberjax.config import Hyperparams

FLAGS = flags.FLAGS if __name__ == "__main__" else flags.FlagValues()  # tests: their own
_flag = dict(flag_values=FLAGS)
flags.DEFINE_string("corpus", None, "Native corpus folder (default: a synthetic corpus built "
                    "in memory from --preset and --num_docs).", **_flag)
flags.DEFINE_string("preset", "clueweb", "Shape of the synthetic corpus (saberjax.synth).",
                    **_flag)
flags.DEFINE_integer("num_docs", 60_000, "Documents of the synthetic corpus.", lower_bound=1,
                     **_flag)
flags.DEFINE_integer("seed", 0, "Seed of the synthetic corpus.", **_flag)
flags.DEFINE_integer("chunk_tokens", 23_000_000, "Tokens per chunk (layout.plan_layout).",
                     lower_bound=1, **_flag)
flags.DEFINE_integer("max_chunks", 8, "Chunks timed (the first ones of the plan; 0: all).",
                     lower_bound=0, **_flag)
flags.DEFINE_integer("host_workers", None, "Threads of one host build (default: one per core).",
                     lower_bound=1, **_flag)
flags.DEFINE_bool("check", True, "Compare every chunk's arrays, device against host.", **_flag)
flags.DEFINE_bool("store", False, "Also build the whole chunk store both ways and compare "
                  "the files.", **_flag)
flags.DEFINE_string("store_dir", None, "Where --store builds (default: a temporary folder, "
                    "removed after).", **_flag)
flags.DEFINE_integer("store_workers", None, "Host builder threads of the store (default: "
                     "min(cores, chunk_store.BUILD_WORKERS), as the host plan allows them).",
                     lower_bound=1, **_flag)


def emit(**fields) -> None:
    print(json.dumps(fields), flush=True)


def rate(tokens: int, seconds: float) -> float:
    return round(tokens / seconds / 1e6, 2) if seconds > 0 else float("inf")


def load_corpus():
    if FLAGS.corpus:
        return corpus_io.load_native(FLAGS.corpus)
    start = time.perf_counter()
    config = synth.make_config(FLAGS.preset, num_docs=FLAGS.num_docs, seed=FLAGS.seed)
    lengths, words = synth.generate(config, num_threads=None)
    corpus = corpus_io.Corpus(np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]),
                              words.astype(np.int32), tuple(synth.vocab_words(config.num_words)),
                              name=f"synth-{FLAGS.preset}-{FLAGS.num_docs}")
    emit(event="synthesised", seconds=round(time.perf_counter() - start, 2))
    return corpus


def same_arrays(device: chunk_compact.CompactChunk, host: chunk_compact.CompactChunk) -> bool:
    return all(np.array_equal(np.asarray(getattr(device, name))[0], getattr(host, name))
               and np.asarray(getattr(device, name)).dtype == np.asarray(getattr(host, name))
               .dtype for name in chunk_compact.COMPACT_FIELDS)


def time_chunks(corpus, plan) -> None:
    tokens, docs = plan.padded_tokens, plan.padded_docs
    runs = min(corpus.num_words, tokens) + 1
    sharding = jax.sharding.NamedSharding(make_mesh(1), BY_DEVICE)
    build = chunk_store.device_slot_builder(runs, sharding)
    word_rank = jax.device_put(plan.word_rank, jax.sharding.NamedSharding(
        sharding.mesh, jax.sharding.PartitionSpec()))
    pinned = sharding.with_memory_kind("pinned_host")
    raw, (words,) = chunk_records.pinned_rows(sharding, tokens, np.int32)

    def put(index: int) -> layout_device.ChunkInputs:
        inputs = layout_device.chunk_inputs(corpus, *plan.chunk_docs[index], tokens, docs,
                                            words=words)
        rest = jax.device_put([np.stack([field]) for field in inputs[1:]], sharding)
        return jax.block_until_ready(
            layout_device.ChunkInputs(jax.device_put(raw, sharding), *rest))

    start = time.perf_counter()
    compiled = build.lower(put(0), word_rank).compile()
    compile_seconds = time.perf_counter() - start
    memory = compiled.memory_analysis()
    temp = getattr(memory, "temp_size_in_bytes", None)
    program = compiled.as_text() or ""
    emit(event="compile", seconds=round(compile_seconds, 3), temp_bytes=temp,
         temp_bytes_per_padded_token=None if temp is None else round(temp / tokens, 1),
         cub_radix_sorts=program.count('custom_call_target="__cub$DeviceRadixSort'),
         xla_sorts=program.count(" sort("))

    count = len(plan.chunk_docs) if FLAGS.max_chunks == 0 else min(FLAGS.max_chunks,
                                                                   len(plan.chunk_docs))
    totals = dict(tokens=0, host=0.0, device=0.0, device_tokens=0)
    all_equal = True
    for index in range(count):
        start = time.perf_counter()
        host = chunk_compact.compact(plan.build_chunk(corpus, index, workers=FLAGS.host_workers),
                                   runs)
        host_seconds = time.perf_counter() - start
        start = time.perf_counter()
        inputs = put(index)
        put_seconds = time.perf_counter() - start
        built = jax.block_until_ready(compiled(inputs, word_rank))
        build_seconds = time.perf_counter() - start - put_seconds
        fetched = jax.tree.map(np.asarray, jax.device_put(built, pinned))
        device_seconds = time.perf_counter() - start
        n = int(host.num_tokens)
        equal = same_arrays(fetched, host) if FLAGS.check else None
        all_equal &= equal is not False
        emit(event="chunk", chunk=index, tokens=n, host_seconds=round(host_seconds, 4),
             host_mtoken_per_s=rate(n, host_seconds), device_seconds=round(device_seconds, 4),
             put_seconds=round(put_seconds, 4), build_seconds=round(build_seconds, 4),
             fetch_seconds=round(device_seconds - put_seconds - build_seconds, 4),
             device_mtoken_per_s=rate(n, device_seconds),
             build_mtoken_per_s=rate(n, build_seconds), equal=equal)
        totals["tokens"] += n
        totals["host"] += host_seconds
        if index or count == 1:
            totals["device"] += device_seconds
            totals["device_tokens"] += n
        del host, built, fetched
    emit(event="summary", chunks=count, tokens=totals["tokens"],
         host_mtoken_per_s=rate(totals["tokens"], totals["host"]),
         device_mtoken_per_s=rate(totals["device_tokens"], totals["device"]),
         speedup=round(rate(totals["device_tokens"], totals["device"])
                       / rate(totals["tokens"], totals["host"]), 2),
         compile_seconds=round(compile_seconds, 3), all_equal=all_equal if FLAGS.check else None)


def time_store(corpus, plan) -> None:
    base = pathlib.Path(FLAGS.store_dir or tempfile.mkdtemp(prefix="layout-device-bench-"))
    sharding = jax.sharding.NamedSharding(make_mesh(1), BY_DEVICE)
    workers = FLAGS.store_workers or min(os.cpu_count() or 1, chunk_store.BUILD_WORKERS)
    try:
        for on_devices in (True, False):
            directory = base / ("devices" if on_devices else "host")
            shutil.rmtree(directory, ignore_errors=True)
            start = time.perf_counter()
            store = chunk_store.StoredChunks(corpus, plan, Hyperparams.create(16), directory,
                                             sharding, workers=workers,
                                             build_on_devices=on_devices)
            seconds = time.perf_counter() - start
            emit(event="store", builder="devices" if on_devices else "host",
                 workers=None if on_devices else workers, seconds=round(seconds, 2),
                 build_seconds=round(store.build_seconds, 2), slots=len(store),
                 mtoken_per_s=rate(corpus.num_tokens, store.build_seconds))
            store.close()
        same = all(_same_file(base / "devices" / name, base / "host" / name)
                   for name in (chunk_store.STATIC, chunk_store.MANIFEST))
        emit(event="store_files", same=same)
    finally:
        if FLAGS.store_dir is None:
            shutil.rmtree(base, ignore_errors=True)


def _same_file(a: pathlib.Path, b: pathlib.Path, piece: int = 1 << 26) -> bool:
    if a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as left, open(b, "rb") as right:
        while True:
            chunk = left.read(piece)
            if chunk != right.read(piece):
                return False
            if not chunk:
                return True


def main(argv):
    del argv
    corpus = load_corpus()
    start = time.perf_counter()
    plan = layout.plan_layout(corpus, FLAGS.chunk_tokens)
    emit(event="plan", corpus=corpus.name, tokens=corpus.num_tokens, docs=corpus.num_docs,
         words=corpus.num_words, chunks=len(plan.chunk_docs), padded_tokens=plan.padded_tokens,
         padded_docs=plan.padded_docs, plan_seconds=round(time.perf_counter() - start, 2),
         backend=jax.default_backend(), device=str(jax.devices()[0].device_kind),
         cores=os.cpu_count())
    time_chunks(corpus, plan)
    if FLAGS.store:
        time_store(corpus, plan)


if __name__ == "__main__":
    cli.run_main(main)
