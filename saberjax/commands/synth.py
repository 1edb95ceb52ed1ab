"""`saberjax synth`: write a synthetic LDA corpus (saberjax native format) drawn from the LDA
model.

Examples:
  saberjax synth --preset=nytimes --scale=0.03 --output=/tmp/nyt3m
  saberjax synth --preset=clueweb --num_docs=6000000 --output=/data/cw2b

Prints one JSON line: D, T, V, seconds, Mtoken_per_s, output.  The corpus folder appears whole
when it is finished; an existing --output is replaced only with --overwrite.
"""

import json

from absl import app, flags

from saberjax import command_line, outputs, synth, synth_text

FLAGS = flags.FLAGS


INTERFACE = command_line.Interface(required=("output",), paths=("output",))


def define_flags() -> None:
    """The command's flags, in absl's registry."""
    with command_line.group("model"):
        flags.DEFINE_enum("preset", "nytimes", sorted(synth.PRESETS),
                          "Corpus shape (D, mean doc length, V).")
        flags.DEFINE_float("scale", 1.0, "Multiplies the preset's number of documents.",
                           lower_bound=0)
        flags.DEFINE_integer("num_docs", None, "Number of documents D (overrides preset and "
                             "--scale).")
        flags.DEFINE_float("mean_doc_length", None, "Mean document length (overrides preset).")
        flags.DEFINE_integer("num_words", None, "Vocabulary size V (overrides preset).")
        flags.DEFINE_integer("num_true_topics", 100, "Number of true topics K used to "
                             "generate.")
        flags.DEFINE_float("alpha_true", 0.1, "Symmetric Dirichlet parameter of the true "
                           "theta_d.")
        flags.DEFINE_float("zipf_exponent", 1.0, "Base word frequency ~ rank ** "
                           "-zipf_exponent.")
        flags.DEFINE_float("word_shape", 0.1, "Gamma shape of per-topic word emphasis (small: "
                           "distinct topics).")
        flags.DEFINE_float("length_sigma", 0.6, "Lognormal sigma of doc lengths (0: Poisson).")
        flags.DEFINE_integer("seed", 0, "Seed; the corpus depends only on seed and model "
                             "flags.", lower_bound=0)
    with command_line.group("run"):
        flags.DEFINE_integer("batch_tokens", 1 << 25, "Tokens per append to the writer "
                             "(memory bound).", lower_bound=1)
        flags.DEFINE_integer("threads", None, "Generator threads (default: all usable cores).",
                             lower_bound=1)
    with command_line.group("output"):
        flags.DEFINE_string("output", None, "Output folder of the native corpus (or, with "
                            "--text, the text file).")
        flags.DEFINE_enum("text", None, sorted(synth_text.TEXT_LAYOUTS), "Write the corpus as text "
                          "instead, one document a line of letter-only words: txt (plain) or "
                          "jsonl ({\"text\": ...} records).")
        flags.DEFINE_bool("overwrite", False, "Replace the corpus already in --output (without "
                          "it, an existing --output stops the command before anything is "
                          "generated).")
        flags.DEFINE_string("name", "", "Corpus name recorded in corpus.json (default: "
                            "synth-<preset>).")


def config_from_flags() -> "synth.SynthConfig":
    """SynthConfig from the parsed flags."""
    return synth.make_config(
        FLAGS.preset,
        scale=FLAGS.scale,
        num_docs=FLAGS.num_docs,
        mean_doc_length=FLAGS.mean_doc_length,
        num_words=FLAGS.num_words,
        num_true_topics=FLAGS.num_true_topics,
        alpha_true=FLAGS.alpha_true,
        zipf_exponent=FLAGS.zipf_exponent,
        word_shape=FLAGS.word_shape,
        length_sigma=FLAGS.length_sigma,
        seed=FLAGS.seed,
    )


def main(argv):
    del argv
    try:
        cfg = config_from_flags()
    except ValueError as error:  # a setting out of range, named as its flag is
        raise app.UsageError(str(error)) from error
    outputs.check_absent_or_overwrite(FLAGS.output, FLAGS.overwrite)
    if FLAGS.text:
        stats = synth_text.write_text(cfg, FLAGS.output, layout=FLAGS.text,
                                 batch_tokens=FLAGS.batch_tokens, num_threads=FLAGS.threads)
    else:
        stats = synth.write_corpus(
            cfg,
            FLAGS.output,
            name=FLAGS.name or f"synth-{FLAGS.preset}",
            batch_tokens=FLAGS.batch_tokens,
            num_threads=FLAGS.threads,
        )
    print(json.dumps(stats), flush=True)

