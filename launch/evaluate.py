"""Score a trained model on held-out documents by document completion; prints one JSON line.

    python launch/evaluate.py --model=runs/kos_k50 --corpus=path/to/test_docs
    python launch/evaluate.py --model=runs/kos_k50    # the training corpus's own test split

Each test document is split 50/50 into observed and held-out tokens (seeded), theta is fitted
to the observed half by EM with the topics fixed, and the held-out half is scored.  Without
--corpus, the test documents are the ones the training run held out: the same corpus,
--test_fraction and seed as recorded in the model's config.json.
"""

from __future__ import annotations

import json
import pathlib
import sys

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from absl import app, flags

from saberjax import corpus as corpus_io
from saberjax.evaluate import heldout_loglik
from saberjax.model import TopicModel

FLAGS = flags.FLAGS
flags.DEFINE_string("model", None, "Model directory written by launch/train.py.", required=True)
flags.DEFINE_string("corpus", None, "Test documents (all of them are scored); default: the "
                    "documents held out by the training run.")
flags.DEFINE_enum("format", "auto", ["auto", *corpus_io.FORMATS], "Corpus format.")
flags.DEFINE_integer("seed", None, "Seed of the observed/held-out split (default: the "
                     "training seed).")
flags.DEFINE_integer("em_iterations", 50, "EM iterations fitting theta.")


def test_documents(model: TopicModel) -> corpus_io.Corpus:
    """The documents to score, in the model's vocabulary."""
    if FLAGS.corpus:
        return corpus_io.align_vocabulary(corpus_io.load_corpus(FLAGS.corpus, FLAGS.format),
                                          model.vocab)
    source = model.config.get("corpus_path")
    fraction = model.config.get("test_fraction", 0)
    if not fraction:
        raise app.UsageError(f"{FLAGS.model} was trained without a test split; pass --corpus")
    corpus = (corpus_io.load_corpus(source) if source else corpus_io.load_bundled("kos"))
    return corpus_io.train_test_split(corpus, fraction, model.config.get("seed", 0))[1]


def main(argv):
    del argv
    model = TopicModel.load(FLAGS.model)
    test = test_documents(model)
    seed = FLAGS.seed if FLAGS.seed is not None else model.config.get("seed", 0)
    observed, heldout = corpus_io.split_document_halves(test, seed)
    score = heldout_loglik(model.topic_word, observed, heldout, model.alpha, FLAGS.em_iterations)
    print(json.dumps(dict(model=FLAGS.model, documents=score.documents, tokens=score.tokens,
                          heldout_loglik_per_token=score.loglik_per_token,
                          perplexity=score.perplexity)))


if __name__ == "__main__":
    app.run(main)
