"""Where the learned prior's update goes on one device: its count histogram, its fixed point
and the whole update (histograms, fixed point, B-hat and trees rebuilt), timed on a run's
state at given iterations, beside a reference prior module's histogram and fixed point (e.g.
another tree's saberjax/prior.py) on the same state, with each piece's GPU kernels from a
profiler trace (docs/measurements/roofline.md, run 11):

    python tools/alpha_update_bench.py --corpus=.corpora/wiki25k --num_topics=1024 \
        --test_fraction=0.1 --at=10,100 --reference=../alphabase/saberjax/prior.py

One JSON line per state: ms (median of --repeats after a compiling pass) of each piece, the
nonzero pairs counted, whether the two histograms are equal and the largest relative
difference of the two alphas; then each piece's kernels on a GPU.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import statistics
import sys

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from saberjax import compilation, prior  # noqa: E402
from saberjax import corpus as corpus_io  # noqa: E402
from saberjax.config import Hyperparams  # noqa: E402
from saberjax.execution.placement import place  # noqa: E402
from saberjax.timing import timed  # noqa: E402

import kernel_timeline  # noqa: E402  (tools/, beside this script)

FLAGS = flags.FLAGS
flags.DEFINE_string("corpus", None, "Corpus path (load_corpus).", required=True)
flags.DEFINE_integer("num_topics", 1024, "K.")
flags.DEFINE_float("test_fraction", 0.1, "Documents held out (the seed's split), as bench.")
flags.DEFINE_integer("seed", 0, "Seed of the split and the initial topics.")
flags.DEFINE_string("init_window_topics", "auto", "auto (the setting's default) or S.")
flags.DEFINE_list("at", ["10", "100"], "Iterations whose state (before that iteration's "
                  "alpha update) is measured.")
flags.DEFINE_integer("repeats", 5, "Timed passes of each piece (median).")
flags.DEFINE_string("reference", None, "A prior.py whose count_histogram and fixed_point are "
                    "timed beside this tree's (None: this tree's alone).")
flags.DEFINE_string("trace_dir", "/tmp/alpha_update_trace", "Where the profiler traces go.")


def _reference_prior(path: str):
    spec = importlib.util.spec_from_file_location("reference_prior", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _median_ms(program, *args) -> float:
    times = [timed(lambda: program(*args))[1] for _ in range(FLAGS.repeats + 1)]
    return round(statistics.median(times[1:]) * 1e3, 4)


def _kernels(name: str, program, *args) -> str:
    """The kernels of one traced call of program(*args) (GPU only)."""
    if jax.devices()[0].platform != "gpu":
        return ""
    _, events = kernel_timeline.traced_events(lambda: program(*args),
                                              f"{FLAGS.trace_dir}/{name}")
    return f"-- {name}\n" + kernel_timeline.kernel_totals(events or [], 1, top=12)


def _pieces(module, hyper: Hyperparams, width: int):
    """module's (count histogram of one chunk's pairs, fixed point) as compiled programs."""
    zeros = (hyper.padded_topics, width)
    count = compilation.jit(lambda pairs: module.count_histogram(
        pairs, jnp.zeros(zeros, jnp.int32)))
    learn = compilation.jit(lambda alpha, counts, lengths: module.fixed_point(
        alpha, counts, lengths, hyper.num_topics))
    return count, learn


def measure(state, iteration: int, placement, update, lengths, implementations) -> list[str]:
    hyper = placement.hyper
    pairs = state.chunks[0].a_pairs[0]
    alpha = state.model.alpha
    width = prior.histogram_width(lengths.shape[0] - 1, hyper.padded_topics)
    record = dict(iteration=iteration, width=width, slots=int(pairs.shape[0]))
    histograms, alphas, texts = {}, {}, []
    for name, module in implementations.items():
        count, learn = _pieces(module, hyper, width)
        histograms[name] = histogram = jax.block_until_ready(count(pairs))
        alphas[name] = np.asarray(learn(alpha, histogram, lengths))
        record[f"{name}_histogram_ms"] = _median_ms(count, pairs)
        record[f"{name}_fixed_point_ms"] = _median_ms(learn, alpha, histogram, lengths)
        texts.append(_kernels(f"{name}_histogram_{iteration}", count, pairs))
        texts.append(_kernels(f"{name}_fixed_point_{iteration}", learn, alpha, histogram,
                              lengths))
    record["whole_update_ms"] = _median_ms(update, state)
    texts.append(_kernels(f"whole_update_{iteration}", update, state))
    record["nonzero_pairs"] = int(np.asarray(histograms["this"]).sum())
    if "reference" in implementations:
        record["histograms_equal"] = bool(np.array_equal(histograms["this"],
                                                         histograms["reference"]))
        real = np.asarray(alpha) > 0
        record["alpha_max_relative_difference"] = float(np.max(np.abs(
            alphas["this"][real] / alphas["reference"][real] - 1)))
    return [json.dumps(record)] + [text for text in texts if text]


def main(_):
    corpus = corpus_io.load_corpus(FLAGS.corpus)
    if FLAGS.test_fraction > 0:
        corpus, _ = corpus_io.train_test_split(corpus, FLAGS.test_fraction, FLAGS.seed)
    window = None if FLAGS.init_window_topics == "auto" else int(FLAGS.init_window_topics)
    hyper = Hyperparams.create(FLAGS.num_topics, init_window_topics=window)
    placement = place(corpus, hyper, 1)
    implementations = {"this": prior}
    if FLAGS.reference:
        implementations["reference"] = _reference_prior(FLAGS.reference)
    state = placement.init(FLAGS.seed)
    step = placement.compile(state)
    update = placement.compile_alpha_update(state, corpus.doc_lengths())
    lengths = placement.replicated(prior.length_histogram(corpus.doc_lengths()))
    at = sorted(int(n) for n in FLAGS.at)
    for iteration in range(1, at[-1] + 1):
        state = jax.block_until_ready(step(state))
        if iteration in at:
            print("\n".join(measure(state, iteration, placement, update, lengths,
                                    implementations)), flush=True)
        if prior.is_due(iteration, 10, 0):
            state = update(state)


if __name__ == "__main__":
    app.run(main)
