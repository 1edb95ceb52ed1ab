"""Views of a trained model: relevance ranking, the pyLDAvis arguments and page, topics over
time, through the Python API and the report and evaluate commands, on models trained by the
CLI, by saberjax.train and by LDA, saved and loaded."""

import csv
import json
import subprocess
import sys

import numpy as np
import pytest
from helpers import ROOT
from test_seeding import themed_corpus

from saberjax import ldavis, over_time
from saberjax.config import TrainConfig
from saberjax.estimator import LDA
from saberjax.model import TopicModel
from saberjax.trainer import train

LETTERS = "abcdefghijklmnopqrst"


@pytest.fixture(name="models", scope="module")
def fixture_models(tmp_path_factory):
    """(the corpus, {how: the model trained that way, saved and loaded})."""
    folder = tmp_path_factory.mktemp("models")
    corpus = themed_corpus(docs=60)
    settings = dict(num_topics=6, iterations=3, backend="xla", num_devices=1)
    trained = {"train": train(corpus, TrainConfig(**settings)).model,
               "LDA": LDA(**settings).fit(corpus).model_}
    loaded = {}
    for how, model in trained.items():
        model.save(folder / how)
        loaded[how] = TopicModel.load(folder / how)
    return corpus, loaded


def test_relevance_one_is_the_plain_top_words(models):
    """lambda = 1 ranks as top_words does, ties (all unused words) to the lower id, for every
    n; lambda = 0 ranks by lift; lambda outside [0, 1] is a ValueError."""
    corpus, loaded = models
    for model in loaded.values():
        for n in (5, 60, corpus.num_words):
            assert model.top_words(n, relevance=1.0) == model.top_words(n)
        assert model.top_words(5, relevance=0.6) != model.top_words(5)
        with pytest.raises(ValueError, match="relevance must be a number in"):
            model.top_words(5, relevance=1.5)
    counts = np.array([[50, 0], [40, 40], [1, 0], [0, 30]], np.int32)
    model = TopicModel(counts, 0.1, 0.01, ("common", "shared", "rare", "other"))
    assert model.top_words(1, relevance=1.0) == [["common"], ["shared"]]
    # word 2 is all topic 0's: its lift, p(w | 0) / p(w), beats the frequent shared words
    assert model.top_words(2, relevance=0.0)[0] == ["common", "rare"]


def test_to_pyldavis(models):
    """pyLDAvis.prepare's arguments: the model's topic_word, each document's theta (rows sum
    to 1), lengths and the documents' word counts; the page where pyLDAvis is installed."""
    corpus, loaded = models
    for model in loaded.values():
        arguments = model.to_pyldavis(corpus)
        assert set(arguments) == {"topic_term_dists", "doc_topic_dists", "doc_lengths", "vocab",
                                  "term_frequency"}
        np.testing.assert_allclose(arguments["topic_term_dists"], model.topic_word)
        assert arguments["doc_topic_dists"].shape == (corpus.num_docs, model.num_topics)
        np.testing.assert_allclose(arguments["doc_topic_dists"].sum(axis=1), 1, rtol=1e-5)
        np.testing.assert_array_equal(arguments["doc_lengths"], corpus.doc_lengths())
        np.testing.assert_array_equal(arguments["term_frequency"],
                                      np.bincount(corpus.word_ids, minlength=corpus.num_words))
        assert arguments["vocab"] == list(model.vocab)
    pytest.importorskip("pyLDAvis")
    page = ldavis.pyldavis_html(loaded["LDA"].to_pyldavis(corpus))
    assert "ldavis_el" in page and "t0w0" in page


def test_pyldavis_page_without_pyldavis(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyLDAvis", None)
    with pytest.raises(ImportError, match="pip install pyLDAvis"):
        ldavis.pyldavis_html({})


def test_topics_over_time_means_each_periods_theta():
    """Shares are the mean theta of each period's documents; a document without a date is
    left out with a warning; a value that is no date names its document."""
    theta = np.array([[1, 0], [0, 1], [0.5, 0.5], [0.2, 0.8]])
    dates = over_time.parse_dates(["2024-01-05", "2024-01-20T10:00", "2025-03", ""], "dates")
    with pytest.warns(UserWarning, match="1 document"):
        by_month = over_time.topics_over_time(theta, dates, "month")
    assert by_month.periods == ("2024-01", "2025-03")
    np.testing.assert_array_equal(by_month.documents, [2, 1])
    np.testing.assert_allclose(by_month.shares, [[0.5, 0.5], [0.5, 0.5]])
    by_year = over_time.topics_over_time(theta[:3], dates[:3], "year")
    assert by_year.periods == ("2024", "2025")
    assert over_time.write_table(by_year).splitlines() == [
        "period,documents,topic_0,topic_1", "2024,2,0.500000,0.500000",
        "2025,1,0.500000,0.500000"]
    with pytest.raises(ValueError, match="dates: document 1's date 'soon' is not an ISO date"):
        over_time.parse_dates(["2024", "soon"], "dates")


@pytest.fixture(name="cli_model", scope="module")
def fixture_cli_model(tmp_path_factory):
    """A model trained by the CLI on JSON Lines documents with a date field."""
    folder = tmp_path_factory.mktemp("cli")
    corpus = themed_corpus(docs=60)
    with open(folder / "docs.jsonl", "w") as file:
        for d in range(corpus.num_docs):
            words = corpus.word_ids[corpus.doc_offsets[d]:corpus.doc_offsets[d + 1]]
            text = " ".join("th" + "abcdef"[w // 20] + LETTERS[w % 20] for w in words)
            file.write(json.dumps(dict(text=text, date=f"202{d % 2}-0{1 + d % 3}-15")) + "\n")
    subprocess.run([sys.executable, "-m", "saberjax", "train", f"--corpus={folder / 'docs.jsonl'}",
                    "--num_topics=4", "--iterations=5", "--backend=xla", "--num_devices=1",
                    "--min_df=1", "--max_df=1.0", "--top_words=0", f"--output={folder / 'model'}"],
                   check=True, capture_output=True, cwd=ROOT)
    return folder


def saberjax(*arguments) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "saberjax", *arguments], capture_output=True,
                          text=True, cwd=ROOT)


def test_report_relevance_dates_and_pyldavis(cli_model):
    """report --relevance --dates=COLUMN --period=year --pyldavis: the words ranked, the
    table of the yearly shares, c_v and diversity (plain text keeps token order), and the
    pyLDAvis page or the line saying how to install it."""
    model = TopicModel.load(cli_model / "model")
    run = saberjax("report", f"--model={cli_model / 'model'}", "--relevance=0.6", "--dates=date",
                   "--period=year", "--pyldavis", f"--output={cli_model / 'report'}")
    assert run.returncode == 0, run.stderr
    markdown = (cli_model / "report" / "topics.md").read_text()
    assert "lambda = 0.6" in markdown and "**c_v**: " in markdown
    assert "**topic diversity**: " in markdown
    assert " ".join(model.top_words(10, relevance=0.6)[0]) in markdown
    with open(cli_model / "report" / "topics_over_time.csv") as file:
        rows = list(csv.reader(file))
    assert [row[:2] for row in rows] == [["period", "documents"], ["2020", "30"], ["2021", "30"]]
    np.testing.assert_allclose([sum(map(float, row[2:])) for row in rows[1:]], 1, atol=1e-5)
    try:
        import pyLDAvis  # noqa: F401
        assert (cli_model / "report" / "pyldavis.html").is_file()
    except ImportError:
        assert "pip install pyLDAvis" in run.stdout


def test_report_dates_from_a_file_and_bad_dates(cli_model):
    """--dates=FILE (one date a line) gives the periods of its dates; a file of the wrong
    length is one line, and no report is written."""
    dates = cli_model / "dates.txt"
    dates.write_text("".join(f"202{d % 2}-0{1 + d % 3}-15\n" for d in range(60)))
    run = saberjax("report", f"--model={cli_model / 'model'}", f"--dates={dates}",
                   "--period=year", f"--output={cli_model / 'by_file'}")
    assert run.returncode == 0, run.stderr
    with open(cli_model / "by_file" / "topics_over_time.csv") as file:
        assert [row[:2] for row in csv.reader(file)] == [["period", "documents"],
                                                         ["2020", "30"], ["2021", "30"]]
    dates.write_text("2020-01-01\n")
    short = saberjax("report", f"--model={cli_model / 'model'}", f"--dates={dates}",
                     f"--output={cli_model / 'short'}")
    assert short.returncode != 0 and "1 lines, but the corpus has 60 documents" in short.stderr
    assert len(short.stderr.strip().splitlines()) == 1
    assert not (cli_model / "short").exists()


def test_evaluate_relevance_and_cv(cli_model):
    """evaluate --relevance=1 prints the plain top words and scores c_v on plain text."""
    model = TopicModel.load(cli_model / "model")
    run = saberjax("evaluate", f"--model={cli_model / 'model'}", "--relevance=1",
                   "--coherence=npmi,c_v", "--top_n=5")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["top_words"] == model.top_words(5)
    assert -1 <= result["coherence_c_v"] <= 1 and 0 < result["topic_diversity"] <= 1
