"""`saberjax infer`: topic proportions of new documents under a trained model; writes a [D, K]
float32 .npy.

    saberjax infer --model=runs/kos_k50 --corpus=path/to/docs --output=theta.npy

Row d of the output is document d's theta (rows sum to 1), fitted with the model's topics
fixed by EM fold-in (default) or by ESCA iterations (--method=esca, seeded); words are matched
to the model's vocabulary by string, and documents without known words get the uniform prior
mean.  Raw text (a folder of .txt files, a file of one document per line, JSON Lines, CSV, TSV
or Parquet: saberjax.corpus.text_sources) is tokenised by the training rules against the model's
vocabulary, with no document-frequency rule, one row per document; with --id_field the rows'
ids are written beside the output, one a line (OUTPUT.doc_names.txt).  Rows follow the
loaded corpus: the UCI and LDA-C loaders drop documents without tokens (counted in the JSON line), a native corpus keeps them.  Prints one JSON line
(documents, tokens used, unknown_tokens: tokens of words outside the model's vocabulary,
seconds, docs_per_second); the output is written to a temporary name and renamed into place,
and an existing output is replaced only with --overwrite.
"""

from __future__ import annotations

import json
import pathlib
import time

import numpy as np
from absl import flags

from saberjax import cli, command_line, outputs
from saberjax.config import DEFAULT_EM_ITERATIONS
from saberjax.files import atomic_write
from saberjax.inference import METHODS, infer_topics, load_in_model_vocabulary
from saberjax.model import TopicModel

FLAGS = flags.FLAGS


INTERFACE = command_line.Interface(positionals=("model", "corpus"),
                                   required=("model", "corpus", "output"),
                                   paths=("model", "corpus", "output", "cache_dir"))


def define_flags() -> None:
    """The command's flags, in absl's registry."""
    with command_line.group("model"):
        cli.define_model_flag()
    with command_line.group("data"):
        cli.define_corpus_flags("Documents to infer")
        cli.define_cache_flags()
        cli.define_reading_flags()
    with command_line.group("run"):
        flags.DEFINE_integer("iterations", DEFAULT_EM_ITERATIONS, "EM or ESCA iterations "
                             "fitting theta.", lower_bound=1)
        flags.DEFINE_enum("method", "em", list(METHODS), "em: EM fold-in (deterministic); "
                          "esca: the training sampler with the topics fixed, theta averaged "
                          "over the last half.")
        flags.DEFINE_integer("seed", 0, "Random seed of --method=esca.", lower_bound=0)
    with command_line.group("devices"):
        flags.DEFINE_integer("num_devices", 0, "Devices to spread batches over (0: all local "
                             "devices; on a CPU, one per core).", lower_bound=0)
    with command_line.group("output"):
        flags.DEFINE_string("output", None, "Output .npy file of theta [D, K]; with "
                            "--id_field, the rows' ids are written beside it, one a line "
                            "(OUTPUT without .npy, + .doc_names.txt).")
        flags.DEFINE_bool("overwrite", False, "Replace --output if it exists (without it, an "
                          "existing file stops the command before anything is computed).")


def names_path(output: pathlib.Path) -> pathlib.Path:
    """Where the ids of theta's rows go: beside `output`, named OUTPUT.doc_names.txt (OUTPUT
    without a .npy suffix)."""
    return output.with_name(output.name.removesuffix(".npy") + ".doc_names.txt")


def main(argv):
    del argv
    outputs.check_absent_or_overwrite(FLAGS.output, FLAGS.overwrite)
    if FLAGS.id_field:
        outputs.check_absent_or_overwrite(names_path(pathlib.Path(FLAGS.output)), FLAGS.overwrite)
    cli.use_caches_as_flagged()
    model = TopicModel.load(FLAGS.model)
    documents = load_in_model_vocabulary(model, FLAGS.corpus, FLAGS.format,
                                         cli.load_corpus_as_flagged, **cli.flagged_fields())
    start = time.perf_counter()
    theta = infer_topics(model, documents, FLAGS.iterations, num_devices=FLAGS.num_devices,
                         method=FLAGS.method, seed=FLAGS.seed)
    seconds = time.perf_counter() - start
    if documents.doc_names is not None:  # row d's id on line d
        atomic_write(names_path(pathlib.Path(FLAGS.output)), lambda file: file.writelines(
            f"{name}\n" for name in documents.doc_names), mode="w")
    atomic_write(pathlib.Path(FLAGS.output), lambda file: np.save(file, theta))
    print(json.dumps(dict(output=FLAGS.output, documents=documents.num_docs,
                          dropped_empty_documents=documents.dropped_empty_docs,
                          tokens=documents.num_tokens, unknown_tokens=documents.unknown_tokens,
                          topics=model.num_topics, seconds=round(seconds, 3),
                          docs_per_second=documents.num_docs / seconds)))

