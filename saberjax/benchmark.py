"""The trainer's throughput benchmark: Mtoken/s per device count, partition, K and backend,
phase by phase (saberjax.iteration_measures), with the run's environment
(saberjax.run_environment); `saberjax bench` runs it from flags, and the fields of its records
are described there."""

from __future__ import annotations

import dataclasses
import itertools
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

from saberjax import roofline, synth, trainer
from saberjax.backend import pallas_unavailable_reason
from saberjax.config import Hyperparams
from saberjax.corpus import Corpus
from saberjax.execution import memory
from saberjax.execution.placement import Placement, placed
from saberjax.execution.plan import Plan, plan
from saberjax.iteration_measures import measure_phases, measure_reduction, significant
from saberjax.run_environment import environment
from saberjax.timing import copy_seconds, timed

BACKENDS = ("xla", "pallas")
# a device's bytes in the collectives measuring an axis's bandwidth, by platform (enough to
# reach the links' bandwidth on GPUs, little on the CPU of a test)
BANDWIDTH_BYTES = dict(gpu=256 << 20, cpu=8 << 20)


def _nbytes(tree) -> int:
    return int(sum(leaf.nbytes if hasattr(leaf, "nbytes") else np.asarray(leaf).nbytes
                   for leaf in jax.tree.leaves(tree)))


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
    return dict(copy_bytes=moved // 2, copy_seconds=significant(best),
                copy_GB_per_s=significant(moved / best / 1e9))


def measure_placement(corpus: Corpus, hyper: Hyperparams, num_devices: int,
                      chunk_tokens: int | None, partition: str,
                      mesh: str | None = None) -> tuple[Placement, dict]:
    """(placement, its record): the layout built and put on a mesh of num_devices devices
    (or the two-axis `mesh`, "HOSTSxGPUS"), resident (planned with stream=False)."""
    _start_client()
    run_plan, plan_seconds = timed(lambda: plan(corpus, hyper, num_devices, chunk_tokens,
                                                stream=False, partition=partition, mesh=mesh))
    return _measured_placement(corpus, hyper, run_plan, plan_seconds)


def _start_client() -> None:
    """The device client started, so that no measured placement counts its start."""
    jax.block_until_ready(jax.device_put(np.zeros(16, np.int32)))


def _measured_placement(corpus: Corpus, hyper: Hyperparams, run_plan: Plan,
                        plan_seconds: float) -> tuple[Placement, dict]:
    """(placement, its record) of the corpus placed as run_plan says, its seconds those of
    placing and of planning (plan_seconds)."""
    placement, seconds = timed(lambda: placed(corpus, hyper, run_plan))
    seconds += plan_seconds
    moved = _nbytes((placement.slots, placement.word_shares))
    return placement, dict(bytes=moved, seconds=significant(seconds),
                           GB_per_s=significant(moved / seconds / 1e9) if seconds > 0 else None)


def _a_nonzero_share(placement: Placement, state, tokens: int) -> float | None:
    """A's nonzero pairs after the timed iterations over the corpus's tokens: the share of
    the doc-major A arrays holding pairs (each of a words group's devices holds the group's
    A; None where the chunks stream, or the state holds z alone)."""
    if placement.streamed or state.chunks[0].a_nnz is None:
        return None
    pairs = sum(float(jnp.sum(chunk.a_nnz, dtype=jnp.float32)) for chunk in state.chunks)
    return significant(pairs / placement.word_parts / tokens, 4)


def _peak_device_gigabytes() -> float | None:
    """The most memory any local device has held so far in this process (None: not told)."""
    peaks = [(device.memory_stats() or {}).get("peak_bytes_in_use")
             for device in jax.local_devices()]
    return significant(max(peaks) / 1e9) if all(peaks) else None


def planned_device_bytes(corpus: Corpus, hyper: Hyperparams, placement: Placement) -> int:
    """The memory plan's bytes a device of this placement needs with every chunk resident, as
    the plan counts them (on the two-axis mesh, for its number of hosts)."""
    return memory.resident_bytes(corpus, hyper, placement.num_devices, placement.partition,
                                 memory.device_bytes_per_token(corpus, hyper),
                                 placement.num_hosts)


def backend_unavailable(name: str) -> str | None:
    """Why a backend cannot run here, or None."""
    return pallas_unavailable_reason() if name == "pallas" else None


def bench_one(placement: Placement, corpus: Corpus, *, iterations: int,
    warmup: int, seed: int, phases: bool, phase_repeats: int,
    heldout: tuple[Corpus, Corpus] | None = None, card: roofline.Card | None = None,
    optimize_alpha_every: int = trainer.TrainConfig.optimize_alpha_every,
    bandwidth_bytes: int = BANDWIDTH_BYTES["cpu"]) -> dict:
    """The record of one (devices, K, backend, optimize_alpha_every, init_window_topics: the
    placement's hyper's); with heldout (observed,
    held-out halves of the test documents) also the held-out log-likelihood per token after
    the timed iterations.  bandwidth_bytes: a device's bytes in the collectives that measure
    each axis's bandwidth (axis_bandwidth)."""
    hyper = placement.hyper
    num_topics, backend = hyper.num_topics, hyper.backend
    tokens = corpus.num_tokens
    config = trainer.TrainConfig(num_topics, iterations=warmup + iterations, seed=seed,
                                 backend=backend, optimize_alpha_every=optimize_alpha_every,
                                 init_window_topics=hyper.init_window_topics)
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
        alpha=significant(hyper.alpha), optimize_alpha_every=optimize_alpha_every,
        init_window_topics=hyper.init_window_topics,
        alpha_sum=significant(float(placement.alpha(state).sum())), beta=hyper.beta,
        iterations=iterations, warmup=warmup,
        Mtoken_per_s_mean=significant(tokens * len(times) / sum(times) / 1e6),
        Mtoken_per_s_steady=significant(tokens * len(steady) / sum(steady) / 1e6),
        Mtoken_per_s_best=significant(tokens / min(times) / 1e6),
        steady_iteration_seconds=significant(steady_seconds),
        iteration_seconds=[significant(t) for t in times],
        warmup_seconds=[significant(t) for t in warmup_seconds],
        compile_seconds=significant(run.compile_seconds),
        init_seconds=significant(run.init_seconds),
        chunk_bytes_per_token=significant(chunk_bytes / tokens),
        chunk_state_bytes_per_token=significant(state_bytes / tokens),
        state_bytes_per_token=significant((chunk_bytes + state_bytes) / tokens),
        model_bytes=model_bytes,
        model_bytes_per_token=significant(model_bytes / tokens),
        peak_device_GB=_peak_device_gigabytes(),
        planned_device_GB=significant(planned_device_bytes(corpus, hyper, placement) / 1e9),
        min_traffic_bytes=chunk_bytes + 2 * state_bytes + 2 * model_bytes,
        a_nonzero_share=_a_nonzero_share(placement, state, tokens),
    )
    if heldout is not None:
        record["heldout_loglik_per_token"] = significant(
            run.metrics[-1]["heldout_loglik_per_token"])
    record.update(measure_reduction(placement, phase_repeats, bandwidth_bytes))
    record["reduction_share"] = significant(record["reduction_seconds"] / steady_seconds, 3)
    if phases and jax.process_count() == 1:
        record["phases"] = measure_phases(placement, state, phase_repeats, card)
        for entry in record["phases"].values():
            entry["share_of_iteration"] = significant(entry["seconds"] / steady_seconds, 3)
        record["phases_sum_seconds"] = significant(
            sum(p["seconds"] for p in record["phases"].values()))
    return record


def run_benchmark(corpus: Corpus, num_topics: list[int], backends: list[str], *,
                  iterations: int = 10, warmup: int = 2,
                  chunk_tokens: tuple[int | None, ...] = (None,),
                  num_devices: tuple[int, ...] = (0,), partitions: tuple[str, ...] = ("auto",),
                  seed: int = 0, phases: bool = True, phase_repeats: int = 3,
                  copy_mib: int = 0, heldout: tuple[Corpus, Corpus] | None = None,
                  optimize_alpha_every: tuple[int, ...] = (
                      trainer.TrainConfig.optimize_alpha_every,),
                  init_window_topics: tuple[int | None, ...] = (
                      trainer.TrainConfig.init_window_topics,),
                  mesh: str | None = None, hosts_exchanges: tuple[str, ...] = ("auto",),
                  emit=print) -> list[dict]:
    """Benchmark every (device count, partition, chunk size, K, backend, optimize_alpha_every,
    init_window_topics); emit(json_line) for each record and the summary.  chunk_tokens: PDOW
    chunk sizes (None: place's default).  init_window_topics: None runs the setting's default
    for each K (config.default_window_topics).  heldout: (observed, held-out) halves of test
    documents to score each model on.  mesh: the two-axis mesh ("HOSTSxGPUS") of the runs
    whose partition is hybrid or auto (with num_devices 0).  hosts_exchanges: what crosses
    between its hosts (plan.hosts_exchange's settings), each run in turn there."""
    wall_start = time.perf_counter()
    env = environment()
    copy_mib = copy_mib or (1024 if env["platform"] == "gpu" else 256)
    bandwidth = copy_bandwidth(copy_mib << 20)
    copy_bps = bandwidth["copy_GB_per_s"] * 1e9
    card = roofline.Card.of_device(jax.devices()[0], copy_bps)
    bandwidth_bytes = BANDWIDTH_BYTES.get(env["platform"], BANDWIDTH_BYTES["cpu"])
    # xla first, so that every other backend's line can carry its ratio to xla.
    order = sorted(dict.fromkeys(backends), key=lambda b: b != "xla")
    records, baselines = [], _Baselines(compare_backends=len(order) > 1)

    def put(record):
        record = {**{key: record[key] for key in ("type", "devices", "K", "backend")
                     if key in record}, **record}
        records.append(record)
        emit(json.dumps(record))

    corpus_info = dict(corpus=corpus.name, D=corpus.num_docs, T=corpus.num_tokens,
                       V=corpus.num_words)
    for count, partition, chunk_size in itertools.product(num_devices, partitions, chunk_tokens):
        run_mesh = mesh if partition in ("auto", "hybrid") and count == 0 else None
        placements = _PlacementsByPlan(corpus, count, chunk_size, partition, run_mesh)
        for k, every, window in itertools.product(num_topics, optimize_alpha_every,
                                                  init_window_topics):
            placement, placing = placements.for_topics(k)
            mesh_info = dict(devices=placement.num_devices, partition=placement.partition,
                             mesh_shape=dict(placement.mesh.shape), chunk_tokens=chunk_size,
                             num_chunks=placement.num_chunks,
                             padded_tokens=int(placement.slots[0].word.size
                                               * placement.num_slots))
            exchanges = hosts_exchanges if placement.partition == "hybrid" else ("auto",)
            for exchange, backend in itertools.product(exchanges, order):
                head = dict(K=k, backend=backend, **corpus_info, **mesh_info)
                reason = backend_unavailable(backend)
                if reason is not None:
                    put(dict(type="skipped", **head, reason=reason, **env))
                    continue
                result = bench_one(dataclasses.replace(
                    placement.with_hyper(dataclasses.replace(
                        Hyperparams.create(k, backend=backend, init_window_topics=window),
                        model_format=placement.hyper.model_format,
                        wide_pairs=placement.hyper.wide_pairs)),
                    hosts_exchange_setting=exchange), corpus, iterations=iterations,
                                   warmup=warmup, seed=seed, phases=phases,
                                   phase_repeats=phase_repeats, heldout=heldout,
                                   optimize_alpha_every=every, card=card,
                                   bandwidth_bytes=bandwidth_bytes)
                result.update(**bandwidth, **_bandwidth_bound(result, copy_bps,
                                                              corpus.num_tokens),
                              placement=placing)
                baselines.compare(result,
                                  run=(count, partition, chunk_size, k, every, window, exchange),
                                  devices=placement.num_devices, k=k, backend=backend,
                                  every=every)
                put(dict({**head, **result}, **env))
            del placement  # the next K's placement, where its plan differs, is placed alone
    summary = dict(type="summary", **corpus_info, **env, **bandwidth, iterations=iterations,
                   warmup=warmup, seed=seed, **summary_lists(records),
                   wall_seconds=significant(time.perf_counter() - wall_start))
    put(summary)
    return records


class _PlacementsByPlan:
    """The placement each K of a benchmark runs on: the corpus placed as execution.plan plans
    it for that K (partition "auto" may choose another partition, model format or A's pair
    width for another K), placed again only where the plan differs from the last K's, and
    one placement held at a time (the previous one's device memory freed first)."""

    def __init__(self, corpus: Corpus, num_devices: int, chunk_tokens: int | None,
                 partition: str, mesh: str | None):
        self.corpus, self.settings = corpus, (num_devices, chunk_tokens, partition, mesh)
        self.key, self.current = None, None

    def for_topics(self, num_topics: int) -> tuple[Placement, dict]:
        """(placement, its record) for K = num_topics (its hyper's format and A's pair width
        are those the plan chose; its K may be an earlier one of the same plan).  The caller
        holds no earlier placement when the plan changes."""
        hyper = Hyperparams.create(num_topics)
        num_devices, chunk_tokens, partition, mesh = self.settings
        _start_client()
        run_plan, plan_seconds = timed(lambda: plan(
            self.corpus, hyper, num_devices, chunk_tokens, stream=False, partition=partition,
            mesh=mesh))
        key = (run_plan.partition, tuple(run_plan.mesh.shape.items()), run_plan.chunk_tokens,
               run_plan.streamed, run_plan.model_format, run_plan.wide_pairs)
        if key != self.key:
            self.key, self.current = key, None
            self.current = _measured_placement(self.corpus, hyper, run_plan, plan_seconds)
        return self.current


def _bandwidth_bound(result: dict, copy_bps: float, num_tokens: int) -> dict:
    """A result's iteration against the device's copy bandwidth: the seconds its least
    traffic takes at that bandwidth, the Mtoken/s that bounds, and the GB/s it achieved."""
    traffic = result["min_traffic_bytes"]
    return dict(
        bandwidth_floor_seconds=significant(traffic / copy_bps),
        bandwidth_bound_Mtoken_per_s=significant(num_tokens * copy_bps / traffic / 1e6),
        achieved_GB_per_s=significant(traffic / result["steady_iteration_seconds"] / 1e9))


class _Baselines:
    """The results a result is compared with: xla's of the same run (speedup_vs_xla, where
    several backends run), one device's of the same K, backend and optimize_alpha_every
    (speedup_vs_one_device), and the same devices, K and backend's with alpha fixed
    (learned_alpha_cost, where optimize_alpha_every takes 0 first)."""

    def __init__(self, compare_backends: bool):
        self.compare_backends = compare_backends
        self.xla = {}  # run -> steady Mtoken/s of xla
        self.one_device = {}  # (K, backend, optimize_alpha_every) -> steady Mtoken/s
        self.fixed_alpha = {}  # (devices, K, backend) -> mean Mtoken/s with alpha fixed

    def compare(self, result: dict, *, run: tuple, devices: int, k: int, backend: str,
                every: int) -> None:
        """Add the ratios to the baselines to `result`, the result of `run` (the settings
        that share xla's: devices setting, partition, chunk size, K, optimize_alpha_every,
        hosts exchange) on `devices` devices with `backend`, and record it as a baseline
        where it is one."""
        steady = result["Mtoken_per_s_steady"]
        if backend == "xla":
            self.xla[run] = steady
        if self.compare_backends and self.xla.get(run):
            result["speedup_vs_xla"] = significant(steady / self.xla[run], 4)
        if devices == 1:
            self.one_device.setdefault((k, backend, every), steady)
        if (k, backend, every) in self.one_device:
            result["speedup_vs_one_device"] = significant(
                steady / self.one_device[k, backend, every], 4)
        if every == 0:
            self.fixed_alpha[devices, k, backend] = result["Mtoken_per_s_mean"]
        elif (devices, k, backend) in self.fixed_alpha:
            result["learned_alpha_cost"] = significant(
                1 - result["Mtoken_per_s_mean"] / self.fixed_alpha[devices, k, backend], 3)


# the fields of a result line that the summary line repeats
SUMMARY_FIELDS = ("devices", "partition", "hosts_exchange", "K", "backend", "optimize_alpha_every",
                  "init_window_topics",
                  "learned_alpha_cost", "Mtoken_per_s_steady", "Mtoken_per_s_mean",
                  "Mtoken_per_s_best", "compile_seconds", "speedup_vs_xla",
                  "speedup_vs_one_device", "reduction_share", "heldout_loglik_per_token")


def summary_lists(records: list[dict]) -> dict:
    """The summary line's lists: `results` (SUMMARY_FIELDS of each result) and `skipped`."""
    return dict(results=[{key: r[key] for key in SUMMARY_FIELDS if key in r}
                         for r in records if r["type"] == "result"],
                skipped=[{key: r[key] for key in ("K", "backend", "reason")}
                         for r in records if r["type"] == "skipped"])
