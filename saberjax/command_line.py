"""A command's command line read into its flags: positional arguments, paths, one-line
messages, and the --help that lists every flag with its default.

A command (saberjax.commands) defines its flags inside `group(...)` blocks, so that --help
shows them by group (GROUPS), and describes the rest of its command line with an
`Interface`: which flags may also be given as positional arguments, which are required, and
which hold paths (their `~` expanded as the shell would have).  `parse` reads the command
line as absl does and then applies the Interface; every mistake is a flags.Error or
app.UsageError with a one-line message in one form, ``--seed: 'abc' is not an integer``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import sys
import textwrap

from absl import app, flags

# --help's sections, in order; a flag defined outside every group() is listed under OTHER
GROUPS = ("model", "run", "data", "devices", "output")
OTHER = "other"
HELP_ARGUMENTS = ("--help", "-help", "-h", "-?", "--helpshort", "-helpshort")
FULL_HELP_ARGUMENTS = ("--helpfull", "-helpfull")
_GROUP_ATTRIBUTE = "saberjax_group"  # where group() records a flag's group, on the absl Flag
_WIDTH = 100


@dataclasses.dataclass(frozen=True)
class Interface:
    """What a command's command line holds beyond its flags' definitions.

    positionals: flags that may be given as positional arguments instead, in their order;
    required: flags without which the command cannot run; paths: flags naming files or
    folders (`~` expanded)."""

    positionals: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()


class PathParser(flags.ArgumentParser):
    """A string flag naming a path: `~` and `~user` expanded, as a shell does for words."""

    def parse(self, argument):
        return os.path.expanduser(argument) if isinstance(argument, str) else argument

    def flag_type(self) -> str:
        return "path"


@contextlib.contextmanager
def group(name: str, flag_values: flags.FlagValues = flags.FLAGS):
    """The flags defined inside the block are listed under `name` (one of GROUPS) by --help."""
    if name not in GROUPS:
        raise ValueError(f"flag group {name!r}: must be one of {', '.join(GROUPS)}")
    before = set(flag_values)
    yield
    for flag_name in set(flag_values) - before:
        setattr(flag_values[flag_name], _GROUP_ATTRIBUTE, name)


def group_of(flag: flags.Flag) -> str:
    """The group a flag was defined in (OTHER when none)."""
    return getattr(flag, _GROUP_ATTRIBUTE, OTHER)


def command_flags(flag_values: flags.FlagValues = flags.FLAGS) -> list[flags.Flag]:
    """The flags defined by saberjax (absl's own, --verbosity and the like, left out)."""
    return [flag for module, defined in flag_values.flags_by_module_dict().items()
            if not module.startswith("absl.") for flag in defined]


def use_path_parsers(names, flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Make the string flags `names` path flags (PathParser), wherever they were defined."""
    for name in names:
        flag_values[name].parser = PathParser()


def parse(argv: list[str], interface: Interface, usage: str,
          flag_values: flags.FlagValues = flags.FLAGS) -> list[str]:
    """The command line `argv` read into `flag_values` (argv[0] the program's name), then
    the positional arguments given to their flags and the required flags checked; returns
    [argv[0]].  --help prints `usage` and the flags by group, and exits; --helpfull adds
    absl's own flags (--verbosity, --logtostderr, ...)."""
    arguments = _before_terminator(argv[1:])
    full = any(argument in FULL_HELP_ARGUMENTS for argument in arguments)
    if full or any(argument in HELP_ARGUMENTS for argument in arguments):
        print(help_text(argv[0], usage, interface, flag_values))
        if full:
            print(f"\nabsl's flags:\n{absl_flags_help(flag_values)}")
        sys.exit(0)
    try:
        arguments = flag_values(argv)[1:]
        _take_positionals(arguments, interface, flag_values)
        flag_values.validate_all_flags()
    except flags.Error as error:
        raise flags.Error(_readable(error, flag_values)) from None
    missing = [name for name in interface.required if flag_values[name].value is None]
    if missing:
        raise app.UsageError(f"--{missing[0]} is required{_positional_hint(missing[0], interface)}")
    return argv[:1]


def _before_terminator(arguments: list[str]) -> list[str]:
    return arguments[:arguments.index("--")] if "--" in arguments else arguments


def _take_positionals(arguments: list[str], interface: Interface,
                      flag_values: flags.FlagValues) -> None:
    """Give each positional argument to its flag: an error when there are more arguments than
    the command takes, or when the flag was given too with another value."""
    if len(arguments) > len(interface.positionals):
        extra = arguments[len(interface.positionals):]
        takes = (f"takes {_positional_usage(interface)}" if interface.positionals
                 else "takes no positional arguments, only flags")
        raise app.UsageError(f"unexpected argument {extra[0]!r}: the command {takes}")
    for name, argument in zip(interface.positionals, arguments):
        flag = flag_values[name]
        value = flag.parser.parse(argument)
        if flag.present and flag.value != value:
            raise app.UsageError(f"--{name}={flag.value} and the argument {argument!r} differ; "
                                 f"give the {name} once")
        flag.value = value
        flag.using_default_value = False


def _positional_hint(name: str, interface: Interface) -> str:
    if name not in interface.positionals:
        return ""
    position = ("first", "second", "third")[interface.positionals.index(name)]
    return f" (or give it as the {position} argument: {_positional_usage(interface)})"


def _positional_usage(interface: Interface) -> str:
    return " ".join(name.upper() if name in interface.required else f"[{name.upper()}]"
                    for name in interface.positionals)


def _readable(error: flags.Error, flag_values: flags.FlagValues) -> str:
    """absl's message of a flag that failed, in the form ``--NAME: VALUE problem``."""
    message = str(error)
    if isinstance(error, flags.UnrecognizedFlagError):
        suggestion = message.partition(". Did you mean")[2].strip(" :?")
        return (f"--{error.flagname}: no such flag ("
                + (f"did you mean --{suggestion}? " if suggestion else "")
                + "--help lists the flags)")
    missing = re.match(r"Missing value for flag --(\w+)", message)
    if missing:
        return f"--{missing.group(1)}: a value is missing (--{missing.group(1)}=VALUE)"
    failed = re.match(r"flag --(\w+)=(.*?): (.*)$", message, re.S)
    if not failed or failed.group(1) not in flag_values:
        return message
    name, value, problem = failed.groups()
    not_parsed = _parse_failure(flag_values[name], problem)
    if not_parsed:
        return f"--{name}: {value!r} {not_parsed}"
    for prefix in (f"--{name}: ", f"--{name} ", f"{value} "):
        if problem.startswith(prefix):
            problem = problem[len(prefix):]
            break
    return f"--{name}: {value} {problem}"


def _parse_failure(flag: flags.Flag, problem: str) -> str | None:
    """What a value that did not parse is not ("is not an integer"), or None when the value
    parsed and failed a check."""
    if problem.startswith("invalid literal for int()"):
        return "is not an integer"
    if problem.startswith("could not convert string to float"):
        return "is not a number"
    if problem.startswith("value should be one of"):
        return f"is not one of {', '.join(flag.parser.enum_values)}"
    if "Non-boolean argument" in problem:
        return "is not true or false"
    return None


def help_text(program: str, usage: str, interface: Interface,
              flag_values: flags.FlagValues = flags.FLAGS) -> str:
    """`usage`, the command line's form and every flag the command defined, by group, each
    with its default."""
    by_group: dict[str, list[flags.Flag]] = {}
    for flag in sorted(command_flags(flag_values), key=lambda flag: flag.name):
        by_group.setdefault(group_of(flag), []).append(flag)
    positionals = _positional_usage(interface)
    lines = [usage.strip(), "", f"usage: {program} {positionals + ' ' if positionals else ''}"
             f"[FLAGS]   (--helpfull also lists absl's own flags: --verbosity, ...)"]
    for name in (*GROUPS, OTHER):
        if by_group.get(name):
            lines += ["", f"{name}:"]
            lines += [line for flag in by_group[name] for line in _flag_help(flag)]
    return "\n".join(lines)


def absl_flags_help(flag_values: flags.FlagValues = flags.FLAGS) -> str:
    """absl's help of its own flags, module by module."""
    return "\n".join(flag_values.module_help(module)
                     for module in sorted(flag_values.flags_by_module_dict())
                     if module.startswith("absl."))


def _flag_help(flag: flags.Flag) -> list[str]:
    """--NAME=FORM (default: VALUE), then the flag's help, wrapped and indented."""
    kind, text = flag.flag_type(), flag.help or ""
    choices = getattr(flag.parser, "enum_values", None)
    if choices:  # absl begins an enum's help with <a|b|c>: the form shows them
        text = text.removeprefix(f"<{'|'.join(choices)}>: ")
    if kind == "bool":
        head = f"  --[no]{flag.name} (default: {'true' if flag.default else 'false'})"
    else:
        form = "|".join(choices) if choices else {"int": "N", "float": "X", "path": "PATH"}.get(
            kind, "A,B" if "list" in kind else "TEXT")
        default = (",".join(map(str, flag.default)) if isinstance(flag.default, list)
                   else None if flag.default is None else str(flag.default))
        head = f"  --{flag.name}={form}" + (f" (default: {default})" if default else "")
    return [head] + textwrap.wrap(text, _WIDTH, initial_indent=" " * 6,
                                  subsequent_indent=" " * 6)
