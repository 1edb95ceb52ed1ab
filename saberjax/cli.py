"""The commands' entry point: every mistake ends in one line on stderr, never a traceback.

Every command runs as ``cli.run_main(main)`` (saberjax.commands.run).  A flag that does not
parse or fails its check, app.UsageError and outputs.OutputConflictError (a command that would
replace earlier work, or --resume with nothing to continue) print ``error: ...`` and exit with
status 2; any other exception (a malformed corpus, model or checkpoint, a file that cannot be
read, a model that does not fit the memory: the memory plan's MemoryError, XLA's
RESOURCE_EXHAUSTED) prints ``error: ...`` and exits with status 1.  The library's messages
name the file, line, flag or value at fault, so the line is what the user needs; the
traceback follows on request: --verbosity=1 or more, or SABERJAX_TRACEBACK=1.  Exception types
outside the library's ValueError / OSError / MemoryError family are named in the line, with
"a bug?", since they mean one.

run_main also lets a GPU's memory pool grow as the run allocates
(allocate_device_memory_on_demand) instead of XLA reserving three quarters of the GPU first,
gives NCCL's collectives 32 channels or more (NCCL_MIN_NCHANNELS, where the user set none: the
mesh's all-gathers and all_to_all run faster with them, DESIGN.md), and keeps the log readable:
jax's probe of backends this machine lacks ("Unable to initialize backend 'tpu'") is not logged,
and a warning is one ``warning: ...`` line. A run that finishes ends at once (exit_at_once): its
outputs are written and synced by then, and tearing the runtime down (the devices' memory pool,
the GPU context) would only add to its wall time.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import re
import sys
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path

from absl import app, flags
from absl import logging as absl_logging

from saberjax import command_line, layout_cache, text
from saberjax.corpus import FORMATS, Corpus, load_corpus
from saberjax.corpus import cache as corpus_cache
from saberjax.corpus import plain_text
from saberjax.outputs import OutputConflictError

TRACEBACK_ENV = "SABERJAX_TRACEBACK"
USAGE_STATUS = 2  # the command line is wrong: a flag, or what the flags ask of the output path
DATA_STATUS = 1  # the input is wrong (or the run failed)
INTERRUPTED_STATUS = 130  # as a shell reports SIGINT

_USAGE_ERRORS = (flags.Error, app.UsageError, OutputConflictError)
# whose messages stand on their own: a memory budget or plan's MemoryError names the GB needed
_LIBRARY_ERRORS = (ValueError, OSError, MemoryError)
_OUT_OF_MEMORY = "RESOURCE_EXHAUSTED"  # XLA's status of a failed device allocation
# XLA's variables for its GPU memory pool: a user who sets any of them keeps XLA's behaviour
DEVICE_MEMORY_ENV = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
                     "XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR")
# NCCL's least number of channels a collective uses, and the launchers' value (DESIGN.md)
NCCL_CHANNELS_ENV, NCCL_CHANNELS = "NCCL_MIN_NCHANNELS", "32"


def run_main(main: Callable[[list[str]], object], argv: list[str] | None = None,
             parse: Callable[[list[str]], list[str]] = flags.FLAGS) -> None:
    """absl's app.run(main) on `argv` (default sys.argv), its flags read by `parse` (absl's
    by default; saberjax.command_line.parse for the commands), with one-line errors, exit
    statuses 2 / 1 and a quiet log; the device memory pool grown on demand and NCCL's
    collectives given NCCL_CHANNELS channels or more, unless the user set either."""
    allocate_device_memory_on_demand()
    os.environ.setdefault(NCCL_CHANNELS_ENV, NCCL_CHANNELS)  # read when NCCL first starts
    require_finite_numbers(flags.FLAGS)
    logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)
    warnings.formatwarning = _format_warning
    app.run(_reporting_errors(main), argv=argv, flags_parser=_parsing_with(parse))


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """The flags of every command that run_main itself reads: --log_prefix."""
    flags.DEFINE_bool("log_prefix", False, "Log lines with absl's prefix (level, date, time, "
                      "thread, file:line), as --verbosity=1 also gives; without it a line is "
                      "the time and the message.", flag_values=flag_values)


def use_log_format() -> None:
    """Log lines as `03:00:08 training on kos: ...` (warnings and errors say so after the
    time) with other libraries' info lines left out, unless --log_prefix or a --verbosity of
    1 or more asks for absl's prefix and every line."""
    flag_values = flags.FLAGS
    if flag_values.verbosity >= 1 or ("log_prefix" in flag_values and flag_values.log_prefix):
        return
    handler = absl_logging.get_absl_handler()
    handler.setFormatter(TimeAndMessage())
    handler.addFilter(own_info_only)


def own_info_only(record: logging.LogRecord) -> bool:
    """Whether a log line is shown by default: saberjax's own lines (absl's logger) and every
    library's warnings and errors; absl sets the root level to INFO, so without this filter an
    imported library's info lines (pandas' numexpr announcing its threads) reach the user."""
    return record.levelno >= logging.WARNING or record.name.split(".")[0] in ("absl", "saberjax")


class TimeAndMessage(logging.Formatter):
    """A log line of its time (HH:MM:SS, local) and message; from warnings up, the level's
    name between them."""

    def format(self, record: logging.LogRecord) -> str:
        level = "" if record.levelno <= logging.INFO else f"{record.levelname.lower()}: "
        return f"{self.formatTime(record, '%H:%M:%S')} {level}{super().format(record)}"


def allocate_device_memory_on_demand() -> None:
    """Unless the user set one of XLA's memory variables (DEVICE_MEMORY_ENV), let the GPU
    memory pool grow as the run allocates: XLA_PYTHON_CLIENT_PREALLOCATE=false.

    By default XLA reserves 75% of a GPU's memory at the first allocation, which takes a
    second or more of every run's start (longer the larger the GPU), on the start's critical
    path.  The launchers' runs do not need it: the device budget is planned from the same 75%
    limit, which stays in force, and a run's large arrays (the model, the chunks, the slots
    streamed through) are few, long-lived and of repeating sizes, so the pool grown on demand
    holds them without the fragmentation that preallocation guards against.  Called before
    any device starts (the variable is read when the backend starts); the library itself
    leaves the environment to the programs that import it."""
    if not any(name in os.environ for name in DEVICE_MEMORY_ENV):
        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"


def require_finite_numbers(flag_values: flags.FlagValues) -> None:
    """Fail every number flag given inf or nan (absl's float flags take both): no setting of
    saberjax means anything at either."""
    for name in list(flag_values):
        if isinstance(flag_values[name].parser, flags.FloatParser):
            flags.register_validator(name, lambda value: value is None or math.isfinite(value),
                                     f"--{name} must be a finite number",
                                     flag_values=flag_values)


def error_line(error: BaseException) -> str:
    """The one line reported for `error`: its message (first line), prefixed by its type
    when that is not one of the library's own; XLA's RESOURCE_EXHAUSTED says the device ran
    out of memory, and a MemoryError without a message (Python's own) the host."""
    lines = str(error).strip().splitlines()
    message = lines[0] if lines else ""
    if isinstance(error, _LIBRARY_ERRORS + _USAGE_ERRORS) and message:
        return f"error: {as_flags(message)}"
    if message.startswith(_OUT_OF_MEMORY):
        return (f"error: the device ran out of memory ({message}); fewer topics, a smaller "
                f"corpus or --device_memory_gb (training streams the corpus) need less")
    if isinstance(error, MemoryError):
        return ("error: the host ran out of memory; fewer topics, a smaller corpus or "
                "--host_memory_gb need less")
    return f"error: {type(error).__name__}{': ' if message else ''}{message} (a bug? " \
           f"{TRACEBACK_ENV}=1 shows where)"


# A setting named in a library message: a word with an underscore, or one before "=" (not a
# module's attribute, a call or part of a path).
_SETTING = re.compile(r"(?<![\w.\-/])(?:[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[a-z]+(?==))(?![\w.(/])")


def as_flags(message: str, flag_values: flags.FlagValues = flags.FLAGS) -> str:
    """message with every setting it names that is also a flag written as the flag
    (num_topics=5 -> --num_topics=5): the library names settings, a command line flags."""
    return _SETTING.sub(lambda match: f"--{match[0]}" if match[0] in flag_values else match[0],
                        message)


def exit_status(error: BaseException) -> int:
    """2 for a wrong command line, 1 for anything else."""
    return USAGE_STATUS if isinstance(error, _USAGE_ERRORS) else DATA_STATUS


def traceback_wanted() -> bool:
    """Whether the user asked for tracebacks: SABERJAX_TRACEBACK set (not to 0), or
    --verbosity of 1 or more."""
    if os.environ.get(TRACEBACK_ENV, "0") not in ("", "0"):
        return True
    return flags.FLAGS.is_parsed() and flags.FLAGS.verbosity >= 1


def _parsing_with(parse: Callable[[list[str]], list[str]]):
    def parse_or_report(argv: list[str]) -> list[str]:
        try:
            return parse(argv)
        except (flags.Error, app.UsageError) as error:
            _report(error)
    return parse_or_report


def exit_at_once(status: int = 0) -> None:
    """End the process now with `status`, after flushing the output streams and the log and
    leaving the cluster of processes (jax.distributed), but without the interpreter's and the
    runtime's teardown, which frees every device buffer and the device's memory pool one by
    one.  Returns (and the process exits normally) while a profiler or tracer watches the
    process: cProfile, coverage and the like write their results at exit."""
    monitoring = getattr(sys, "monitoring", None)
    watched = (sys.getprofile() is not None or sys.gettrace() is not None or (
        monitoring is not None and any(monitoring.get_tool(tool) for tool in range(6))))
    if watched:
        return
    if "jax" in sys.modules:
        sys.modules["jax"].distributed.shutdown()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _reporting_errors(main):
    def reporting_main(argv):
        use_log_format()
        try:
            status = main(argv)
        except SystemExit:
            raise
        except KeyboardInterrupt:
            print("error: interrupted", file=sys.stderr)
            sys.exit(INTERRUPTED_STATUS)
        except Exception as error:  # noqa: BLE001 (every error becomes one line)
            _report(error)
        exit_at_once(status or 0)
        return status
    return reporting_main


def _report(error: BaseException):
    if traceback_wanted():
        traceback.print_exception(error, file=sys.stderr)
    print(error_line(error), file=sys.stderr, flush=True)
    sys.exit(exit_status(error))


def _format_warning(message, category, filename, lineno, line=None) -> str:
    return f"warning: {message}\n"


def define_config_flags(config_class, flag_values: flags.FlagValues = flags.FLAGS,
                        exclude: tuple[str, ...] = (), groups: dict[str, str] | None = None
                        ) -> None:
    """One flag per field of a settings dataclass (config.TrainConfig): its default, its help,
    its choices, and a check that fails the flag with the field's own requirement
    (its setting_problem), so that the flags and the library never disagree.  Fields in
    `exclude` get no flag.  A field's --help group (command_line.GROUPS) is `groups[name]`,
    else "model" for the settings that define the model (metadata "model"); a field with
    neither is an error."""
    for field in dataclasses.fields(config_class):
        if field.name in exclude:
            continue
        group = (groups or {}).get(field.name, "model" if field.metadata["model"] else None)
        if group is None:
            raise ValueError(f"{config_class.__name__}.{field.name} has no --help group")
        with command_line.group(group, flag_values):
            _define_config_flag(config_class, field, flag_values)


def _define_config_flag(config_class, field: dataclasses.Field,
                        flag_values: flags.FlagValues) -> None:
    definers = {"int": flags.DEFINE_integer, "float": flags.DEFINE_float,
                "str": flags.DEFINE_string, "bool": flags.DEFINE_bool}
    meta = field.metadata
    if meta["choices"]:
        flags.DEFINE_enum(field.name, field.default, list(meta["choices"]), meta["help"],
                          flag_values=flag_values)
        return
    definers[config_class.setting_kind(field)[0]](field.name, field.default, meta["help"],
                                                  flag_values=flag_values)

    def check(value):
        problem = config_class.setting_problem(field, value)
        if problem:
            raise flags.ValidationError(f"--{field.name} {problem}")
        return True

    flags.register_validator(field.name, check, flag_values=flag_values)


def config_from_flags(config_class, flag_values: flags.FlagValues = flags.FLAGS, **given):
    """The settings dataclass from the flags define_config_flags made (and `given` values)."""
    return config_class(**{field.name: flag_values[field.name].value
                           for field in dataclasses.fields(config_class)
                           if field.name not in given and field.name in flag_values}, **given)


# The flags of what the commands read: the documents and the trained model.
def define_corpus_flags(what: str, default: str | None = None) -> None:
    """--corpus (`what` the command reads, in any format; `default`: what it reads without
    the flag) and --format."""
    flags.DEFINE_string("corpus", None, f"{what}: UCI, LDA-C, native, or raw text (a folder of "
                        ".txt files, a file with one document per line, JSON Lines, CSV, TSV "
                        "or Parquet, each also .gz or .zst, or a folder or glob of shards)"
                        + (f"; default: {default}." if default else "."))
    flags.DEFINE_enum("format", "auto", ["auto", *FORMATS], "Corpus format.")


def define_model_flag() -> None:
    """--model, the directory of the trained model the command reads."""
    flags.DEFINE_string("model", None, "Model directory written by saberjax train.")


# The caches' flags, --cache_dir and --[no]cache, of the launchers that read corpora.
def define_cache_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """The launchers' --cache_dir and --[no]cache flags."""
    flags.DEFINE_string("cache_dir", None, "Cache folder: corpora/ keeps corpora read from UCI, "
                        "LDA-C or text as memory-mapped native copies, keyed by the files' "
                        "contents and the reading options; xla/ keeps compiled programs "
                        "(default: $SABERJAX_CACHE_DIR, else ~/.cache/saberjax).",
                        flag_values=flag_values)
    flags.DEFINE_bool("cache", True, "Use the caches (--nocache: read the corpus from its "
                      "source and compile every program, writing nothing to --cache_dir).",
                      flag_values=flag_values)


def flagged_cache_root() -> Path | None:
    """The launchers' cache folder: --cache_dir, else corpus.cache.cache_root(); None under
    --nocache."""
    if not flags.FLAGS.cache:
        return None
    return Path(flags.FLAGS.cache_dir) if flags.FLAGS.cache_dir else corpus_cache.cache_root()


def use_caches_as_flagged() -> None:
    """Compiled programs kept in --cache_dir/xla and layouts in --cache_dir/layouts, unless
    --nocache (call before compiling)."""
    root = flagged_cache_root()
    if root is not None:
        corpus_cache.use_compilation_cache(root / "xla")
    layout_cache.use(None if root is None else root / "layouts")


def load_corpus_as_flagged(path, format: str = "auto", checked: bool = True,
                           **text_options) -> Corpus:
    """corpus.cache.load_corpus with the cache --cache_dir/corpora, or corpus.load_corpus
    under --nocache; reading raw text into the cache logs progress lines to stderr.
    checked=False: each process of a run reads only its own documents: a native corpus's
    word ids are left to whoever counts them (load_native), a raw text input is read by the
    processes together, each tokenising its share (shared_text.load_shared_text, each
    process's share kept in the cache)."""
    root = flagged_cache_root()
    if not checked:
        from saberjax import shared_text  # noqa: PLC0415 (imports jax; several processes only)

        if shared_text.is_text_input(path, format):
            return shared_text.load_shared_text(
                path, format, log=_stderr_line,
                cache_dir=None if root is None else root / "corpora", **text_options)
    if root is None:
        return load_corpus(path, format, checked, **text_options)
    return corpus_cache.load_corpus(path, format, root / "corpora", log=_stderr_line,
                                    checked=checked, **text_options)


def _stderr_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# The raw text flags: the text options (plain_text.text_rules) and the fields of records.
def define_text_flags() -> None:
    """The launchers' text option flags, named as the options are (plain_text.text_rules)."""
    flags.DEFINE_integer("min_df", None, "Plain text: keep words in at least N documents "
                         f"(default {text.DEFAULT_MIN_DF}).", lower_bound=1)
    flags.DEFINE_float("max_df", None, "Plain text: keep words in at most this fraction of "
                       f"documents (default {text.DEFAULT_MAX_DF}).")
    flags.register_validator("max_df", lambda max_df: max_df is None or 0 < max_df <= 1,
                             "--max_df must be in (0, 1]")
    flags.DEFINE_integer("max_features", None, "Plain text: keep at most N words, the most "
                         f"frequent (default {text.DEFAULT_MAX_FEATURES:,}).", lower_bound=1)
    flags.DEFINE_string("stop_words", None, "Plain text: 'english' (default), 'none', or a file "
                        "of stop words, one a line.")
    flags.DEFINE_string("token_pattern", None, "Plain text: tokens are this regular "
                        f"expression's matches (default {text.DEFAULT_TOKEN_PATTERN!r}, after "
                        "accents are stripped and the text lowercased).")
    flags.DEFINE_bool("lowercase", True, "Plain text: lowercase the text.")
    flags.DEFINE_enum("strip_accents", None, ["ascii", "unicode", "none"], "Plain text: 'ascii' "
                      "(default: NFKD, non-ASCII characters dropped), 'unicode' (NFKD, combining "
                      "marks dropped) or 'none'.")
    flags.DEFINE_bool("pretokenized", False, "Plain text: the tokens are the text's "
                      "whitespace-separated pieces (--token_pattern unused).")


def flagged_text_options() -> dict:
    """The text options the command line gives (define_text_flags); defaults stand for the
    rest."""
    options = {name: flags.FLAGS[name].value for name in plain_text.TEXT_OPTIONS
               if flags.FLAGS[name].present}
    if options.get("strip_accents") == "none":
        options["strip_accents"] = None
    return options


def define_reading_flags() -> None:
    """The launchers' flags naming the fields of raw text records: --text_field, --text_column
    (the same option, by the name CSV and Parquet use) and --id_field."""
    flags.DEFINE_string("text_field", None, "JSON Lines, CSV, TSV, Parquet: the field or "
                        "column holding each document's text (default: text).")
    flags.DEFINE_string("text_column", None, "Another name of --text_field.")
    flags.DEFINE_string("id_field", None, "JSON Lines, CSV, TSV, Parquet: the field or column "
                        "holding each document's id; the ids are written beside the "
                        "documents' topic proportions (doc_names.txt).")


def flagged_fields() -> dict:
    """The field flags (define_reading_flags) that were given, as load_corpus's options."""
    return {name: flags.FLAGS[name].value for name in ("text_field", "text_column", "id_field")
            if flags.FLAGS[name].value is not None}
