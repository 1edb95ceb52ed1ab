"""Tests of the performance benchmark command (saberjax bench), run in-process on tiny corpora."""

from __future__ import annotations

import dataclasses
import json
import os

import jax
import numpy as np
import pytest
from absl import flags

from helpers import needs_local_devices, random_corpus
from saberjax import esca
from saberjax.benchmark import planned_device_bytes
from saberjax.execution import memory
from saberjax.iteration_measures import measure_reduction
from saberjax.execution.placement import place
from saberjax.commands import bench
from saberjax.config import Hyperparams
from saberjax.corpus import save_native
from saberjax.layout import build_layout



@pytest.fixture(scope="module")
def bench_flags():
    """The bench command's flags, in a registry of their own."""
    values = flags.FlagValues()
    bench.define_flags(values)
    return values


@pytest.fixture
def parse(bench_flags):
    """Parses bench flags from a list of arguments; flags go back to defaults afterwards."""

    def parse_args(*args):
        bench_flags.unparse_flags()
        return bench_flags(["bench", *args])

    yield parse_args
    bench_flags.unparse_flags()


def run_main(bench_flags, parse, capsys, *args) -> list[dict]:
    parse(*args)
    bench.main(["bench"], bench_flags)
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]


def test_benchmark_reports_positive_throughput_phases_and_skips_unavailable_backend(
        bench_flags, parse, capsys, tmp_path):
    corpus_dir = tmp_path / "tiny"
    save_native(random_corpus(num_docs=40, num_words=30, mean_length=20, seed=1), corpus_dir)
    output = tmp_path / "runs" / "bench.jsonl"
    output.parent.mkdir()
    output.write_text('{"earlier": "line"}')  # no trailing newline: appending must add one
    lines = run_main(bench_flags, parse, capsys, f"--corpus={corpus_dir}", "--num_topics=8",
                     "--iterations=2", "--warmup=1", "--backends=pallas,xla", "--copy_mib=4",
                     "--phase_repeats=1", "--num_devices=1,2", f"--output={output}")

    assert [line["backend"] for line in lines[:2]] == ["xla", "pallas"]  # xla first: the ratios
    result, pallas, two_result, two_pallas, summary = lines
    assert result["type"] == "result" and summary["type"] == "summary"
    assert (result["K"], result["backend"]) == (8, "xla")
    for key in ("Mtoken_per_s_mean", "Mtoken_per_s_steady", "Mtoken_per_s_best",
                "steady_iteration_seconds",
                "compile_seconds", "init_seconds", "copy_GB_per_s", "achieved_GB_per_s",
                "bandwidth_floor_seconds", "bandwidth_bound_Mtoken_per_s",
                "chunk_bytes_per_token", "chunk_state_bytes_per_token", "state_bytes_per_token",
                "model_bytes", "model_bytes_per_token", "min_traffic_bytes", "T", "D", "V"):
        assert result[key] > 0, key
    assert len(result["iteration_seconds"]) == 2 and len(result["warmup_seconds"]) == 1
    assert all(t > 0 for t in result["iteration_seconds"])
    assert result["state_bytes_per_token"] == pytest.approx(
        result["chunk_bytes_per_token"] + result["chunk_state_bytes_per_token"], rel=1e-3)
    assert result["speedup_vs_xla"] == 1.0  # several backends asked for: ratio reported
    for key in ("device", "platform", "jax_version", "date"):
        assert result[key], key
    assert result["device"] == jax.devices()[0].device_kind
    assert result["jax_version"] == jax.__version__

    phases = result["phases"]
    assert set(phases) == {"sample", "rebuild_a", "count_b", "bhat_trees"}
    for name in ("sample", "rebuild_a", "count_b", "bhat_trees"):
        assert phases[name]["seconds"] > 0 and phases[name]["Mtoken_per_s"] > 0, name
    sample = phases["sample"]  # the E-step's roofline beside the measured phase
    assert sample["floor_seconds"] == max(sample["hbm_seconds"], sample["l2_seconds"],
                                          sample["l1_seconds"]) > 0
    assert sample["floor_bound"] in ("hbm", "l2", "l1")
    assert sample["over_floor"] == pytest.approx(sample["seconds"] / sample["floor_seconds"],
                                                 rel=1e-2)
    assert sample["hbm_bytes_per_token"] > 16 and sample["nnz_per_token"] >= 1
    assert 0 < sample["a_l2_share"] <= 1
    assert result["chunk_tokens"] is None and result["num_chunks"] == 1
    assert result["placement"]["bytes"] > 0 and result["placement"]["seconds"] > 0
    assert (result["devices"], two_result["devices"]) == (1, 2)
    assert result["speedup_vs_one_device"] == 1.0 and two_result["speedup_vs_one_device"] > 0
    assert result["collective_bytes_per_device"] == 0  # one device: no collective
    assert two_result["collective_bytes_per_device"] > 0 and two_result["reduction_seconds"] > 0
    axis, = two_result["collective_bytes_by_axis"]  # the one axis of the mesh, its floor
    assert two_result["collective_floor_seconds"] == pytest.approx(
        two_result["collective_bytes_per_device"] / two_result["axis_GB_per_s"][axis] / 1e9,
        rel=1e-3)
    assert 0 < two_result["reduction_share"] < 1

    assert pallas["K"] == 8
    if jax.default_backend() != "gpu":  # the Pallas kernels need a GPU: reported, not a crash
        assert pallas["type"] == two_pallas["type"] == "skipped" and pallas["reason"]
        assert summary["skipped"] == 2 * [dict(K=8, backend="pallas", reason=pallas["reason"])]
    else:
        assert pallas["type"] in ("result", "skipped")
    assert summary["results"][0]["backend"] == "xla"
    assert summary["copy_GB_per_s"] > 0 and summary["wall_seconds"] > 0

    written = output.read_text().splitlines()
    assert json.loads(written[0]) == {"earlier": "line"}
    assert [json.loads(line) for line in written[1:]] == lines
    assert sorted(os.listdir(output.parent)) == ["bench.jsonl"]  # no temporary file left


def test_each_k_of_a_list_runs_on_the_partition_auto_plans_for_it():
    """partition auto places the corpus for each K as training would: by documents for a
    small model, by words where the model outweighs the corpus (each K its own plan, not
    the first K's placement reused)."""
    from saberjax.benchmark import run_benchmark
    from saberjax.execution.placement import place

    needs_local_devices(2)
    corpus = random_corpus(num_docs=30, seed=7)  # 50 words, about 1,200 tokens
    expected = {k: place(corpus, Hyperparams.create(k), 2).partition for k in (60, 8)}
    assert expected == {60: "words", 8: "documents"}
    records = run_benchmark(corpus, [60, 8], ["xla"], iterations=1, warmup=0,
                            num_devices=(2,), phases=False, copy_mib=1, emit=lambda _: None)
    results = [record for record in records if record["type"] == "result"]
    assert [(r["K"], r["partition"]) for r in results] == [(60, "words"), (8, "documents")]


def test_test_fraction_trains_on_the_rest_and_scores_the_held_out_documents(
        bench_flags, parse, capsys, tmp_path):
    corpus = random_corpus(num_docs=40, num_words=30, mean_length=20, seed=2)
    save_native(corpus, tmp_path / "tiny")
    lines = run_main(bench_flags, parse, capsys, f"--corpus={tmp_path / 'tiny'}", "--num_topics=4",
                     "--iterations=2", "--warmup=0", "--phases=false", "--copy_mib=4",
                     "--test_fraction=0.25")
    result, summary = lines
    assert result["D"] == 30  # 10 of the 40 documents held out
    assert -np.log(30) - 1 < result["heldout_loglik_per_token"] < 0
    assert summary["results"][0]["heldout_loglik_per_token"] == result["heldout_loglik_per_token"]


def test_each_init_window_topics_value_is_a_run_of_its_own(bench_flags, parse, capsys,
                                                          tmp_path):
    corpus = random_corpus(num_docs=40, num_words=30, mean_length=20, seed=3)
    save_native(corpus, tmp_path / "tiny")
    for bad in ("-1", "4,x", "automatic"):
        with pytest.raises(flags.IllegalFlagValueError, match="init_window_topics"):
            parse(f"--init_window_topics={bad}")
    *results, summary = run_main(bench_flags, parse, capsys, f"--corpus={tmp_path / 'tiny'}",
                                 "--num_topics=8", "--iterations=1", "--warmup=0",
                                 "--phases=false", "--copy_mib=4",
                                 "--init_window_topics=0,2,auto")
    # auto: the setting's default for the K, uniform at K = 8
    assert [r["init_window_topics"] for r in results] == [0, 2, 0]
    assert [r["init_window_topics"] for r in summary["results"]] == [0, 2, 0]


def test_unknown_backend_or_bad_k_is_a_flag_error(parse, bench_flags):
    with pytest.raises(flags.IllegalFlagValueError, match="cuda"):
        parse("--backends=xla,cuda")
    with pytest.raises(flags.IllegalFlagValueError):
        parse("--num_topics=100,abc")
    with pytest.raises(flags.IllegalFlagValueError):
        parse("--corpus=/tmp/x", "--synth_preset=nytimes")
    for chunks in ("0", "1000,x", "-5"):
        with pytest.raises(flags.IllegalFlagValueError, match="chunk_tokens"):
            parse(f"--chunk_tokens={chunks}")
    parse("--chunk_tokens=1000,2000")
    assert bench_flags.chunk_tokens == ["1000", "2000"]


def test_compiled_step_gives_the_same_state_as_esca_step():
    corpus = random_corpus(num_docs=50, num_words=40, mean_length=30, seed=2)
    hyper = Hyperparams.create(8)
    chunks = build_layout(corpus, chunk_tokens=800).chunks
    placement = place(corpus, hyper, num_devices=1, chunk_tokens=800)
    assert len(chunks) == placement.num_slots > 1
    ours, reference = placement.init(seed=3), esca.init(chunks, corpus.num_words, hyper, seed=3)
    compiled = placement.compile(ours)
    assert compiled.compile_seconds > 0 and compiled.num_executables == 1
    for _ in range(2):
        ours = compiled(ours)
        reference = esca.step(reference, chunks, hyper)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(reference)):
        np.testing.assert_array_equal(np.asarray(a).reshape(np.shape(b)), np.asarray(b))


def test_append_lines_is_atomic_and_keeps_earlier_lines(tmp_path):
    path = tmp_path / "out" / "bench.jsonl"
    bench.append_lines(str(path), ["a"])
    bench.append_lines(str(path), ["b", "c"])
    assert path.read_text() == "a\nb\nc\n"
    assert os.listdir(path.parent) == ["bench.jsonl"]


def test_the_two_axis_mesh_reports_what_crosses_between_hosts():
    """On hosts x gpus = 2 x 1, exchanging counts, a device's rows of B cross the hosts axis
    as float16 (no word has 2,048 tokens) and B-hat as bfloat16: 4 bytes a cell, halved by
    the 2 hosts, against the 6 x 1/2 of the one-axis partition by documents.  Exchanging
    topics, the other host's topics of the device's share: 2 bytes a token (int16) of its
    padded share, fewer here, so auto takes them.  bench's planned bytes are the plan's for
    the mesh's 2 hosts."""
    needs_local_devices(2)
    corpus = random_corpus(num_docs=40, num_words=30, mean_length=20, seed=1)
    hyper = Hyperparams.create(8)
    placement = place(corpus, hyper, mesh="2x1", hosts_exchange="counts")
    per_token = memory.device_bytes_per_token(corpus, hyper)
    assert planned_device_bytes(corpus, hyper, placement) == memory.resident_bytes(
        corpus, hyper, 2, "hybrid", per_token, hosts=2) != memory.resident_bytes(
        corpus, hyper, 2, "hybrid", per_token)
    record = measure_reduction(placement, 1, 1 << 16)
    assert set(record["collective_bytes_by_axis"]) == {"hosts"}
    assert record["collective_bytes_by_axis"]["hosts"] == 30 * 32 * 4 // 2
    assert record["hosts_exchange"] == "counts"
    assert record["cross_host_share_of_by_documents"] == pytest.approx(4 / 6, rel=1e-3)
    assert record["axis_GB_per_s"]["hosts"] > 0 and record["collective_seconds"] > 0
    topics = measure_reduction(dataclasses.replace(placement, hosts_exchange_setting="auto"),
                               1, 1 << 16)
    share_tokens = placement.word_shares.word.shape[1]
    assert topics["hosts_exchange"] == "topics"
    assert topics["collective_bytes_by_axis"]["hosts"] == share_tokens * 2 < 30 * 32 * 4 // 2
    assert topics["cross_host_share_of_by_documents"] == pytest.approx(
        share_tokens * 2 / (30 * 32 * 6 / 2), rel=1e-3)
