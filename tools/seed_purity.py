"""Seed words on 20 Newsgroups: topic-to-label purity of a model trained with one seed list
per newsgroup (tools/20news_seed_words.txt: topic i seeded for the group on line i of
classes.txt) against the same run unseeded.

    python tools/seed_purity.py --iterations=200 --seed_weight=100

Each training document goes to its most probable topic (theta by EM fold-in).  Purity is the
share of documents whose topic's most common label is their own (sum over topics of the
largest label count, over the documents); seeded, `seeded_match` is the share of documents
whose topic is the one seeded for their label.  Prints one JSON line per run.
"""

from __future__ import annotations

import json
import pathlib
import sys
import time

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from saberjax.platform import use_every_cpu_core  # noqa: E402 (before jax starts)

use_every_cpu_core()

import numpy as np  # noqa: E402
from absl import app, flags  # noqa: E402

from saberjax.config import TrainConfig  # noqa: E402
from saberjax.corpus import load_corpus  # noqa: E402
from saberjax.trainer import train  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
flags.DEFINE_string("data", "/work/shared/data/20news_train", "The 20news_train folder (UCI "
                    "docword, vocab.txt, docs.tsv of labels, classes.txt).")
flags.DEFINE_string("seed_words", str(ROOT / "tools" / "20news_seed_words.txt"), "Seed words.")
flags.DEFINE_float("seed_weight", TrainConfig.seed_weight, "Seed weight.")
flags.DEFINE_integer("iterations", 200, "ESCA iterations.")
flags.DEFINE_integer("seed", 0, "Random seed.")
flags.DEFINE_string("backend", "auto", "Backend.")
flags.DEFINE_bool("unseeded", True, "Also train unseeded (the baseline).")
FLAGS = flags.FLAGS


def purity(topics: np.ndarray, labels: np.ndarray) -> float:
    """Sum over topics of their documents' largest label count, over the documents."""
    table = np.zeros((topics.max() + 1, labels.max() + 1), np.int64)
    np.add.at(table, (topics, labels), 1)
    return float(table.max(axis=1).sum() / labels.size)


def main(argv):
    del argv
    data = pathlib.Path(FLAGS.data)
    corpus = load_corpus(data)
    classes = (data / "classes.txt").read_text().split()
    labels = np.array([classes.index(line.split("\t")[0])
                       for line in (data / "docs.tsv").read_text().splitlines()])
    assert labels.size == corpus.num_docs, (labels.size, corpus.num_docs)
    for seed_words in ((None,) if FLAGS.unseeded else ()) + (FLAGS.seed_words,):
        config = TrainConfig(num_topics=len(classes), iterations=FLAGS.iterations,
                             seed=FLAGS.seed, backend=FLAGS.backend, seed_words=seed_words,
                             seed_weight=FLAGS.seed_weight)
        start = time.perf_counter()
        model = train(corpus, config).model
        seconds = time.perf_counter() - start
        topics = np.argmax(model.transform(corpus), axis=1)
        result = dict(seeded=seed_words is not None, seed_weight=FLAGS.seed_weight,
                      iterations=FLAGS.iterations, seed=FLAGS.seed,
                      purity=round(purity(topics, labels), 4),
                      seeded_match=round(float(np.mean(topics == labels)), 4),
                      train_seconds=round(seconds, 1))
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    app.run(main)
