"""Several processes (jax.distributed over CPU collectives) train the one-process model, and a
process that dies stops the others with an error within a bounded time."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import ROOT, random_corpus

from saberjax import esca, processes
from saberjax.config import Hyperparams
from saberjax.layout import build_layout

WORKER = """
import os, sys
import numpy as np
from saberjax import processes
processes.initialize(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), heartbeat_seconds=5)
import jax
from helpers import random_corpus
from saberjax.execution.placement import place
from saberjax.config import Hyperparams
corpus = random_corpus(num_docs=90, num_words=37, mean_length=30, seed=3)
placed = place(corpus, Hyperparams.create(40), chunk_tokens=int(sys.argv[4]) or None,
               hosts_exchange=sys.argv[7])
# one string a line: Gloo's C++ lines may come between the pieces of a print of several
print(f"partition {placed.partition} {dict(placed.mesh.shape)} {placed.hosts_exchange}",
      flush=True)
state = placed.init(5)
step = placed.compile(state)
for _ in range(3):
    state = step(state)
word_topic = placed.word_topic(state)  # every process takes part in gathering B
print(f"devices {jax.device_count()} local {jax.local_device_count()} chunks "
      f"{placed.own_chunks()}", flush=True)
if processes.is_writer():
    np.save(sys.argv[5], word_topic)
if sys.argv[6] == "stop":
    sys.exit(0)
if jax.process_index() == 1:
    os.kill(os.getpid(), 9)
jax.block_until_ready(step(state))
for _ in range(10_000):  # the survivor: stopped by the dead process's missing heartbeats
    state = jax.block_until_ready(step(state))
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


def start_processes(count: int, output, chunk_tokens: int = 0, end: str = "finish",
                    devices: int = 1, hosts_exchange: str = "auto"):
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
           "PYTHONPATH": f"{ROOT / 'tests'}:{ROOT}"}
    address = f"localhost:{free_port()}"
    return [subprocess.Popen([sys.executable, "-c", WORKER, address, str(count), str(index),
                              str(chunk_tokens), str(output), end, hosts_exchange],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            for index in range(count)]


def one_process_model():
    corpus = random_corpus(num_docs=90, num_words=37, mean_length=30, seed=3)
    hyper = Hyperparams.create(40)
    chunks = build_layout(corpus).chunks
    state = esca.init(chunks, corpus.num_words, hyper, 5)
    for _ in range(3):
        state = esca.step(state, chunks, hyper)
    return np.asarray(state.model.word_topic)


@pytest.mark.parametrize("chunk_tokens, end", [(0, "die"), (300, "stop")])
def test_two_processes_train_the_one_process_model(tmp_path, chunk_tokens, end):
    """Two processes train the one-process model (in one chunk each, or several); and
    where process 1 then dies (SIGKILL), the survivor stops with an error within a bounded
    time instead of waiting for it."""
    workers = start_processes(2, tmp_path / "b.npy", chunk_tokens, end=end)
    start = time.monotonic()
    outputs = [worker.communicate(timeout=300) for worker in workers]
    for worker, (out, err) in zip(workers, outputs):
        assert worker.returncode == 0 or end == "die", err[-3000:]
        assert "devices 2 local 1" in out, err[-3000:]
    assert "chunks [0" in outputs[0][0] and "chunks [" in outputs[1][0]
    np.testing.assert_array_equal(np.load(tmp_path / "b.npy"), one_process_model())
    if end == "die":
        assert workers[0].returncode != 0 and time.monotonic() - start < 100
        assert workers[1].returncode == -9


@pytest.mark.parametrize("exchange", ["counts", "topics", "auto"])
def test_two_processes_of_two_devices_train_the_one_device_model_on_the_two_axis_mesh(
        tmp_path, exchange):
    """Between the processes the word shares' counts, or their tokens' topics (each process
    then counts the share's B from the other's topics and word rows, gathered once); auto:
    both processes take the same, from the bandwidth they measured together."""
    workers = start_processes(2, tmp_path / "b.npy", end="stop", devices=2,
                              hosts_exchange=exchange)
    outputs = [worker.communicate(timeout=300) for worker in workers]
    chosen = set()
    for worker, (out, err) in zip(workers, outputs):
        assert worker.returncode == 0, err[-3000:]
        assert "devices 4 local 2" in out
        # the partition chosen by auto
        found = re.search(r"partition hybrid \{'hosts': 2, 'gpus': 2\} (\w+)", out)
        assert found and found[1] in ("counts", "topics") and exchange in (found[1], "auto")
        chosen.add(found[1])
    assert len(chosen) == 1
    assert "chunks [0, 1]" in outputs[0][0] and "chunks [2, 3]" in outputs[1][0]
    np.testing.assert_array_equal(np.load(tmp_path / "b.npy"), one_process_model())


def test_the_cluster_flags_come_together():
    with pytest.raises(ValueError, match="missing --num_processes, --process_id"):
        processes.initialize("localhost:1234")
    with pytest.raises(ValueError, match=r"--process_id=2 must be in \[0, --num_processes=2\)"):
        processes.initialize("localhost:1234", 2, 2)
    assert processes.initialize() is False  # alone: nothing to join


def train_command(corpus_dir, output, *flags: str) -> list[str]:
    """launch/train.py on corpus_dir into output (a list of folders: process i's corpus is
    the i-th)."""
    return [sys.executable, str(ROOT / "launch" / "train.py"), f"--corpus={corpus_dir}",
            f"--output={output}", "--num_topics=6", "--backend=xla", "--test_fraction=0",
            "--checkpoint_every=2", "--top_words=0", *flags]


def start_training(count: int, corpus_dir, output, *flags: str, devices: int = 1,
                   **popen) -> list[subprocess.Popen]:
    """launch/train.py as `count` processes of one cluster (one process: no cluster flags),
    each with `devices` CPU devices."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
    cluster = [f"--coordinator_address=localhost:{free_port()}", f"--num_processes={count}"]
    popen = dict(dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE), **popen)
    corpora = corpus_dir if isinstance(corpus_dir, list) else [corpus_dir] * count
    return [subprocess.Popen(train_command(corpora[index], output, *flags)
                             + (cluster + [f"--process_id={index}"] if count > 1 else []),
                             text=True, env=env, cwd=ROOT, **popen)
            for index in range(count)]


def train_processes(count: int, corpus_dir, output, *flags: str, devices: int = 1) -> None:
    """start_training, and wait for every process to succeed."""
    for worker in start_training(count, corpus_dir, output, *flags, devices=devices):
        _, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err[-3000:]


def word_topic_counts(output):
    with np.load(output / "model.npz") as model:
        return model["word_topic_counts"]


def one_device_run(iterations: int):
    """The model of train_command's training on one device, uninterrupted, in this process
    (the same B and config as `launch/train.py` alone: test_a_checkpoint_of_2_processes_x_2_
    devices_resumes_on_1_x_3_and_on_4_x_1 compares the launcher's with it)."""
    from saberjax import trainer

    corpus = random_corpus(num_docs=60, num_words=40, mean_length=20, seed=9)
    config = trainer.TrainConfig(num_topics=6, iterations=iterations, backend="xla",
                                 num_devices=1)
    return trainer.train(corpus, config).model


def one_device_model(iterations: int) -> np.ndarray:
    """B of one_device_run."""
    return one_device_run(iterations).word_topic_counts


def test_a_checkpoint_of_2_processes_x_2_devices_resumes_on_1_x_3_and_on_4_x_1(tmp_path):
    """Two training processes of 2 devices (the two-axis mesh, 4 chunks), each given a copy
    of the corpus readable only in its host's documents, write the one-device model, the
    one-process fingerprint and a checkpoint of a manifest and a shard each; the checkpoint
    is the same whatever the mesh: it resumes from the shards on 1 process of 3 devices (by
    documents, 3 chunks) and on 4 processes of 1 (by words), each to the model one device
    trains uninterrupted."""
    corpus = random_corpus(num_docs=60, num_words=40, mean_length=20, seed=9)
    corpora = corpora_readable_only_by_their_process(corpus, tmp_path, 2)
    train_processes(2, corpora, tmp_path / "a", "--iterations=4", devices=2)
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert config["partition"] == "hybrid" and config["processes"] == 2
    assert config["corpus_fingerprint"] == corpus.fingerprint()
    assert sorted(os.listdir(tmp_path / "a" / "checkpoints")) == [
        "checkpoint-00000002.json", "checkpoint-00000002.npz", "checkpoint-00000002.p1.npz",
        "checkpoint-00000004.json", "checkpoint-00000004.npz", "checkpoint-00000004.p1.npz"]
    np.testing.assert_array_equal(word_topic_counts(tmp_path / "a"), one_device_model(4))
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    train_processes(1, tmp_path / "corpus", tmp_path / "a", "--iterations=8", "--resume",
                    devices=3)
    train_processes(4, tmp_path / "corpus", tmp_path / "b", "--iterations=8", "--resume",
                    "--partition=words")
    uninterrupted = one_device_model(8)
    for resumed in ("a", "b"):
        np.testing.assert_array_equal(word_topic_counts(tmp_path / resumed), uninterrupted)


def test_a_run_that_loses_a_process_resumes_on_the_one_left(tmp_path):
    """SIGKILL one of 2 processes mid-run: the other stops within the heartbeat, and the same
    command with --resume, on the process left, ends with the uninterrupted model."""
    from saberjax.corpus import save_native

    save_native(random_corpus(num_docs=60, num_words=40, mean_length=20, seed=9),
                tmp_path / "corpus")
    flags = ("--iterations=100", "--heartbeat_seconds=5")
    log = tmp_path / "killed.log"
    with open(log, "w") as log_file:
        workers = start_training(2, tmp_path / "corpus", tmp_path / "killed", *flags,
                                 stdout=subprocess.DEVNULL, stderr=log_file)
    checkpoints = tmp_path / "killed.partial" / "checkpoints"
    deadline = time.monotonic() + 120
    while not [path for path in checkpoints.glob("checkpoint-*.json")
               if int(path.stem.split("-")[1]) > 4]:
        assert workers[0].poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.01)
    workers[1].send_signal(signal.SIGKILL)
    start = time.monotonic()
    assert workers[0].wait(timeout=120) != 0 and time.monotonic() - start < 60
    assert not (tmp_path / "killed").exists()
    train_processes(1, tmp_path / "corpus", tmp_path / "killed", *flags, "--resume")
    np.testing.assert_array_equal(word_topic_counts(tmp_path / "killed"), one_device_model(100))


def test_processes_given_different_settings_stop_with_one_clear_error(tmp_path):
    from saberjax.corpus import save_native

    save_native(random_corpus(num_docs=30, num_words=20, mean_length=10, seed=2),
                tmp_path / "corpus")
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": ""}
    cluster = [f"--coordinator_address=localhost:{free_port()}", "--num_processes=2"]
    workers = [subprocess.Popen(
        [sys.executable, str(ROOT / "launch" / "train.py"), f"--corpus={tmp_path / 'corpus'}",
         f"--output={tmp_path / 'out'}", "--backend=xla", "--iterations=2", "--top_words=0",
         f"--num_topics={4 + index}", *cluster, f"--process_id={index}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        for index in range(2)]
    errors = [worker.communicate(timeout=120)[1] for worker in workers]
    assert all(worker.returncode == 1 for worker in workers), errors
    assert "error: the processes disagree on the corpus and the settings" in errors[0]
    assert not (tmp_path / "out" / "model.npz").exists()


def corpora_readable_only_by_their_process(corpus, directory, devices: int) -> list:
    """A copy of the corpus for each of 2 processes of `devices` devices whose tokens outside
    that process's devices' chunks (by documents, or its host's on the two-axis mesh) are word
    ids outside the vocabulary: reading one (to check, count, hash or lay it out) fails or
    changes the fingerprint."""
    from saberjax.corpus import load_native, save_native
    from saberjax.layout import chunk_boundaries

    save_native(corpus, directory / "corpus")
    cuts = chunk_boundaries(corpus.doc_offsets, -(-corpus.num_tokens // (2 * devices)),
                            2 * devices)[::devices]
    corpora = []
    for process, (first, last) in enumerate(zip(cuts[:-1], cuts[1:])):
        shutil.copytree(directory / "corpus", directory / f"corpus{process}")
        word_ids = np.load(directory / f"corpus{process}" / "word_ids.npy", mmap_mode="r+")
        word_ids[:corpus.doc_offsets[first]] = -7
        word_ids[corpus.doc_offsets[last]:] = -7
        word_ids.flush()
        corpora.append(directory / f"corpus{process}")
    with pytest.raises(Exception, match="outside the vocabulary"):
        load_native(corpora[0])
    return corpora


def test_each_process_reads_only_its_documents(tmp_path):
    """Each process is given a copy of the corpus readable only in its own documents (by
    documents; its host's on the two-axis mesh: test_a_checkpoint_of_2_processes_x_2_devices_
    resumes_on_1_x_3_and_on_4_x_1): the two processes train the one-process model and record
    the one-process fingerprint."""
    corpus = random_corpus(num_docs=60, num_words=40, mean_length=20, seed=9)
    corpora = corpora_readable_only_by_their_process(corpus, tmp_path, 1)
    train_processes(2, corpora, tmp_path / "two", "--iterations=4", "--partition=documents")
    one = one_device_run(4)
    configs = [json.loads((tmp_path / "two" / "config.json").read_text()), one.config]
    assert configs[0]["processes"] == 2 and configs[1]["processes"] == 1
    assert configs[0]["corpus_fingerprint"] == configs[1]["corpus_fingerprint"] \
        == corpus.fingerprint()
    np.testing.assert_array_equal(word_topic_counts(tmp_path / "two"), one.word_topic_counts)


def test_processes_partitioned_by_words_read_and_check_every_document(tmp_path):
    """By words on one axis each process samples its words' tokens of every document, so it
    validates them all: a copy readable only in its own documents stops it with one clear
    error instead of training on what lies outside the vocabulary."""
    corpus = random_corpus(num_docs=60, num_words=40, mean_length=20, seed=9)
    corpora = corpora_readable_only_by_their_process(corpus, tmp_path, 1)
    workers = start_training(2, corpora, tmp_path / "out", "--iterations=2",
                             "--partition=words", "--heartbeat_seconds=5")
    errors = [worker.communicate(timeout=120)[1] for worker in workers]
    assert [worker.returncode for worker in workers] == [1, 1], errors
    assert all("is -7, outside the vocabulary range [0, 40)" in error for error in errors)
    assert not (tmp_path / "out").exists()
