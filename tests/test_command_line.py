"""Issue 24 and 31: the command line does what it says.  Positional arguments are taken or
refused, never ignored; --help lists every flag with its default by group; a flag that does
not parse is one line; `~` is expanded; expected conditions never say "a bug?"; the log is
time and message; tools/run.sh keeps the caller's directory; `saberjax` / `python -m
saberjax` run the same commands as launch/*.py."""

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys

import pytest

from helpers import ROOT, random_corpus
from saberjax import cli, command_line
from saberjax.commands import COMMANDS
from saberjax.corpus import save_native

FAST = ("--num_topics=3", "--iterations=2", "--backend=xla", "--top_words=0", "--nocache")


def saberjax(*arguments, cwd, env=None, timeout=300) -> subprocess.CompletedProcess:
    """`python -m saberjax ARGUMENTS` as a user runs it, whatever its exit."""
    return subprocess.run([sys.executable, "-m", "saberjax", *arguments], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=timeout)


def error_of(result) -> str:
    """The one error line of a failed command (asserting there is one and no traceback)."""
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert [line for line in lines if line.startswith("error: ")] == lines[-1:], result.stderr
    return lines[-1]


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A home folder holding a small corpus, and a model trained on it as
    `saberjax train ~/corpus --output=~/model` with HOME there (from another folder)."""
    home = tmp_path_factory.mktemp("home")
    save_native(random_corpus(num_docs=40, num_words=30, mean_length=20, seed=4),
                home / "corpus")
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    trained = saberjax("train", "~/corpus", "--output=~/model", *FAST, cwd=elsewhere,
                       env=dict(os.environ, HOME=str(home), PYTHONPATH=str(ROOT)))
    assert trained.returncode == 0, trained.stderr[-3000:]
    return home, trained


def test_train_takes_the_corpus_positionally_and_expands_the_home_folder(home):
    folder, trained = home
    config = json.loads((folder / "model" / "config.json").read_text())
    assert config["corpus_path"] == str(folder / "corpus")
    assert json.loads(trained.stdout.splitlines()[-1])["output"] == str(folder / "model")


def test_the_log_is_time_and_message_unless_the_prefix_is_asked_for(home, tmp_path):
    _, trained = home
    logged = [line for line in trained.stderr.splitlines() if " training on " in line]
    assert len(logged) == 1 and re.fullmatch(r"\d\d:\d\d:\d\d training on \S+: .*", logged[0])
    assert not re.search(r"^[IWE]\d{4} ", trained.stderr, re.M)
    for asked in ("--log_prefix", "--verbosity=1"):
        prefixed = saberjax("train", str(home[0] / "corpus"), f"--output={tmp_path / asked}",
                            asked, *FAST, cwd=tmp_path)
        assert prefixed.returncode == 0, prefixed.stderr[-3000:]
        assert re.search(r"^I\d{4} [\d:.]+ +\d+ train\.py:\d+\] training on ", prefixed.stderr,
                         re.M), prefixed.stderr


def test_the_default_log_leaves_out_other_libraries_info_lines():
    def record(name, level):
        return logging.LogRecord(name, level, __file__, 1, "message", None, None)
    assert cli.own_info_only(record("absl", logging.INFO))
    assert cli.own_info_only(record("saberjax.trainer", logging.INFO))
    assert not cli.own_info_only(record("numexpr.utils", logging.INFO))
    assert cli.own_info_only(record("numexpr.utils", logging.WARNING))


def test_evaluate_takes_the_model_and_corpus_positionally(home, tmp_path):
    folder, _ = home
    by_flag = saberjax("evaluate", f"--model={folder / 'model'}",
                       f"--corpus={folder / 'corpus'}", "--coherence=", cwd=tmp_path)
    positional = saberjax("evaluate", str(folder / "model"), str(folder / "corpus"),
                          "--coherence=", cwd=tmp_path)
    assert by_flag.returncode == 0 == positional.returncode, positional.stderr[-3000:]
    score = [json.loads(result.stdout.splitlines()[-1])["heldout_loglik_per_token"]
             for result in (by_flag, positional)]
    assert score[0] == score[1]
    with_model_only = saberjax("evaluate", str(folder / "model"), "--coherence=", cwd=tmp_path)
    assert json.loads(with_model_only.stdout.splitlines()[-1])["documents"] < 40


@pytest.mark.parametrize("arguments, message", [
    (("train", "a", "b"), "error: unexpected argument 'b': the command takes [CORPUS]"),
    (("train", "--corpus=a", "b"), "error: --corpus=a and the argument 'b' differ"),
    (("evaluate", "m", "c", "x"), "error: unexpected argument 'x'"),
    (("report", "m", "x"), "error: unexpected argument 'x'"),
    (("infer", "m"), "error: --corpus is required (or give it as the second argument"),
    (("synth", "x", "--output=o"), "error: unexpected argument 'x': the command takes no "
                                   "positional arguments"),
    (("bench", "x"), "error: unexpected argument 'x'"),
    (("evaluate",), "error: --model is required (or give it as the first argument"),
    (("train", "--seed=abc"), "error: --seed: 'abc' is not an integer"),
    (("train", "--num_topics=1e7"), "error: --num_topics: '1e7' is not an integer"),
    (("train", "--alpha=big"), "error: --alpha: 'big' is not a number"),
    (("train", "--backend=cuda"), "error: --backend: 'cuda' is not one of auto, xla, pallas"),
    (("train", "--resume=maybe"), "error: --resume: 'maybe' is not true or false"),
    (("train", "--num_topics=1"), "error: --num_topics: 1 must be at least 2"),
    (("train", "--seeed=1"), "error: --seeed: no such flag (did you mean --seed?"),
    (("train", "--corpus=~/no_such_corpus"), "no_such_corpus: no such file or directory"),
])
def test_a_command_line_mistake_is_one_line_naming_it(tmp_path, arguments, message):
    result = saberjax(*arguments, cwd=tmp_path, env=dict(os.environ, HOME=str(tmp_path)))
    assert message in error_of(result)
    if "~" in " ".join(arguments):
        assert str(tmp_path / "no_such_corpus") in error_of(result)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("command", list(COMMANDS))
def test_help_lists_every_flag_of_the_command_with_its_default_by_group(command, tmp_path):
    shown = saberjax(command, "--help", cwd=tmp_path, timeout=120)
    assert shown.returncode == 0, shown.stderr
    listing = shown.stdout.split("\nusage: ", 1)[1]  # after the command's own text
    sections = re.findall(r"^(\w+):\n((?:  .*\n?)+)", listing, re.M)
    assert [name for name, _ in sections] == [group for group in command_line.GROUPS
                                             if group in dict(sections)]
    for name, (has_default, group) in defined_flags(command).items():
        head = re.search(rf"^  --(\[no\])?{name}\b.*$", dict(sections)[group], re.M)
        assert head, f"--{name} not under {group}: in {command} --help"
        assert ("(default: " in head.group(0)) == has_default, head.group(0)
    assert not re.search(r"^  --verbosity", shown.stdout, re.M)  # absl's own: --helpfull
    full = saberjax(command, "--helpfull", cwd=tmp_path, timeout=120)
    assert full.returncode == 0 and "--[no]log_prefix" in full.stdout
    assert re.search(r"^  -v,--verbosity", full.stdout, re.M)


def defined_flags(command: str) -> dict[str, tuple[bool, str]]:
    """The flags `saberjax COMMAND` defines (name -> (has a default, group)), read in a
    process of their own: they live in absl's global registry."""
    script = f"""
import json
from saberjax import cli, command_line
from saberjax.commands import {command} as command
command.define_flags()
with command_line.group("output"):
    cli.define_flags()
print(json.dumps({{flag.name: [flag.default not in (None, "", []), command_line.group_of(flag)]
                  for flag in command_line.command_flags()}}))
"""
    return {name: tuple(entry) for name, entry in json.loads(subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True,
        cwd=ROOT).stdout).items()}


def test_expected_conditions_never_say_a_bug():
    planned = MemoryError("the model needs 9.0 GB of host memory; --host_memory_gb=4 allows 4.0")
    assert cli.error_line(planned) == f"error: {planned}"
    assert cli.error_line(MemoryError()).startswith("error: the host ran out of memory")
    assert "a bug?" in cli.error_line(KeyError("alpha"))
    assert cli.exit_status(planned) == 1


def test_the_saberjax_command_lists_its_commands_and_version(tmp_path):
    from saberjax import __version__

    listed = saberjax("--help", cwd=tmp_path)
    assert listed.returncode == 0 and all(name in listed.stdout for name in COMMANDS)
    assert saberjax("--version", cwd=tmp_path).stdout.strip() == f"saberjax {__version__}"
    assert "unknown command 'fit'" in error_of(saberjax("fit", cwd=tmp_path))
    assert saberjax(cwd=tmp_path).returncode == 2


def test_run_sh_keeps_the_callers_directory_for_the_users_paths(tmp_path):
    """bash tools/run.sh train --corpus=texts --output=runs/x from another folder: both paths
    are the caller's.  The venv is this interpreter behind a wrapper that refuses pip, with
    run.sh's install stamp, so that run.sh finds it set up and never installs anything."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    wrapper = venv / "bin" / "python"
    wrapper.write_text(f'#!/bin/sh\n[ "$1 $2" = "-m pip" ] && exit 1\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    gpu = shutil.which("nvidia-smi") is not None and subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True).returncode == 0
    stamp = hashlib.sha256((ROOT / "pyproject.toml").read_bytes())
    stamp.update(("\0" + ("test,cuda" if gpu else "test") + "\0" + str(ROOT)).encode())
    (venv / ".saberjax-install-stamp").write_text(stamp.hexdigest() + "\n")
    caller = tmp_path / "caller"
    save_native(random_corpus(num_docs=30, num_words=20, mean_length=15, seed=5),
                caller / "texts")
    result = subprocess.run(["bash", str(ROOT / "tools" / "run.sh"), "train", "--corpus=texts",
                             "--output=runs/x", *FAST], capture_output=True, text=True,
                            cwd=caller, env=dict(os.environ, SABERJAX_VENV=str(venv)),
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (caller / "runs" / "x" / "model.npz").is_file()
    assert not (ROOT / "runs" / "x").exists()
