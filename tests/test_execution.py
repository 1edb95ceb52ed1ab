"""The mesh: one seed gives the bit-identical model on any number of devices, chunks and slots,
resident or streamed; placement errors are clear; the package's imports have no cycle."""

import ast
import dataclasses
import math
import pathlib
import subprocess
import sys
import threading

import jax
import numpy as np
import pytest
from helpers import ROOT, needs_local_devices, random_corpus, run_on_mesh

from saberjax import checkpoint, esca, trainer
from saberjax.config import Hyperparams, TrainConfig
from saberjax.execution import memory, placement
from saberjax.execution.mesh import (HYBRID_MODEL_SPEC, HYBRID_TOPICS_MODEL_SPEC, MODEL_SPEC,
                                     WORD_MODEL_SPEC, make_mesh)
from saberjax.execution.placement import place
from saberjax.execution.plan import hosts_exchange
from saberjax.layout import build_layout


def reference(corpus, hyper, iterations, seed):
    """(topics in corpus order, B, B-hat) after esca.init and esca.step on one chunk."""
    chunks = build_layout(corpus).chunks
    state = esca.init(chunks, corpus.num_words, hyper, seed)
    for _ in range(iterations):
        state = esca.step(state, chunks, hyper)
    return (esca.corpus_order_topics(chunks, state.chunks), np.asarray(state.model.word_topic),
            np.asarray(state.model.bhat, np.float32))


@pytest.mark.parametrize("num_devices,chunk_tokens,stream,partition,mesh,layout_on_devices", [
    (1, None, False, "documents", None, False), (2, None, False, "documents", None, False),
    (2, 300, False, "documents", None, False), (2, 500, True, "documents", None, False),
    (1, None, False, "words", None, False), (2, None, False, "words", None, False),
    (2, None, False, "hybrid", "2x1", False), (2, None, False, "hybrid", "1x2", False),
    (1, None, False, "documents", None, True), (2, 300, False, "documents", None, True),
    (2, 500, True, "documents", None, True), (2, None, False, "words", None, True)])
def test_the_model_is_bit_identical_on_any_mesh(num_devices, chunk_tokens, stream, partition,
                                                mesh, layout_on_devices, monkeypatch):
    """The same model on any mesh, chunking, streaming and partition, whether the host or
    the devices build the layout (the host's builder then never runs)."""
    needs_local_devices(num_devices)
    if layout_on_devices:
        monkeypatch.setattr(placement, "cached_layout", None)
    corpus = random_corpus(num_docs=90, num_words=37, mean_length=30, seed=3)  # V odd: padded
    hyper = Hyperparams.create(40)
    topics, word_topic, bhat = reference(corpus, hyper, 3, seed=5)
    placed, state = run_on_mesh(corpus, hyper, 3, 5, num_devices=num_devices,
                                chunk_tokens=chunk_tokens, stream=stream, partition=partition,
                                mesh=mesh, layout_on_devices=layout_on_devices)
    assert placed.num_devices == num_devices and placed.streamed == stream
    assert placed.num_chunks == num_devices * placed.num_slots
    assert placed.partition == partition
    np.testing.assert_array_equal(placed.corpus_order_topics(state), topics)
    np.testing.assert_array_equal(placed.word_topic(state), word_topic)
    spec = {"documents": MODEL_SPEC, "words": WORD_MODEL_SPEC,
            "hybrid": {"counts": HYBRID_MODEL_SPEC,
                       "topics": HYBRID_TOPICS_MODEL_SPEC}[placed.hosts_exchange]}[partition]
    for name in ("word_topic", "bhat"):
        array = getattr(state.model, name)
        assert array.sharding.is_equivalent_to(placed.sharding(getattr(spec, name)), 2)
    if partition == "documents":  # B spread over the devices by rows, B-hat whole everywhere
        np.testing.assert_array_equal(
            np.asarray(state.model.bhat, np.float32)[:corpus.num_words], bhat)
        assert state.model.bhat.sharding.is_fully_replicated
    np.testing.assert_allclose(np.asarray(placed.topic_word(state)).T,
                               np.asarray(esca.model_from_counts(
                                   word_topic, hyper.initial_alpha(), hyper).bhat,
                                          np.float32)[:, :40], rtol=2**-7)


@pytest.mark.parametrize("chunk_tokens,stream,partition", [(500, True, "documents"),
                                                         (None, False, "words")])
def test_window_initial_topics_give_one_model_on_any_mesh(chunk_tokens, stream, partition):
    """Initial topics drawn per window of the corpus (init_window_topics) are keyed by global
    token ids alone: a word share, which holds a document's tokens of its words only, and a
    streamed chunk draw what one chunk draws."""
    needs_local_devices(2)
    corpus = random_corpus(num_docs=90, num_words=37, mean_length=30, seed=4)
    hyper = Hyperparams.create(40, init_window_topics=3)
    topics, word_topic, _ = reference(corpus, hyper, 1, seed=5)
    placed, state = run_on_mesh(corpus, hyper, 1, 5, num_devices=2, chunk_tokens=chunk_tokens,
                                stream=stream, partition=partition)
    assert placed.partition == partition
    np.testing.assert_array_equal(placed.corpus_order_topics(state), topics)
    np.testing.assert_array_equal(placed.word_topic(state), word_topic)


@pytest.mark.parametrize("partition,mesh,carried", [("words", None, True),
                                                    ("hybrid", "1x2", True),
                                                    ("hybrid", "2x1", False)])
def test_by_word_a_is_rebuilt_between_barriers_and_the_model_stays(partition, mesh, carried):
    """By word, A is rebuilt between two optimization barriers (the row totals counted
    before, summed after: Programs._word_finish), which order the work and change no value:
    the model is the one device's.  Where the hosts reduce the counts first there are none.
    Where each device's counts become its rows, the iteration counts B into zeros the one
    before made (donated) and makes the next ones behind a third barrier, after B-hat and
    the trees; elsewhere the zeros are made on a GPU stream of their own (an annotation CPUs
    ignore)."""
    needs_local_devices(2)
    corpus = random_corpus(num_docs=90, num_words=37, mean_length=30, seed=3)
    hyper = Hyperparams.create(40)
    topics, word_topic, _ = reference(corpus, hyper, 2, seed=5)
    placed, state = run_on_mesh(corpus, hyper, 2, 5, num_devices=2, partition=partition,
                                mesh=mesh, hosts_exchange="counts")
    programs = placed.programs
    assert programs.carries_zero_counts == carried
    key = esca.next_iteration(state.seed, state.iteration)[1]
    zeros = programs.zero_partial_counts() if carried else None
    program = programs.iteration.lower(placed.slots, placed.program_shares, state.chunks,
                                       state.model, key, zeros).as_text()
    assert program.count("optimization_barrier") == (3 if carried else 0)
    assert sum('call @compute_on' in line and '_xla_stream_annotation = "1"' in line
               for line in program.splitlines()) == (0 if carried else 1)
    assert ("jax.buffer_donor" in program) == carried  # the zeros become the counts
    np.testing.assert_array_equal(placed.corpus_order_topics(state), topics)
    np.testing.assert_array_equal(placed.word_topic(state), word_topic)


@pytest.mark.parametrize("partition,mesh", [("words", None), ("hybrid", "1x2")])
def test_by_word_the_chunks_read_only_their_tokens_of_each_devices_doc_major_topics(
        monkeypatch, partition, mesh):
    """By word the iteration asks the E-step not to zero its doc-major output, and each
    chunk's device takes every position from the device whose share holds its token
    (WordShares.owner): whatever the other positions hold, the model is the one device's."""
    needs_local_devices(2)
    corpus = random_corpus(num_docs=90, num_words=37, mean_length=30, seed=3)
    hyper = Hyperparams.create(40)
    topics, word_topic, _ = reference(corpus, hyper, 2, seed=5)
    sample, unzeroed = esca.sample, []

    def sample_leaving_garbage(chunk, chunk_state, model, key, hyper, zero_doc_major=True):
        word_major, doc_major = sample(chunk, chunk_state, model, key, hyper, zero_doc_major)
        if not zero_doc_major:
            unzeroed.append(True)
            own = jax.numpy.zeros(doc_major.shape, bool).at[chunk.doc_major_pos].set(
                True, mode="drop")
            doc_major = jax.numpy.where(own, doc_major, hyper.num_topics // 2 + 3)
        return word_major, doc_major

    monkeypatch.setattr(esca, "sample", sample_leaving_garbage)
    placed, state = run_on_mesh(corpus, hyper, 2, 5, num_devices=2, partition=partition,
                                mesh=mesh, hosts_exchange="topics")
    assert unzeroed
    np.testing.assert_array_equal(placed.corpus_order_topics(state), topics)
    np.testing.assert_array_equal(placed.word_topic(state), word_topic)


@pytest.mark.parametrize("exchange", ["counts", "topics"])
def test_the_hosts_exchange_counts_or_topics_to_the_one_device_model(exchange):
    """Exchanging topics, each host counts its word share's B whole from every host's topics
    and holds the whole share's rows; exchanging counts, the share's rows are split between
    the hosts.  Either way the model of one device, with the learned prior too."""
    needs_local_devices(2)
    corpus = random_corpus(num_docs=90, num_words=37, mean_length=30, seed=3)
    hyper = Hyperparams.create(40)
    topics, word_topic, _ = reference(corpus, hyper, 3, seed=5)
    placed, state = run_on_mesh(corpus, hyper, 3, 5, mesh="2x1", hosts_exchange=exchange)
    assert placed.hosts_exchange == exchange
    np.testing.assert_array_equal(placed.corpus_order_topics(state), topics)
    np.testing.assert_array_equal(placed.word_topic(state), word_topic)
    spec = HYBRID_TOPICS_MODEL_SPEC if exchange == "topics" else HYBRID_MODEL_SPEC
    for name in ("word_topic", "bhat"):
        array = getattr(state.model, name)
        assert array.sharding.is_equivalent_to(placed.sharding(getattr(spec, name)), 2)
    assert state.model.word_topic.sharding.is_fully_replicated == (exchange == "topics")
    learned = placed.compile_alpha_update(state, corpus.doc_lengths())(state)
    one = place(corpus, hyper, 1, partition="documents")
    one_state = one.init(5)
    step = one.compile(one_state)
    for _ in range(3):
        one_state = step(one_state)
    one_learned = one.compile_alpha_update(one_state, corpus.doc_lengths())(one_state)
    np.testing.assert_array_equal(placed.alpha(learned), one.alpha(one_learned))
    np.testing.assert_array_equal(np.asarray(placed.topic_word(learned)),
                                  np.asarray(one.topic_word(one_learned)))


def test_the_hosts_exchange_whichever_costs_less_time():
    """auto: the topics of a share's tokens (2 bytes a token as int16) and their extra work
    (the other hosts' tokens counted, B-hat of the rows no longer split) against the counts
    of its rows and their B-hat (float16 and bfloat16: 2 + 2 bytes a cell, half of them
    received from 2 hosts), the bytes at the hosts' measured bandwidth; a setting is kept
    whatever the bytes."""
    hyper = Hyperparams.create(1000)  # 1,024 padded topics, int16 topics
    rows = 50_000  # counts: 4 x 50,000 x 1,024 / 2 = 102 MB a device
    slow, fast = 50e9, 200e9  # bytes a second between hosts
    # 25M tokens: 50 MB and 0.65 ms of count, 25,000 rows of B-hat 0.08 ms
    assert hosts_exchange("auto", 2, 25_000_000, rows, 0, hyper, slow) == "topics"
    # where the link is fast, the topics' extra work costs more than the bytes they save:
    # 0.25 + 0.73 ms against 0.51 ms
    assert hosts_exchange("auto", 2, 25_000_000, rows, 0, hyper, fast) == "counts"
    assert hosts_exchange("auto", 2, 60_000_000, rows, 0, hyper, slow) == "counts"  # 120 MB
    assert hosts_exchange("auto", 2, 40_000_000, rows, rows, hyper, slow) == "topics"  # int32
    assert hosts_exchange("auto", 2, 40_000_000, rows, 0, hyper, slow) == "counts"
    ten_thousand = Hyperparams.create(10_000)  # the counts: 1 GB, 5 ms even at 200 GB/s
    assert hosts_exchange("auto", 2, 25_000_000, rows, 0, ten_thousand, fast) == "topics"
    # one host: nothing crosses (link_speed: an axis of one device is infinitely fast)
    assert hosts_exchange("auto", 1, 25_000_000, rows, 0, hyper, math.inf) == "counts"
    assert hosts_exchange("counts", 2, 1, rows, 0, hyper) == "counts"
    assert hosts_exchange("topics", 2, 10**9, rows, 0, hyper) == "topics"
    with pytest.raises(ValueError, match="hosts_exchange must be 'auto', 'counts' or 'topics'"):
        place(random_corpus(num_docs=5), hyper, hosts_exchange="z")


def test_four_devices_give_the_one_device_model():
    """In a process of its own with four host devices (the test process has two): three by
    documents (several chunks each) and by words, more than two devices on one axis, and the
    two-axis meshes of four; on those exchanging counts also a corpus with a word of more
    than 2,048 tokens, whose counts cross between hosts as int32 (as float16 they would
    round); exchanging topics also over 4 hosts (each counts the share's tokens of 3
    others)."""
    script = """
import numpy as np
from helpers import random_corpus
from saberjax.corpus import Corpus
from saberjax.execution.placement import place
from saberjax.config import Hyperparams

def models(corpus, hyper, meshes):
    found = []
    for count, partition, mesh, *exchange in meshes:
        placed = place(corpus, hyper, count, partition=partition, mesh=mesh,
                       chunk_tokens=200 if count == 3 and partition == "documents" else None,
                       hosts_exchange=(exchange or ["auto"])[0])
        assert placed.hosts_exchange == (exchange or ["counts"])[0]
        state = placed.init(9)
        step = placed.compile(state)
        for _ in range(2):
            state = step(state)
        found.append((placed.word_topic(state), placed.corpus_order_topics(state)))
        print(mesh, "int32 rows", placed.int32_rows)
    for word_topic, topics in found[1:]:
        np.testing.assert_array_equal(word_topic, found[0][0])
        np.testing.assert_array_equal(topics, found[0][1])
    return len(found)

corpus = random_corpus(num_docs=70, num_words=41, mean_length=20, seed=4)
same = models(corpus, Hyperparams.create(33), (
    (1, "documents", None), (3, "documents", None), (3, "words", None),
    (0, "hybrid", "2x2", "counts"), (0, "hybrid", "2x2", "topics"),
    (0, "hybrid", "4x1", "topics")))
rng = np.random.default_rng(1)
lengths = rng.integers(40, 160, 120)
words = rng.integers(0, 41, lengths.sum()).astype(np.int32)
words[rng.random(len(words)) < 0.6] = 3  # about 7,300 tokens
frequent = Corpus(np.concatenate([[0], np.cumsum(lengths)]), words, tuple(map(str, range(41))))
same += models(frequent, Hyperparams.create(2), ((1, "documents", None),
                                                  (0, "hybrid", "2x2", "counts")))
print("same on", same, "meshes")
"""
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": f"{ROOT / 'tests'}:{ROOT}", "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "same on 8 meshes" in result.stdout
    assert "2x2 int32 rows 0" in result.stdout and "2x2 int32 rows 2" in result.stdout


def test_auto_partitions_by_word_on_several_devices_when_the_model_outweighs_the_corpus():
    needs_local_devices(2)
    corpus = random_corpus(num_docs=30, seed=7)  # 50 words, about 1,200 tokens
    hyper = Hyperparams.create(8)  # 50 x 32 cells: 1.3 a token
    assert place(corpus, hyper, 2).partition == "documents"
    hyper = Hyperparams.create(60)
    assert place(corpus, hyper, 2).partition == "words"
    assert place(corpus, hyper, 1).partition == "documents"
    assert place(corpus, hyper, 2, chunk_tokens=100).partition == "documents"
    assert place(corpus, hyper, 2, stream=True).partition == "documents"
    streamed = place(corpus, hyper, 2, chunk_tokens=100, partition="words")
    assert (streamed.partition, streamed.streamed, streamed.num_slots > 1) == ("words", True, True)
    with pytest.raises(ValueError, match="partition 'hybrid' keeps each device's share"):
        place(corpus, hyper, chunk_tokens=100, mesh="1x2")
    with pytest.raises(ValueError, match="partition must be"):
        place(corpus, hyper, 2, partition="topics")


def test_word_shares_built_several_slots_at_once_are_those_built_one_by_one(monkeypatch):
    """Streamed by words, a host of many cores builds several slots' word shares at once
    (layout.word_share_slots_at_once); the slots come out the same and in slot order."""
    from saberjax import layout

    needs_local_devices(2)
    corpus = random_corpus(num_docs=40, seed=3)
    hyper = Hyperparams.create(60)
    monkeypatch.setattr(layout.os, "cpu_count", lambda: 1)
    assert layout.word_share_slots_at_once(8, 2) == 1
    one_by_one = place(corpus, hyper, 2, chunk_tokens=100, partition="words")
    monkeypatch.setattr(layout.os, "cpu_count", lambda: 64)
    assert layout.word_share_slots_at_once(8, 2) == 4
    at_once = place(corpus, hyper, 2, chunk_tokens=100, partition="words")
    assert one_by_one.num_slots >= 4
    for first, second in zip(one_by_one.word_shares.chunks, at_once.word_shares.chunks,
                             strict=True):
        for a, b in zip(jax.tree.leaves(first), jax.tree.leaves(second), strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_more_devices_than_there_are_is_one_clear_error():
    with pytest.raises(ValueError, match=f"num_devices=99, but there are {jax.device_count()}"):
        make_mesh(99)


def test_a_mesh_with_more_chunks_than_documents_leaves_some_empty():
    needs_local_devices(2)
    corpus = random_corpus(num_docs=3, num_words=10, mean_length=5, seed=6)
    hyper = Hyperparams.create(4)
    topics, word_topic, _ = reference(corpus, hyper, 2, seed=1)
    placed, state = run_on_mesh(corpus, hyper, 2, 1, num_devices=2, chunk_tokens=1)
    assert placed.num_chunks > corpus.num_docs
    np.testing.assert_array_equal(placed.word_topic(state), word_topic)
    np.testing.assert_array_equal(placed.corpus_order_topics(state), topics)


def package_imports() -> dict[str, set[str]]:
    """saberjax module -> the saberjax modules it imports anywhere (lazy imports inside
    functions and imports for type checkers too; `from saberjax import x` imports
    saberjax.x)."""
    package = ROOT / "saberjax"
    modules = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.update(f"{node.module}.{alias.name}" if node.module == "saberjax"
                             else node.module for alias in node.names)
        modules[name] = found
    # every submodule's import loads the package's __init__ first: no edge of its own
    return {name: {other for other in found if other in modules and other not in (name,
                                                                               "saberjax")}
            for name, found in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of the graph, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for other in sorted(graph[node]):
            if state.get(other) == "open":
                return path[path.index(other):] + [other]
            if other not in state and (cycle := visit(other, path + [other])):
                return cycle
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node, [node])):
            return cycle
    return None


def test_the_package_import_graph_has_no_cycle():
    graph = package_imports()
    assert {"saberjax.esca", "saberjax.execution.programs", "saberjax.pallas.kernels"} <= set(graph)
    assert "saberjax.esca" not in graph["saberjax.pallas.bhat_tree"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("num_docs", [3, 2000])  # under both probes' tokens; over the larger
def test_the_probes_compile_at_once_and_measure_what_one_after_the_other_did(num_docs,
                                                                            monkeypatch):
    corpus = random_corpus(num_docs=num_docs, num_words=300, mean_length=40, seed=8)
    hyper = Hyperparams.create(16, backend="xla")
    (small_tokens, small), (large_tokens, large) = (
        memory._chunk_step_bytes(corpus, hyper, tokens) for tokens in memory.PROBE_TOKENS)
    expected = (large / large_tokens if large_tokens == small_tokens
                else max(large - small, 0) / (large_tokens - small_tokens))
    assert (large_tokens > small_tokens) == (num_docs > 3)
    threads = {}
    probe = memory._chunk_step_bytes

    def recording(corpus, hyper, tokens):
        threads[tokens] = threading.current_thread().name
        return probe(corpus, hyper, tokens)

    monkeypatch.setattr(memory, "_chunk_step_bytes", recording)
    assert memory.device_bytes_per_token(corpus, hyper) == expected
    small_probe, large_probe = memory.PROBE_TOKENS
    assert threads[large_probe] == "saberjax-probe" != threads[small_probe]


def test_a_run_on_the_two_axis_mesh_resumes_on_any_mesh_to_the_uninterrupted_model(tmp_path):
    """A checkpoint written on hosts x gpus = 2 x 1 resumes on 1 x 2 and on one device by
    documents to the one-device model; learning alpha rebuilds the word shares' B-hat."""
    needs_local_devices(2)
    corpus = random_corpus(num_docs=40, num_words=30, mean_length=20, seed=0)
    config = TrainConfig(num_topics=6, iterations=2, seed=3, backend="xla", mesh="2x1",
                         optimize_alpha_every=1, checkpoint_every=2)
    first = trainer.train(corpus, config, checkpoint_dir=tmp_path)
    assert first.model.config["partition"] == "hybrid"
    longer = dataclasses.replace(config, iterations=4, checkpoint_every=0, mesh=None,
                                 num_devices=1)
    one_device = trainer.train(corpus, longer).model
    for resumed_on in (dict(mesh="1x2", num_devices=0), dict()):
        resumed = trainer.train(corpus, dataclasses.replace(longer, **resumed_on),
                                resume_from=checkpoint.latest_checkpoint(tmp_path)).model
        np.testing.assert_array_equal(resumed.word_topic_counts, one_device.word_topic_counts)
        np.testing.assert_array_equal(resumed.alpha, one_device.alpha)


def test_a_mesh_is_named_as_hosts_x_gpus_and_lays_out_the_hybrid_partition():
    with pytest.raises(ValueError, match="mesh='3': must be HOSTSxGPUS"):
        TrainConfig(mesh="3")
    with pytest.raises(ValueError, match="lays out partition 'hybrid', not partition='words'"):
        TrainConfig(mesh="1x2", partition="words")
    corpus = random_corpus(num_docs=30, seed=7)
    with pytest.raises(ValueError, match=r"mesh=2x4 needs 8 devices, but there are"):
        place(corpus, Hyperparams.create(8), mesh="2x4")
    with pytest.raises(ValueError, match="partition 'hybrid' keeps each device's share"):
        place(corpus, Hyperparams.create(8), mesh="1x1", chunk_tokens=100)
