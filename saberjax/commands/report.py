"""`saberjax report`: the report of a trained model, a convergence plot and topic pages with
coherence.

    saberjax report --model=runs/kos_k50      # writes runs/kos_k50/report/
    saberjax report --model=runs/kos_k50 --output=/tmp/kos_report \\
        --coherence_corpus=path/to/reference_docs --top_n=10

    saberjax report --model=runs/news --relevance=0.6 --pyldavis \
        --dates=published --period=month

Writes OUTPUT/convergence.png (from DIR/metrics.jsonl; needs matplotlib:
pip install 'saberjax[report]'), OUTPUT/topics.md and OUTPUT/topics.html (every topic's top
words, share of tokens, NPMI / UMass coherence on --coherence_corpus, by default the model's
training documents, and c_v where those keep token order, plain text; topic diversity) and
prints the paths written.  --relevance ranks the top words by relevance (lambda).
--pyldavis adds OUTPUT/pyldavis.html (needs pyLDAvis; without it one line says how to install
it).  --dates adds OUTPUT/topics_over_time.csv and .png: every topic's share of the documents
of each --period, from the documents' topic proportions (EM fold-in) and their dates, a
column of the model's training corpus or a file of one date a line.  The report directory
appears whole, replacing an earlier report; a directory holding anything else is never
written into.
"""

from __future__ import annotations

import pathlib
import warnings

from absl import flags

from saberjax import cli, command_line, ldavis, outputs, over_time, report
from saberjax.coherence import cv_unavailable, records_training_corpus, reference_corpus
from saberjax.corpus import Corpus, align_vocabulary, detect_format, load_bundled
from saberjax.corpus.text_sources import FIELD_FORMATS
from saberjax.inference import load_in_model_vocabulary
from saberjax.model import TopicModel
from saberjax.relevance import check_relevance

FLAGS = flags.FLAGS


INTERFACE = command_line.Interface(positionals=("model",), required=("model",),
                                   paths=("model", "output", "coherence_corpus", "dates"))


def define_flags() -> None:
    """The command's flags, in absl's registry."""
    with command_line.group("model"):
        cli.define_model_flag()
    with command_line.group("data"):
        flags.DEFINE_string("coherence_corpus", None, "Reference documents of coherence (any "
                            "format); default: the training documents recorded in the model's "
                            "config.json.")
    with command_line.group("output"):
        flags.DEFINE_string("output", None, "Report directory (default: MODEL/report).")
        flags.DEFINE_integer("top_n", 10, "Top words shown and scored per topic.",
                             lower_bound=2)
        flags.DEFINE_float("relevance", None, "Rank the top words by relevance at this "
                           "lambda in [0, 1] (Sievert & Shirley; 1: by probability, as without "
                           "it; about 0.6 favours words particular to a topic).")
        flags.DEFINE_bool("pyldavis", False, "Also write pyldavis.html, the pyLDAvis page of "
                          "the model on the report's documents (needs pyLDAvis).")
        flags.DEFINE_string("dates", None, "Topics over time: the column (field) of the "
                            "model's training corpus holding each document's date, or a file "
                            "of one date a line (YYYY-MM-DD, YYYY-MM or YYYY) for every "
                            "document of that corpus in order.")
        flags.DEFINE_enum("period", "month", list(over_time.PERIODS), "Period of --dates.")
    flags.register_validator("relevance", lambda value: value is None or 0 <= value <= 1,
                             "--relevance must be in [0, 1]")


def main(argv):
    del argv
    warnings.filterwarnings("ignore", message="no convergence plot")  # printed below instead
    model_dir = pathlib.Path(FLAGS.model)
    model = TopicModel.load(model_dir)
    relevance = None if FLAGS.relevance is None else check_relevance(FLAGS.relevance)
    trends = topics_over_time(model, FLAGS.dates, FLAGS.period) if FLAGS.dates else None
    reference = reference_corpus(model, FLAGS.coherence_corpus)
    page, page_skipped = pyldavis_page(model, reference) if FLAGS.pyldavis else (None, None)
    no_cv = cv_unavailable(model, FLAGS.coherence_corpus)
    output = pathlib.Path(FLAGS.output or model_dir / "report")
    with outputs.staged_directory(output, report.REPORT_FILES, "a saberjax report") as staging:
        written = report.write_report(model, staging, reference, model.metrics, FLAGS.top_n,
                                      relevance, no_cv, trends, page)
    for path in written.files:
        print(output / path.name)
    for skipped in (written.plot_skipped, no_cv, page_skipped):
        if skipped:
            print(skipped)


def pyldavis_page(model: TopicModel, documents: Corpus) -> tuple[str | None, str | None]:
    """(the pyLDAvis page of the model on the documents, None), or (None, the line saying how
    to install pyLDAvis) without it."""
    try:
        import pyLDAvis  # noqa: F401, PLC0415 (optional dependency)
    except ImportError:
        return None, (f"{report.PYLDAVIS_FILE} not written: pyLDAvis is not installed "
                      f"({ldavis.PYLDAVIS_HINT})")
    return ldavis.pyldavis_html(model.to_pyldavis(documents)), None


def training_documents(model: TopicModel, id_field: str | None = None) -> Corpus:
    """Every document of the model's recorded training corpus over its words, in order (the
    test split included; documents without a known word kept, empty), with id_field's values
    as the documents' names; ValueError for a model that records no corpus."""
    if not records_training_corpus(model):
        raise ValueError(f"{FLAGS.model} records no training corpus (a model saved from "
                         f"Python), whose documents --dates dates")
    path = model.config["corpus_path"]
    if path is None:
        if id_field:
            raise ValueError(f"--dates={id_field}: the bundled kos corpus has no columns; give "
                             f"a file of one date a line")
        return align_vocabulary(load_bundled("kos"), model.vocab)
    recorded = model.config.get("text_options") or {}
    fields = {name: recorded[name] for name in ("text_field", "text_column") if name in recorded}
    if id_field:
        if detect_format(path) not in FIELD_FORMATS:
            raise ValueError(f"--dates={id_field}: no such file, and {path} has no columns "
                             f"(fields) to read dates from")
        fields["id_field"] = id_field
    return load_in_model_vocabulary(model, path, **fields)


def topics_over_time(model: TopicModel, dates: str, period: str) -> over_time.TopicsOverTime:
    """The topic shares of every period of the training documents' dates: --dates a file of
    one date a line, else a column of the training corpus."""
    if pathlib.Path(dates).is_file():
        documents = training_documents(model)
        values, source = over_time.read_dates_file(dates, documents.num_docs), dates
    else:
        documents = training_documents(model, dates)
        values, source = documents.doc_names, f"column {dates!r}"
    parsed = over_time.parse_dates(values, source)
    return over_time.topics_over_time(model.transform(documents), parsed, period)

