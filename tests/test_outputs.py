"""Issue 14, section 1: launch/train.py never loses earlier work.

Every flag and the corpus are checked before anything is touched, a directory holding a model
is replaced only with --overwrite (or by --resume continuing its checkpoint), and a run killed
at any point of saving leaves its output either as it was or whole.  Kills are deterministic:
the run is started through a driver that SIGKILLs the process right after a chosen function
returns.
"""

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import ROOT, random_corpus

from saberjax import outputs, run_directory
from saberjax.corpus import save_native

FAST = ("--num_topics=3", "--iterations=2", "--backend=xla", "--test_fraction=0",
        "--top_words=0", "--num_devices=1")

# Runs launch/train.py with argv[5:] after wrapping argv[1].argv[2] (a module's function or a
# class's method, "Class.method"): a
# call whose first argument ends with argv[3] ("" for any) is followed by argv[4]: a signal's
# name ("SIGKILL") sends it to the process once the call has returned, "pause" waits, once it
# has returned, until the file PAUSE_FILE (an environment variable) is gone, and an errno name
# ("ENOSPC") raises that OSError, without a file name as a failed write does, instead of
# calling.
DRIVER = """
import errno, importlib, os, runpy, signal, sys, time
module, name, after, action, *flags = sys.argv[1:]
*owners, name = name.split(".")
target = importlib.import_module(module)
for owner in owners:
    target = getattr(target, owner)
real = getattr(target, name)
def wrapped(*args, **kwargs):
    if not str(args[0] if args else "").endswith(after):
        return real(*args, **kwargs)
    if action.startswith("E"):
        code = getattr(errno, action)
        raise OSError(code, os.strerror(code))
    result = real(*args, **kwargs)
    if action.startswith("SIG"):
        os.kill(os.getpid(), getattr(signal, action))
    while os.path.exists(os.environ["PAUSE_FILE"]):
        time.sleep(0.05)
    return result
setattr(target, name, wrapped)
sys.argv = ["launch/train.py", *flags]
runpy.run_path("launch/train.py", run_name="__main__")
"""


# Runs launch/train.py with argv[1:] on a machine whose disks have no free space left.
NO_FREE_SPACE_DRIVER = """
import runpy, shutil, sys
real = shutil.disk_usage
shutil.disk_usage = lambda path: real(path)._replace(free=0)
sys.argv = ["launch/train.py", *sys.argv[1:]]
runpy.run_path("launch/train.py", run_name="__main__")
"""


def train_command(corpus, output, *flags, kill_after=None, fail=None, pause_after=None,
                  kill_signal="SIGKILL") -> list[str]:
    """The command line of launch/train.py on corpus into output, through DRIVER when one of
    kill_after, fail or pause_after names a (module, function, first-argument suffix)."""
    args = [f"--corpus={corpus}", f"--output={output}", *FAST, *flags]
    for action, where in ((kill_signal, kill_after), ("pause", pause_after),
                          *(fail or {}).items()):
        if where:
            return [sys.executable, "-c", DRIVER, *where, action, *args]
    return [sys.executable, str(ROOT / "launch" / "train.py"), *args]


def train(corpus, output, *flags, kill_after=None, kill_signal="SIGKILL", fail=None
          ) -> subprocess.CompletedProcess:
    """launch/train.py on corpus into output (optionally killed by kill_signal after
    kill_after = (module, function, first-argument suffix) returns, or failing with fail =
    {errno name: (module, function, first-argument suffix)})."""
    return subprocess.run(train_command(corpus, output, *flags, kill_after=kill_after,
                                        fail=fail, kill_signal=kill_signal),
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


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
    "model.npz written": ("saberjax.model_files", "atomic_write", "model.npz"),
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


@pytest.mark.parametrize("point, kill_signal", [("training", "SIGKILL"), ("training", "SIGTERM"),
                                                ("saving", "SIGKILL")])
def test_a_killed_fresh_run_leaves_no_output_and_the_next_run_needs_no_flag(finished, tmp_path,
                                                                            point, kill_signal):
    output = tmp_path / "fresh"
    where = (("saberjax.trainer", "train_placed", "") if point == "training"
             else KILL_POINTS["model.npz written"])
    killed = train(finished[0], output, kill_after=where, kill_signal=kill_signal)
    assert killed.returncode == -getattr(signal, kill_signal), killed.stderr[-3000:]
    assert not output.exists()  # the run's files went to fresh.partial
    again = train(finished[0], output)
    assert again.returncode == 0, again.stderr[-3000:]
    assert num_topics(output) == 3 and os.listdir(tmp_path) == ["fresh"]


def test_a_killed_fresh_run_resumes_from_its_partial_directory(finished, tmp_path):
    output = tmp_path / "fresh"
    killed = train(finished[0], output, "--iterations=4", "--checkpoint_every=2",
                   kill_after=("saberjax.checkpoint", "save_checkpoint", ""))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert not output.exists()
    partial = tmp_path / "fresh.partial"
    plain = train(finished[0], output, "--iterations=4")
    assert plain.returncode == 2
    assert f"{partial} holds an interrupted run (checkpoint at iteration 2)" in error_line(plain)
    resumed = train(finished[0], output, "--resume", "--iterations=4", "--checkpoint_every=2")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    metrics = (output / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["iteration"] for line in metrics] == [1, 2, 3, 4]
    assert os.listdir(tmp_path) == ["fresh"]


def test_a_second_run_into_an_output_in_use_refuses_and_the_first_keeps_its_model(
        finished, model_dir, tmp_path):
    """Two --overwrite runs into one directory: the second refuses, naming the first, and
    touches nothing; the first finishes with its own model."""
    pause = tmp_path / "pause"
    pause.touch()
    before = snapshot(model_dir)
    first = subprocess.Popen(
        train_command(finished[0], model_dir, "--overwrite", "--num_topics=2",
                      pause_after=("saberjax.run_directory", "RunDirectory.open", "")),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PAUSE_FILE": str(pause)})
    try:
        deadline = time.monotonic() + 120
        while not model_dir.with_name("model.partial").exists():
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read()
            time.sleep(0.05)
        second = train(finished[0], model_dir, "--overwrite", "--num_topics=4")
        assert second.returncode == 2
        assert (f"{model_dir} is in use by another run (process {first.pid} on "
                in error_line(second))
        assert snapshot(model_dir) == before
    finally:
        pause.unlink()
        _, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr[-3000:]
    assert num_topics(model_dir) == 2
    assert os.listdir(model_dir.parent) == ["model"]  # no lock file left behind


def test_a_killed_run_leaves_its_output_free(finished, model_dir):
    killed = train(finished[0], model_dir, "--overwrite", "--num_topics=2",
                   kill_after=("saberjax.trainer", "train_placed", ""))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    again = train(finished[0], model_dir, "--overwrite", "--num_topics=2")
    assert again.returncode == 0, again.stderr[-3000:]
    assert num_topics(model_dir) == 2 and os.listdir(model_dir.parent) == ["model"]


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


def test_resume_names_a_damaged_checkpoint_and_continues_the_one_before(finished, tmp_path):
    output = tmp_path / "model"
    first = train(finished[0], output, "--iterations=4", "--checkpoint_every=2")
    assert first.returncode == 0, first.stderr[-3000:]
    damaged = output / "checkpoints" / "checkpoint-00000004.npz"
    damaged.write_bytes(damaged.read_bytes()[:-100])
    resumed = train(finished[0], output, "--resume", "--iterations=6")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    named = [line for line in resumed.stderr.splitlines() if str(damaged) in line]
    assert len(named) == 1 and "damaged" in named[0], resumed.stderr
    assert f"resuming from {output / 'checkpoints' / 'checkpoint-00000002.json'}" in \
        resumed.stderr
    metrics = (output / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["iteration"] for line in metrics] == [1, 2, 3, 4, 5, 6]


def test_resume_from_a_damaged_checkpoint_alone_names_it(finished, model_dir):
    damaged = model_dir / "checkpoints" / "checkpoint-00000002.npz"
    damaged.write_bytes(damaged.read_bytes()[:-100])
    before = snapshot(model_dir)
    result = train(finished[0], model_dir, "--resume", "--iterations=4")
    assert result.returncode == 2
    line = error_line(result)
    assert str(damaged) in line and "damaged" in line and "no checkpoint in" not in line
    assert snapshot(model_dir) == before and os.listdir(model_dir.parent) == ["model"]


def test_an_output_under_a_file_is_refused_before_training(finished, tmp_path):
    (tmp_path / "file").write_text("not a folder")
    result = train(finished[0], tmp_path / "file" / "sub")
    assert result.returncode == 2
    assert error_line(result) == (f"error: --output={tmp_path / 'file' / 'sub'}: "
                                  f"{tmp_path / 'file'} is not a directory")
    assert "training on" not in result.stderr
    assert os.listdir(tmp_path) == ["file"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into any folder")
def test_an_output_in_a_read_only_folder_is_refused_before_training(finished, tmp_path):
    (tmp_path / "locked").mkdir(mode=0o555)
    result = train(finished[0], tmp_path / "locked" / "model")
    assert result.returncode == 2
    assert f"--output={tmp_path / 'locked' / 'model'}: {tmp_path / 'locked'} is not " \
           f"writable" in error_line(result)
    assert "training on" not in result.stderr and os.listdir(tmp_path / "locked") == []


def test_an_output_without_room_for_the_model_is_refused_before_training(finished, model_dir):
    before = snapshot(model_dir)
    result = subprocess.run([sys.executable, "-c", NO_FREE_SPACE_DRIVER,
                             f"--corpus={finished[0]}", f"--output={model_dir}", *FAST,
                             "--overwrite"],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 2
    assert f"--output={model_dir}: the model needs" in error_line(result)
    assert "training on" not in result.stderr and snapshot(model_dir) == before


# Where a write fails for want of space: the model's arrays (written ahead, while the last
# iteration is scored, or at the save), and a checkpoint during training.
FULL_DISK_POINTS = {
    "model.npz": ("saberjax.files", "write_at", ""),
    "checkpoint": ("numpy", "savez", ""),
}


@pytest.mark.parametrize("point", FULL_DISK_POINTS)
def test_a_full_disk_names_the_output_and_keeps_the_previous_model(finished, model_dir, point):
    before = snapshot(model_dir)
    result = train(finished[0], model_dir, "--overwrite", "--num_topics=2",
                   "--checkpoint_every=1", fail={"ENOSPC": FULL_DISK_POINTS[point]})
    assert result.returncode == 1
    line = error_line(result)
    assert line.startswith(f"error: --output={model_dir}: no space left on device ("), line
    assert snapshot(model_dir) == before
    assert ".model.lock" not in os.listdir(model_dir.parent)


def test_an_output_lock_is_held_by_one_owner_at_a_time(tmp_path):
    first = run_directory.OutputLock.take(tmp_path / "model")
    with pytest.raises(run_directory.OutputInUseError,
                       match=f"model is in use by another run \\(process {os.getpid()} on "):
        run_directory.OutputLock.take(tmp_path / "model")
    first.release()
    assert os.listdir(tmp_path) == []
    second = run_directory.OutputLock.take(tmp_path / "model")
    second.release()
    second.release()  # once is enough


def test_a_failed_metrics_write_names_the_output(tmp_path, monkeypatch):
    run = run_directory.RunDirectory.plan(tmp_path / "model")
    run.open()

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with run.metrics_log([{"iteration": 1}]) as append:
        monkeypatch.setattr(json, "dumps", disk_full)
        with pytest.raises(OSError) as raised:
            append({"iteration": 2})
    monkeypatch.undo()
    error = run.failed(raised.value)
    assert str(error) == (f"--output={tmp_path / 'model'}: no space left on device "
                          f"({tmp_path / 'model.partial' / 'metrics.jsonl'})")
    assert os.listdir(tmp_path) == []  # nothing to resume: the working directory went too


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
