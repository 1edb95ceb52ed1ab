"""Compare saberjax with a collapsed Gibbs sampler (tomotopy) on held-out log-likelihood.

Both are trained on the same training documents with the same K, starting alpha, beta and
iterations, each with alpha fixed and with alpha learned (saberjax every
--optimize_alpha_every iterations after --burn_in; tomotopy's optim_interval=10, its default),
and all are scored by saberjax's own document-completion evaluator on the same test halves,
each model under its own alpha.  tomotopy is not a dependency: it runs in its own environment
through tools/tomotopy_baseline.py.

    python tools/quality_table.py --corpus=kos --num_topics=50,100 --iterations=200 \\
        --tomotopy_python=/path/to/venv-with-tomotopy/bin/python

--corpus is `20news` (train on 20news_train, test on 20news_test) or the name of any other
shared UCI corpus in --data (kos, 20news_train, nyt8k, ...: 10% of its documents held out,
seed 0).  Prints one JSON line per K.
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
flags.DEFINE_string("corpus", "kos", "Which shared corpus: 20news (its own test set) or a "
                    "folder name under --data (a 90/10 split).")
flags.DEFINE_string("data", str(pathlib.Path(__file__).resolve().parents[2] / "shared" / "data"),
                    "Folder of the shared UCI corpora.")
flags.DEFINE_list("num_topics", ["50", "100"], "K values.")
flags.DEFINE_integer("iterations", 200, "Training iterations for both systems.")
flags.DEFINE_integer("seed", 0, "Seed of splits and training.")
flags.DEFINE_string("backend", "auto", "saberjax backend.")
flags.DEFINE_string("tomotopy_python", None, "Python with tomotopy installed (skip if unset).")
flags.DEFINE_integer("tomotopy_threads", 2, "tomotopy worker threads.")
flags.DEFINE_list("optimize_alpha_every", [str(trainer.TrainConfig.optimize_alpha_every)],
                  "saberjax's learned-alpha runs: learn alpha every N iterations, one run per "
                  "value (keys saberjax_learned_N).")
flags.DEFINE_integer("burn_in", trainer.TrainConfig.burn_in,
                     "saberjax's learned-alpha runs: iterations before alpha is first learned.")
flags.DEFINE_integer("tomotopy_optim_interval", 10, "tomotopy's optim_interval when it learns "
                     "alpha (its default).")


def splits():
    """(training corpus, observed test halves, held-out test halves)."""
    data = pathlib.Path(FLAGS.data)
    if FLAGS.corpus != "20news":
        train, test = corpus_io.train_test_split(
            corpus_io.load_uci(data / FLAGS.corpus / "docword.txt.gz"), 0.1, FLAGS.seed)
    else:
        train = corpus_io.load_uci(data / "20news_train" / "docword.txt.gz")
        test = corpus_io.align_vocabulary(
            corpus_io.load_uci(data / "20news_test" / "docword.txt.gz"), train.vocab)
    return (train, *corpus_io.split_document_halves(test, FLAGS.seed))


def tomotopy_topics(train, num_topics: int, alpha: float, optim_interval: int,
                    workdir: pathlib.Path):
    """(topic_word, alpha per topic, training seconds) of tomotopy."""
    corpus_dir = workdir / "train"
    out = workdir / f"tomotopy_k{num_topics}_optim{optim_interval}.npz"
    if not corpus_dir.exists():
        corpus_io.save_native(train, corpus_dir)
    script = pathlib.Path(__file__).with_name("tomotopy_baseline.py")
    subprocess.run([FLAGS.tomotopy_python, str(script), "--corpus", str(corpus_dir),
                    "--k", str(num_topics), "--iterations", str(FLAGS.iterations),
                    "--alpha", str(alpha), "--beta", "0.01", "--seed", str(FLAGS.seed),
                    "--threads", str(FLAGS.tomotopy_threads), "--optim_interval",
                    str(optim_interval), "--out", str(out)], check=True)
    with np.load(out) as result:
        return result["topic_word"], result["alpha"], float(result["seconds"])


def main(argv):
    del argv
    train, observed, heldout = splits()

    def score(topic_word, alpha) -> float:
        return heldout_loglik(topic_word, observed, heldout, alpha).loglik_per_token

    with tempfile.TemporaryDirectory() as workdir:
        for num_topics in map(int, FLAGS.num_topics):
            row = dict(corpus=FLAGS.corpus, num_topics=num_topics, iterations=FLAGS.iterations,
                       alpha=50 / num_topics, train_tokens=train.num_tokens,
                       test_docs=observed.num_docs, burn_in=FLAGS.burn_in)
            runs = [("fixed", 0)] + [(f"learned_{every}", int(every))
                                     for every in FLAGS.optimize_alpha_every]
            for name, every in runs:
                config = trainer.TrainConfig(num_topics=num_topics, iterations=FLAGS.iterations,
                                             seed=FLAGS.seed, backend=FLAGS.backend,
                                             optimize_alpha_every=every, burn_in=FLAGS.burn_in)
                start = time.perf_counter()
                model = trainer.train(train, config).model
                row.update({f"saberjax_{name}": score(model.topic_word, model.alpha),
                            f"saberjax_{name}_seconds": time.perf_counter() - start,
                            f"saberjax_{name}_alpha_sum": float(model.alpha.sum()),
                            "backend": model.config["backend"]})
            if FLAGS.tomotopy_python:
                for name, interval in (("fixed", 0), ("learned", FLAGS.tomotopy_optim_interval)):
                    topic_word, alpha, seconds = tomotopy_topics(
                        train, num_topics, 50 / num_topics, interval, pathlib.Path(workdir))
                    row.update({f"tomotopy_{name}": score(topic_word, alpha),
                                f"tomotopy_{name}_seconds": seconds,
                                f"tomotopy_{name}_alpha_sum": float(alpha.sum())})
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    app.run(main)
