"""`saberjax report`: the report of a trained model, a convergence plot and topic pages with
coherence.

    saberjax report --model=runs/kos_k50      # writes runs/kos_k50/report/
    saberjax report --model=runs/kos_k50 --output=/tmp/kos_report \\
        --coherence_corpus=path/to/reference_docs --top_n=10

Writes OUTPUT/convergence.png (from DIR/metrics.jsonl; needs matplotlib:
pip install 'saberjax[report]'), OUTPUT/topics.md and OUTPUT/topics.html (every topic's top
words, share of tokens and NPMI / UMass coherence on --coherence_corpus, by default the model's
training documents) and prints the paths written.  The report directory appears whole,
replacing an earlier report; a directory holding anything else is never written into.
"""

from __future__ import annotations

import pathlib
import warnings

from absl import flags

from saberjax import command_line, outputs, report
from saberjax.coherence import reference_corpus
from saberjax.model import TopicModel

FLAGS = flags.FLAGS


INTERFACE = command_line.Interface(positionals=("model",), required=("model",),
                                   paths=("model", "output", "coherence_corpus"))


def define_flags() -> None:
    """The command's flags, in absl's registry."""
    with command_line.group("model"):
        flags.DEFINE_string("model", None, "Model directory written by saberjax train.")
    with command_line.group("data"):
        flags.DEFINE_string("coherence_corpus", None, "Reference documents of coherence (any "
                            "format); default: the training documents recorded in the model's "
                            "config.json.")
    with command_line.group("output"):
        flags.DEFINE_string("output", None, "Report directory (default: MODEL/report).")
        flags.DEFINE_integer("top_n", 10, "Top words shown and scored per topic.",
                             lower_bound=2)


def main(argv):
    del argv
    warnings.filterwarnings("ignore", message="no convergence plot")  # printed below instead
    model_dir = pathlib.Path(FLAGS.model)
    model = TopicModel.load(model_dir)
    reference = reference_corpus(model, FLAGS.coherence_corpus)
    output = pathlib.Path(FLAGS.output or model_dir / "report")
    with outputs.staged_directory(output, report.REPORT_FILES, "a saberjax report") as staging:
        written = report.write_report(model, staging, reference, model.metrics, FLAGS.top_n)
    for path in written.files:
        print(output / path.name)
    if written.plot_skipped:
        print(written.plot_skipped)

