"""The trainer's throughput benchmark: Mtoken/s per device count, partition, K and backend,
phase by phase, with the run's environment (`saberjax bench` runs it from flags; the fields of
its records are described there)."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import hashlib
import importlib.metadata
import itertools
import json
import os
import pathlib
import platform
import statistics
import subprocess
import time

import jax
import jax.numpy as jnp
import numpy as np

from saberjax import esca, roofline, synth, trainer
from saberjax.backend import backend_ops, pallas_unavailable_reason
from saberjax.config import Hyperparams
from saberjax.corpus import Corpus
from saberjax.execution import memory
from saberjax.execution.placement import place, Placement
from saberjax.execution.programs import counts_exchange_bytes, topics_exchange_bytes
from saberjax.platform import cpu_cores
from saberjax.state import BHAT_DTYPE, TrainState
from saberjax.timing import copy_seconds, timed

BACKENDS = ("xla", "pallas")
# a device's bytes in the collectives measuring an axis's bandwidth, by platform (enough to
# reach the links' bandwidth on GPUs, little on the CPU of a test)
BANDWIDTH_BYTES = dict(gpu=256 << 20, cpu=8 << 20)


def _sig(x: float, digits: int = 5) -> float:
    """x rounded to a few significant digits (for readable JSON)."""
    return float(f"{x:.{digits}g}")


def _nbytes(tree) -> int:
    return int(sum(leaf.nbytes if hasattr(leaf, "nbytes") else np.asarray(leaf).nbytes
                   for leaf in jax.tree.leaves(tree)))


def _git_commit() -> str | None:
    """HEAD of the repository, with "+dirty" when its sources (saberjax/, launch/) differ from
    it, as in a copied working tree whose .git is older."""
    root = str(pathlib.Path(__file__).resolve().parents[1])

    def git(*args) -> str | None:
        try:
            out = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True,
                                 timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    head = git("rev-parse", "HEAD")
    if not head:
        return None
    changed = git("status", "--porcelain", "--untracked-files=no", "--", "saberjax", "launch")
    return head + ("+dirty" if changed else "")


def _source_digest() -> str:
    """Short SHA-256 of the saberjax sources that ran (git_commit misses uncommitted edits)."""
    root = os.path.dirname(os.path.abspath(esca.__file__))
    digest = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            digest.update(os.path.relpath(path, root).encode() + b"\0")
            with open(path, "rb") as f:
                digest.update(f.read() + b"\0")
    return digest.hexdigest()[:12]


def _host_cpu() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment() -> dict:
    """Device, software and date of this run."""
    device = jax.devices()[0]
    try:
        jaxlib_version = importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:
        jaxlib_version = None
    return dict(
        device=device.device_kind,
        platform=device.platform,
        num_devices=jax.device_count(),
        host_cpu=_host_cpu(),
        cpu_cores=cpu_cores(),
        jax_version=jax.__version__,
        jaxlib_version=jaxlib_version,
        python_version=platform.python_version(),
        git_commit=_git_commit(),
        source_digest=_source_digest(),
        load_average=[round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    )


def synthetic_corpus(preset: str, scale: float, seed: int) -> Corpus:
    """A synthetic corpus of a paper data set's shape, generated in memory."""
    cfg = synth.make_config(preset, scale=scale, seed=seed)
    lengths, words = synth.generate(cfg, num_threads=None)
    offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    return Corpus(offsets, words.astype(np.int32), tuple(synth.vocab_words(cfg.num_words)),
                  name=f"synth-{preset}-x{scale:g}-seed{seed}")


def copy_bandwidth(num_bytes: int, repeats: int = 5) -> dict:
    """Device copy bandwidth: y = x + 1 over float32, (bytes read + written) / best seconds."""
    moved, best = copy_seconds(num_bytes, repeats)
    return dict(copy_bytes=moved // 2, copy_seconds=_sig(best),
                copy_GB_per_s=_sig(moved / best / 1e9))


def measure_placement(corpus: Corpus, hyper: Hyperparams, num_devices: int,
                      chunk_tokens: int | None, partition: str,
                      mesh: str | None = None) -> tuple[Placement, dict]:
    """(placement, its record): the layout built and put on a mesh of num_devices devices
    (or the two-axis `mesh`, "HOSTSxGPUS"), resident (place with stream=False)."""
    jax.block_until_ready(jax.device_put(np.zeros(16, np.int32)))  # the client is up
    placement, seconds = timed(lambda: place(corpus, hyper, num_devices, chunk_tokens,
                                             stream=False, partition=partition, mesh=mesh))
    moved = _nbytes((placement.slots, placement.word_shares))
    return placement, dict(bytes=moved, seconds=_sig(seconds),
                           GB_per_s=_sig(moved / seconds / 1e9) if seconds > 0 else None)


def _median_seconds(program, make_input, repeats: int) -> float:
    """Median seconds of program(make_input()) over `repeats` runs after a compiling one."""
    times = []
    for _ in range(repeats + 1):
        argument = jax.block_until_ready(make_input())
        _, seconds = timed(lambda: jax.block_until_ready(program(argument)))
        times.append(seconds)
    return statistics.median(times[1:])


def axis_bandwidth(placement: Placement, num_bytes: int, repeats: int) -> dict[str, float]:
    """GB/s each device receives in collectives along each axis of the placement's mesh of
    more than one device: a reduce-scatter of num_bytes of int32 a device, then an
    all-gather of the result (the shape of the model's reduction), bytes received / median
    seconds."""
    mesh = placement.mesh
    found = {}
    for axis, size in mesh.shape.items():
        if size == 1:
            continue
        rows = max(num_bytes // 4 // 1024 // size, 1) * size

        def collectives(x, axis=axis):
            return jax.lax.all_gather(jax.lax.psum_scatter(x, axis, scatter_dimension=0,
                                                           tiled=True), axis, axis=0, tiled=True)

        seconds = _median_seconds(_on_mesh(placement, collectives),
                                  _zeros(placement, (rows, 1024), jnp.int32), repeats)
        found[axis] = _sig(2 * rows * 1024 * 4 * (size - 1) / size / seconds / 1e9)
    return found


def _zeros(placement: Placement, shape, dtype):
    """A program making zeros of `shape` on every device (by device)."""
    return jax.jit(lambda: jnp.zeros((placement.num_devices, *shape), dtype),
                   out_shardings=placement.sharding())


def _on_mesh(placement: Placement, body):
    """body on each device's part of by-device arrays, jitted over the placement's mesh."""
    spec = placement.sharding().spec
    return jax.jit(jax.shard_map(lambda x: jax.tree.map(lambda y: y[None], body(x[0])),
                                 mesh=placement.mesh, in_specs=spec, out_specs=spec))


def measure_reduction(placement: Placement, repeats: int, bandwidth_bytes: int) -> dict:
    """What an iteration moves between devices, median of `repeats` after a compiling pass.

    Over the words axis (by word; the gpus of the two-axis mesh): the all-gather of every
    chunk's A pairs and nonzeros and the all-to-all of the E-step's doc-major topics.  Over
    the documents axis (by document; the hosts of the two-axis mesh): the reduce-scatter of
    B's rows of the device (all of them by document, int32; its word share on the two-axis
    mesh, the rows of words of more than 2,048 tokens as int32, the others as float16:
    Programs._model_of_partial_counts) and the all-gather of B-hat's bfloat16 rows, or, where
    the hosts exchange topics (hosts_exchange), the all-gather of the topics of the device's
    word share's tokens (Programs._peer_counts).  Per
    axis: bytes each device receives an iteration, the collectives' seconds alone, and their
    floor, bytes / the axis's bandwidth (axis_bandwidth of bandwidth_bytes).  reduction_seconds: by document the whole
    reduction program (collectives, totals, B-hat and trees of each device's rows;
    Programs.reduce), else the collectives.
    cross_host_share_of_by_documents: on the two-axis mesh, the bytes over the hosts axis
    against those the one-axis partition by document moves on as many devices."""
    programs, hyper = placement.programs, placement.hyper
    size, chunk = placement.num_devices, placement.slots[0]
    tokens, docs = chunk.word.shape[1], chunk.doc_start.shape[1] - 1
    axes, bandwidth = programs.axes, axis_bandwidth(placement, bandwidth_bytes, repeats)
    bhat_bytes = np.dtype(BHAT_DTYPE).itemsize
    moved, seconds = {}, {}
    words = programs.size(axes.words)
    if words > 1:
        def word_collectives(a_pairs_and_nnz):
            topics = jnp.zeros((words, tokens), hyper.topic_dtype)
            return (jax.lax.all_gather(a_pairs_and_nnz, axes.words, axis=0, tiled=True),
                    jax.lax.all_to_all(topics, axes.words, 0, 0, tiled=True).sum(axis=0))

        topic_bytes = np.dtype(hyper.topic_dtype).itemsize
        moved[axes.words] = int((words - 1) * (tokens * (4 + topic_bytes) + docs * 4))
        seconds[axes.words] = _median_seconds(_on_mesh(placement, word_collectives),
                                              _zeros(placement, (tokens + docs,), jnp.int32),
                                              repeats)
    documents = programs.size(axes.documents)
    counts = _zeros(placement, (programs.model_rows, hyper.padded_topics), jnp.int32)
    if documents > 1 and programs.exchanges_topics:
        share_tokens = placement.word_shares.word.shape[1]
        moved[axes.documents] = topics_exchange_bytes(
            share_tokens, np.dtype(hyper.topic_dtype).itemsize, documents)
        seconds[axes.documents] = _median_seconds(
            _on_mesh(placement, lambda topics: jax.lax.all_gather(topics, axes.documents)),
            _zeros(placement, (share_tokens,), hyper.topic_dtype), repeats)
    elif documents > 1:
        first = programs.first_float16_row  # int32 rows before it, float16 from it

        def row_collectives(rows):
            return [jax.lax.all_gather(jax.lax.psum_scatter(
                block.astype(dtype), axes.documents, scatter_dimension=0,
                tiled=True).astype(BHAT_DTYPE), axes.documents, axis=0, tiled=True)
                for block, dtype in ((rows[:first], jnp.int32), (rows[first:], jnp.float16))
                if block.shape[0]]

        moved[axes.documents] = counts_exchange_bytes(programs.model_rows, first,
                                                      hyper.padded_topics, documents)
        seconds[axes.documents] = _median_seconds(_on_mesh(placement, row_collectives),
                                                  counts, repeats)
    total_bytes, total_seconds = sum(moved.values()), sum(seconds.values())
    reduction = total_seconds
    if placement.partition == "documents" and size > 1:
        alpha = placement.replicated(np.asarray(hyper.initial_alpha()))
        reduction = _median_seconds(lambda partial: programs.reduce(partial, alpha), counts,
                                    repeats)
    record = dict(reduction_seconds=_sig(reduction), collective_seconds=_sig(total_seconds),
                  collective_bytes_per_device=total_bytes,
                  collective_GB_per_s=_sig(total_bytes / total_seconds / 1e9)
                  if total_seconds else None,
                  collective_bytes_by_axis=moved,
                  collective_seconds_by_axis={axis: _sig(t) for axis, t in seconds.items()},
                  axis_GB_per_s=bandwidth,
                  collective_floor_seconds=_sig(sum(moved[axis] / (bandwidth[axis] * 1e9)
                                                    for axis in moved)))
    if placement.partition == "hybrid":
        record["hosts_exchange"] = placement.hosts_exchange
        by_documents = (programs.padded_words * hyper.padded_topics * (4 + bhat_bytes)
                        * (size - 1) / size)
        record["cross_host_share_of_by_documents"] = _sig(
            moved.get(axes.documents, 0) / by_documents, 4)
    return record


def measure_phases(placement: Placement, state: TrainState, repeats: int,
                   card: roofline.Card | None = None) -> dict:
    """Each phase of an iteration as its own jitted function over the first device's chunks
    (one device's share of the work; Mtoken/s counts that device's tokens).  With a card, the
    sample phase also carries the E-step's roofline (saberjax.roofline.floor) on this state:
    floor_seconds, the level that sets it and each level's figures."""
    hyper = placement.hyper
    chunks, chunk_states = jax.tree.map(lambda x: x[0], (tuple(placement.slots), state.chunks))
    state = state._replace(chunks=chunk_states)
    num_tokens = sum(int(chunk.num_tokens) for chunk in chunks)
    ops = backend_ops(hyper.backend)
    key = esca.next_iteration(state.seed, state.iteration)[1]
    sample = jax.jit(ops.sample_and_shuffle)
    rebuild = jax.jit(ops.rebuild_doc_topic, static_argnums=2)
    count = jax.jit(ops.count_word_topic, donate_argnums=2)
    # what esca.finish_step runs on B, B not donated: the state's B serves every pass, where a
    # copy of it per pass (a third V x K int32 array) ran an H100 out of memory at K = 30,000
    @jax.jit
    def bhat_trees(word_topic):
        totals = ops.topic_totals(word_topic)
        return totals, ops.bhat_and_tree(word_topic, totals, state.model.alpha, hyper.num_topics,
                                         hyper.beta)

    def run_sample():
        return [sample(c, s, state.model, key) for c, s in zip(chunks, state.chunks)]

    topics = None  # per chunk (word-major, doc-major), from the sample phase

    def run_rebuild():
        return [rebuild(c, doc_major, hyper.num_topics)
                for c, (_, doc_major) in zip(chunks, topics)]

    def run_count(word_topic):
        for c, (word_major, _) in zip(chunks, topics):
            word_topic = count(c, word_major, word_topic)
        return word_topic

    def phase(fn, prepare=lambda: ()):
        """(result, median seconds, first-pass seconds) of fn(*prepare())."""
        times, result = [], None
        for _ in range(repeats + 1):
            args = jax.block_until_ready(prepare())
            result = None  # free the previous pass's output first
            result, seconds = timed(lambda: fn(*args))
            times.append(seconds)
        return result, statistics.median(times[1:]), times[0]

    empty = lambda: (jnp.zeros_like(state.model.word_topic),)  # noqa: E731
    out = {}
    topics, out["sample"], first_sample = phase(run_sample)
    _, out["rebuild_a"], first_rebuild = phase(run_rebuild)
    _, out["count_b"], first_count = phase(run_count, empty)
    _, out["bhat_trees"], first_bhat = phase(bhat_trees, lambda: (state.model.word_topic,))
    firsts = dict(sample=first_sample, rebuild_a=first_rebuild, count_b=first_count,
                  bhat_trees=first_bhat)
    phases = {name: dict(seconds=_sig(seconds), Mtoken_per_s=_sig(num_tokens / seconds / 1e6),
                         compile_seconds=_sig(max(firsts[name] - seconds, 0.0)))
              for name, seconds in out.items()}
    if card is not None:
        floor = roofline.floor(chunks, state.chunks, state.model.bhat.shape, card)
        phases["sample"].update({key: _sig(value, 4) if isinstance(value, float) else value
                                 for key, value in floor.items()})
        phases["sample"]["over_floor"] = _sig(out["sample"] / floor["floor_seconds"], 3)
    return phases


def _peak_device_gigabytes() -> float | None:
    """The most memory any local device has held so far in this process (None: not told)."""
    peaks = [(device.memory_stats() or {}).get("peak_bytes_in_use")
             for device in jax.local_devices()]
    return _sig(max(peaks) / 1e9) if all(peaks) else None


def backend_unavailable(name: str) -> str | None:
    """Why a backend cannot run here, or None."""
    return pallas_unavailable_reason() if name == "pallas" else None


def bench_one(placement: Placement, corpus: Corpus, *, iterations: int,
    warmup: int, seed: int, phases: bool, phase_repeats: int,
    heldout: tuple[Corpus, Corpus] | None = None, card: roofline.Card | None = None,
    optimize_alpha_every: int = trainer.TrainConfig.optimize_alpha_every,
    bandwidth_bytes: int = BANDWIDTH_BYTES["cpu"]) -> dict:
    """The record of one (devices, K, backend, optimize_alpha_every); with heldout (observed,
    held-out halves of the test documents) also the held-out log-likelihood per token after
    the timed iterations.  bandwidth_bytes: a device's bytes in the collectives that measure
    each axis's bandwidth (axis_bandwidth)."""
    hyper = placement.hyper
    num_topics, backend = hyper.num_topics, hyper.backend
    tokens = corpus.num_tokens
    config = trainer.TrainConfig(num_topics, iterations=warmup + iterations, seed=seed,
                                 backend=backend, optimize_alpha_every=optimize_alpha_every)
    run = trainer.train_placed(corpus, placement, config, heldout)
    state = run.state
    warmup_seconds = [record["seconds"] for record in run.metrics[:warmup]]
    times = [record["seconds"] for record in run.metrics[warmup:]]
    steady = times[1:] or times
    steady_seconds = sum(steady) / len(steady)

    chunk_bytes = _nbytes(placement.slots)
    state_bytes = _nbytes(state.chunks)
    model_bytes = _nbytes(state.model)
    record = dict(
        type="result", K=num_topics, padded_K=hyper.padded_topics, backend=backend,
        alpha=_sig(hyper.alpha), optimize_alpha_every=optimize_alpha_every,
        alpha_sum=_sig(float(placement.alpha(state).sum())), beta=hyper.beta,
        iterations=iterations, warmup=warmup,
        Mtoken_per_s_mean=_sig(tokens * len(times) / sum(times) / 1e6),
        Mtoken_per_s_steady=_sig(tokens * len(steady) / sum(steady) / 1e6),
        Mtoken_per_s_best=_sig(tokens / min(times) / 1e6),
        steady_iteration_seconds=_sig(steady_seconds),
        iteration_seconds=[_sig(t) for t in times],
        warmup_seconds=[_sig(t) for t in warmup_seconds],
        compile_seconds=_sig(run.compile_seconds),
        init_seconds=_sig(run.init_seconds),
        chunk_bytes_per_token=_sig(chunk_bytes / tokens),
        chunk_state_bytes_per_token=_sig(state_bytes / tokens),
        state_bytes_per_token=_sig((chunk_bytes + state_bytes) / tokens),
        model_bytes=model_bytes,
        model_bytes_per_token=_sig(model_bytes / tokens),
        peak_device_GB=_peak_device_gigabytes(),
        planned_device_GB=_sig(memory.resident_bytes(
         corpus, hyper, placement.num_devices, placement.partition,
         memory.device_bytes_per_token(corpus, hyper)) / 1e9),
        min_traffic_bytes=chunk_bytes + 2 * state_bytes + 2 * model_bytes,
    )
    if heldout is not None:
        record["heldout_loglik_per_token"] = _sig(run.metrics[-1]["heldout_loglik_per_token"])
    record.update(measure_reduction(placement, phase_repeats, bandwidth_bytes))
    record["reduction_share"] = _sig(record["reduction_seconds"] / steady_seconds, 3)
    if phases and jax.process_count() == 1:
        record["phases"] = measure_phases(placement, state, phase_repeats, card)
        for entry in record["phases"].values():
            entry["share_of_iteration"] = _sig(entry["seconds"] / steady_seconds, 3)
        record["phases_sum_seconds"] = _sig(sum(p["seconds"] for p in record["phases"].values()))
    return record


def run_benchmark(corpus: Corpus, num_topics: list[int], backends: list[str], *,
                  iterations: int = 10, warmup: int = 2,
                  chunk_tokens: tuple[int | None, ...] = (None,),
                  num_devices: tuple[int, ...] = (0,), partitions: tuple[str, ...] = ("auto",),
                  seed: int = 0, phases: bool = True, phase_repeats: int = 3,
                  copy_mib: int = 0, heldout: tuple[Corpus, Corpus] | None = None,
                  optimize_alpha_every: tuple[int, ...] = (
                      trainer.TrainConfig.optimize_alpha_every,),
                  mesh: str | None = None, hosts_exchanges: tuple[str, ...] = ("auto",),
                  emit=print) -> list[dict]:
    """Benchmark every (device count, partition, chunk size, K, backend, optimize_alpha_every);
    emit(json_line) for each record and the summary.  chunk_tokens: PDOW chunk sizes (None:
    place's default).  heldout: (observed, held-out) halves of test documents to
    score each model on.  mesh: the two-axis mesh ("HOSTSxGPUS") of the runs whose partition
    is hybrid or auto (with num_devices 0).  hosts_exchanges: what crosses between the hosts
    of the two-axis mesh (plan.hosts_exchange's settings), each run in turn there."""
    wall_start = time.perf_counter()
    env = environment()
    copy_mib = copy_mib or (1024 if env["platform"] == "gpu" else 256)
    bandwidth = copy_bandwidth(copy_mib << 20)
    copy_bps = bandwidth["copy_GB_per_s"] * 1e9
    card = roofline.Card.of_device(jax.devices()[0], copy_bps)
    # xla first, so that every other backend's line can carry its ratio to xla.
    order = sorted(dict.fromkeys(backends), key=lambda b: b != "xla")
    # (K, backend, optimize_alpha_every) -> steady Mtoken/s on one device
    records, one_device = [], {}

    def put(record):
        record = {**{key: record[key] for key in ("type", "devices", "K", "backend")
                     if key in record}, **record}
        records.append(record)
        emit(json.dumps(record))

    # (devices, K, backend) -> mean Mtoken/s with alpha fixed, when optimize_alpha_every has 0
    fixed_alpha = {}
    corpus_info = dict(corpus=corpus.name, D=corpus.num_docs, T=corpus.num_tokens,
                       V=corpus.num_words)
    for count, partition, chunk_size in itertools.product(num_devices, partitions, chunk_tokens):
        placement, placed = measure_placement(
            corpus, Hyperparams.create(num_topics[0]), count, chunk_size, partition,
            mesh if partition in ("auto", "hybrid") and count == 0 else None)
        mesh_info = dict(devices=placement.num_devices, partition=placement.partition,
                         mesh_shape=dict(placement.mesh.shape), chunk_tokens=chunk_size,
                         num_chunks=placement.num_chunks,
                         padded_tokens=int(placement.slots[0].word.size * placement.num_slots))
        exchanges = hosts_exchanges if placement.partition == "hybrid" else ("auto",)
        for k, every, exchange in itertools.product(num_topics, optimize_alpha_every,
                                                    exchanges):
            xla_steady = None
            for backend in order:
                head = dict(K=k, backend=backend, **corpus_info, **mesh_info)
                reason = backend_unavailable(backend)
                if reason is not None:
                    put(dict(type="skipped", **head, reason=reason, **env))
                    continue
                run_placement = dataclasses.replace(
                    placement.with_hyper(Hyperparams.create(k, backend=backend)),
                    hosts_exchange_setting=exchange)
                result = bench_one(run_placement, corpus, iterations=iterations, warmup=warmup, seed=seed,
                                   phases=phases, phase_repeats=phase_repeats, heldout=heldout,
                                   optimize_alpha_every=every, card=card,
                                   bandwidth_bytes=BANDWIDTH_BYTES.get(env["platform"],
                                                                       BANDWIDTH_BYTES["cpu"]))
                traffic = result["min_traffic_bytes"]
                result.update(
                    **bandwidth,
                    bandwidth_floor_seconds=_sig(traffic / copy_bps),
                    bandwidth_bound_Mtoken_per_s=_sig(corpus.num_tokens * copy_bps / traffic / 1e6),
                    achieved_GB_per_s=_sig(traffic / result["steady_iteration_seconds"] / 1e9),
                    placement=placed,
                )
                steady = result["Mtoken_per_s_steady"]
                if backend == "xla":
                    xla_steady = steady
                if len(order) > 1 and xla_steady:
                    result["speedup_vs_xla"] = _sig(steady / xla_steady, 4)
                if placement.num_devices == 1:
                    one_device.setdefault((k, backend, every), steady)
                if (k, backend, every) in one_device:
                    result["speedup_vs_one_device"] = _sig(
                        steady / one_device[k, backend, every], 4)
                run = (placement.num_devices, k, backend)
                if every == 0:
                    fixed_alpha[run] = result["Mtoken_per_s_mean"]
                elif run in fixed_alpha:
                    result["learned_alpha_cost"] = _sig(
                        1 - result["Mtoken_per_s_mean"] / fixed_alpha[run], 3)
                put(dict({**head, **result}, **env))
    summary = dict(type="summary", **corpus_info, **env, **bandwidth, iterations=iterations,
                   warmup=warmup, seed=seed, **summary_lists(records),
                   wall_seconds=_sig(time.perf_counter() - wall_start))
    put(summary)
    return records


# the fields of a result line that the summary line repeats
SUMMARY_FIELDS = ("devices", "partition", "hosts_exchange", "K", "backend", "optimize_alpha_every",
                  "learned_alpha_cost", "Mtoken_per_s_steady", "Mtoken_per_s_mean",
                  "Mtoken_per_s_best", "compile_seconds", "speedup_vs_xla",
                  "speedup_vs_one_device", "reduction_share", "heldout_loglik_per_token")


def summary_lists(records: list[dict]) -> dict:
    """The summary line's lists: `results` (SUMMARY_FIELDS of each result) and `skipped`."""
    return dict(results=[{key: r[key] for key in SUMMARY_FIELDS if key in r}
                         for r in records if r["type"] == "result"],
                skipped=[{key: r[key] for key in ("K", "backend", "reason")}
                         for r in records if r["type"] == "skipped"])
