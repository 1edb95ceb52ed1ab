"""Issue 14, section 1: launch/train.py never loses earlier work.

Every flag and the corpus are checked before anything is touched, a directory holding a model
is replaced only with --overwrite (or by --resume continuing its checkpoint), and a run killed
at any point of saving leaves its output either as it was or whole.  Kills are deterministic:
the run is started through a driver that SIGKILLs the process right after a chosen function
returns.
"""

import json
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
from helpers import ROOT, random_corpus

from saberjax import outputs
from saberjax.corpus import save_native

FAST = ("--num_topics=3", "--iterations=2", "--backend=xla", "--test_fraction=0",
        "--top_words=0", "--num_devices=1")

# Runs launch/train.py with argv[3:], SIGKILLing itself once argv[1].argv[2] (a module's
# function) has returned from a call whose first argument ends with argv[3] ("" for any).
KILL_DRIVER = """
import importlib, os, runpy, signal, sys
module, name, after, *flags = sys.argv[1:]
target = importlib.import_module(module)
real = getattr(target, name)
def killing(*args, **kwargs):
    result = real(*args, **kwargs)
    if str(args[0] if args else "").endswith(after):
        os.kill(os.getpid(), signal.SIGKILL)
    return result
setattr(target, name, killing)
sys.argv = ["launch/train.py", *flags]
runpy.run_path("launch/train.py", run_name="__main__")
"""


def train(corpus, output, *flags, kill_after=None) -> subprocess.CompletedProcess:
    """launch/train.py on corpus into output (optionally killed after kill_after = (module,
    function, first-argument suffix) returns)."""
    args = [f"--corpus={corpus}", f"--output={output}", *FAST, *flags]
    command = ([sys.executable, "-c", KILL_DRIVER, *kill_after, *args] if kill_after
               else [sys.executable, str(ROOT / "launch" / "train.py"), *args])
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300)


def snapshot(directory) -> dict[str, bytes]:
    """Every file under directory (relative path -> content)."""
    return {str(path.relative_to(directory)): path.read_bytes()
            for path in sorted(directory.rglob("*")) if path.is_file()}


def num_topics(model_dir) -> int:
    with np.load(model_dir / "model.npz") as model:
        topics = model["word_topic_counts"].shape[1]
    assert json.loads((model_dir / "config.json").read_text())["num_topics"] == topics
    return topics


def error_line(result) -> str:
    """The error line a failing launcher printed last (asserting there is one, and no
    traceback; log lines may come before it)."""
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert [line.startswith("error: ") for line in lines].count(True) == 1, result.stderr
    assert lines[-1].startswith("error: "), result.stderr
    return lines[-1]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """(corpus, model directory) of a finished 3-topic run with a report and a checkpoint."""
    root = tmp_path_factory.mktemp("finished")
    save_native(random_corpus(num_docs=40, num_words=30, mean_length=20), root / "corpus")
    result = train(root / "corpus", root / "model", "--report", "--checkpoint_every=2")
    assert result.returncode == 0, result.stderr[-3000:]
    return root / "corpus", root / "model"


@pytest.fixture
def model_dir(finished, tmp_path):
    """A copy of the finished model directory, alone in tmp_path."""
    shutil.copytree(finished[1], tmp_path / "model")
    return tmp_path / "model"


@pytest.mark.parametrize("flags, status, message", [
    ((), 2, "already holds a model (K = 3, 2 iterations): --overwrite replaces it, --resume "
            "continues its checkpoint (iteration 2), or choose another --output"),
    (("--num_topics=5",), 2, "already holds a model"),
    (("--alpha=-1",), 2, "--alpha"),
    (("--iterations=0",), 2, "--iterations: 0 must be at least 1"),
    (("--iterations=-3",), 2, "--iterations: -3 must be at least 1"),
    (("--num_topics=0", "--overwrite"), 2, "--num_topics: 0 must be at least 2"),
    (("--test_fraction=1", "--overwrite"), 2, "--test_fraction"),
    (("--resume", "--num_topics=4"), 1, "num_topics=3 (this run: 4)"),
    (("--corpus=/nonexistent", "--overwrite"), 1, "/nonexistent: no such file or directory"),
])
def test_a_failing_command_leaves_the_model_directory_untouched(finished, model_dir, flags,
                                                                 status, message):
    before = snapshot(model_dir)
    result = train(finished[0], model_dir, *flags)
    assert result.returncode == status
    assert message in error_line(result)
    assert snapshot(model_dir) == before
    assert os.listdir(model_dir.parent) == ["model"]


def test_resume_without_a_checkpoint_is_an_error_and_changes_nothing(finished, model_dir):
    shutil.rmtree(model_dir / "checkpoints")
    before = snapshot(model_dir)
    result = train(finished[0], model_dir, "--resume", "--iterations=30")
    assert result.returncode == 2
    assert "--resume: no checkpoint in" in error_line(result)
    assert snapshot(model_dir) == before and os.listdir(model_dir.parent) == ["model"]


@pytest.mark.parametrize("flag", ["--iterations=0", "--iterations=-3", "--beta=0"])
def test_bad_flags_create_no_output(finished, tmp_path, flag):
    result = train(finished[0], tmp_path / "new", flag)
    assert result.returncode == 2 and flag.split("=")[0] in error_line(result)
    assert os.listdir(tmp_path) == []


def test_overwrite_replaces_the_whole_directory(finished, model_dir):
    result = train(finished[0], model_dir, "--overwrite", "--num_topics=2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert num_topics(model_dir) == 2
    assert sorted(os.listdir(model_dir)) == ["config.json", "metrics.jsonl", "model.npz",
                                             "vocab.txt"]  # the old report/ went with it
    assert os.listdir(model_dir.parent) == ["model"]


def test_resume_continues_a_finished_runs_checkpoint(finished, model_dir):
    result = train(finished[0], model_dir, "--resume", "--iterations=4", "--checkpoint_every=2")
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = (model_dir / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["iteration"] for line in metrics] == [1, 2, 3, 4]
    assert sorted(os.listdir(model_dir / "checkpoints")) == ["checkpoint-00000004.json",
                                                             "checkpoint-00000004.npz"]
    assert os.listdir(model_dir.parent) == ["model"]


def test_a_directory_holding_other_files_is_never_written_into(finished, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    result = train(finished[0], tmp_path / "mine", "--overwrite")
    assert result.returncode == 2
    assert "holds files that are not a saberjax model or training run (notes.txt)" in \
        error_line(result)
    assert os.listdir(tmp_path / "mine") == ["notes.txt"] and os.listdir(tmp_path) == ["mine"]


# Where a run is killed while it saves: the model file written into the assembled directory
# (before it replaces the output), and the exchange that puts it in place (before the old one is
# deleted).
KILL_POINTS = {
    "model.npz written": ("saberjax.model", "atomic_write", "model.npz"),
    "directories exchanged": ("saberjax.outputs", "replace_directory", ""),
}


@pytest.mark.parametrize("point", KILL_POINTS)
def test_a_run_killed_while_saving_leaves_the_old_model_or_the_new_one_whole(finished,
                                                                             model_dir, point):
    before = snapshot(model_dir)
    killed = train(finished[0], model_dir, "--overwrite", "--num_topics=2",
                   kill_after=KILL_POINTS[point])
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    if point == "model.npz written":
        assert snapshot(model_dir) == before
    else:
        assert num_topics(model_dir) == 2
        assert sorted(os.listdir(model_dir)) == ["config.json", "metrics.jsonl", "model.npz",
                                                 "vocab.txt"]
    again = train(finished[0], model_dir, "--overwrite", "--num_topics=2")
    assert again.returncode == 0, again.stderr[-3000:]
    assert num_topics(model_dir) == 2 and os.listdir(model_dir.parent) == ["model"]


def test_a_fresh_run_killed_while_saving_leaves_no_model_and_is_not_silently_replaced(
        finished, tmp_path):
    output = tmp_path / "fresh"
    killed = train(finished[0], output, kill_after=KILL_POINTS["model.npz written"])
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert os.listdir(output) == ["metrics.jsonl"]  # the model's files never reached it
    again = train(finished[0], output)
    assert again.returncode == 2
    assert "holds the files of an unfinished run without a checkpoint: --overwrite replaces it" \
        in error_line(again)
    again = train(finished[0], output, "--overwrite")
    assert again.returncode == 0, again.stderr[-3000:]
    assert num_topics(output) == 3 and os.listdir(tmp_path) == ["fresh"]


def test_an_interrupted_run_is_resumed_not_silently_discarded(finished, model_dir):
    killed = train(finished[0], model_dir, "--overwrite", "--num_topics=2", "--iterations=4",
                   "--checkpoint_every=2", kill_after=("saberjax.checkpoint", "save_checkpoint",
                                                       ""))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert num_topics(model_dir) == 3  # the old model, untouched
    partial = model_dir.with_name("model.partial")
    assert "checkpoint-00000002.json" in os.listdir(partial / "checkpoints")

    plain = train(finished[0], model_dir, "--num_topics=2", "--iterations=4")
    assert plain.returncode == 2
    assert (f"{partial} holds an interrupted run (checkpoint at iteration 2): --resume "
            f"continues it, --overwrite discards it") in error_line(plain)

    resumed = train(finished[0], model_dir, "--resume", "--num_topics=2", "--iterations=4",
                    "--checkpoint_every=2")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert num_topics(model_dir) == 2 and os.listdir(model_dir.parent) == ["model"]
    metrics = (model_dir / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["iteration"] for line in metrics] == [1, 2, 3, 4]


def test_replace_directory_swaps_whole_directories(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "a").write_text("old")
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "b").write_text("new")
    outputs.replace_directory(tmp_path / "new", tmp_path / "old")
    assert os.listdir(tmp_path) == ["old"] and os.listdir(tmp_path / "old") == ["b"]


def earlier_file(tmp_path, finished, model_dir):
    (tmp_path / "theta.npy").write_text("earlier work")
    return tmp_path / "theta.npy"


def earlier_corpus(tmp_path, finished, model_dir):
    return shutil.copytree(finished[0], tmp_path / "corpus")


def the_model(tmp_path, finished, model_dir):
    return model_dir


@pytest.mark.parametrize("launcher, flags, earlier", [
    ("infer.py", ("--model={model}", "--corpus={corpus}", "--output={target}"), earlier_file),
    ("synth.py", ("--num_docs=5", "--num_words=10", "--output={target}"), earlier_corpus),
    ("report.py", ("--model={model}", "--output={target}"), the_model),
])
def test_other_launchers_never_replace_earlier_outputs_unasked(finished, model_dir, tmp_path,
                                                               launcher, flags, earlier):
    target = earlier(tmp_path, finished, model_dir)
    before = snapshot(target) if target.is_dir() else target.read_bytes()
    result = subprocess.run(
        [sys.executable, str(ROOT / "launch" / launcher),
         *(flag.format(model=model_dir, corpus=finished[0], target=target) for flag in flags)],
        capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 2
    line = error_line(result)
    assert str(target) in line and ("--overwrite replaces it" in line or "never replaced" in line)
    assert (snapshot(target) if target.is_dir() else target.read_bytes()) == before
