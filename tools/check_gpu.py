"""Check the Pallas kernels against the XLA path on a GPU, and time their tuning variants.

Run on the device machine from the repo root (nothing is installed there), then launch/bench.py
for the per-phase and whole-iteration timings of both backends:

  python launch/synth.py --preset=nytimes --scale=0.1 --output=/tmp/nyt
  python tools/check_gpu.py --corpus=/tmp/nyt --topics=1000,10000
  python launch/bench.py --corpus=/tmp/nyt --num_topics=1000,10000 --backends=xla,pallas

Checks: the E-step kernel's mismatch fraction against the XLA sampler on the same inputs (and
its doc-major copy against XLA's shuffle), whether the segmented-count and B-count kernels
rebuild A and B exactly, on ragged documents at K = 2 and 65,536 and on the corpus after a few
iterations.  Timings (median of --repeats, Mtoken/s = corpus tokens / seconds): each kernel
variant, totals, B-hat and trees of both backends (and B bytes per second), and the
E-step's one-read bandwidth floor (24 + 4 * nnz bytes a token; saberjax.roofline has the full
model, level by level) at the measured copy bandwidth.  Prints one JSON line per result as it
goes and a table last.
"""

from __future__ import annotations

import functools
import json
import pathlib
import statistics
import sys
import traceback

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from saberjax import esca, mstep, rng, sampler, segmented_count, timing
from saberjax.config import Hyperparams, TrainConfig
from saberjax.corpus import Corpus, load_corpus
from saberjax.layout import build_layout, with_tile_tokens
from saberjax.pallas import bhat_tree as pallas_bhat_tree
from saberjax.pallas import sampler as pallas_sampler
from saberjax.pallas import segmented_count as pallas_ssc
from saberjax.pallas import word_topic_count as pallas_word_count
from saberjax.timing import copy_seconds
from saberjax.tree import tree_totals

FLAGS = flags.FLAGS
flags.DEFINE_string("corpus", None, "Corpus path (any format load_corpus reads, e.g. a "
                    "launch/synth.py --output folder).")
flags.DEFINE_list("topics", ["1000", "10000"], "Numbers of topics K to time.")
flags.DEFINE_integer("warmup_iterations", 2, "ESCA iterations (Pallas) before timing.")
flags.DEFINE_integer("repeats", 5, "Timed runs per measurement after a warm-up run (median "
                     "reported; 0: the warm-up only, e.g. under a profiler).")
flags.DEFINE_bool("checks", True, "Check agreement with the XLA path (off: only time).")
flags.DEFINE_list("sampler_variants", ["default", "2/1", "8/1", "8/2"],
                  "E-step kernel variants: tile_tokens/num_warps, float32 or bfloat16 (B-hat "
                  "stored so, whatever K; timed only), or default (the kernel's defaults).")
flags.DEFINE_list("ssc_variants", ["128x2048x4", "64x2048x2", "32x4096x1", "128x1024x4"],
                  "Segmented-count variants, block_tokens x num_programs x num_warps "
                  "[:semantic of its atomics]; each is also checked against XLA.")
flags.DEFINE_list("count_variants", ["32/1", "16/1", "64/2", "128/4"],
                  "B-count kernel variants, block_tokens/num_warps; each is also checked.")
flags.DEFINE_string("output", None, "Also write all results to this file (JSON lines).")
flags.mark_flag_as_required("corpus")

RESULTS: list[dict] = []


def report(**result) -> None:
    RESULTS.append(result)
    print(json.dumps(result), flush=True)


def median_seconds(function, *args, repeats: int) -> float:
    """Median wall time of function(*args) after one warm-up call (which compiles)."""
    return timing.median_seconds(lambda: function(*args), repeats)


def guarded(name: str):
    """Run a check; on failure report the error and carry on with the next one."""
    def decorate(function):
        @functools.wraps(function)
        def run(*args, **kwargs):
            try:
                return function(*args, **kwargs)
            except Exception as error:  # noqa: BLE001 (one broken variant must not stop the rest)
                report(check=name, error=f"{type(error).__name__}: {error}"[:2000])
                traceback.print_exc()
                return None
        return run
    return decorate


def copy_bandwidth() -> float:
    """Device read + write bandwidth in bytes/s of a 1 GiB elementwise pass."""
    moved, seconds = copy_seconds(1 << 30, repeats=10, reduce=statistics.median)
    bandwidth = moved / seconds
    report(check="copy_bandwidth", gigabytes_per_s=bandwidth / 1e9)
    return bandwidth


def mean_doc_nonzeros(chunks, state) -> float:
    """Nonzeros of A_d averaged over tokens (what the E-step reads per token)."""
    total = tokens = 0
    for chunk, chunk_state in zip(chunks, state.chunks):
        lengths = np.diff(np.asarray(chunk.doc_start))
        nnz = np.asarray(chunk_state.a_nnz)
        real = np.cumsum(lengths) <= int(chunk.num_tokens)
        total += float((lengths * nnz)[real].sum())
        tokens += int(chunk.num_tokens)
    return total / tokens


@guarded("agreement")
def check_agreement(label, chunk, chunk_state, model, key, num_topics):
    """Pallas vs XLA on the same inputs: E-step mismatch fraction of every sampler variant,
    A rebuilt and B counted exactly."""
    expected = jax.jit(sampler.sample_chunk)(chunk, chunk_state, model, key)
    real = int(chunk.num_tokens)
    for variant in FLAGS.sampler_variants:
        if variant in BHAT_DTYPES:
            continue  # timed only: the default variant checks the B-hat dtype the model holds
        (variant_chunk,), sample = sampler_variant(variant, (chunk,), model.bhat.shape[0])
        got, doc_major = sample(variant_chunk, chunk_state, model, key)
        shuffled = segmented_count.shuffle_to_doc_major(got, chunk.doc_major_pos)
        report(check="agreement", case=label, variant=variant,
               sample_mismatch_fraction=float(jnp.mean((got != expected)[:real])),
               padding_zero=bool(jnp.all(got[real:] == 0)),
               doc_major_identical=bool(jnp.array_equal(doc_major, shuffled)))
    a_expected = jax.jit(segmented_count.rebuild_doc_topic, static_argnums=2)(chunk, doc_major,
                                                                              num_topics)
    for variant in FLAGS.ssc_variants:
        a_got = pallas_ssc.rebuild_doc_topic(chunk, doc_major, num_topics, **ssc_knobs(variant))
        a_equal = all(bool(jnp.array_equal(g, e)) for g, e in zip(a_got, a_expected))
        report(check="agreement", case=label, variant=variant, rebuild_identical=a_equal)
    counts_expected = esca.count_word_topic(chunk, got, jnp.ones_like(model.word_topic))
    for variant in FLAGS.count_variants:
        counts = count_variant(variant)(chunk, got, jnp.ones_like(model.word_topic))
        report(check="agreement", case=label, variant=f"count {variant}",
               count_identical=bool(jnp.array_equal(counts, counts_expected)))


def ragged_corpus(num_words: int, seed: int, num_docs: int = 50, max_length: int = 90,
                  long_length: int = 200) -> Corpus:
    """Random documents (lengths uniform below max_length) plus empty, one-token and one
    long_length document, shuffled; word ids skewed (word 0 the most frequent) and the last
    word exactly once.  The kernels' edge cases, here and in tests/test_pallas.py."""
    rng_np = np.random.default_rng(seed)
    lengths = np.concatenate([rng_np.integers(0, max_length, num_docs),
                              [0, 1, 0, 1, long_length, 1]])
    rng_np.shuffle(lengths)
    weights = 1.0 / np.arange(1, num_words) ** 1.5
    words = rng_np.choice(num_words - 1, size=int(lengths.sum()), p=weights / weights.sum())
    words[rng_np.integers(len(words))] = num_words - 1
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return Corpus(offsets, words.astype(np.int32), tuple(f"w{i}" for i in range(num_words)))


def check_ragged_agreement():
    """Agreement on ragged documents at the extreme K (2 and 65,536, a 4-level tree)."""
    for num_topics in (2, 65_536):
        corpus = ragged_corpus(300, num_topics, num_docs=3000, max_length=400, long_length=5000)
        chunks = jax.device_put(build_layout(corpus).chunks)
        hyper = Hyperparams.create(num_topics, backend="xla")
        state = esca.step(esca.init(chunks, corpus.num_words, hyper, 1), chunks, hyper)
        key = rng.iteration_key(state.seed, 9)
        check_agreement(f"ragged K={num_topics}", chunks[0], state.chunks[0], state.model, key,
                        num_topics)


def chunk_seconds(function, chunks, state) -> float:
    """Median time of function over every chunk, summed."""
    key = esca.next_iteration(state.seed, state.iteration)[1]
    return sum(median_seconds(function, chunk, chunk_state, state.model, key,
                              repeats=FLAGS.repeats)
               for chunk, chunk_state in zip(chunks, state.chunks))


def report_time(num_topics, num_tokens, seconds, **labels):
    report(check="time", K=num_topics, **labels, seconds=seconds,
           mtoken_per_s=num_tokens / seconds / 1e6)


@guarded("variant")
def time_variant(num_topics, num_tokens, backend, name, function, chunks, state):
    report_time(num_topics, num_tokens, chunk_seconds(function, chunks, state),
                backend=backend, phase=name)


BHAT_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def with_bhat_dtype(state, num_topics: int, variant: str):
    """The state with its B-hat (and trees) stored in the dtype a variant names, if it does."""
    if variant not in BHAT_DTYPES:
        return state
    model, beta = state.model, TrainConfig.beta
    bhat, tree = mstep.bhat_and_tree(model.word_topic, model.topic_totals, model.alpha,
                                     num_topics, beta, dtype=BHAT_DTYPES[variant])
    return state._replace(model=model._replace(bhat=bhat, tree=tree,
                                               tree_total=tree_totals(tree, bhat, model.alpha)))


def sampler_variant(variant: str, chunks, num_words: int):
    """(chunks with the work list it needs, the E-step kernel with its parameters) of one
    --sampler_variants entry."""
    if variant == "default" or variant in BHAT_DTYPES:
        return chunks, pallas_sampler.sample_and_shuffle
    tile_tokens, warps = map(int, variant.split("/"))
    return (tuple(with_tile_tokens(chunk, num_words, tile_tokens) for chunk in chunks),
            functools.partial(pallas_sampler.sample_and_shuffle, num_warps=warps))


def ssc_knobs(variant: str) -> dict:
    """The segmented-count parameters of one --ssc_variants entry."""
    sizes, *semantic = variant.split(":")
    block, programs, warps = sizes.split("x")
    return dict(block_tokens=int(block), num_programs=int(programs), num_warps=int(warps),
                **({"semantic": semantic[0]} if semantic else {}))


def count_variant(variant: str):
    """The B-count kernel with the parameters of one --count_variants entry."""
    block_tokens, warps = map(int, variant.split("/"))
    return functools.partial(pallas_word_count.count_word_topic, block_tokens=block_tokens,
                             num_warps=warps)


def time_variants(num_topics, chunks, state, num_tokens):
    """The XLA E-step, shuffle, A rebuild and B count, the kernels' tuning variants (the E-step
    kernel's include the shuffle), totals, B-hat and trees of both."""
    time_variant(num_topics, num_tokens, "xla", "sample", jax.jit(sampler.sample_chunk), chunks,
                 state)
    time_variant(num_topics, num_tokens, "xla", "shuffle", jax.jit(
        lambda c, s, m, k: segmented_count.shuffle_to_doc_major(s.topics, c.doc_major_pos)),
        chunks, state)
    # the A rebuilds read doc-major topics: time them on states holding those
    doc_major = state._replace(chunks=tuple(
        s._replace(topics=segmented_count.shuffle_to_doc_major(s.topics, c.doc_major_pos))
        for c, s in zip(chunks, state.chunks)))
    time_variant(num_topics, num_tokens, "xla", "rebuild", jax.jit(
        lambda c, s, m, k: segmented_count.rebuild_doc_topic(c, s.topics, num_topics)), chunks,
        doc_major)
    for variant in FLAGS.sampler_variants:
        variant_chunks, sample = sampler_variant(variant, chunks, state.model.bhat.shape[0])
        time_variant(num_topics, num_tokens, "pallas", f"sample {variant}",
                     jax.jit(sample), variant_chunks,
                     with_bhat_dtype(state, num_topics, variant))
    for variant in FLAGS.ssc_variants:
        rebuild = jax.jit(functools.partial(
            lambda c, s, m, k, **knobs: pallas_ssc.rebuild_doc_topic(c, s.topics, num_topics,
                                                                     **knobs),
            **ssc_knobs(variant)))
        time_variant(num_topics, num_tokens, "pallas", f"rebuild {variant}", rebuild, chunks,
                     doc_major)
    for backend, name, count in [("xla", "count", esca.count_word_topic)] + [
            ("pallas", f"count {variant}", count_variant(variant))
            for variant in FLAGS.count_variants]:
        time_variant(num_topics, num_tokens, backend, name, jax.jit(  # B from zero, as a step
            lambda c, s, m, k, count=count: count(c, s.topics, jnp.zeros_like(m.word_topic))),
            chunks, state)
    model, beta = state.model, TrainConfig.beta
    results = {}
    for backend, model_arrays in (("xla", mstep.model_arrays),
                                  ("pallas", pallas_bhat_tree.model_arrays)):
        function = jax.jit(functools.partial(model_arrays, num_topics=num_topics, beta=beta))
        seconds = median_seconds(function, model.word_topic, model.alpha, repeats=FLAGS.repeats)
        report(check="bhat_tree", K=num_topics, backend=backend, seconds=seconds,
               word_topic_gigabytes_per_s=model.word_topic.nbytes / seconds / 1e9)
        results[backend] = jax.tree.leaves(function(model.word_topic, model.alpha))
    report(check="agreement", case=f"totals, B-hat and trees K={num_topics}",
           max_relative_difference=max(
               float(jnp.max(jnp.abs(g - e) / jnp.maximum(jnp.abs(e), 1e-30)))
               for g, e in zip(results["pallas"], results["xla"])))


def summary_table(bandwidth: float) -> str:
    rows = ["K      backend phase          Mtoken/s       ms"]
    for result in RESULTS:
        if result.get("check") == "time":
            rows.append(f"{result['K']:<6} {result['backend']:<7} {result['phase']:<14} "
                        f"{result['mtoken_per_s']:9.0f} {1e3 * result['seconds']:8.2f}")
        elif result.get("check") in ("agreement", "floor", "bhat_tree"):
            rows.append(json.dumps(result))
        elif "error" in result:
            rows.append(f"ERROR {result['check']}: {result['error'][:300]}")
    rows.append(f"copy bandwidth {bandwidth / 1e9:.0f} GB/s; device {jax.devices()[0].device_kind}")
    return "\n".join(rows)


def main(argv):
    del argv
    bandwidth = copy_bandwidth()
    if FLAGS.checks:
        check_ragged_agreement()
    corpus = load_corpus(FLAGS.corpus)
    chunks = jax.device_put(build_layout(corpus).chunks)
    report(check="corpus", D=corpus.num_docs, T=corpus.num_tokens, V=corpus.num_words,
           chunks=len(chunks))
    for num_topics in map(int, FLAGS.topics):
        hyper = Hyperparams.create(num_topics, backend="pallas")
        state = esca.init(chunks, corpus.num_words, hyper, seed=0)
        for _ in range(FLAGS.warmup_iterations):
            state = esca.step(state, chunks, hyper)
        nonzeros = mean_doc_nonzeros(chunks, state)
        report(check="floor", K=num_topics, mean_doc_nonzeros_per_token=nonzeros,
               sample_floor_mtoken_per_s=bandwidth / (24 + 4 * nonzeros) / 1e6)
        key = esca.next_iteration(state.seed, state.iteration)[1]
        if FLAGS.checks:
            check_agreement(f"corpus K={num_topics}", chunks[0], state.chunks[0], state.model,
                            key, num_topics)
        time_variants(num_topics, chunks, state, corpus.num_tokens)
    if FLAGS.output:
        with open(FLAGS.output, "w") as output:
            output.writelines(json.dumps(result) + "\n" for result in RESULTS)
    print(summary_table(bandwidth), flush=True)


if __name__ == "__main__":
    app.run(main)
