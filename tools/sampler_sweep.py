"""E-step kernel variants against a baseline kernel, on one device, in one process
(docs/measurements/roofline.md): the corpus is loaded or generated once per run.

    python tools/sampler_sweep.py --corpus=.corpora/wiki25k --test_fraction=0.1 \
        --num_topics=1024 --iterations=100 --baseline=../../saberjax/pallas/sampler.py \
        --variants='early:early_own=1;kept:own_in_kept=1;t16w2:tile_tokens=16,num_warps=2' \
        --rebuild_variants='aggregate:aggregate=1' --output=/tmp/wiki.jsonl

For each K: the baseline kernel (a sampler.py file, e.g. main's; default this tree's with its
defaults) trains `iterations` iterations from the seed's random start (mean Mtoken/s, and
the held-out log-likelihood with --test_fraction).  On that run's last state: the E-step's
roofline floor (saberjax.roofline.floor), then the A rebuild, the B count and the sample
phase, each with its defaults (the sample phase: the baseline kernel) and with every variant's
knobs (this tree's kernels), timed (median of --repeats) and compared with the default's
result (mismatches: 0 for an exact variant).  Sampler knobs are sample_and_shuffle's keyword
arguments, plus tile_tokens (layout.with_tile_tokens) and file (another sampler.py whose
kernel the variant runs).  With --full_run the fastest exact variant of each phase (none with
tile_tokens) then trains the same iterations.

A cap on the kernel's registers is its max_registers knob (saberjax.pallas.registers; XLA's
-maxrregcount flag does not reach a Pallas kernel).  --profile runs each variant once between
cuProfilerStart and cuProfilerStop (for `ncu --profile-from-start off`) instead of timing it.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import json
import pathlib
import statistics
import sys
import time
import types

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax
import numpy as np
from absl import app, flags

from saberjax import corpus as corpus_io
from saberjax import esca, rng, roofline, trainer
from saberjax.benchmark import copy_bandwidth, measure_placement, synthetic_corpus
from saberjax.config import Hyperparams
from saberjax.layout import with_tile_tokens
from saberjax.pallas import kernels
from saberjax.pallas import sampler as pallas_sampler

import knob_args  # tools/, beside this script

DEFAULTS = {name: getattr(kernels, name) for name in
            ("sample_and_shuffle", "rebuild_doc_topic", "count_word_topic")}
FLAGS = flags.FLAGS
flags.DEFINE_string("corpus", None, "Corpus path (load_corpus).")
flags.DEFINE_string("synth_preset", None, "Or a synthetic corpus of this preset's shape.")
flags.DEFINE_float("scale", 1.0, "The synthetic corpus's size relative to the preset's.")
flags.DEFINE_list("num_topics", ["1000"], "K values.")
flags.DEFINE_integer("iterations", 5, "Iterations of each training run.")
flags.DEFINE_float("test_fraction", 0.0, "Held-out documents (scored after each run).")
flags.DEFINE_string("baseline", None, "The baseline kernel's sampler.py (default: this tree's).")
flags.DEFINE_string("variants", "", "E-step kernel knobs, name:knob=value,...;... (int or "
                    "string values; tile_tokens too).")
flags.DEFINE_string("rebuild_variants", "", "A rebuild (rebuild_doc_topic) knobs, as --variants.")
flags.DEFINE_string("count_variants", "", "B count (count_word_topic) knobs, as --variants.")
flags.DEFINE_bool("full_run", True, "Also train with the fastest exact variant of each phase "
                  "(--full_run_gain or more faster than its default).")
flags.DEFINE_float("full_run_gain", 0.02, "The share of its default's time a variant must save "
                   "to be trained with under --full_run.")
flags.DEFINE_integer("repeats", 5, "Timed calls per variant (median).")
flags.DEFINE_string("output", None, "JSON lines file.")
flags.DEFINE_bool("profile", False, "Run each variant once inside a CUDA profiler range "
                  "(ncu --profile-from-start off) instead of timing it.")


def load_module(path: str):
    """The sampler module at path (its imports resolve against this tree's saberjax)."""
    spec = importlib.util.spec_from_file_location("baseline_sampler", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def train(corpus, placement, num_topics, heldout, **operations):
    """(record, last state) of FLAGS.iterations iterations with `operations` (e.g.
    sample_and_shuffle=...) as the pallas backend's, its defaults for the others."""
    for name, default in DEFAULTS.items():
        setattr(kernels, name, operations.get(name, default))
    jax.clear_caches()
    hyper = Hyperparams.create(num_topics, backend="pallas")
    config = trainer.TrainConfig(num_topics, iterations=FLAGS.iterations, seed=0,
                                 backend="pallas")
    run = trainer.train_placed(corpus, placement.with_hyper(hyper), config, heldout)
    times = [record["seconds"] for record in run.metrics]
    half = times[len(times) // 2:]
    record = dict(Mtoken_per_s_mean=corpus.num_tokens * len(times) / sum(times) / 1e6,
                  Mtoken_per_s_last_half=corpus.num_tokens * len(half) / sum(half) / 1e6,
                  compile_seconds=run.compile_seconds)
    if heldout is not None:
        record["heldout_loglik_per_token"] = run.metrics[-1]["heldout_loglik_per_token"]
    return record, run.state


def profiled_range(run):
    """run() between cuProfilerStart and cuProfilerStop (what ncu profiles when started with
    --profile-from-start off)."""
    cuda = ctypes.CDLL("libcuda.so.1")
    cuda.cuProfilerStart()
    try:
        run()
    finally:
        cuda.cuProfilerStop()


def time_call(fn, *args):
    """(median seconds, the result on the host) of fn(*args), after one untimed call (under
    --profile: one call in a profiler range, seconds None); each call gets fresh copies of
    args, which it may donate."""
    def copies():
        return jax.block_until_ready(jax.tree.map(lambda x: x.copy(), args))

    executable = jax.jit(fn).lower(*copies()).compile()
    result = jax.device_get(executable(*copies()))
    if FLAGS.profile:
        fresh = copies()
        profiled_range(lambda: jax.block_until_ready(executable(*fresh)))
        return None, result
    seconds = []
    for _ in range(FLAGS.repeats):
        fresh = copies()
        start = time.perf_counter()
        jax.block_until_ready(executable(*fresh))
        seconds.append(time.perf_counter() - start)
        del fresh
    return statistics.median(seconds), result


def sweep(emit, num_topics, kind, operation, args, variants,
          prepare=lambda args, knobs: (args, knobs)):
    """Time `operation` with its defaults and with each variant's knobs on args (prepare:
    the args and knobs a variant's call takes); mismatches count the result's elements that
    differ from the defaults'.
    Returns (name, knobs) of the fastest exact variant --full_run_gain or more faster than the
    defaults, or None (always under --profile)."""
    base_seconds, base = time_call(operation, *args)
    emit(K=num_topics, kind=kind, variant="default", seconds=base_seconds)
    best, best_seconds = None, (1 - FLAGS.full_run_gain) * (base_seconds or 0.0)
    for name, knobs in variants.items():
        call_args, call_knobs = prepare(args, dict(knobs))
        try:
            seconds, result = time_call(functools.partial(operation, **call_knobs), *call_args)
        except Exception as error:  # noqa: BLE001 (a variant that fails is recorded)
            emit(K=num_topics, kind=kind, variant=name, error=repr(error)[:300])
            continue
        mismatches = sum(int(np.sum(np.asarray(a) != np.asarray(b)))
                         for a, b in zip(jax.tree.leaves(result), jax.tree.leaves(base)))
        emit(K=num_topics, kind=kind, variant=name, knobs=knobs, seconds=seconds,
             over_default=seconds / base_seconds if seconds else None, mismatches=mismatches)
        if (seconds is not None and mismatches == 0 and seconds < best_seconds
                and call_args is args):
            best, best_seconds = (name, call_knobs), seconds
    if not FLAGS.profile:
        again, _ = time_call(operation, *args)  # drift over the sweep shows here
        emit(K=num_topics, kind=kind, variant="default_again", seconds=again)
    return best


ABLATIONS = dict(  # what a sampler variant's ablate=a+b... removes (its topics are wrong)
    hash=("rng", types.SimpleNamespace(  # one mix of the state instead of a hash per draw
        **{name: getattr(rng, name) for name in dir(rng) if name.startswith("STREAM")},
        uniform=lambda state, stream: ((state ^ jax.numpy.asarray(stream).astype(
            jax.numpy.uint32)) >> 8).astype(jax.numpy.float32) * 2.0**-24,
        token_hash=rng.token_hash, global_token_ids=rng.global_token_ids)),
    dense=("tree_topic",  # every token's tree draw: topic 0
           lambda level_refs, alpha_ref, level_widths, row, take, *rest, **knobs:
           jax.numpy.zeros(take.shape, jax.numpy.int32)))


def ablated(names, *args, **knobs):
    """This tree's E-step kernel traced with the ABLATIONS `names` patched in."""
    saved = {ABLATIONS[name][0]: getattr(pallas_sampler, ABLATIONS[name][0]) for name in names}
    try:
        for name in names:
            setattr(pallas_sampler, *ABLATIONS[name])
        return pallas_sampler.sample_and_shuffle.__wrapped__(*args, **knobs)
    finally:
        for attribute, value in saved.items():
            setattr(pallas_sampler, attribute, value)


def main(argv):
    del argv
    corpus = (corpus_io.load_corpus(FLAGS.corpus) if FLAGS.corpus
              else synthetic_corpus(FLAGS.synth_preset, FLAGS.scale, 0))
    heldout = None
    if FLAGS.test_fraction > 0:
        corpus, test = corpus_io.train_test_split(corpus, FLAGS.test_fraction, 0)
        heldout = corpus_io.split_document_halves(test, 0)
    baseline = (load_module(FLAGS.baseline) if FLAGS.baseline else pallas_sampler)
    output = open(FLAGS.output, "a") if FLAGS.output else None
    card = roofline.Card.of_device(jax.devices()[0],
                                   copy_bandwidth(1 << 30)["copy_GB_per_s"] * 1e9)

    def emit(**record):
        line = json.dumps({"corpus": corpus.name, "T": corpus.num_tokens, **record},
                          default=lambda value: value.item())
        print(line, flush=True)
        if output:
            output.write(line + "\n")
            output.flush()

    for num_topics in map(int, FLAGS.num_topics):
        placement, _ = measure_placement(corpus, Hyperparams.create(num_topics,
                                                                    backend="pallas"),
                                         1, None, "auto")
        record, state = train(corpus, placement, num_topics, heldout,
                              sample_and_shuffle=baseline.sample_and_shuffle)
        emit(K=num_topics, kind="train", variant="baseline", **record)
        chunks, chunk_states = jax.tree.map(lambda x: x[0], (tuple(placement.slots),
                                                              state.chunks))
        chunk, chunk_state = chunks[0], chunk_states[0]
        key = esca.next_iteration(state.seed, state.iteration)[1]
        floor = roofline.floor(chunks, chunk_states, state.model.bhat.shape, card)
        emit(K=num_topics, kind="floor", copy_GB_per_s=card.hbm_bytes_per_s / 1e9,
             **{name: value for name, value in floor.items() if name != "arrays"})

        def tiled(args, knobs):
            """A tile_tokens knob is the chunk's (layout.with_tile_tokens)."""
            if "tile_tokens" not in knobs:
                return args, knobs
            chunk = with_tile_tokens(args[0], state.model.bhat.shape[0],
                                     knobs.pop("tile_tokens"))
            return (chunk, *args[1:]), knobs

        sample = jax.jit(baseline.sample_and_shuffle)
        topics, doc_major = sample(chunk, chunk_state, state.model, key)
        best = dict(
            rebuild_doc_topic=sweep(
                emit, num_topics, "rebuild", functools.partial(
                    DEFAULTS["rebuild_doc_topic"], num_topics=num_topics),
                (chunk, doc_major), knob_args.parse_named(FLAGS.rebuild_variants)),
            count_word_topic=sweep(
                emit, num_topics, "count", DEFAULTS["count_word_topic"],
                (chunk, topics, jax.numpy.zeros_like(state.model.word_topic)),
                knob_args.parse_named(FLAGS.count_variants)))
        del topics, doc_major
        # the baseline kernel is the sweep's default, each variant this tree's kernel
        sampler_variants = knob_args.parse_named(FLAGS.variants)

        def this_tree(args, knobs):
            args, knobs = tiled(args, knobs)
            ablate, path = knobs.pop("ablate", ""), knobs.pop("file", None)
            kernel = (functools.partial(ablated, ablate.split("+")) if ablate
                      else load_module(path).sample_and_shuffle if path
                      else pallas_sampler.sample_and_shuffle)
            return args, dict(knobs, kernel=kernel)

        def sample_with(*args, kernel=baseline.sample_and_shuffle, **knobs):
            return kernel(*args, **knobs)

        best["sample_and_shuffle"] = sweep(
            emit, num_topics, "sample", sample_with, (chunk, chunk_state, state.model, key),
            sampler_variants, this_tree)
        chosen = {op: functools.partial(DEFAULTS[op] if op != "sample_and_shuffle"
                                        else sample_with, **knobs)
                  for op, found in best.items() if found for knobs in [found[1]]}
        if FLAGS.full_run and chosen:
            record, _ = train(corpus, placement, num_topics, heldout, **chosen)
            emit(K=num_topics, kind="train", variant="best",
                 variants={op: found[0] for op, found in best.items() if found}, **record)


if __name__ == "__main__":
    app.run(main)
