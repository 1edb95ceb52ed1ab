"""Streaming from a chunk store on disk gives the in-memory model, and the store is never
trusted when stale, truncated, in use or without room."""

import json
import shutil
import warnings

import jax
import numpy as np
import pytest
from helpers import import_script, needs_local_devices, random_corpus, run_launcher

from saberjax import checkpoint, chunk_compact, chunk_records, chunk_store, esca, trainer
from saberjax.execution import memory
from saberjax.execution.placement import place
from saberjax.execution.host_memory import coarse, plan_store_chunk_tokens
from saberjax.config import Hyperparams
from saberjax.corpus import Corpus, save_native
from saberjax.layout import plan_layout
from saberjax.outputs import OutputConflictError

# A host budget that holds a chunk of a few thousand tokens but not these corpora's states,
# beside nothing else: the memory the test process holds (jax) is taken as none.
TINY_HOST_GB = 2.3e-4


@pytest.fixture(autouse=True)
def process_holds_no_host_memory(monkeypatch):
    monkeypatch.setattr(memory, "anonymous_host_memory", lambda: 0)


def test_compact_chunks_expand_to_the_layouts_chunks():
    corpus = random_corpus(num_docs=200, num_words=40, mean_length=30, seed=21)
    lengths = corpus.doc_lengths().copy()
    lengths[[0, 57, 199]] = 0  # empty documents, the last one too
    words = np.concatenate([np.asarray(corpus.word_ids)[start:start + length] for start, length
                            in zip(np.asarray(corpus.doc_offsets)[:-1], lengths)])
    corpus = Corpus(np.concatenate([[0], np.cumsum(lengths)]), words, corpus.vocab)
    plan = plan_layout(corpus, 1500)
    runs = min(corpus.num_words, plan.padded_tokens) + 1
    expand = jax.jit(chunk_compact.expand)
    for index in range(len(plan.chunk_docs)):  # every word present in some chunks
        chunk = plan.build_chunk(corpus, index)
        back = jax.device_get(expand(chunk_compact.compact(chunk, runs)))
        assert jax.tree.structure(back) == jax.tree.structure(chunk)
        for name, leaf in zip(("word", "doc", "doc_major_pos", "doc_start", "num_tokens",
                               "token_base", "tile_start"), jax.tree.leaves(chunk)):
            np.testing.assert_array_equal(getattr(back, name), leaf, err_msg=name)


def stored_placement(corpus, hyper, num_devices, directory, chunk_tokens=1500):
    return place(corpus, hyper, num_devices, chunk_tokens=chunk_tokens, stream=True,
                 host_memory_gb=TINY_HOST_GB, chunk_store_dir=directory)


def run(placement, iterations, seed=5):
    state = placement.init(seed)
    step = placement.compile(state)
    for _ in range(iterations):
        state = step(state)
    return state


@pytest.mark.parametrize("num_devices", [1, 2])
def test_same_seed_same_model_in_memory_streamed_from_memory_and_from_disk(num_devices,
                                                                           tmp_path):
    needs_local_devices(num_devices)
    corpus = random_corpus(num_docs=300, num_words=50, mean_length=30, seed=22)
    hyper = Hyperparams.create(10)
    resident = place(corpus, hyper, num_devices)
    from_memory = place(corpus, hyper, num_devices, chunk_tokens=1500, stream=True)
    from_disk = stored_placement(corpus, hyper, num_devices, tmp_path / "store")
    assert not resident.streamed and from_memory.streamed and not from_memory.stored
    assert from_disk.stored and from_disk.num_slots > from_disk.slots.prefetch
    states = [run(placement, 3) for placement in (resident, from_memory, from_disk)]
    for placement, state in zip((from_memory, from_disk), states[1:]):
        np.testing.assert_array_equal(placement.word_topic(state), resident.word_topic(states[0]))
        np.testing.assert_array_equal(placement.corpus_order_topics(state),
                                      resident.corpus_order_topics(states[0]))
    # the states on disk are the in-memory z alone, and A rebuilt from it is the in-memory A
    rebuild = jax.jit(esca.state_of_topics, static_argnames="hyper")
    chunks, in_memory = from_memory.host_chunks(), from_memory.chunk_states(states[1])
    for index, state in from_disk.chunk_states(states[2]).items():
        assert state.a_pairs is None and state.a_nnz is None
        rebuilt = jax.device_get(rebuild(chunks[index], state.topics, hyper=hyper))
        for field, value in rebuilt._asdict().items():
            np.testing.assert_array_equal(value, in_memory[index]._asdict()[field],
                                          err_msg=field)
    # compact chunks and z alone: fewer bytes a token put on the devices and written back
    put, written = ([getattr(placement.slots.counters, name)
                     for placement in (from_memory, from_disk)]
                    for name in ("bytes_put", "bytes_written"))
    assert put[1] < 0.6 * put[0]  # 0.35 for large chunks, more where V is a large part
    assert written[1] < 0.4 * written[0]  # 2 bytes a token against 6


def test_training_streams_from_disk_when_the_host_budget_is_small_and_resumes_bit_identically(
        tmp_path):
    corpus = random_corpus(num_docs=400, num_words=60, mean_length=40, seed=14)
    base = dict(num_topics=8, iterations=4, backend="xla", num_devices=1,
                device_memory_gb=0.002, optimize_alpha_every=2)  # A read back from disk too
    stored = dict(base, host_memory_gb=TINY_HOST_GB, chunk_store=str(tmp_path / "store"))
    whole = trainer.train(corpus, trainer.TrainConfig(**stored, checkpoint_every=2),
                          checkpoint_dir=tmp_path / "checkpoints")
    assert whole.model.config["stored"] and whole.model.config["num_chunks"] > 3
    assert all(record["bytes_put"] > 0 and record["bytes_written"] > 0
               for record in whole.metrics)
    # resumed from iteration 2's checkpoint (kept aside: the run went on to iteration 4)
    saved = tmp_path / "at2"
    shutil.copytree(tmp_path / "checkpoints", saved)
    two = trainer.train(corpus, trainer.TrainConfig(**dict(stored, iterations=2),
                                                    checkpoint_every=2),
                        checkpoint_dir=saved)
    resumed = trainer.train(corpus, trainer.TrainConfig(**stored),
                            resume_from=checkpoint.latest_checkpoint(saved))
    assert int(two.state.iteration) == 2 and len(resumed.metrics) == 4
    np.testing.assert_array_equal(resumed.model.word_topic_counts,
                                  whole.model.word_topic_counts)


def test_a_store_is_reused_and_a_stale_or_truncated_one_rebuilt(tmp_path):
    corpus = random_corpus(num_docs=200, num_words=40, mean_length=30, seed=23)
    hyper, directory = Hyperparams.create(6), tmp_path / "store"
    first = stored_placement(corpus, hyper, 1, directory)
    expected = first.word_topic(run(first, 2))
    assert first.slots.build_seconds > 0
    del first
    reused = stored_placement(corpus, hyper, 1, directory)  # the first one's lock is released
    assert reused.slots.build_seconds == 0
    del reused
    with open(directory / chunk_store.STATIC, "r+b") as static:  # cut short
        static.truncate(100)
    with pytest.warns(UserWarning, match="rebuilding the chunk store .*truncated"):
        rebuilt = stored_placement(corpus, hyper, 1, directory)
    np.testing.assert_array_equal(rebuilt.word_topic(run(rebuilt, 2)), expected)
    del rebuilt
    other = random_corpus(num_docs=200, num_words=40, mean_length=30, seed=24)
    with pytest.warns(UserWarning, match="made for another corpus or chunking"):
        stored_placement(other, hyper, 1, directory)
    with warnings.catch_warnings():  # a chunking of its own is another store too
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="another corpus or chunking"):
            stored_placement(other, hyper, 1, directory, chunk_tokens=1200)


def test_a_store_in_use_by_another_run_is_refused(tmp_path):
    corpus = random_corpus(num_docs=200, num_words=40, mean_length=30, seed=25)
    hyper = Hyperparams.create(6)
    holding = stored_placement(corpus, hyper, 1, tmp_path / "store")
    with pytest.raises(chunk_store.ChunkStoreError, match="store .* is in use by another run; "
                                                          ".*--chunk_store"):
        stored_placement(corpus, hyper, 1, tmp_path / "store")
    assert holding.stored


def test_a_folder_holding_other_files_is_never_used_as_a_store(tmp_path):
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "manifest.json").write_text("mine")
    (tmp_path / "store" / "notes.txt").write_text("mine too")
    corpus = random_corpus(num_docs=200, num_words=40, mean_length=30, seed=28)
    with pytest.raises(OutputConflictError, match="holds files that are not a saberjax chunk "
                                                  "store \\(notes.txt\\)"):
        stored_placement(corpus, Hyperparams.create(6), 1, tmp_path / "store")
    assert (tmp_path / "store" / "manifest.json").read_text() == "mine"


def test_a_disk_without_room_for_the_store_is_a_clear_error(tmp_path, monkeypatch):
    corpus = random_corpus(num_docs=200, num_words=40, mean_length=30, seed=26)
    monkeypatch.setattr(chunk_store.shutil, "disk_usage",
                        lambda path: shutil._ntuple_diskusage(10**12, 10**12 - 1000, 1000))
    with pytest.raises(chunk_store.ChunkStoreError,
                       match=rf"the chunk store needs 0\.0 GB at {tmp_path / 'store'} .* but "
                             r"that disk has 0\.0 GB free; .*--chunk_store"):
        stored_placement(corpus, Hyperparams.create(6), 1, tmp_path / "store")
    assert not (tmp_path / "store").exists()


def test_a_host_budget_that_cannot_hold_one_chunk_names_the_flag(tmp_path):
    corpus = random_corpus(num_docs=200, num_words=40, mean_length=30, seed=27)
    with pytest.raises(ValueError, match=r"host_memory_gb=5e-05 cannot hold one chunk and "
                                         r"the model: .* chunks of [\d,]+ tokens \(a chunk "
                                         r"needs 1,024: "):
        place(corpus, Hyperparams.create(6), 1, chunk_tokens=1500, stream=True,
              host_memory_gb=5e-5, chunk_store_dir=tmp_path / "store")
    assert not (tmp_path / "store").exists()


@pytest.fixture
def streaming_bench():
    """tools/streaming_bench.py imported as a module (its flags in a registry of their own)."""
    return import_script("tools/streaming_bench.py", "saberjax_streaming_bench")


def test_streaming_bench_compares_disk_and_memory_streaming_in_one_invocation(
        streaming_bench, tmp_path, capsys):
    save_native(random_corpus(num_docs=300, num_words=50, mean_length=30, seed=29),
                tmp_path / "corpus")
    streaming_bench.FLAGS(["streaming_bench", f"--corpus={tmp_path / 'corpus'}",
                           "--num_topics=8", "--iterations=2", "--backend=xla",
                           "--budget_fraction=0.5", "--skip_resident", "--disk",
                           f"--host_memory_gb={TINY_HOST_GB}",
                           f"--chunk_store={tmp_path / 'store'}", "--disk_probe_gb=0.01"])
    streaming_bench.main(["streaming_bench"])
    header, disk, memory, summary = map(json.loads, capsys.readouterr().out.splitlines())
    assert header["disk_read_gb_per_s"] > 0 and header["h2d_pinned_gb_per_s"] > 0
    assert (disk["run"], disk["stored"], memory["run"], memory["stored"]) == (
        "disk", True, "memory", False)
    assert disk["store_bytes_per_token"] > 0 and disk["setup_seconds"] > 0
    assert disk["bytes_put_per_token"] < memory["bytes_put_per_token"]
    assert disk["transfer_floor_mtoken_per_s"] > 0 and disk["peak_rss_gb"] > 0
    assert summary["disk_to_memory"] == disk["mtoken_per_s"] / memory["mtoken_per_s"]


def test_train_py_names_the_host_budget_that_cannot_hold_a_chunk_in_one_line(tmp_path):
    save_native(random_corpus(num_docs=400, num_words=60, mean_length=40, seed=30),
                tmp_path / "corpus")
    done = run_launcher("train.py", f"--corpus={tmp_path / 'corpus'}", "--num_topics=4",
                        "--iterations=1", "--backend=xla", "--device_memory_gb=0.002",
                        "--host_memory_gb=0.0001", f"--chunk_store={tmp_path / 'store'}",
                        f"--output={tmp_path / 'model'}", timeout=300)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith(
        "error: --host_memory_gb=0.0001 cannot hold one chunk and the model: beside the ")
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "model").exists() and not (tmp_path / "store").exists()


def test_a_build_that_fails_leaves_no_store_behind(tmp_path, monkeypatch):
    """Whichever builds the chunks (the host, or the devices where they are accelerators),
    a slot that cannot be written fails the build and leaves nothing."""
    corpus = random_corpus(num_docs=200, num_words=40, mean_length=30, seed=31)
    real_write, written = chunk_records.Records.write, []

    def failing_third_slot(records, *args, **kwargs):
        written.append(args[1])
        if len(written) == 3:
            raise OSError("disk on fire")
        return real_write(records, *args, **kwargs)

    monkeypatch.setattr(chunk_records.Records, "write", failing_third_slot)
    with pytest.raises(OSError, match="disk on fire"):
        stored_placement(corpus, Hyperparams.create(6), 1, tmp_path / "store")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["store.lock"]
    monkeypatch.setattr(chunk_records.Records, "write", real_write)
    placement = stored_placement(corpus, Hyperparams.create(6), 1, tmp_path / "store")
    assert placement.slots.build_seconds > 0  # built whole the next time


def test_the_store_chunking_does_not_move_with_the_memory_the_process_holds(monkeypatch):
    """The host plan counts what the process holds already; a few MB more or less from one run
    to the next must give the same chunks, or every run would build its store again (seen on
    the GPU: the second run of one benchmark rebuilt a 35 GB store)."""
    corpus = random_corpus(num_docs=400, num_words=60, mean_length=40, seed=14)
    hyper = Hyperparams.create(8)
    plans = []
    for held in (50_000_000, 50_001_000, 50_002_000):
        monkeypatch.setattr(memory, "anonymous_host_memory", lambda held=held: held)
        plans.append(plan_store_chunk_tokens(corpus, hyper,
                                             50_000_000 + int(TINY_HOST_GB * 1e9), 2,
                                             40 * corpus.num_tokens))  # held in memory
    assert plans[0] is not None and plans == [plans[0]] * 3
    assert plans[0] == coarse(plans[0])


def test_a_checkpoint_of_a_store_resumes_into_a_store_and_into_memory(tmp_path):
    """A checkpoint holds z alone: a run from a chunk store resumes from it into a store, and
    one in memory (or streamed) with A rebuilt, the state each had."""
    corpus = random_corpus(num_docs=300, num_words=50, mean_length=30, seed=26)
    hyper, config = Hyperparams.create(10), trainer.TrainConfig(num_topics=10)
    from_disk = stored_placement(corpus, hyper, 1, tmp_path / "store")
    from_memory = place(corpus, hyper, 1, chunk_tokens=1500, stream=True)
    state = run(from_disk, 2)
    path = checkpoint.save_checkpoint(tmp_path / "checkpoints", state, from_disk, config,
                                      corpus.fingerprint(), [])
    loaded, _ = checkpoint.load_checkpoint(path, from_disk, corpus, config)
    np.testing.assert_array_equal(from_disk.corpus_order_topics(loaded),
                                  from_disk.corpus_order_topics(state))
    in_memory, _ = checkpoint.load_checkpoint(path, from_memory, corpus, config)
    np.testing.assert_array_equal(from_memory.corpus_order_topics(in_memory),
                                  from_disk.corpus_order_topics(state))
    np.testing.assert_array_equal(from_memory.word_topic(in_memory), from_disk.word_topic(state))
    expected = run(from_memory, 2)
    for mine, theirs in zip(in_memory.chunks, expected.chunks):
        np.testing.assert_array_equal(np.asarray(mine.a_pairs), np.asarray(theirs.a_pairs))


def test_cpu_devices_stream_from_a_store_when_the_host_budget_cannot_hold_the_layout(tmp_path):
    """On CPU devices the host holds a resident layout: a host budget too small for it sends
    the chunks to a chunk store (no device budget needed), and the model is the resident one's;
    devices that build their own layout hold it in their memory, so they stay resident."""
    corpus = random_corpus(num_docs=300, num_words=50, mean_length=30, seed=31)
    hyper = Hyperparams.create(10)
    resident = place(corpus, hyper, 1)
    small = dict(host_memory_gb=TINY_HOST_GB, chunk_store_dir=tmp_path / "store")
    stored = place(corpus, hyper, 1, **small)
    assert not resident.streamed and stored.stored and stored.num_slots > 1
    np.testing.assert_array_equal(stored.word_topic(run(stored, 2)),
                                  resident.word_topic(run(resident, 2)))
    assert not place(corpus, hyper, 1, layout_on_devices=True, **small).streamed
    assert not place(corpus, hyper, 1, stream=False, **small).streamed


def test_slots_read_from_several_threads_at_once_are_each_whole(tmp_path):
    """The trainer compiles in a thread that reads a slot while the main thread streams
    them: read-aheads of one thread must not be taken or released by another."""
    import concurrent.futures

    corpus = random_corpus(num_docs=300, num_words=50, mean_length=30, seed=31)
    placement = stored_placement(corpus, Hyperparams.create(6), 1, tmp_path / "store",
                                 chunk_tokens=800)
    store = placement.slots
    expected = [jax.tree.map(np.asarray, store[slot]) for slot in range(len(store))]
    assert len(expected) > 3

    def read_all(_):
        return [jax.tree.map(np.asarray, store[slot]) for slot in range(len(store))]

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        for slots in pool.map(read_all, range(24)):
            for got, want in zip(slots, expected):
                jax.tree.map(np.testing.assert_array_equal, got, want)
