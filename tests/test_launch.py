"""The launchers work as a user runs them: train writes a model directory, evaluate scores it."""

import json

import numpy as np
from helpers import launch, run_launcher


def test_train_then_evaluate_on_the_bundled_corpus(tmp_path):
    out = tmp_path / "model"
    stdout = launch("train.py", "--num_topics=6", "--iterations=3", "--backend=xla",
                    f"--output={out}", "--top_words=4", "--report")
    assert stdout.count("topic ") == 6
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["iterations"] == 3 and summary["heldout_loglik_per_token"] < 0
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in metrics] == [1, 2, 3]
    assert {"seconds", "tokens_per_second"} <= metrics[0].keys()
    assert "heldout_loglik_per_token" in metrics[-1]
    with np.load(out / "model.npz") as model:
        assert model["topic_word"].shape == (6, 6906)
        np.testing.assert_allclose(model["topic_word"].sum(axis=1, dtype=np.float64), 1.0, rtol=1e-6)
        assert model["word_topic_counts"].shape == (6906, 6)
    config = json.loads((out / "config.json").read_text())
    assert config["num_topics"] == 6 and len(config["corpus_fingerprint"]) == 64
    assert len((out / "vocab.txt").read_text().splitlines()) == 6906
    assert (out / "report" / "topics.html").read_text().count("<tr") >= 6

    scored = json.loads(launch("evaluate.py", f"--model={out}").strip().splitlines()[-1])
    assert abs(scored["heldout_loglik_per_token"] - summary["heldout_loglik_per_token"]) < 1e-6


def test_train_rejects_a_malformed_corpus_with_a_clear_message(tmp_path):
    bad = tmp_path / "docword.txt"
    bad.write_text("2\n3\n1\n1 9 1\n")
    (tmp_path / "vocab.txt").write_text("a\nb\nc\n")
    result = run_launcher("train.py", f"--corpus={bad}", "--iterations=1", timeout=300)
    assert result.returncode != 0
    assert "docword.txt, line 4" in result.stderr
