"""Benchmark of the model formats (dense, sparse, auto) on one corpus: Mtoken/s per (K, format),
the model's device bytes, B's nonzeros and the bytes of model per nonzero beside the dense
model's, one JSON line per run (to stdout and --output).

    PYTHONPATH=$PWD python3 tools/sparse_bench.py --preset=nytimes --scale=1 \
        --runs=1000:dense,1000:auto,100000:sparse --iterations=3 --output=runs/sparse.jsonl

A run is K:format[:backend[:iterations]] (format dense, sparse or auto; backend auto, xla or
pallas).  Each run places the corpus as training would (trainer.plan_run: the memory plan
resolves "auto"; consecutive runs of one plan share the placement), initialises, compiles,
runs --warmup + iterations iterations (trainer.train_placed) and reports the timed ones.
--quality_runs run after the others on a split of the corpus (--test_fraction of the
documents held out) from the random start and report the held-out log-likelihood per token
after their iterations.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gzip
import inspect
import json
import os
import resource
import time

import jax
import jax.numpy as jnp
import numpy as np

from saberjax import benchmark, esca, rng, roofline, sparse_rows, synth, timing, trainer
from saberjax import corpus as corpus_io
from saberjax.config import Hyperparams
from saberjax.execution import memory
from saberjax.execution.placement import placed
from saberjax.pallas import segmented_count as pallas_segmented_count
from saberjax.corpus import Corpus
from saberjax.state import check_document_lengths, max_pair_count

import kernel_timeline  # tools/, beside this script
import knob_args
from tile_sectors import tile_sectors

try:  # the model's build; a baseline tree of tools/sparse_ab.sh may predate its module
    from saberjax import sparse_build
except ImportError:
    sparse_build = sparse_rows


def model_record(placement, state, corpus) -> dict:
    """Device bytes of the state's model, B's nonzeros, bytes per nonzero, and the dense
    model's bytes (B int32, B-hat, trees: memory.model_bytes less the update) per nonzero."""
    hyper = placement.hyper
    model_bytes = sum(leaf.nbytes for leaf in jax.tree.leaves(state.model))
    if hyper.sparse:  # by document the model is whole on every device: one copy
        copies = 1 if placement.partition == "documents" else placement.num_devices
        row_start = np.asarray(state.model.word_topic.row_start).reshape(copies, -1)
        nnz = int(row_start[:, -1].sum())
    else:
        nnz = int(np.count_nonzero(np.asarray(state.model.word_topic)))
    dense_bytes = corpus.num_words * hyper.padded_topics * (4 + 2 + 4 / 31)
    return dict(model_bytes=model_bytes, model_GB=round(model_bytes / 1e9, 3), nnz=nnz,
                nnz_per_token=round(nnz / corpus.num_tokens, 4),
                model_bytes_per_nnz=round(model_bytes / max(nnz, 1), 2),
                dense_model_bytes=int(dense_bytes),
                dense_model_bytes_per_nnz=round(dense_bytes / max(nnz, 1), 2))


def bench(corpus, run: str, iterations: int, warmup: int, seed: int, placements: dict,
          heldout=None, phases: bool = False, wide_pairs: bool = False,
          phase_variants: bool = False, profile: str = "", estep_variants: str = "",
          rebuild_variants: str = "",
          **settings) -> dict:
    """The record of run K:format[:backend[:iterations]] (placements: shared by plan;
    phases, phase_variants: sparse_phases' timings after the run; profile: a folder for
    kernel_profile's trace and program after the run; estep_variants: estep_settings'
    after the run, with phases (rebuild_variants: rebuild_settings'); wide_pairs: A's pairs
    wide whatever the documents' lengths; settings: TrainConfig's placement settings, e.g.
    partition, chunk_tokens)."""
    parts = run.split(":")
    num_topics, model_format, backend, iterations = parts + ["auto", str(iterations)][
        len(parts) - 2:]
    backend = backend or "auto"
    config = trainer.TrainConfig(num_topics=int(num_topics), iterations=warmup + int(iterations),
                                 seed=seed, model_format=model_format, backend=backend,
                                 optimize_alpha_every=0, **settings)
    start = time.perf_counter()
    check_document_lengths(corpus.doc_lengths())
    hyper = dataclasses.replace(Hyperparams.from_config(config), wide_pairs=wide_pairs)
    run_plan = trainer.plan_run(corpus, hyper, config, scoring=heldout is not None)
    hyper = dataclasses.replace(hyper, model_format=run_plan.model_format,
                                wide_pairs=run_plan.wide_pairs)
    key = (run_plan.partition, run_plan.model_format, run_plan.streamed, run_plan.chunk_tokens,
           run_plan.wide_pairs)
    if key not in placements:  # one placement on the devices at a time
        placements.clear()
        placements[key] = placed(corpus, hyper, run_plan)
    placement = placements[key].with_hyper(hyper)
    place_seconds = time.perf_counter() - start
    result = trainer.train_placed(corpus, placement, config, heldout)
    times = [record["seconds"] for record in result.metrics[warmup:]]
    peak_device = max((device.memory_stats() or {}).get("peak_bytes_in_use", 0)
                      for device in jax.local_devices())
    record = dict(
        K=config.num_topics, requested=model_format, model_format=hyper.model_format,
        partition=placement.partition, streamed=placement.streamed,
        slots=placement.num_slots, wide_pairs=hyper.wide_pairs, backend=hyper.backend,
        devices=placement.num_devices, T=corpus.num_tokens, V=corpus.num_words,
        D=corpus.num_docs, iterations=len(times), warmup=warmup,
        Mtoken_per_s_mean=round(corpus.num_tokens * len(times) / sum(times) / 1e6, 2),
        Mtoken_per_s_best=round(corpus.num_tokens / min(times) / 1e6, 2),
        iteration_seconds=[round(t, 4) for t in times[:10]],
        last_iteration_seconds=[round(t, 4) for t in times[10:][-10:]],
        place_seconds=round(place_seconds, 2), init_seconds=round(result.init_seconds, 2),
        compile_seconds=round(result.compile_seconds, 2),
        peak_device_GB=round(peak_device / 1e9, 2),
        peak_host_GB=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9, 2),
        planned_device_GB=round(planned_device_bytes(placement, corpus) / 1e9, 2),
        state_digest=state_digest(result.state),
        **model_record(placement, result.state, corpus))
    if hyper.sparse and placement.num_devices == 1 and phases:
        # the training's figures first, kept where the phases outrun a time limit
        print(json.dumps(dict(type="trained", **record)), flush=True)
        record["phase_seconds"] = sparse_phases(placement, result.state,
                                                variants=phase_variants,
                                                estep_variants=estep_variants,
                                                rebuild_variants=rebuild_variants)
    if profile and placement.num_devices == 1:
        print(kernel_profile(placement, result.state, os.path.join(profile, f"K{num_topics}")),
              flush=True)
    if heldout is not None:
        record["heldout_loglik_per_token"] = result.metrics[-1]["heldout_loglik_per_token"]
    return record


def state_digest(state) -> str:
    """A checksum of every bit of a trained state (the chunks' topics and A, the model's arrays),
    computed where the arrays are: equal digests of two trees' runs from one seed say that
    they trained the same model (each leaf's bits, as uint32, weighted by odd multipliers of
    their positions, summed modulo 2**32)."""
    @jax.jit
    def leaf_sum(leaf):
        if leaf.dtype == jnp.bool_:
            leaf = leaf.astype(jnp.uint8)
        bits = jax.lax.bitcast_convert_type(leaf, jnp.dtype(f"uint{leaf.dtype.itemsize * 8}"))
        bits = bits.astype(jnp.uint32).ravel()
        weights = jnp.arange(bits.shape[0], dtype=jnp.uint32) * jnp.uint32(2654435761) | 1
        return jnp.sum(bits * weights, dtype=jnp.uint32)

    sums = [int(leaf_sum(leaf)) for leaf in jax.tree.leaves(state)
            if hasattr(leaf, "dtype") and leaf.size]
    return f"{sum(value * (2 * index + 1) for index, value in enumerate(sums)) % 2**32:08x}"


def planned_device_bytes(placement, corpus) -> int:
    """The memory plan's device bytes of the placement: resident (memory.resident_bytes), or
    streamed, the model (the sparse model by document: whole, with the tokens' keys; by word:
    a device's rows, memory.streamed_by_word_model_bytes) beside prefetch + 1 slots (by word,
    each with every device's chunk's A gathered and doc-major topics)."""
    hyper = placement.hyper
    per_token = memory.SPARSE_BYTES_PER_TOKEN if hyper.sparse else memory.BYTES_PER_TOKEN_BOUND
    chunk_tokens = placement.slots.padded_tokens if placement.streamed else 0
    if placement.streamed and placement.partition == "words":
        model = memory.streamed_by_word_model_bytes(
            placement.streamed_tokens, placement.model_rows, hyper.padded_topics, hyper.sparse)
        per_token += placement.num_devices * (memory.WORD_PARTITION_BYTES_PER_TOKEN + (
            memory.WIDE_PAIR_EXTRA_BYTES if hyper.wide_pairs else 0))
    elif placement.streamed and hyper.sparse:
        model = memory.streamed_sparse_model_bytes(corpus.num_tokens, placement.model_rows,
                                                   hyper.padded_topics, placement.num_devices)
    else:
        return memory.resident_bytes(corpus, hyper, placement.num_devices, placement.partition,
                                     per_token)
    return int(model + per_token * chunk_tokens * (placement.slots.prefetch + 1))


def split_long_documents(corpus, limit: int):
    """The corpus with every document longer than `limit` tokens cut into consecutive pieces
    of at most `limit` (what the refusal of longer documents at large K advises)."""
    offsets = np.asarray(corpus.doc_offsets, np.int64)
    cuts = [np.arange(start, end, limit) for start, end in zip(offsets[:-1], offsets[1:])
            if end - start > limit]
    if not cuts:
        return corpus
    new_offsets = np.unique(np.concatenate([offsets, *cuts]))
    return Corpus(new_offsets, np.asarray(corpus.word_ids), tuple(corpus.vocab),
                  name=f"{corpus.name}-split{limit}")


def timed(program, repeats: int) -> float:
    """Seconds of program() (timing.median_seconds), to 0.1 ms."""
    return round(timing.median_seconds(program, repeats), 4)


def sparse_phases(placement, state, repeats: int = 3, variants: bool = False,
                  estep_variants: str = "", rebuild_variants: str = "") -> dict:
    """Seconds of each phase of a sparse iteration on the first device (median of `repeats`
    after a compiling pass): the E-step, A's rebuild, B's rows counted, the model built, and
    the compiled iteration itself (Placement.compile: the four in one program under the
    mesh's shard_map, as training runs them); variants: also the four phases as one jitted
    program without the shard_map, A's rebuild kernel at one and two bitmap levels (and
    whether their pairs agree) and the E-step with float32 and bfloat16 dense rows (and how
    many rows each); estep_variants: estep_settings' timings; rebuild_variants:
    rebuild_settings'."""
    hyper = placement.hyper
    share, chunk, chunk_state = jax.tree.map(
        lambda x: jax.device_put(np.asarray(x)[0]),
        (placement.word_shares, placement.slots[0], state.chunks[0]))
    model = jax.tree.map(lambda x: jax.device_put(np.asarray(x)), state.model)
    key = rng.iteration_key(0, 1)
    # every array goes in as an argument: a closure over device arrays would embed them in the
    # compiled program as constants (gigabytes at large K)
    sample = functools.partial(jax.jit(lambda s, c, m, k: esca.sample(s, c, m, k, hyper)),
                               share, chunk_state, model, key)
    topics, doc_major = sample()
    rebuild = functools.partial(
        jax.jit(lambda c, t, d: esca.chunk_state_from_topics(c, t, d, hyper)),
        chunk, topics, doc_major)
    count = functools.partial(
        jax.jit(lambda s, t: sparse_rows.count_rows(s, t, placement.model_rows,
                                                    hyper.padded_topics)), share, topics)
    rows = count()
    build = functools.partial(jax.jit(lambda r, a: esca.model_from_totals(
        r, sparse_rows.topic_totals(r, hyper.padded_topics), a, hyper, placement.num_words)),
        rows, model.alpha)
    phases = {name: timed(program, repeats) for name, program in (
        ("sample", sample), ("rebuild_a", rebuild), ("count_rows", count),
        ("build_model", build))}
    phases["iteration"] = timed(functools.partial(placement.compile(state), state), repeats)
    phases["sample_floor"] = sample_floor(share, chunk_state, model, placement.num_words)
    phases["tile_sectors"] = tile_sectors(share, chunk_state, int(model.dense_bhat.shape[0]),
                                          int(model.topic_totals.shape[0]))
    if rebuild_variants:
        phases.update(rebuild_settings(chunk, doc_major, hyper.num_topics, rebuild_variants,
                                       repeats))
    if estep_variants:
        phases.update(estep_settings(share, chunk_state, model, key, topics, estep_variants,
                                     repeats, hyper, placement.num_words))
    if variants:
        phases["phases_in_one_program"] = timed(functools.partial(
            jax.jit(functools.partial(_one_program, placement)), share, chunk, chunk_state,
            model, key), repeats)
        phases.update(rebuild_settings(chunk, doc_major, hyper.num_topics, "levels=1;levels=2",
                                       repeats))
        phases.update(dense_row_types(placement, share, chunk_state, rows, model.alpha, key,
                                      repeats))
    return phases


def sample_floor(share, chunk_state, model, num_words: int) -> dict:
    """The E-step's floor on the device's tokens (roofline.sparse_floor, at the card's
    measured copy rate): its levels' seconds and bytes a token, the bound, the share of
    tokens on dense rows, A's nonzeros a token and each array's bytes a token by level."""
    card = roofline.Card.of_device(
        jax.devices()[0], benchmark.copy_bandwidth(1 << 30)["copy_GB_per_s"] * 1e9)
    return roofline.sparse_floor((share,), (chunk_state,), int(model.dense_bhat.shape[0]),
                                 (num_words, int(model.topic_totals.shape[0])), card)


def estep_settings(share, chunk_state, model, key, topics, settings: str,
                   repeats: int, hyper=None, num_words: int = 0) -> dict:
    """Seconds of the sparse E-step kernel at each of the ';'-separated settings (its keyword
    arguments as name=value, an integer or a word, comma-separated, tile_tokens among them:
    the layout's tiles rebuilt at that size; names of sparse_build.model_from_totals' keyword
    arguments, e.g. row_table_bytes, rebuild the model from the same rows with them) on the
    same state, and how many of its topics differ from `topics` (the defaults'); with the
    model's row tables, the tokens whose words have a table, a bucket search or a dense
    row."""
    from saberjax.layout import with_tile_tokens  # noqa: PLC0415
    from saberjax.pallas import sparse_sampler as kernel  # noqa: PLC0415

    model_knobs = set(inspect.signature(sparse_build.model_from_totals).parameters)
    record = {}
    for setting in settings.split(";"):
        knobs = knob_args.parse(setting)
        chunk = share
        if "tile_tokens" in knobs:
            chunk = with_tile_tokens(share, int(model.row_mass.shape[0]),
                                     knobs.pop("tile_tokens"))
        built = {name: knobs.pop(name) for name in list(knobs) if name in model_knobs}
        setting_model = model
        if built:
            rows = model.word_topic
            build = functools.partial(jax.jit(lambda r, a: sparse_build.model_from_totals(
                r, sparse_rows.topic_totals(r, hyper.padded_topics), a, hyper.num_topics,
                hyper.beta, num_words, **built)), rows, model.alpha)
            record[f"build[{setting}]"] = timed(build, repeats)
            setting_model = build()
            record[f"sample[{setting}]_lookups"] = lookup_shares(share, setting_model)
        program = functools.partial(jax.jit(functools.partial(
            kernel.sample_and_shuffle, **knobs)), chunk, chunk_state, setting_model, key)
        record[f"sample[{setting}]"] = timed(program, repeats)
        record[f"sample[{setting}]_differ"] = int(jnp.sum(program()[0] != topics))
        del setting_model, program  # one extra model on the device at a time
    return record


def lookup_shares(share, model) -> dict:
    """The shares of a device's tokens whose words have a dense row, a row table and a
    bucket search only, and the model's row table slots (filled and all)."""
    word = np.asarray(share.word)[:int(share.num_tokens)]
    window = np.asarray(model.tables.window)
    dense = word < model.dense_bhat.shape[0]
    tabled = ~dense & (window[word] > 0)
    return dict(dense=round(float(dense.mean()), 4), table=round(float(tabled.mean()), 4),
                bucket=round(float((~dense & ~tabled).mean()), 4),
                table_windows=np.bincount(window[word[tabled]], minlength=9).tolist(),
                slots_filled=int(jnp.sum(model.tables.slots != 0)),
                slots=int(model.tables.slots.shape[0]))


def kernel_profile(placement, state, folder: str, calls: int = 2) -> str:
    """The first GPU's kernels over `calls` compiled iterations from the trained state
    (kernel_timeline.kernel_totals), the trace and the iteration's optimized program
    (program.txt.gz: the fusions' operations) written under folder."""
    step = placement.compile(state)
    jax.block_until_ready(step(state))
    _, events = kernel_timeline.traced_events(
        lambda: [step(state) for _ in range(calls)], os.path.join(folder, "trace"))
    os.makedirs(folder, exist_ok=True)
    with gzip.open(os.path.join(folder, "program.txt.gz"), "wt") as file:
        file.write("\n\n".join(step.program_texts()))
    if events is None:
        return f"kernel profile {folder}: no GPU in the trace"
    return (f"kernel profile {folder}:\n" + kernel_timeline.kernel_totals(events, calls)
            + "\nthe largest kernels' launches:\n" + kernel_timeline.kernel_details(
                os.path.join(folder, "trace"), kernel_timeline.top_kernels(events, 8)))


def _one_program(placement, share, chunk, chunk_state, model, key):
    """The four phases of a sparse iteration on one device as one program (no shard_map):
    (the chunk's new state, the new model)."""
    hyper = placement.hyper
    topics, doc_major = esca.sample(share, chunk_state, model, key, hyper)
    rows = sparse_rows.count_rows(share, topics, placement.model_rows, hyper.padded_topics)
    return (esca.chunk_state_from_topics(chunk, topics, doc_major, hyper),
            esca.model_from_totals(rows, sparse_rows.topic_totals(rows, hyper.padded_topics),
                                   model.alpha, hyper, placement.num_words))


def rebuild_settings(chunk, doc_major, num_topics: int, settings: str, repeats: int) -> dict:
    """Seconds of the segmented-count kernel at each of the ';'-separated settings (its
    keyword arguments as name=value, comma-separated) on the same topics, and whether each
    gives the A of the first."""
    record, first = {}, None
    for setting in settings.split(";"):
        knobs = knob_args.parse(setting)
        program = functools.partial(jax.jit(functools.partial(
            pallas_segmented_count.rebuild_doc_topic, num_topics=num_topics, **knobs)),
            chunk, doc_major)
        record[f"rebuild_a[{setting}]"] = timed(program, repeats)
        result = jax.tree.map(np.asarray, program())
        first = result if first is None else first
        record[f"rebuild_a[{setting}]_agrees"] = all(
            np.array_equal(one, two) for one, two in zip(first, result))
    return record


def dense_row_types(placement, share, chunk_state, rows, alpha, key, repeats: int) -> dict:
    """Seconds of the E-step with the dense rows in float32 and in bfloat16 (the model built
    from the same rows), and the dense rows of each."""
    hyper = placement.hyper
    record = {}
    for dtype in (jnp.float32, jnp.bfloat16):
        model = jax.jit(lambda r, a, dtype=dtype: sparse_build.model_from_totals(
            r, sparse_rows.topic_totals(r, hyper.padded_topics), a, hyper.num_topics,
            hyper.beta, placement.num_words, dense_dtype=dtype))(rows, alpha)
        name = jnp.dtype(dtype).name
        record[f"sample_{name}_rows"] = timed(functools.partial(
            jax.jit(lambda s, c, m, k: esca.sample(s, c, m, k, hyper)), share, chunk_state,
            model, key), repeats)
        record[f"dense_rows_{name}"] = int(model.dense_bhat.shape[0])
        del model  # one extra model on the device at a time
    return record


def run_all(corpus, runs: str, iterations: int, warmup: int, seed: int, output,
            heldout=None, phases: bool = False, **settings) -> None:
    """Every run of the comma-separated list, one JSON line each (to stdout and output);
    settings: bench's."""
    placements = {}
    for run in runs.split(","):
        try:
            record = dict(type="result", **bench(corpus, run, iterations, warmup, seed,
                                                 placements, heldout, phases, **settings))
        except Exception as error:  # noqa: BLE001 (record it; the next run goes on)
            record = dict(type="failed", run=run, reason=f"{type(error).__name__}: {error}"[:2000])
        line = json.dumps(record)
        print(line, flush=True)
        if output:
            with open(output, "a", encoding="utf-8") as file:
                file.write(line + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="nytimes")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", default="", help="K:format[:backend[:iterations]],... "
                        "(format dense, sparse or auto), in the order run")
    parser.add_argument("--quality_runs", default="", help="runs as --runs, on the split "
                        "corpus, scored on the held-out documents")
    parser.add_argument("--test_fraction", type=float, default=0.1)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--output", default=None)
    parser.add_argument("--phases", action="store_true", help="time each phase of a sparse "
                        "iteration on one device (after the run)")
    parser.add_argument("--phase_variants", action="store_true", help="with --phases, also "
                        "A's rebuild at one and two bitmap levels and the E-step with float32 "
                        "and bfloat16 dense rows, on the same state")
    parser.add_argument("--estep_variants", default="", help="with --phases, also the "
                        "sparse E-step kernel at each ';'-separated setting of its keyword "
                        "arguments (name=value, comma-separated; tile_tokens: the tiles' "
                        "size), e.g. 'num_warps=2;tile_tokens=4', on the same state")
    parser.add_argument("--rebuild_variants", default="", help="with --phases, also A's "
                        "rebuild kernel at each ';'-separated setting of its keyword "
                        "arguments, e.g. 'min_programs=1024;num_warps=8', on the same topics")
    parser.add_argument("--profile", default="", help="a folder: after each one-device run, "
                        "the first GPU's kernels over two compiled iterations (printed), the "
                        "trace and the iteration's optimized program (written there)")
    parser.add_argument("--partition", default="auto", help="TrainConfig's partition "
                        "(documents: the sparse model streams, whole on every device; words "
                        "with --chunk_tokens: streamed, each device's rows resident)")
    parser.add_argument("--chunk_tokens", type=int, default=None)
    parser.add_argument("--num_devices", type=int, default=0)
    parser.add_argument("--wide_pairs", action="store_true", help="A's pairs wide whatever "
                        "the documents' lengths (state.pack_pairs), to measure them")
    parser.add_argument("--num_docs", type=int, default=None,
                        help="documents of the preset's shape (instead of --scale)")
    parser.add_argument("--split_documents_at_topics", type=int, default=0,
                        help="cut documents longer than A's packed pairs hold at this K "
                        "(state.max_pair_count) into pieces before every run (0: none)")
    args = parser.parse_args()
    start = time.perf_counter()
    scale = (args.num_docs / synth.PRESETS[args.preset].num_docs if args.num_docs
             else args.scale)
    corpus = benchmark.synthetic_corpus(args.preset, scale, args.seed)
    if args.split_documents_at_topics:
        corpus = split_long_documents(corpus, max_pair_count(args.split_documents_at_topics))
    env = dict(benchmark.environment(), synth_seconds=round(time.perf_counter() - start, 1))
    print(json.dumps(dict(type="corpus", corpus=corpus.name, T=corpus.num_tokens,
                          V=corpus.num_words, D=corpus.num_docs, **env)), flush=True)
    if args.runs:
        run_all(corpus, args.runs, args.iterations, args.warmup, args.seed, args.output,
                phases=args.phases, phase_variants=args.phase_variants, profile=args.profile,
                estep_variants=args.estep_variants, rebuild_variants=args.rebuild_variants,
                partition=args.partition, chunk_tokens=args.chunk_tokens,
                num_devices=args.num_devices, wide_pairs=args.wide_pairs)
    if args.quality_runs:
        train, test = corpus_io.train_test_split(corpus, args.test_fraction, args.seed)
        heldout = corpus_io.split_document_halves(test, args.seed)
        run_all(train, args.quality_runs, args.iterations, 0, args.seed, args.output, heldout)


if __name__ == "__main__":
    main()
