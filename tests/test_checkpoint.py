"""Checkpoints: a killed run resumes to the bit-identical model; damaged ones are never used."""

import dataclasses
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import ROOT, random_corpus

from saberjax import checkpoint, trainer
from saberjax.execution.placement import place
from saberjax.config import Hyperparams
from saberjax.corpus import load_bundled, save_native

# two chunks whatever the device count (the corpus has about 800 tokens)
CONFIG = trainer.TrainConfig(num_topics=4, iterations=4, backend="xla", checkpoint_every=2,
                             chunk_tokens=400, optimize_alpha_every=1)


# Training subprocesses allocate device memory as they need it: on a GPU the test process and
# two trainings share one device.
SUBPROCESS_ENV = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


def train_command(corpus, output, *flags):
    """launch/train.py on every device (a mesh of two on CI's two cores)."""
    return [sys.executable, str(ROOT / "launch" / "train.py"), f"--corpus={corpus}",
            f"--output={output}", "--num_topics=8", "--iterations=30", "--checkpoint_every=2",
            "--backend=xla", "--test_fraction=0", "--num_devices=0", *flags]


def word_topic_counts(output):
    with np.load(output / "model.npz") as model:
        return model["word_topic_counts"]


def wait_for_checkpoint_beyond(directory, iteration, process, log, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if any(int(path.stem.split("-")[1]) > iteration
               for path in directory.glob("checkpoint-*.json")):
            return
        time.sleep(0.01)
    raise AssertionError(f"no checkpoint beyond iteration {iteration} appeared in {directory} "
                         f"while training ran: {log.read_text()[-2000:]}")


def test_killed_run_resumes_to_the_bit_identical_model(tmp_path):
    corpus = tmp_path / "kos1000"
    save_native(load_bundled("kos").subset(np.arange(1000)), corpus)
    log = tmp_path / "killed.log"
    uninterrupted = subprocess.Popen(train_command(corpus, tmp_path / "full"), cwd=ROOT,
                                     env=SUBPROCESS_ENV, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
    with open(log, "w") as log_file:
        killed = subprocess.Popen(train_command(corpus, tmp_path / "killed"), cwd=ROOT,
                                  env=SUBPROCESS_ENV, stdout=subprocess.DEVNULL,
                                  stderr=log_file)
    wait_for_checkpoint_beyond(tmp_path / "killed.partial" / "checkpoints", 4, killed, log)
    assert killed.poll() is None, "training finished before it could be killed"
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert not (tmp_path / "killed").exists()

    resumed = subprocess.run(train_command(corpus, tmp_path / "killed", "--resume"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             cwd=ROOT, env=SUBPROCESS_ENV, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stderr
    assert uninterrupted.wait(timeout=300) == 0
    np.testing.assert_array_equal(word_topic_counts(tmp_path / "killed"),
                                  word_topic_counts(tmp_path / "full"))
    metrics = (tmp_path / "killed" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["iteration"] for line in metrics] == list(range(1, 31))
    assert sorted(os.listdir(tmp_path / "killed" / "checkpoints")) == [
        "checkpoint-00000028.json", "checkpoint-00000028.npz",
        "checkpoint-00000030.json", "checkpoint-00000030.npz"]


@pytest.fixture(scope="module")
def checkpointed_run(tmp_path_factory):
    """(corpus, folder) of a 4-iteration run checkpointed at 2 and 4 into folder/checkpoints,
    its model in folder/model.npz."""
    directory = tmp_path_factory.mktemp("run")
    corpus = random_corpus(num_docs=40, num_words=30, mean_length=20)
    result = trainer.train(corpus, CONFIG, checkpoint_dir=directory / "checkpoints")
    result.model.write_arrays(directory / "model.npz")
    return corpus, directory


def test_the_newest_two_checkpoints_are_kept_with_no_temporary_files(checkpointed_run):
    _, directory = checkpointed_run
    assert sorted(os.listdir(directory / "checkpoints")) == [
        "checkpoint-00000002.json", "checkpoint-00000002.npz",
        "checkpoint-00000004.json", "checkpoint-00000004.npz"]


def test_a_save_deletes_all_but_the_newest_checkpoint_first(tmp_path, monkeypatch):
    """Never more than two checkpoints on disk, a save under way included."""
    corpus = random_corpus(num_docs=40, num_words=30, mean_length=20)
    most = []
    real_atomic_write = checkpoint.atomic_write

    def counting(path, write, mode="wb"):
        real_atomic_write(path, write, mode)
        most.append(len(list(tmp_path.glob("checkpoint-*.npz"))))

    monkeypatch.setattr(checkpoint, "atomic_write", counting)
    trainer.train(corpus, dataclasses.replace(CONFIG, checkpoint_every=1), checkpoint_dir=tmp_path)
    assert max(most) == 2
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "checkpoint-00000003.json", "checkpoint-00000003.npz",
        "checkpoint-00000004.json", "checkpoint-00000004.npz"]


def test_resumed_training_matches_uninterrupted_training(checkpointed_run):
    corpus, directory = checkpointed_run
    longer = dataclasses.replace(CONFIG, iterations=6, checkpoint_every=0)
    resumed = trainer.train(corpus, longer,
                            resume_from=directory / "checkpoints" / "checkpoint-00000002.json")
    uninterrupted = trainer.train(corpus, longer)
    np.testing.assert_array_equal(resumed.model.word_topic_counts,
                                  uninterrupted.model.word_topic_counts)
    np.testing.assert_array_equal(resumed.model.alpha, uninterrupted.model.alpha)
    assert np.ptp(resumed.model.alpha) > 0  # learned: one value per topic
    assert [record["iteration"] for record in resumed.metrics] == [1, 2, 3, 4, 5, 6]
    for mine, theirs in zip(resumed.state.chunks, uninterrupted.state.chunks):
        assert mine.a_pairs.sharding == theirs.a_pairs.sharding
        np.testing.assert_array_equal(np.asarray(mine.a_pairs), np.asarray(theirs.a_pairs))


def test_a_checkpoint_recording_the_legacy_fingerprint_resumes(checkpointed_run, tmp_path):
    """A checkpoint written before fingerprints were hashed in blocks records the corpus's
    legacy fingerprint: it resumes to the uninterrupted model, and the next one records the
    current fingerprint."""
    corpus, directory = checkpointed_run
    (tmp_path / "at2").mkdir()
    for name in ("checkpoint-00000002.json", "checkpoint-00000002.npz"):
        shutil.copy(directory / "checkpoints" / name, tmp_path / "at2" / name)
    path = tmp_path / "at2" / "checkpoint-00000002.json"
    manifest = json.loads(path.read_text())
    assert manifest["corpus_fingerprint"] == corpus.fingerprint() != corpus.legacy_fingerprint()
    path.write_text(json.dumps(dict(manifest, corpus_fingerprint=corpus.legacy_fingerprint())))
    longer = dataclasses.replace(CONFIG, iterations=6, checkpoint_every=4)
    resumed = trainer.train(corpus, longer, resume_from=path, checkpoint_dir=tmp_path / "next")
    uninterrupted = trainer.train(corpus, dataclasses.replace(longer, checkpoint_every=0))
    np.testing.assert_array_equal(resumed.model.word_topic_counts,
                                  uninterrupted.model.word_topic_counts)
    assert json.loads(checkpoint.latest_checkpoint(tmp_path / "next").read_text())[
        "corpus_fingerprint"] == corpus.fingerprint()
    other = random_corpus(num_docs=40, num_words=30, mean_length=20, seed=1)
    path.write_text(json.dumps(dict(manifest, corpus_fingerprint=other.legacy_fingerprint())))
    with pytest.raises(checkpoint.CheckpointError, match="made for another corpus"):
        trainer.train(corpus, dataclasses.replace(longer, checkpoint_every=0), resume_from=path)


def damage_newest(directory: pathlib.Path) -> None:
    """Checkpoint 4 truncated, 6 with no manifest, 8 a garbage manifest, a stray temporary."""
    npz = directory / "checkpoint-00000004.npz"
    npz.write_bytes(npz.read_bytes()[:-100])
    (directory / "checkpoint-00000006.npz").write_bytes(b"half")
    (directory / "checkpoint-00000008.json").write_text('{"format_version": 1, "iter')
    (directory / ".checkpoint-00000010.npz.x1y2.tmp").write_bytes(b"partial")


def test_damaged_or_unfinished_checkpoints_are_never_taken_as_latest(checkpointed_run, tmp_path):
    _, directory = checkpointed_run
    shutil.copytree(directory / "checkpoints", tmp_path, dirs_exist_ok=True)
    assert checkpoint.latest_checkpoint(tmp_path) == tmp_path / "checkpoint-00000004.json"
    damage_newest(tmp_path)
    with pytest.warns(UserWarning, match="skipping damaged checkpoint"):
        assert checkpoint.latest_checkpoint(tmp_path) == tmp_path / "checkpoint-00000002.json"
    assert checkpoint.latest_checkpoint(tmp_path / "nowhere") is None


def test_a_checkpoint_of_an_earlier_format_is_named_as_one(checkpointed_run, tmp_path):
    _, directory = checkpointed_run
    path = tmp_path / "checkpoint-00000004.json"
    manifest = json.loads((directory / "checkpoints" / path.name).read_text())
    path.write_text(json.dumps(dict(manifest, format_version=4)))
    with pytest.raises(checkpoint.CheckpointError, match="a checkpoint of format 4, written by "
                                                         "an earlier saberjax"):
        checkpoint.read_manifest(path)


@pytest.mark.parametrize("corpus_seed, change, message", [
    (1, {}, "made for another corpus"),
    (0, dict(num_topics=5), r"trained with num_topics=4 \(this run: 5\)"),
    (0, dict(seed=3), r"trained with seed=0 \(this run: 3\)"),
])
def test_a_checkpoint_of_another_corpus_or_setting_is_refused(checkpointed_run, corpus_seed,
                                                              change, message):
    _, directory = checkpointed_run
    corpus = random_corpus(num_docs=40, num_words=30, mean_length=20, seed=corpus_seed)
    with pytest.raises(checkpoint.CheckpointError, match=message):
        trainer.train(corpus, dataclasses.replace(CONFIG, checkpoint_every=0, **change),
                      resume_from=checkpoint.latest_checkpoint(directory / "checkpoints"))


def test_a_streamed_checkpoint_loads_its_states_into_pinned_host_memory(tmp_path):
    """Streamed chunks keep their states on the host; resuming must not move them all to the
    device at once (that is what streaming exists to avoid)."""
    corpus = random_corpus(num_docs=30, num_words=20, seed=3)
    hyper = Hyperparams.create(CONFIG.num_topics, backend="xla")
    placement = place(corpus, hyper, chunk_tokens=corpus.num_tokens // 6 + 1,
                      stream=True)
    assert placement.streamed and placement.num_slots >= 3
    state = placement.init(seed=0)
    path = checkpoint.save_checkpoint(tmp_path, state, placement, CONFIG, corpus.fingerprint(),
                                      [])
    loaded, _ = checkpoint.load_checkpoint(path, placement, corpus, CONFIG)
    for saved, chunk_state in zip(state.chunks, loaded.chunks):
        for leaf in chunk_state:
            assert leaf.sharding.memory_kind == "pinned_host"
        np.testing.assert_array_equal(np.asarray(chunk_state.a_pairs), np.asarray(saved.a_pairs))


@pytest.mark.parametrize("written_on, resumed_on", [
    (dict(partition="documents"), dict(num_devices=1, chunk_tokens=None)),
    (dict(partition="documents"), dict(chunk_tokens=150)),
    (dict(partition="documents"), dict(chunk_tokens=None, partition="words")),
    (dict(chunk_tokens=None, partition="words"), dict(chunk_tokens=300, partition="documents")),
    (dict(chunk_tokens=None, partition="words"),
     dict(num_devices=1, chunk_tokens=None, partition="words")),
    (dict(partition="documents"), dict(chunk_tokens=None, partition="hybrid", mesh="1x2")),
])
def test_a_checkpoint_resumes_on_any_mesh_chunking_and_partition(checkpointed_run, tmp_path,
                                                                 written_on, resumed_on):
    """z is stored in corpus order: a checkpoint of 2 chunks on 2 devices (by documents or by
    words) resumes on one device, on 6 chunks, by words, by documents or on the two-axis mesh,
    to the uninterrupted model (checkpointed_run's, 4 iterations; from the two-axis mesh:
    test_execution)."""
    corpus, directory = checkpointed_run
    first = trainer.train(corpus, dataclasses.replace(CONFIG, iterations=2, **written_on),
                          checkpoint_dir=tmp_path)
    assert first.model.config["partition"] == written_on["partition"]
    longer = dataclasses.replace(CONFIG, iterations=4, checkpoint_every=0, **resumed_on)
    resumed = trainer.train(corpus, longer, resume_from=checkpoint.latest_checkpoint(tmp_path))
    with np.load(directory / "model.npz") as uninterrupted:
        np.testing.assert_array_equal(resumed.model.word_topic_counts,
                                      uninterrupted["word_topic_counts"])
        np.testing.assert_array_equal(resumed.model.alpha, uninterrupted["alpha"])
