"""The command line: one `saberjax` command with a subcommand per task.

    saberjax train [FLAGS]        # also: python -m saberjax train, python launch/train.py
    saberjax evaluate --model=DIR
    saberjax --version

Each subcommand is a module here with `define_flags()` (its flags, in command_line.group
blocks), `INTERFACE` (command_line.Interface: its positional arguments, required flags and
path flags) and `main(argv)`; its flags are defined only when it runs (`run`), so that
commands sharing a flag name (--corpus, --output) never clash in absl's one registry.
launch/*.py call `run` with their name.
"""

from __future__ import annotations

import functools
import importlib
import sys

from saberjax import __version__, cli, command_line
from saberjax.platform import reuse_freed_memory, use_every_cpu_core

# subcommand -> what it does (the summary `saberjax --help` lists)
COMMANDS = {
    "train": "train a topic model and write its model directory",
    "evaluate": "score a trained model on held-out documents",
    "infer": "topic proportions of new documents under a trained model",
    "report": "convergence plot and topic pages of a trained model",
    "bench": "throughput benchmark of the trainer, phase by phase",
    "synth": "write a synthetic corpus drawn from the LDA model",
}
PROGRAM = "saberjax"


def run(name: str, argv: list[str] | None = None) -> None:
    """Run subcommand `name` with `argv` (program name first; default sys.argv): its flags
    defined, parsed and checked, its errors reported in one line (cli.run_main)."""
    module = importlib.import_module(f"saberjax.commands.{name}")
    use_every_cpu_core()  # before jax starts (importing it does not start it)
    reuse_freed_memory()
    module.define_flags()
    with command_line.group("output"):
        cli.define_flags()
    command_line.use_path_parsers(module.INTERFACE.paths)
    parse = functools.partial(command_line.parse, interface=module.INTERFACE,
                              usage=module.__doc__)
    cli.run_main(module.main, list(sys.argv if argv is None else argv), parse)


def main(argv: list[str] | None = None) -> None:
    """The `saberjax` console command: `saberjax COMMAND [FLAGS]`, `saberjax --version`."""
    argv = list(sys.argv if argv is None else argv)
    first = argv[1] if len(argv) > 1 else ""
    if first == "--version":
        print(f"{PROGRAM} {__version__}")
        return
    if first in ("", "-h", "--help", "help"):
        print(usage(), file=sys.stdout if first else sys.stderr)
        sys.exit(0 if first else 2)
    if first not in COMMANDS:
        print(f"error: unknown command {first!r}; choose from {', '.join(COMMANDS)} "
              f"({PROGRAM} --help lists them)", file=sys.stderr)
        sys.exit(2)
    run(first, [f"{PROGRAM} {first}", *argv[2:]])


def usage() -> str:
    """The command list `saberjax --help` prints."""
    width = max(map(len, COMMANDS))
    lines = [f"usage: {PROGRAM} COMMAND [FLAGS]   ({PROGRAM} COMMAND --help: its flags)", "",
             "commands:"]
    lines += [f"  {name:<{width}}  {summary}" for name, summary in COMMANDS.items()]
    lines += ["", f"  {PROGRAM} --version   the installed version"]
    return "\n".join(lines)

