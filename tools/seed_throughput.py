"""Training throughput with and without seed words, same corpus, same placement, same process.

    python tools/seed_throughput.py --scale=0.3 --num_topics=1000 --iterations=30

A synthetic corpus of the NYTimes shape (saberjax.benchmark.synthetic_corpus) is placed once;
the runs alternate unseeded, seeded, unseeded, seeded (--rounds pairs), each from a fresh
initialisation with the same seed, compiled before it is timed.  Seeded: the first
--seeded_topics topics get --words_per_topic seed words each (distinct words).  Prints one JSON
line per run: the median Mtoken/s over the iterations after the first --skip.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import sys

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from absl import app, flags  # noqa: E402

from saberjax.benchmark import synthetic_corpus  # noqa: E402
from saberjax.config import Hyperparams, TrainConfig  # noqa: E402
from saberjax.trainer import place, train_placed  # noqa: E402

flags.DEFINE_float("scale", 0.3, "NYTimes shape scale (documents).")
flags.DEFINE_integer("num_topics", 1000, "K.")
flags.DEFINE_integer("iterations", 30, "Iterations a run.")
flags.DEFINE_integer("skip", 5, "Iterations left out of the median (warm-up, alpha updates "
                     "included in the rest).")
flags.DEFINE_integer("rounds", 2, "Pairs of runs (unseeded, seeded).")
flags.DEFINE_integer("seeded_topics", 100, "Topics with seed words.")
flags.DEFINE_integer("words_per_topic", 10, "Seed words a seeded topic.")
flags.DEFINE_string("backend", "auto", "Backend.")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    corpus = synthetic_corpus("nytimes", FLAGS.scale, 0)
    seeds = {k: [corpus.vocab[k * FLAGS.words_per_topic + i]
                 for i in range(FLAGS.words_per_topic)] for k in range(FLAGS.seeded_topics)}
    config = TrainConfig(num_topics=FLAGS.num_topics, iterations=FLAGS.iterations,
                         backend=FLAGS.backend, num_devices=1)
    seeded = dataclasses.replace(config, seed_words=json.dumps(seeds))
    placement = place(corpus, Hyperparams.from_config(config, corpus.vocab), config)
    for round_ in range(FLAGS.rounds):
        for run_config in (config, seeded):
            hyper = Hyperparams.from_config(run_config, corpus.vocab)
            run = train_placed(corpus, placement.with_hyper(hyper), run_config)
            speeds = [m["tokens_per_second"] / 1e6 for m in run.metrics[FLAGS.skip:]]
            print(json.dumps(dict(
                round=round_, seeded=hyper.seeds is not None,
                seeded_rows=len(hyper.seeds.rows) if hyper.seeds else 0,
                num_topics=FLAGS.num_topics, tokens=corpus.num_tokens,
                backend=hyper.backend, median_mtoken_s=round(float(np.median(speeds)), 1),
                mean_mtoken_s=round(float(np.mean(speeds)), 1),
                compile_seconds=round(run.compile_seconds, 2))), flush=True)


if __name__ == "__main__":
    app.run(main)
