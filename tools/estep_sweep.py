"""The bench (saberjax.benchmark.run_benchmark, the E-step roofline beside its sample phase)
once per E-step kernel knob setting, in one process: the corpus is loaded or generated once.

    python tools/estep_sweep.py --corpus=.corpora/wiki25k --num_topics=1024 --warmup=0 \
        --iterations=100 --test_fraction=0.1 --prefetch_blocks=1,2,3 --output=/tmp/wiki.jsonl

Each setting runs the backend's kernel as functools.partial(sample_and_shuffle, knobs), every
jit cache cleared between settings; the JSON lines carry it as "prefetch_blocks".
"""

from __future__ import annotations

import functools
import json
import pathlib
import sys

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax
from absl import app, flags

from saberjax import corpus as corpus_io
from saberjax.benchmark import run_benchmark, synthetic_corpus
from saberjax.pallas import kernels
from saberjax.pallas import sampler as pallas_sampler

FLAGS = flags.FLAGS
flags.DEFINE_string("corpus", None, "Corpus path (load_corpus).")
flags.DEFINE_string("synth_preset", None, "Or a synthetic corpus of this preset's shape.")
flags.DEFINE_list("num_topics", ["1000"], "K values.")
flags.DEFINE_list("chunk_tokens", [], "PDOW chunk sizes (default: place's).")
flags.DEFINE_list("prefetch_blocks", ["1"], "E-step kernel prefetch_blocks values.")
flags.DEFINE_integer("warmup", 2, "Untimed iterations.")
flags.DEFINE_integer("iterations", 5, "Timed iterations.")
flags.DEFINE_float("test_fraction", 0.0, "Held-out documents (scored after the run).")
flags.DEFINE_string("output", None, "JSON lines file.")


def main(argv):
    del argv
    corpus = (corpus_io.load_corpus(FLAGS.corpus) if FLAGS.corpus
              else synthetic_corpus(FLAGS.synth_preset, 1.0, 0))
    heldout = None
    if FLAGS.test_fraction > 0:
        corpus, test = corpus_io.train_test_split(corpus, FLAGS.test_fraction, 0)
        heldout = corpus_io.split_document_halves(test, 0)
    sample = pallas_sampler.sample_and_shuffle
    with open(FLAGS.output, "a") if FLAGS.output else open("/dev/null", "a") as output:
        for prefetch in map(int, FLAGS.prefetch_blocks):
            kernels.sample_and_shuffle = functools.partial(sample, prefetch_blocks=prefetch)
            jax.clear_caches()  # jitted callers traced with the previous setting retrace

            def emit(line, prefetch=prefetch):
                line = json.dumps({"prefetch_blocks": prefetch, **json.loads(line)})
                print(line, flush=True)
                output.write(line + "\n")
                output.flush()

            run_benchmark(corpus, [int(k) for k in FLAGS.num_topics], ["pallas"],
                          iterations=FLAGS.iterations, warmup=FLAGS.warmup,
                          chunk_tokens=tuple(int(n) for n in FLAGS.chunk_tokens) or (None,),
                          num_devices=(1,), heldout=heldout, emit=emit)


if __name__ == "__main__":
    app.run(main)
