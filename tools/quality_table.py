"""Compare saberjax with a collapsed Gibbs sampler (tomotopy) on held-out log-likelihood.

Both are trained on the same training documents with the same K, alpha, beta and iterations,
and both are scored by saberjax's own document-completion evaluator on the same test halves.
tomotopy is not a dependency: it runs in its own environment through tools/tomotopy_baseline.py.

    python tools/quality_table.py --corpus=kos --num_topics=50,100 --iterations=200 \\
        --tomotopy_python=/path/to/venv-with-tomotopy/bin/python

--corpus is `kos` (10% of documents held out, seed 0) or `20news` (train on 20news_train,
test on 20news_test), read from --data (the shared UCI corpora).  Prints one JSON line per K.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import tempfile
import time

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from saberjax.platform import use_every_cpu_core  # noqa: E402 (before jax starts)

use_every_cpu_core()

import numpy as np
from absl import app, flags

from saberjax import corpus as corpus_io
from saberjax import trainer
from saberjax.evaluate import heldout_loglik

FLAGS = flags.FLAGS
flags.DEFINE_enum("corpus", "kos", ["kos", "20news"], "Which shared corpus setting.")
flags.DEFINE_string("data", str(pathlib.Path(__file__).resolve().parents[2] / "shared" / "data"),
                    "Folder of the shared UCI corpora.")
flags.DEFINE_list("num_topics", ["50", "100"], "K values.")
flags.DEFINE_integer("iterations", 200, "Training iterations for both systems.")
flags.DEFINE_integer("seed", 0, "Seed of splits and training.")
flags.DEFINE_string("backend", "auto", "saberjax backend.")
flags.DEFINE_string("tomotopy_python", None, "Python with tomotopy installed (skip if unset).")
flags.DEFINE_integer("tomotopy_threads", 2, "tomotopy worker threads.")


def splits():
    """(training corpus, observed test halves, held-out test halves)."""
    data = pathlib.Path(FLAGS.data)
    if FLAGS.corpus == "kos":
        train, test = corpus_io.train_test_split(corpus_io.load_uci(data / "kos" / "docword.txt.gz"),
                                                 0.1, FLAGS.seed)
    else:
        train = corpus_io.load_uci(data / "20news_train" / "docword.txt.gz")
        test = corpus_io.align_vocabulary(
            corpus_io.load_uci(data / "20news_test" / "docword.txt.gz"), train.vocab)
    return (train, *corpus_io.split_document_halves(test, FLAGS.seed))


def tomotopy_topics(train, num_topics: int, alpha: float, workdir: pathlib.Path):
    corpus_dir, out = workdir / "train", workdir / f"tomotopy_k{num_topics}.npz"
    if not corpus_dir.exists():
        corpus_io.save_native(train, corpus_dir)
    script = pathlib.Path(__file__).with_name("tomotopy_baseline.py")
    subprocess.run([FLAGS.tomotopy_python, str(script), "--corpus", str(corpus_dir),
                    "--k", str(num_topics), "--iterations", str(FLAGS.iterations),
                    "--alpha", str(alpha), "--beta", "0.01", "--seed", str(FLAGS.seed),
                    "--threads", str(FLAGS.tomotopy_threads), "--out", str(out)], check=True)
    with np.load(out) as result:
        return result["topic_word"], float(result["seconds"])


def main(argv):
    del argv
    train, observed, heldout = splits()
    with tempfile.TemporaryDirectory() as workdir:
        for num_topics in map(int, FLAGS.num_topics):
            config = trainer.TrainConfig(num_topics=num_topics, iterations=FLAGS.iterations,
                                         seed=FLAGS.seed, backend=FLAGS.backend)
            start = time.perf_counter()
            result = trainer.train(train, config)
            seconds = time.perf_counter() - start
            alpha = result.model.alpha
            row = dict(corpus=FLAGS.corpus, num_topics=num_topics, iterations=FLAGS.iterations,
                       alpha=alpha, train_tokens=train.num_tokens, test_docs=observed.num_docs,
                       saberjax=heldout_loglik(result.model.topic_word, observed, heldout,
                                               alpha).loglik_per_token,
                       saberjax_seconds=seconds, backend=result.model.config["backend"])
            if FLAGS.tomotopy_python:
                topic_word, tomo_seconds = tomotopy_topics(train, num_topics, alpha,
                                                           pathlib.Path(workdir))
                row.update(tomotopy=heldout_loglik(topic_word, observed, heldout,
                                                   alpha).loglik_per_token,
                           tomotopy_seconds=tomo_seconds)
                row["difference"] = row["saberjax"] - row["tomotopy"]
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    app.run(main)
