"""`saberjax evaluate`: score a trained model on held-out documents by document completion;
prints one JSON line.

    saberjax evaluate --model=runs/kos_k50 --corpus=path/to/test_docs
    saberjax evaluate --model=runs/kos_k50    # the training corpus's own test split

Each test document is split 50/50 into observed and held-out tokens (seeded), theta is fitted
to the observed half by EM with the topics fixed, and the held-out half is scored.  --corpus
is read over the model's vocabulary (plain text tokenised against it, as saberjax infer
does).  Without --corpus, the test documents are the ones the training run held out, as
recorded in the model's config.json: its --test_corpus, or its --test_fraction split of the
training corpus by the same seed.  The mean topic coherence of every --coherence measure
(saberjax.coherence: umass, npmi, and c_v on a reference that keeps token order, plain text)
joins the output as coherence_<measure>, measured on --coherence_corpus (default: the model's
training documents; skipped with a warning for a model saved from Python, which does not
record them), with the topic diversity.  --relevance scores every topic's top words ranked by
relevance at that lambda (saberjax.relevance) and adds them to the output as top_words.
"""

from __future__ import annotations

import json
import warnings

from absl import flags

from saberjax import cli, command_line
from saberjax import corpus as corpus_io
from saberjax.coherence import (MEASURES, cooccurrence, cv_cooccurrence, cv_unavailable,
                                records_training_corpus, reference_corpus, topic_diversity)
from saberjax.config import DEFAULT_EM_ITERATIONS
from saberjax.evaluate import model_heldout_loglik, test_documents
from saberjax.model import TopicModel

FLAGS = flags.FLAGS
ALL_MEASURES = (*MEASURES, "c_v")


INTERFACE = command_line.Interface(positionals=("model", "corpus"), required=("model",),
                                   paths=("model", "corpus", "coherence_corpus"))


def define_flags() -> None:
    """The command's flags, in absl's registry."""
    with command_line.group("model"):
        cli.define_model_flag()
    with command_line.group("data"):
        cli.define_corpus_flags("Test documents, all of them scored",
                                "the documents held out by the training run")
        cli.define_reading_flags()
        flags.DEFINE_string("coherence_corpus", None, "Reference documents of coherence (any "
                            "format); default: the training documents recorded in the model's "
                            "config.json.")
    with command_line.group("run"):
        flags.DEFINE_integer("seed", None, "Seed of the observed/held-out split (default: the "
                             "training seed).", lower_bound=0)
        flags.DEFINE_integer("em_iterations", DEFAULT_EM_ITERATIONS, "EM iterations fitting "
                             "theta.", lower_bound=1)
    with command_line.group("output"):
        flags.DEFINE_list("coherence", list(MEASURES), f"Coherence measures to report (of "
                          f"{ALL_MEASURES}; empty: none).")
        flags.DEFINE_integer("top_n", 10, "Top words per topic scored by coherence.",
                             lower_bound=2)
        flags.DEFINE_float("relevance", None, "Rank the top words by relevance at this lambda "
                           "in [0, 1] (1: by probability), score those and print them.")
    flags.register_validator("coherence", lambda measures: set(measures) <= set(ALL_MEASURES),
                             f"--coherence takes a comma list of {ALL_MEASURES}")
    flags.register_validator("relevance", lambda value: value is None or 0 <= value <= 1,
                             "--relevance must be in [0, 1]")


def main(argv):
    del argv
    model = TopicModel.load(FLAGS.model)
    test, training = test_documents(model, FLAGS.corpus, FLAGS.format, **cli.flagged_fields())
    seed = FLAGS.seed if FLAGS.seed is not None else model.config.get("seed", 0)
    observed, heldout = corpus_io.split_document_halves(test, seed)
    score = model_heldout_loglik(model, observed, heldout, FLAGS.em_iterations)
    result = dict(model=FLAGS.model, documents=score.documents, tokens=score.tokens,
                  heldout_loglik_per_token=score.loglik_per_token, perplexity=score.perplexity)
    if FLAGS.coherence and not FLAGS.coherence_corpus and not records_training_corpus(model):
        warnings.warn(f"no coherence: {FLAGS.model} records no training corpus (saved from "
                      f"Python); --coherence_corpus gives the reference documents")
    elif FLAGS.coherence:
        reference = reference_corpus(model, FLAGS.coherence_corpus, training)
        measures = [measure for measure in FLAGS.coherence if measure in MEASURES]
        if measures:
            counts = cooccurrence(model, reference, FLAGS.top_n, relevance=FLAGS.relevance)
            result.update({f"coherence_{measure}": counts.score(measure).mean
                           for measure in measures})
        if "c_v" in FLAGS.coherence:
            no_cv = cv_unavailable(model, FLAGS.coherence_corpus)
            if no_cv:
                warnings.warn(no_cv)
            else:
                result["coherence_c_v"] = cv_cooccurrence(
                    model, reference, FLAGS.top_n, relevance=FLAGS.relevance).score("c_v").mean
    result["topic_diversity"] = topic_diversity(model)
    if FLAGS.relevance is not None:
        result["top_words"] = model.top_words(FLAGS.top_n, relevance=FLAGS.relevance)
    print(json.dumps(result))

