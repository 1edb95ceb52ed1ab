"""Train an LDA topic model with saberjax and write the model directory.

    python launch/train.py                                   # bundled KOS corpus, K=50
    python launch/train.py --corpus=path/to/uci_folder --num_topics=1000 --iterations=200 \\
        --output=runs/mymodel --eval_every=10

Writes DIR/model.npz, DIR/vocab.txt, DIR/config.json and DIR/metrics.jsonl (one JSON object
per iteration), prints the top words of every topic and the held-out log-likelihood per token
(document completion on a --test_fraction split of the documents, or on --test_corpus).
With --checkpoint_every=N the training state is saved in DIR/checkpoints/ every N iterations;
--resume continues from the latest checkpoint there (metrics.jsonl rewritten up to it).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import sys

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from saberjax.platform import use_every_cpu_core  # noqa: E402 (before jax starts)

use_every_cpu_core()

from absl import app, flags, logging

from saberjax import checkpoint, trainer
from saberjax import corpus as corpus_io
from saberjax.model import atomic_write
from saberjax.report import read_metrics, write_report

FLAGS = flags.FLAGS
flags.DEFINE_string("corpus", None, "Corpus folder or file (UCI, LDA-C, native, or plain text: "
                    "a folder of .txt files or a file with one document per line); "
                    "default: the bundled KOS corpus.")
flags.DEFINE_enum("format", "auto", ["auto", *corpus_io.FORMATS], "Corpus format.")
flags.DEFINE_integer("min_df", None, "Plain text: keep words in at least N documents "
                     "(default 5).")
flags.DEFINE_float("max_df", None, "Plain text: keep words in at most this fraction of "
                   "documents (default 0.5).")
flags.DEFINE_integer("max_vocab", None, "Plain text: keep at most N words, the most frequent "
                     "(default 50,000).")
flags.DEFINE_string("test_corpus", None, "Separate test documents (same vocabulary words); "
                    "overrides --test_fraction.")
flags.DEFINE_integer("num_topics", 50, "Number of topics K.")
flags.DEFINE_float("alpha", None, "Document-topic prior; default 50 / K.")
flags.DEFINE_float("beta", 0.01, "Topic-word prior.")
flags.DEFINE_integer("iterations", 100, "ESCA iterations.")
flags.DEFINE_integer("seed", 0, "Random seed (also of the train/test split).")
flags.DEFINE_enum("backend", "auto", ["auto", "xla", "pallas"],
                  "auto: the Pallas kernels on a GPU, else the XLA path.")
flags.DEFINE_integer("eval_every", 0, "Score held-out documents every N iterations "
                     "(0: only at the end).")
flags.DEFINE_float("test_fraction", 0.1, "Fraction of documents held out for evaluation.")
flags.DEFINE_integer("chunk_tokens", None, "Tokens per PDOW chunk (default: one per device, "
                     "or, when the corpus does not fit the device, the fewest chunks that do).")
flags.DEFINE_float("device_memory_gb", None, "Device memory budget; a corpus larger than it "
                   "streams through the device in chunks (default: free memory less headroom).")
flags.DEFINE_integer("prefetch", 2, "Chunks in flight to the device when streaming.")
flags.DEFINE_integer("num_devices", 0, "Devices to spread chunks over (0: all local devices; "
                     "on a CPU, one per core).")
flags.DEFINE_integer("em_iterations", 50, "EM iterations fitting theta in evaluation.")
flags.DEFINE_string("output", None, "Model directory (default: runs/<corpus>_k<K>).")
flags.DEFINE_integer("top_words", 10, "Top words printed per topic.")
flags.DEFINE_bool("report", False, "After training, write OUTPUT/report/: convergence plot, "
                  "topics with coherence (as launch/report.py does).")
flags.DEFINE_integer("checkpoint_every", 0, "Save the training state in OUTPUT/checkpoints/ "
                     "every N iterations (0: never).")
flags.DEFINE_bool("resume", False, "Continue from the latest checkpoint in OUTPUT/checkpoints/ "
                  "(the same corpus and settings are required); start afresh if there is none.")


def text_options() -> dict:
    """The plain-text flags that were given (saberjax.text's defaults stand for the rest)."""
    return {name: FLAGS[name].value for name in ("min_df", "max_df", "max_vocab")
            if FLAGS[name].value is not None}


def load_data():
    """(training corpus, held-out halves or None) as the flags ask."""
    if FLAGS.corpus:
        corpus = corpus_io.load_corpus(FLAGS.corpus, FLAGS.format, **text_options())
    else:
        corpus = corpus_io.load_bundled("kos")
    if FLAGS.test_corpus:
        test = corpus_io.load_corpus(FLAGS.test_corpus, FLAGS.format, **text_options())
        test = corpus_io.align_vocabulary(test, corpus.vocab)
    elif FLAGS.test_fraction > 0:
        corpus, test = corpus_io.train_test_split(corpus, FLAGS.test_fraction, FLAGS.seed)
    else:
        return corpus, None
    return corpus, corpus_io.split_document_halves(test, FLAGS.seed)


def main(argv):
    del argv
    corpus, heldout = load_data()
    config = trainer.TrainConfig(
        num_topics=FLAGS.num_topics, alpha=FLAGS.alpha, beta=FLAGS.beta,
        iterations=FLAGS.iterations, seed=FLAGS.seed, backend=FLAGS.backend,
        chunk_tokens=FLAGS.chunk_tokens, num_devices=FLAGS.num_devices,
        device_memory_gb=FLAGS.device_memory_gb, prefetch=FLAGS.prefetch,
        eval_every=FLAGS.eval_every,
        em_iterations=FLAGS.em_iterations, checkpoint_every=FLAGS.checkpoint_every)
    output = pathlib.Path(FLAGS.output or f"runs/{corpus.name or 'corpus'}_k{FLAGS.num_topics}")
    output.mkdir(parents=True, exist_ok=True)
    logging.info("training on %s: %d documents, %d tokens, %d words; K=%d, backend %s",
                 corpus.name, corpus.num_docs, corpus.num_tokens, corpus.num_words,
                 config.num_topics, trainer.resolve_backend(config.backend))

    checkpoint_dir = output / "checkpoints"
    resume_from = checkpoint.latest_checkpoint(checkpoint_dir) if FLAGS.resume else None
    earlier_metrics = []
    if resume_from:
        earlier_metrics = checkpoint.read_manifest(resume_from)["metrics"]
        logging.info("resuming from %s", resume_from)
    elif FLAGS.resume:
        logging.info("no checkpoint in %s; starting afresh", checkpoint_dir)
    atomic_write(output / "metrics.jsonl", lambda file: file.writelines(
        json.dumps(record) + "\n" for record in earlier_metrics), mode="w")

    with open(output / "metrics.jsonl", "a") as metrics_file:
        def log_iteration(iteration, record, state):
            metrics_file.write(json.dumps(record) + "\n")
            metrics_file.flush()
            remaining = (config.iterations - iteration) * record["seconds"]
            score = record.get("heldout_loglik_per_token")
            logging.info("iteration %d: %.3f s, %.2f Mtoken/s%s, ETA %.0f s", iteration,
                         record["seconds"], record["tokens_per_second"] / 1e6,
                         f", held-out log-likelihood {score:.4f}" if score is not None else "",
                         remaining)

        result = trainer.train(corpus, config, heldout, callback=log_iteration,
                               checkpoint_dir=checkpoint_dir, resume_from=resume_from)
    model = dataclasses.replace(result.model, config=dict(
        result.model.config, corpus_path=FLAGS.corpus and str(pathlib.Path(FLAGS.corpus).resolve()),
        test_corpus=FLAGS.test_corpus, test_fraction=0 if FLAGS.test_corpus else FLAGS.test_fraction,
        text_options=text_options()))
    model.save(output)
    if FLAGS.report:
        write_report(model, output / "report", corpus, read_metrics(output / "metrics.jsonl"))

    for topic, words in enumerate(model.top_words(FLAGS.top_words)):
        print(f"topic {topic:4d}: {' '.join(words)}")
    final = result.metrics[-1]
    summary = dict(output=str(output), iterations=len(result.metrics),
                   init_seconds=round(result.init_seconds, 3),
                   compile_seconds=round(result.compile_seconds, 3),
                   mean_tokens_per_second=sum(m["tokens_per_second"] for m in result.metrics)
                   / len(result.metrics))
    if "heldout_loglik_per_token" in final:
        summary.update(heldout_loglik_per_token=final["heldout_loglik_per_token"],
                       perplexity=final["perplexity"])
    print(json.dumps(summary))


if __name__ == "__main__":
    app.run(main)
