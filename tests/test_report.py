"""Reports: topic pages list every topic with escaped words, the plot is optional, and the
report launcher writes them for a trained model."""

import dataclasses
import json
import re
import sys

import numpy as np
import pytest
from helpers import launch, random_corpus

from saberjax import report, trainer
from saberjax.corpus import (Corpus, load_bundled, save_native, split_document_halves,
                             train_test_split)
from saberjax.model import TopicModel

WORDS = ("<script>alert(1)</script>", "fish&chips", "left|right", "snake_case", "plain")
METRICS = [dict(iteration=i, seconds=0.1, tokens_per_second=1e6 + i)
           | (dict(heldout_loglik_per_token=-8 + 0.1 * i, perplexity=2000.0 - i) if i % 2 else {})
           for i in range(1, 8)]


@pytest.fixture(name="model_and_reference")
def fixture_model_and_reference():
    """A model over awkward words whose topics have distinct shares, and its documents."""
    corpus = random_corpus(num_docs=40, num_words=30, seed=4)
    corpus = Corpus(corpus.doc_offsets, corpus.word_ids, WORDS + corpus.vocab[len(WORDS):])
    counts = np.random.default_rng(4).integers(0, 20, (corpus.num_words, 6)).astype(np.int32)
    counts[:, 2] *= 5  # the largest topic
    counts[: len(WORDS)] += 100  # the awkward words are on top
    config = dict(corpus_name="random<4>", corpus_docs=40, corpus_tokens=corpus.num_tokens,
                  iterations_run=len(METRICS), backend="xla")
    return TopicModel(counts, 0.5, 0.01, corpus.vocab, config), corpus


def table_topics(page: str, row_pattern: str) -> list[int]:
    """Topic ids of a page's table rows, in order (row_pattern captures the id)."""
    return [int(topic) for topic in re.findall(row_pattern, page)]


def test_pages_list_every_topic_by_share_with_words_escaped(model_and_reference, tmp_path,
                                                            monkeypatch):
    for module in ("matplotlib", "matplotlib.figure"):  # as if not installed
        monkeypatch.setitem(sys.modules, module, None)
    model, reference = model_and_reference
    with pytest.warns(UserWarning, match=re.escape(report.MATPLOTLIB_HINT)):
        written = report.write_report(model, tmp_path, reference, METRICS, top_n=6)
    assert written.files == [tmp_path / report.MARKDOWN_FILE, tmp_path / report.HTML_FILE]
    assert "matplotlib" in written.plot_skipped

    by_share = list(np.argsort(-model.topic_shares(), kind="stable"))
    markdown = (tmp_path / report.MARKDOWN_FILE).read_text()
    assert table_topics(markdown, r"\n\| \d+ \| (\d+) \|") == by_share
    assert r"left\|right" in markdown and r"snake\_case" in markdown
    assert f"{written.scores['npmi'].per_topic[2]:.3f}" in markdown
    umass = written.scores["umass"]  # a mean over word pairs, about -3 to 0: 3 decimals
    assert f"UMass {umass.mean:.3f} (means over topics" in markdown
    assert f"| {umass.per_topic[2]:.3f} |" in markdown

    page = (tmp_path / report.HTML_FILE).read_text()
    assert table_topics(page, r"<tr><td>\d+</td><td>(\d+)</td>") == by_share
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "fish&amp;chips" in page and "random&lt;4&gt;" in page
    assert "-7.3000 per token (iteration 7" in page  # the last held-out score
    assert "http" not in page  # self-contained
    assert f"<td>{written.scores['umass'].per_topic[2]:.3f}</td>" in page
    assert "UMass is the mean over word pairs" in page


def test_the_plot_is_written_and_embedded_when_matplotlib_is_installed(model_and_reference,
                                                                      tmp_path):
    pytest.importorskip("matplotlib")
    model, reference = model_and_reference
    written = report.write_report(model, tmp_path, reference, METRICS)
    assert written.plot_skipped is None and written.files[0] == tmp_path / report.PLOT_FILE
    png = (tmp_path / report.PLOT_FILE).read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert "data:image/png;base64," in (tmp_path / report.HTML_FILE).read_text()
    assert f"]({report.PLOT_FILE})" in (tmp_path / report.MARKDOWN_FILE).read_text()


def test_a_learned_alpha_is_plotted_and_listed_per_topic(model_and_reference, tmp_path):
    pytest.importorskip("matplotlib")
    model, reference = model_and_reference
    learned = dataclasses.replace(model, alpha=np.array([0.9, 0.05, 2.5, 0.3, 0.3, 0.125]))
    written = report.write_report(learned, tmp_path, reference, METRICS)
    assert tmp_path / report.PRIOR_FILE in written.files
    assert (tmp_path / report.PRIOR_FILE).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    markdown = (tmp_path / report.MARKDOWN_FILE).read_text()
    assert f"]({report.PRIOR_FILE})" in markdown
    assert "| 1 | 2 | " in markdown and "| 2.5 |" in markdown  # the largest topic's alpha
    page = (tmp_path / report.HTML_FILE).read_text()
    assert page.count("data:image/png;base64,") == 2 and "<td>0.125</td>" in page
    assert "learned, 0.05 to 2.5" in page
    # a fixed alpha has no prior plot
    fixed = report.write_report(model, tmp_path / "fixed", reference, METRICS)
    assert tmp_path / "fixed" / report.PRIOR_FILE not in fixed.files
    assert "0.5 (every topic)" in (tmp_path / "fixed" / report.HTML_FILE).read_text()


def test_report_launcher_on_a_tiny_trained_model(tmp_path):
    corpus = load_bundled("kos").subset(np.arange(200))
    save_native(corpus, tmp_path / "corpus")
    train, test = train_test_split(corpus, 0.1, seed=0)
    result = trainer.train(train, trainer.TrainConfig(num_topics=5, iterations=4, eval_every=2,
                                                      backend="xla"),
                           split_document_halves(test, seed=0))
    model_dir = tmp_path / "model"
    # What launch/train.py records, so that coherence defaults to the training documents.
    dataclasses.replace(result.model, config=dict(
        result.model.config, corpus_path=str(tmp_path / "corpus"), test_fraction=0.1)
    ).save(model_dir)
    (model_dir / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in result.metrics))

    stdout = launch("report.py", f"--model={model_dir}", "--top_n=8")
    assert str(model_dir / "report" / report.HTML_FILE) in stdout
    markdown = (model_dir / "report" / report.MARKDOWN_FILE).read_text()
    assert sorted(table_topics(markdown, r"\n\| \d+ \| (\d+) \|")) == list(range(5))
    assert "top 8 words" in markdown and "iterations**: 4" in markdown
    assert "held-out log-likelihood**: -" in markdown


@pytest.fixture(name="drawn")
def fixture_drawn(monkeypatch):
    """The matplotlib figures the report draws, kept as they are saved (laid out)."""
    pytest.importorskip("matplotlib")
    figures, png = [], report._png

    def keeping(figure):
        figures.append(figure)
        return png(figure)

    monkeypatch.setattr(report, "_png", keeping)
    return figures


def panel_titles(figure) -> list[str]:
    return [axes.get_title() for axes in figure.axes if axes.get_title()]


def test_a_held_out_score_taken_once_is_a_note_not_a_one_point_panel(drawn):
    once = [{key: value for key, value in record.items() if key == "iteration" or
             record["iteration"] == 7 or key not in ("heldout_loglik_per_token", "perplexity")}
            for record in METRICS]  # scored after the last iteration only, as by default
    report.convergence_png(once)
    figure = drawn[-1]
    assert not any("held-out" in title for title in panel_titles(figure))
    assert "training time, summed over the iterations" in panel_titles(figure)
    assert figure.get_suptitle() == ("held-out log-likelihood scored once, after iteration 7: "
                                     "-7.3000 per token (perplexity 1,993.0); --eval_every=N "
                                     "scores it every N iterations")
    report.convergence_png(METRICS)  # scored 4 times: plotted against time and iteration
    assert panel_titles(drawn[-1])[:2] == ["held-out log-likelihood vs training time",
                                          "held-out log-likelihood vs iteration"]
    assert drawn[-1].get_suptitle() == ""


def test_legends_are_clear_of_the_axes_and_the_data(model_and_reference, drawn):
    model, _ = model_and_reference
    learned = dataclasses.replace(model, alpha=np.array([0.9, 0.05, 2.5, 0.3, 0.3, 0.125]))
    report.prior_png(learned)
    report.convergence_png(METRICS)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    for figure in drawn:
        canvas = FigureCanvasAgg(figure)
        canvas.draw()  # laid out as when saved
        renderer = canvas.get_renderer()
        legends = figure.legends + [axes.get_legend() for axes in figure.axes
                                    if axes.get_legend() is not None]
        for legend in legends:
            box = legend.get_window_extent(renderer)
            for axes in figure.axes:  # the plotting area, ticks, labels and title
                assert not box.overlaps(axes.get_tightbbox(renderer)), legend.get_texts()
