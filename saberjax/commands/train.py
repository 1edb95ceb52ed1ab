"""`saberjax train`: train an LDA topic model and write the model directory.

    saberjax train                                           # bundled KOS corpus, K=50
    saberjax train --corpus=path/to/uci_folder --num_topics=1000 --iterations=200 \\
        --output=runs/mymodel --eval_every=10

Writes DIR/model.npz, DIR/vocab.txt, DIR/config.json and DIR/metrics.jsonl (one JSON object
per iteration), prints the top words of every topic and the held-out log-likelihood per token
(document completion on a --test_fraction split of the documents, or on --test_corpus).
With --checkpoint_every=N the training state is saved in DIR/checkpoints/ every N iterations;
--resume continues from the latest checkpoint (metrics.jsonl rewritten up to it), on any
mesh: a run of several processes that loses one continues on those left with the same command,
--resume and --num_processes counting only them.

Nothing earlier is lost: every flag and the corpus are checked before any file is touched; a
DIR that holds a model is replaced only with --overwrite (or by --resume continuing its
checkpoint), and then only when the new run has finished: until then the run writes into
DIR.partial.  The finished directory replaces DIR in one step, so a crash or a kill leaves DIR
either as it was or whole (saberjax.run_directory).  Mistakes end in one line on stderr, exit
status 2 for flags and 1 for data (saberjax.cli).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import shutil
import time

import jax
import numpy as np
from absl import flags, logging

from saberjax import checkpoint, cli, command_line, processes, seeding, trainer
from saberjax.execution.mesh import start_devices
from saberjax import corpus as corpus_io
from saberjax import timing
from saberjax.backend import resolve_backend
from saberjax.background import in_background
from saberjax.corpus import plain_text
from saberjax.evaluate import check_scorable
from saberjax.files import atomic_write
from saberjax.inference import load_in_vocabulary
from saberjax.model_files import model_file_bytes
from saberjax.outputs import hidden_sibling
from saberjax.progress import Progress, memory_line, time_line
from saberjax.run_directory import DOC_NAMES, DOC_TOPICS, MODEL_FILE, RunDirectory

FLAGS = flags.FLAGS


# --help groups of the TrainConfig settings that do not define the model (those are "model")
CONFIG_GROUPS = dict(iterations="run", eval_every="run", em_iterations="run",
                     checkpoint_every="run", backend="devices", model_format="devices",
                     chunk_tokens="devices", num_devices="devices", partition="devices",
                     mesh="devices", device_memory_gb="devices", prefetch="devices",
                     host_memory_gb="devices", chunk_store="devices")
INTERFACE = command_line.Interface(
    positionals=("corpus",), paths=("corpus", "test_corpus", "output", "cache_dir",
                                    "chunk_store", "seed_words"))


def define_flags() -> None:
    """The command's flags, in absl's registry."""
    cli.define_config_flags(trainer.TrainConfig, FLAGS, groups=CONFIG_GROUPS)
    with command_line.group("data"):
        define_data_flags()
    with command_line.group("run"):
        flags.DEFINE_bool("resume", False, "Continue from the newest undamaged checkpoint "
                          "for --output (OUTPUT.partial/checkpoints/ of an interrupted run, or "
                          "OUTPUT/checkpoints/ of a finished one given more --iterations), on "
                          "any number of processes and devices (a run that lost a process: the "
                          "same command on those left, --num_processes counting them); the same "
                          "corpus and model settings are required, and it is an error when "
                          "there is none.")
    with command_line.group("devices"):
        processes.define_flags(FLAGS)
    with command_line.group("output"):
        define_output_flags()


def define_data_flags() -> None:
    """The flags of the documents: the corpus, its reading, the held-out ones, the cache."""
    cli.define_corpus_flags("Corpus folder, file or glob", "the bundled KOS corpus")
    cli.define_text_flags()
    flags.DEFINE_string("test_corpus", None, "Separate test documents (same vocabulary "
                        "words); overrides --test_fraction.")
    flags.DEFINE_float("test_fraction", 0.1, "Fraction of documents held out for evaluation, "
                       "in [0, 1) (0: none).")
    flags.register_validator("test_fraction", lambda fraction: 0 <= fraction < 1,
                             "--test_fraction must be in [0, 1)")
    cli.define_cache_flags()
    cli.define_reading_flags()


def define_output_flags() -> None:
    """The flags of what the run writes and prints."""
    flags.DEFINE_string("output", None, "Model directory (default: runs/<corpus>_k<K>); the "
                        "run writes OUTPUT.partial and renames it to OUTPUT when it has "
                        "finished.")
    flags.DEFINE_bool("overwrite", False, "Replace the model already in --output (without it, "
                      "a run into a directory holding a model stops before touching anything); "
                      "the old model stays whole until the new run has finished.")
    flags.DEFINE_integer("top_words", 10, "Top words printed per topic (0: none).",
                         lower_bound=0)
    flags.DEFINE_integer("log_every", 10, "Log a progress line (Mtoken/s, ETA, latest held-out "
                         "score) every N iterations, and after the last.", lower_bound=1)
    flags.DEFINE_bool("report", False, "After training, write OUTPUT/report/: convergence "
                      "plot, topics with coherence (as saberjax report does).")
    flags.DEFINE_bool("save_doc_topics", False, "Also write OUTPUT/doc_topics.npy: the topic "
                      "proportions [D, K] of every document of --corpus, training and held-out, "
                      "in order (EM fold-in under the final topics, as saberjax infer gives "
                      "them).")


def text_options() -> dict:
    """The raw-text flags that were given (saberjax.text's defaults stand for the rest), the
    fields of records among them."""
    return {**cli.flagged_text_options(), **cli.flagged_fields()}


def reads_own_documents_only() -> bool:
    """Whether each process of the run reads only its own documents' tokens: with several
    processes, no test split to cut from the corpus and nothing written from every document
    (--save_doc_topics, --report).  A native corpus's word ids are then validated by each
    process as it counts its own (trainer.train) instead of whole on loading."""
    return (jax.process_count() > 1 and not (FLAGS.save_doc_topics or FLAGS.report)
            and (FLAGS.test_corpus is not None or FLAGS.test_fraction == 0))


def load_data():
    """(every document of the corpus, the training corpus, held-out halves or None) as the
    flags ask; corpora are read through the corpus cache."""
    if FLAGS.corpus:
        documents = cli.load_corpus_as_flagged(FLAGS.corpus, FLAGS.format,
                                               checked=not reads_own_documents_only(),
                                               **text_options())
    else:
        documents = corpus_io.load_bundled("kos")
    corpus = documents
    if FLAGS.test_corpus:
        test = load_in_vocabulary(FLAGS.test_corpus, corpus.vocab, FLAGS.format,
                                  cli.load_corpus_as_flagged,
                                  plain_text.tokenizing_rules(text_options()),
                                  **cli.flagged_fields())
    elif FLAGS.test_fraction > 0:
        corpus, test = corpus_io.train_test_split(corpus, FLAGS.test_fraction, FLAGS.seed)
    else:
        return documents, corpus, None
    # the training corpus's fingerprint, the trainer's first need, hashed beside the halves
    # (combined by the trainer from every process's part when each holds only its share)
    fingerprint = in_background(corpus.fingerprint if corpus.held_tokens is None else str,
                                name="saberjax-fingerprint")
    halves = corpus_io.split_document_halves(test, FLAGS.seed)
    check_scorable(*halves)
    fingerprint.result()
    return documents, corpus, halves


def main(argv):
    del argv
    processes.initialize_from_flags(FLAGS)
    config = cli.config_from_flags(trainer.TrainConfig, FLAGS)
    if config.seed_words is not None:  # the file's syntax, before the corpus is read
        seeding.read_seed_words(config.seed_words)
    phases, started = timing.Phases().record(), time.perf_counter()
    start_devices()  # beside the corpus load
    cli.use_caches_as_flagged()
    with phases.phase("load"):
        documents, corpus, heldout = load_data()
    seeding.seed_prior(config.seed_words, config.seed_weight, corpus.vocab, config.num_topics,
                       warn=False)  # its words and topics, before any file is touched
    backend = resolve_backend(config.backend)
    run = RunDirectory.plan(FLAGS.output or f"runs/{corpus.name or 'corpus'}_k{FLAGS.num_topics}",
                            overwrite=FLAGS.overwrite, resume=FLAGS.resume,
                            needed_bytes=model_file_bytes(corpus.num_words, config.num_topics,
                                                         corpus.num_tokens))
    # read now: the run's own checkpoints replace the one it resumes from
    resumed_at = checkpoint.read_manifest(run.resume_from)["iteration"] if run.resume_from else 0
    if not processes.is_writer():  # trains its share; process 0 writes everything
        processes.barrier("output planned")
        processes.barrier("output opened")
        trainer.train(corpus, config, heldout, checkpoint_dir=run.checkpoint_dir,
                      resume_from=run.resume_from)
        return
    processes.barrier("output planned")  # every process saw the output as it was
    logging.info("training on %s: %d documents, %d tokens, %d words; K=%d, backend %s",
                 corpus.name, corpus.num_docs, corpus.num_tokens, corpus.num_words,
                 config.num_topics, backend)
    run.open()
    processes.barrier("output opened")
    ahead = ArraysAhead(run.directory)
    try:
        with phases.phase("training"):
            result = train(run, corpus, heldout, config, ahead)
        model = with_provenance(result)
        with phases.phase("save"):
            output = run.finish(lambda staging: save_result(staging, model, corpus, documents,
                                                            ahead.written()))
    except BaseException as error:
        raise run.failed(error)
    finally:
        ahead.remove()

    for topic, words in enumerate(model.top_words(FLAGS.top_words) if FLAGS.top_words else []):
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
    logging.info(memory_line(phases.peak_rss, timing.peak_rss_bytes()))
    logging.info(time_line(phases.seconds, result.init_seconds, result.compile_seconds,
                           sum(record["seconds"] for record in result.metrics
                               if record["iteration"] > resumed_at),
                           time.perf_counter() - started))


class ArraysAhead:
    """model.npz written while the last iteration is scored (trainer.train's on_model), into
    a hidden folder beside the output (outputs.hidden_sibling: the next run's
    RunDirectory.open clears what a killed run leaves there) until the save moves it into
    the finished directory."""

    def __init__(self, directory: pathlib.Path):
        self.directory, self.folder, self.writing = directory, None, None

    def __call__(self, model) -> None:
        self.folder = hidden_sibling(self.directory, "partial")
        self.folder.mkdir()
        self.writing = in_background(model.write_arrays, self.folder / MODEL_FILE,
                                     name="saberjax-save")

    def written(self) -> pathlib.Path | None:
        """The model.npz written (once it is), or None when training never offered it."""
        if self.writing is None:
            return None
        self.writing.result()
        return self.folder / MODEL_FILE

    def remove(self) -> None:
        """Delete the folder (after the writing, should it still be going on)."""
        if self.writing is not None:
            self.writing.exception()
            shutil.rmtree(self.folder, ignore_errors=True)


def train(run: RunDirectory, corpus, heldout, config, ahead: ArraysAhead
          ) -> trainer.TrainResult:
    """Train, writing metrics.jsonl and the checkpoints into the run's working directory,
    logging progress every --log_every iterations and the model's arrays ahead of the save."""
    earlier_metrics = []
    if run.resume_from:
        earlier_metrics = checkpoint.read_manifest(run.resume_from)["metrics"]
        logging.info("resuming from %s", run.resume_from)
    progress = Progress(config.iterations, FLAGS.log_every, logging.info)
    with run.metrics_log(earlier_metrics) as append_metrics:
        def log_iteration(iteration, record, state):
            append_metrics(record)
            progress(iteration, record, state)

        return trainer.train(corpus, config, heldout, callback=log_iteration,
                             checkpoint_dir=run.checkpoint_dir, resume_from=run.resume_from,
                             on_model=ahead)


def with_provenance(result: trainer.TrainResult):
    """The trained model with its metrics and what the launcher knows of its data (the corpus
    path, None for the bundled one, test split and text options) in its config."""
    return dataclasses.replace(result.model, metrics=tuple(result.metrics), config=dict(
        result.model.config, corpus_path=FLAGS.corpus and str(pathlib.Path(FLAGS.corpus).resolve()),
        test_corpus=FLAGS.test_corpus and str(pathlib.Path(FLAGS.test_corpus).resolve()),
        test_fraction=0 if FLAGS.test_corpus else FLAGS.test_fraction,
        text_options=text_options()))


def save_result(directory: pathlib.Path, model, corpus, documents,
                arrays: pathlib.Path | None = None) -> None:
    """The model files (model.npz moved from `arrays` where it was written ahead), with
    --save_doc_topics the topic proportions of `documents`, and with --report the report,
    into the directory being assembled."""
    model.save(directory, arrays=arrays)
    if FLAGS.save_doc_topics:
        with timing.phase("evaluation"):
            theta = model.transform(documents, num_devices=FLAGS.num_devices)
        atomic_write(directory / DOC_TOPICS, lambda file: np.save(file, theta))
        if documents.doc_names is not None:  # row d's id on line d
            atomic_write(directory / DOC_NAMES, lambda file: file.writelines(
                f"{name}\n" for name in documents.doc_names), mode="w")
    if FLAGS.report:
        from saberjax.report import write_report  # noqa: PLC0415 (only for --report)

        from saberjax.coherence import cv_unavailable  # noqa: PLC0415

        write_report(model, directory / "report", corpus, model.metrics,
                     cv_unavailable=cv_unavailable(model))

