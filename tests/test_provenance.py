"""Issue 14, section 4: models saved from Python are whole.  They record the training metrics
and settings, and the launchers either work on them or say in one line what they need, never
scoring them silently against a corpus they were not trained on."""

import json

import pytest
from helpers import random_corpus, run_launcher

from saberjax import trainer
from saberjax.corpus import save_native
from saberjax.estimator import LDA
from saberjax.model import TopicModel


@pytest.fixture(scope="module")
def python_model(tmp_path_factory):
    """(model directory saved by LDA.save, its training corpus saved as a native folder)."""
    root = tmp_path_factory.mktemp("python_model")
    documents = random_corpus(num_docs=40, num_words=30, mean_length=20)
    save_native(documents, root / "corpus")
    LDA(num_topics=3, iterations=3, backend="xla").fit(documents).save(root / "model")
    return root / "model", root / "corpus"


def test_lda_save_records_metrics_and_settings(python_model):
    model = TopicModel.load(python_model[0])
    assert [record["iteration"] for record in model.metrics] == [1, 2, 3]
    assert model.config["num_topics"] == 3 and len(model.config["corpus_fingerprint"]) == 64
    lines = (python_model[0] / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["iteration"] for line in lines] == [1, 2, 3]


def test_report_on_a_python_model_asks_for_its_reference_documents(python_model, tmp_path):
    result = run_launcher("report.py", f"--model={python_model[0]}",
                          f"--output={tmp_path / 'report'}", timeout=300)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "records no training corpus path" in result.stderr.strip().splitlines()[-1]
    assert "--coherence_corpus" in result.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "report").exists()

    result = run_launcher("report.py", f"--model={python_model[0]}",
                          f"--output={tmp_path / 'report'}",
                          f"--coherence_corpus={python_model[1]}", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    markdown = (tmp_path / "report" / "topics.md").read_text()
    assert "path not recorded" in markdown and "bundled" not in markdown
    assert (tmp_path / "report" / "convergence.png").is_file()  # from the saved metrics


def test_evaluate_scores_a_python_model_and_says_why_coherence_is_missing(python_model):
    result = run_launcher("evaluate.py", f"--model={python_model[0]}",
                          f"--corpus={python_model[1]}", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    scores = json.loads(result.stdout.strip().splitlines()[-1])
    assert scores["heldout_loglik_per_token"] < 0 and "coherence_npmi" not in scores
    assert "warning: no coherence" in result.stderr and "--coherence_corpus" in result.stderr


def test_lda_verbose_prints_progress_lines(capsys):
    LDA(num_topics=3, iterations=3, backend="xla", verbose=2).fit(
        random_corpus(num_docs=20, num_words=20, mean_length=10))
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(":")[0] for line in lines] == ["iteration 2/3", "iteration 3/3"]
    assert all("Mtoken/s, ETA" in line for line in lines)


def test_a_model_trained_from_python_carries_its_metrics(tmp_path):
    result = trainer.train(random_corpus(num_docs=20, num_words=20, mean_length=10),
                           trainer.TrainConfig(num_topics=3, iterations=2, backend="xla"))
    result.model.save(tmp_path / "model")
    assert len(TopicModel.load(tmp_path / "model").metrics) == 2
