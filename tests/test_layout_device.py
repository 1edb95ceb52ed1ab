"""The PDOW layout built on a JAX device is the host builder's, array for array, in the
expanded and in the store's compact form, with one compiled program per plan."""

import filecmp
import json

import jax
import numpy as np
import pytest
from helpers import import_script, needs_local_devices

from saberjax import chunk_compact, chunk_store, layout, layout_device
from saberjax.config import Hyperparams
from saberjax.execution.mesh import BY_DEVICE, make_mesh
from saberjax.corpus import Corpus, save_native
from saberjax.layout import plan_layout

CHUNK_FIELDS = ("word", "doc", "doc_major_pos", "doc_start", "num_tokens", "token_base",
                "tile_start")


def corpus_of(lengths, words, num_words: int) -> Corpus:
    lengths = np.asarray(lengths, np.int64)
    return Corpus(np.concatenate([[0], np.cumsum(lengths)]), np.asarray(words, np.int32),
                  tuple(f"w{i}" for i in range(num_words)))


def random_corpus(seed: int, num_docs: int, num_words: int, longest: int = 60) -> Corpus:
    """Documents of random lengths (many equal, so ties in length are common), with empty
    documents first, in the middle and last, one-token documents, and Zipf-like words over
    a vocabulary of which some words never occur."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, longest, num_docs)
    lengths[rng.random(num_docs) < 0.15] = 1
    lengths[rng.random(num_docs) < 0.1] = 0
    lengths[[0, num_docs // 2, num_docs - 1]] = 0
    weights = 1.0 / np.arange(1, num_words + 1) ** 1.2
    words = rng.choice(num_words, int(lengths.sum()), p=weights / weights.sum())
    return corpus_of(lengths, words, num_words)


_build = jax.jit(layout_device.build_chunk)


def device_chunk(corpus, first, last, word_rank, padded_tokens, padded_docs) -> layout.Chunk:
    inputs = layout_device.chunk_inputs(corpus, first, last, padded_tokens, padded_docs)
    return jax.device_get(_build(inputs, jax.numpy.asarray(word_rank)))


def assert_same_chunk(device, host, where=""):
    assert (device.tile_tokens, device.block_tokens) == (host.tile_tokens, host.block_tokens)
    for name in CHUNK_FIELDS:
        got, want = np.asarray(getattr(device, name)), np.asarray(getattr(host, name))
        assert got.dtype == want.dtype and got.shape == want.shape, (where, name)
        np.testing.assert_array_equal(got, want, err_msg=f"{where} {name}")


def assert_same_compact(device, host, where=""):
    assert (device.tile_tokens, device.block_tokens) == (host.tile_tokens, host.block_tokens)
    for name in chunk_compact.COMPACT_FIELDS:
        got, want = np.asarray(getattr(device, name)), np.asarray(getattr(host, name))
        assert got.dtype == want.dtype and got.shape == want.shape, (where, name)
        np.testing.assert_array_equal(got, want, err_msg=f"{where} {name}")


@pytest.mark.parametrize("seed, num_docs, num_words, chunk_tokens", [
    (0, 40, 300, None), (1, 200, 200, 900), (2, 300, 500, 1200), (3, 120, 2, 500),
    (4, 90, 1000, 400), (5, 7, 12, 20)])
def test_device_layout_is_the_host_layout_in_every_chunk(seed, num_docs, num_words,
                                                          chunk_tokens):
    corpus = random_corpus(seed, num_docs, num_words)
    plan = plan_layout(corpus, chunk_tokens)
    runs = min(corpus.num_words, plan.padded_tokens) + 1
    compact = jax.jit(lambda inputs, rank: chunk_compact.compact_on_device(
        layout_device.build_chunk(inputs, rank), runs))
    absent = length_order_matters = False
    for index, (first, last) in enumerate(plan.chunk_docs):
        host = plan.build_chunk(corpus, index)
        device = device_chunk(corpus, first, last, plan.word_rank, plan.padded_tokens,
                              plan.padded_docs)
        assert_same_chunk(device, host, f"chunk {index}")
        inputs = layout_device.chunk_inputs(corpus, first, last, plan.padded_tokens,
                                            plan.padded_docs)
        assert_same_compact(jax.device_get(compact(inputs, jax.numpy.asarray(plan.word_rank))),
                            chunk_compact.compact(host, runs), f"chunk {index}")
        n = int(host.num_tokens)
        absent |= len(np.unique(host.word[:n])) < corpus.num_words
        # the documents' lengths decide the order: a stable sort by rank alone differs
        rank_only = np.argsort(plan.word_rank[corpus.word_ids[
            corpus.doc_offsets[first]:corpus.doc_offsets[last]]], kind="stable")
        length_order_matters |= not np.array_equal(rank_only, host.doc_major_pos[:n])
    assert length_order_matters and (absent or num_words == 2)  # what they are for


def test_documents_longer_than_65536_tokens_and_padding_beyond_the_plan():
    """The host sorts documents by a 16-bit key below 65,536 tokens and by a wider one above;
    a chunk laid out with more padding than its plan needs keeps the same conventions."""
    rng = np.random.default_rng(7)
    lengths = np.array([0, 3, 70_000, 1, 65_536, 0, 65_535, 70_000, 2, 0])
    words = rng.integers(0, 300, lengths.sum())
    words[:1000] = 299  # some ranks with long runs in one document
    corpus = corpus_of(lengths, words, 400)
    plan = plan_layout(corpus)
    for padded_tokens, padded_docs in [(plan.padded_tokens, plan.padded_docs),
                                       (plan.padded_tokens + 5000, plan.padded_docs + 40)]:
        host = layout.build_chunk(corpus, 0, len(lengths), plan.word_rank, padded_tokens,
                                  padded_docs)
        device = device_chunk(corpus, 0, len(lengths), plan.word_rank, padded_tokens,
                              padded_docs)
        assert_same_chunk(device, host, f"padded to {padded_tokens}")
        assert np.all(host.doc[corpus.num_tokens:] == len(lengths))


def test_one_word_vocabulary_empty_chunks_and_chunks_of_empty_documents():
    corpus = corpus_of([0, 5, 1, 0, 9, 0, 0, 0, 4], np.zeros(19), 1)
    word_rank = np.zeros(1, np.int32)
    for first, last in [(0, 9), (1, 3), (5, 8), (3, 3), (8, 9)]:
        host = layout.build_chunk(corpus, first, last, word_rank, 32, 16)
        assert_same_chunk(device_chunk(corpus, first, last, word_rank, 32, 16), host,
                          f"documents {first}..{last}")


def test_chunk_inputs_must_fit_the_padded_shape():
    corpus = corpus_of([4, 4], np.arange(8), 8)
    with pytest.raises(ValueError, match="do not fit"):
        layout_device.chunk_inputs(corpus, 0, 2, 7, 4)
    with pytest.raises(ValueError, match="do not fit"):
        layout_device.chunk_inputs(corpus, 0, 2, 8, 2)  # no room for the padding document


def test_every_chunk_of_a_plan_runs_one_compiled_program():
    corpus = random_corpus(11, 400, 60)
    plan = plan_layout(corpus, 800)
    traces = []

    def build(inputs, rank):
        traces.append(1)
        return layout_device.build_chunk(inputs, rank)

    build = jax.jit(build)
    word_rank = jax.numpy.asarray(plan.word_rank)
    for index, (first, last) in enumerate(plan.chunk_docs):
        chunk = build(layout_device.chunk_inputs(corpus, first, last, plan.padded_tokens,
                                                 plan.padded_docs), word_rank)
        assert_same_chunk(jax.device_get(chunk), plan.build_chunk(corpus, index))
    assert len(plan.chunk_docs) >= 8 and len(traces) == 1


@pytest.mark.parametrize("num_devices", [1, 2])
def test_a_store_built_on_the_devices_is_byte_for_byte_the_host_built_store(
        num_devices, tmp_path, monkeypatch):
    needs_local_devices(num_devices)
    corpus = random_corpus(13, 500, 80)
    plan = plan_layout(corpus, 1500, num_devices)
    sharding = jax.sharding.NamedSharding(make_mesh(num_devices),
                                BY_DEVICE)
    traces = []
    build_chunk = layout_device.build_chunk

    def counted(*args, **kwargs):
        traces.append(1)
        return build_chunk(*args, **kwargs)

    monkeypatch.setattr(layout_device, "build_chunk", counted)
    stores = {}
    for on_devices in (False, True):
        directory = tmp_path / ("devices" if on_devices else "host")
        store = chunk_store.StoredChunks(corpus, plan, Hyperparams.create(8), directory,
                                         sharding, build_on_devices=on_devices)
        stores[on_devices] = directory
        store.close()
        assert len(traces) == on_devices  # one trace serves every slot
    assert len(plan.chunk_docs) // num_devices > 3  # slots pipelined through the writer
    for name in (chunk_store.STATIC, chunk_store.MANIFEST):
        assert filecmp.cmp(stores[False] / name, stores[True] / name, shallow=False), name


def test_devices_out_of_memory_leave_the_build_to_the_host(tmp_path, monkeypatch):
    corpus = random_corpus(17, 300, 60)
    plan = plan_layout(corpus, 1200)
    sharding = jax.sharding.NamedSharding(make_mesh(1), BY_DEVICE)
    chunk_inputs, calls = layout_device.chunk_inputs, []

    def runs_out_at_the_third_slot(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying "
                                             "to allocate 1 bytes.")
        return chunk_inputs(*args, **kwargs)

    monkeypatch.setattr(layout_device, "chunk_inputs", runs_out_at_the_third_slot)
    with pytest.warns(UserWarning, match="on the host: the devices ran out of memory"):
        chunk_store.StoredChunks(corpus, plan, Hyperparams.create(8), tmp_path / "fallback",
                                 sharding, build_on_devices=True).close()
    chunk_store.StoredChunks(corpus, plan, Hyperparams.create(8), tmp_path / "host", sharding,
                             build_on_devices=False).close()
    assert len(calls) == 3 and len(plan.chunk_docs) > 3
    assert filecmp.cmp(tmp_path / "fallback" / chunk_store.STATIC,
                       tmp_path / "host" / chunk_store.STATIC, shallow=False)

    def breaks(*args, **kwargs):
        raise jax.errors.JaxRuntimeError("INTERNAL: broken")

    # any other device error is the build's error, and leaves no store
    monkeypatch.setattr(layout_device, "chunk_inputs", breaks)
    with pytest.raises(jax.errors.JaxRuntimeError, match="INTERNAL"):
        chunk_store.StoredChunks(corpus, plan, Hyperparams.create(8), tmp_path / "failed",
                                 sharding, build_on_devices=True)
    assert not (tmp_path / "failed" / chunk_store.MANIFEST).exists()


def test_layout_device_bench_times_both_builders_and_checks_them_equal(tmp_path, capsys):
    bench = import_script("tools/layout_device_bench.py", "saberjax_layout_device_bench")
    save_native(random_corpus(19, 400, 300), tmp_path / "corpus")
    bench.FLAGS(["layout_device_bench", f"--corpus={tmp_path / 'corpus'}",
                 "--chunk_tokens=2000", "--max_chunks=3", "--store",
                 f"--store_dir={tmp_path / 'stores'}"])
    bench.main(["layout_device_bench"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    events = [line["event"] for line in lines]
    assert events == ["plan", "compile", "chunk", "chunk", "chunk", "summary", "store", "store",
                      "store_files"]
    chunks = [line for line in lines if line["event"] == "chunk"]
    assert all(line["equal"] and line["device_mtoken_per_s"] > 0 and line["host_seconds"] > 0
               for line in chunks)
    assert lines[5]["all_equal"] and lines[5]["tokens"] == sum(c["tokens"] for c in chunks)
    assert lines[1]["seconds"] > 0 and lines[-1]["same"]
    assert {line["builder"] for line in lines[6:8]} == {"devices", "host"}
