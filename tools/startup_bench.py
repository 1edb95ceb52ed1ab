"""Start-up costs of a training run, as JSON lines: corpus load (from the source, writing the
cache, from the cache), PDOW layout build, model writing.

    python tools/startup_bench.py --corpus=/work/shared/data/wiki25k --num_topics=1024

The layout is built as launch/train.py builds it: on the training split (--test_fraction),
one chunk per local device (on a CPU, one device per core), best of --repeats.  The model is
--num_topics x the corpus vocabulary of random counts, saved with TopicModel.save (best of
--repeats, each into a fresh directory under --scratch).  The cache goes to a fresh folder
under --scratch, removed at the end.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import sys
import tempfile
import time

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from saberjax.platform import reuse_freed_memory, use_every_cpu_core  # noqa: E402

use_every_cpu_core()  # before jax starts
reuse_freed_memory()  # as the launchers do

import jax
import numpy as np
from absl import app, flags

from saberjax import corpus as corpus_io
from saberjax.corpus import cache as corpus_cache
from saberjax.layout import build_layout
from saberjax.model import TopicModel

FLAGS = flags.FLAGS
flags.DEFINE_string("corpus", None, "Corpus (UCI, LDA-C or text).", required=True)
flags.DEFINE_integer("num_topics", 1024, "K of the model written.", lower_bound=2)
flags.DEFINE_float("test_fraction", 0.1, "Held-out share of documents, as train.py.")
flags.DEFINE_integer("repeats", 3, "Repetitions of the layout build and the model save.",
                     lower_bound=1)
flags.DEFINE_string("scratch", None, "Folder for the cache and the saved models (default: "
                    "the system's temporary folder).")


def seconds(work) -> tuple[object, float]:
    start = time.perf_counter()
    result = work()
    return result, time.perf_counter() - start


def report(**fields) -> None:
    print(json.dumps({key: round(value, 3) if isinstance(value, float) else value
                      for key, value in fields.items()}), flush=True)


def main(argv):
    del argv
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="startup_bench.", dir=FLAGS.scratch))
    try:
        cache = scratch / "cache"
        corpus, source = seconds(lambda: corpus_io.load_corpus(FLAGS.corpus))
        _, writing = seconds(lambda: corpus_cache.load_corpus(FLAGS.corpus, cache_dir=cache))
        _, cached = seconds(lambda: corpus_cache.load_corpus(FLAGS.corpus, cache_dir=cache))
        report(phase="load", corpus=FLAGS.corpus, tokens=corpus.num_tokens,
               source_seconds=source, first_cached_seconds=writing,
               second_cached_seconds=cached)

        train, _ = corpus_io.train_test_split(corpus, FLAGS.test_fraction, 0)
        devices = len(jax.local_devices())
        layouts = [seconds(lambda: build_layout(train, -(-train.num_tokens // devices),
                                                devices))[1] for _ in range(FLAGS.repeats)]
        report(phase="layout", tokens=train.num_tokens, chunks=devices,
               seconds=min(layouts), first_seconds=layouts[0])

        counts = np.random.default_rng(0).integers(
            0, 20, (corpus.num_words, FLAGS.num_topics)).astype(np.int32)
        model = TopicModel(counts, 50 / FLAGS.num_topics, 0.01, corpus.vocab)
        saves = [seconds(lambda: model.save(scratch / f"model{i}"))[1]
                 for i in range(FLAGS.repeats)]
        report(phase="save", num_topics=FLAGS.num_topics, num_words=corpus.num_words,
               bytes=(scratch / "model0" / "model.npz").stat().st_size, seconds=min(saves),
               first_seconds=saves[0])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    app.run(main)
