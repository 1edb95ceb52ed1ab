"""A trained model's report: a convergence plot and its topics as Markdown and HTML pages.

`write_report` writes into one folder, each file atomically:

    convergence.png  what training measured: held-out log-likelihood per token against
                     training time and iteration (when scored more than once; a note
                     when once), training time and throughput per iteration (needs
                     matplotlib, an optional dependency: pip install 'saberjax[report]')
    alpha.png        where alpha was learned (one value per topic): alpha_k of every topic,
                     largest first, beside the topic's share of the tokens (matplotlib too)
    topics.md        a summary of the model (topic diversity among it), then every topic's
                     share of the tokens, alpha, coherence (NPMI, UMass: means over word
                     pairs; c_v where the reference keeps token order; saberjax.coherence)
                     and top words (by relevance at a given lambda: saberjax.relevance),
                     largest topics first
    topics.html      the same as one self-contained page (inline CSS, the plot embedded)

and, when asked for:

    topics_over_time.csv, topics_over_time.png
                     each topic's share of every period's documents (saberjax.over_time)
    pyldavis.html    the pyLDAvis page of the model (saberjax.ldavis)
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import pathlib
import re
import warnings
from collections.abc import Sequence

import numpy as np

from saberjax import over_time
from saberjax.coherence import (MEASURES, CoherenceScores, cooccurrence, cv_cooccurrence,
                                topic_diversity)
from saberjax.corpus import Corpus
from saberjax.files import atomic_write
from saberjax.model import TopicModel

PLOT_FILE, PRIOR_FILE = "convergence.png", "alpha.png"
MARKDOWN_FILE, HTML_FILE = "topics.md", "topics.html"
OVER_TIME_TABLE, OVER_TIME_PLOT = "topics_over_time.csv", "topics_over_time.png"
PYLDAVIS_FILE = "pyldavis.html"
REPORT_FILES = (PLOT_FILE, PRIOR_FILE, MARKDOWN_FILE, HTML_FILE, OVER_TIME_TABLE,
                OVER_TIME_PLOT, PYLDAVIS_FILE)
MATPLOTLIB_HINT = "pip install 'saberjax[report]'"
NPMI_COLOUR_RANGE = 0.25  # NPMI cells shade from red at -0.25 and below to green at +0.25


@dataclasses.dataclass(frozen=True)
class TopicRow:
    """What the pages show of one topic."""

    topic: int
    share: float
    alpha: float
    words: list[str]
    npmi: float
    umass: float
    cv: float  # NaN where c_v is not measured


@dataclasses.dataclass(frozen=True)
class Report:
    """The files written, the coherence scores shown in them (c_v among them where measured),
    the topic diversity, and why a plot is missing."""

    files: list[pathlib.Path]
    scores: dict[str, CoherenceScores]
    plot_skipped: str | None  # None when convergence.png was written
    diversity: float = float("nan")


def convergence_png(metrics: Sequence[dict]) -> bytes:
    """The convergence plot of training metrics as PNG bytes; ImportError without matplotlib.

    What was measured: the training time and throughput of every iteration, and the held-out
    log-likelihood against training time and iteration where it was scored more than once;
    a score taken once (after the last iteration, as by default) is a note above the panels,
    since one point draws no curve."""
    from matplotlib.figure import Figure  # noqa: PLC0415 (optional dependency)
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415 (optional dependency)

    iterations = np.array([record["iteration"] for record in metrics])
    training_seconds = np.cumsum([record["seconds"] for record in metrics])
    scored = np.array([i for i, record in enumerate(metrics)
                       if "heldout_loglik_per_token" in record], dtype=np.int64)
    loglik = [metrics[i]["heldout_loglik_per_token"] for i in scored]

    figure = Figure(figsize=(12, 3.5), dpi=100, layout="constrained")
    if scored.size > 1:
        by_time, by_iteration, throughput = figure.subplots(1, 3)
        for axes, x, label in ((by_time, training_seconds[scored], "training time (s)"),
                               (by_iteration, iterations[scored], "iteration")):
            axes.plot(x, loglik, marker="o", markersize=3, color="tab:blue")
            axes.set(xlabel=label, ylabel="held-out log-likelihood per token",
                     title=f"held-out log-likelihood vs {label.split(' (')[0]}")
        panels, by_iterations = (by_time, by_iteration, throughput), (by_iteration, throughput)
    else:
        elapsed, throughput = figure.subplots(1, 2)
        elapsed.plot(iterations, training_seconds, color="tab:purple")
        elapsed.set(xlabel="iteration", ylabel="training time (s)",
                    title="training time, summed over the iterations")
        elapsed.set_ylim(bottom=0)
        figure.suptitle(_heldout_note(metrics, scored), color="dimgray", fontsize="medium")
        panels = by_iterations = (elapsed, throughput)
    speed = np.array([record["tokens_per_second"] for record in metrics]) / 1e6
    throughput.plot(iterations, speed, color="tab:green")
    throughput.axhline(np.median(speed), color="gray", linestyle="--", linewidth=1)
    throughput.set(xlabel="iteration", ylabel="Mtoken/s",
                   title=f"throughput (median {np.median(speed):,.2f}, dashed)")
    throughput.set_ylim(bottom=0)
    for axes in panels:
        axes.grid(alpha=0.3)
    for axes in by_iterations:
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    return _png(figure)


def _heldout_note(metrics: Sequence[dict], scored: np.ndarray) -> str:
    """What the convergence plot says of a held-out log-likelihood scored once or never."""
    if not scored.size:
        return "no held-out log-likelihood was scored"
    record = metrics[scored[0]]
    return (f"held-out log-likelihood scored once, after iteration {record['iteration']}: "
            f"{record['heldout_loglik_per_token']:.4f} per token (perplexity "
            f"{record['perplexity']:,.1f}); --eval_every=N scores it every N iterations")


def prior_png(model: TopicModel) -> bytes:
    """The learned prior as PNG bytes: alpha_k of every topic as bars, largest first, and each
    topic's share of the tokens beside it (the legend above the axes, clear of both scales
    and the data); ImportError without matplotlib."""
    from matplotlib.figure import Figure  # noqa: PLC0415 (optional dependency)

    order = np.argsort(-model.alpha, kind="stable")
    ranks = np.arange(1, model.num_topics + 1)
    shares = 100 * model.topic_shares()[order]
    figure = Figure(figsize=(12, 3.5), dpi=100, layout="constrained")
    axes = figure.subplots()
    axes.bar(ranks, model.alpha[order], width=1.0, color="tab:blue", label="alpha_k")
    axes.set(xlabel="topics by alpha (largest first)", ylabel="alpha_k",
             title=f"learned document-topic prior (sum {model.alpha.sum():.3g})")
    share_axes = axes.twinx()
    share_axes.plot(ranks, shares, color="tab:orange", marker=".", linestyle="none",
                    label="share of tokens (%)")
    share_axes.set(ylabel="share of tokens (%)")
    share_axes.set_ylim(0, 1.08 * shares.max())  # the largest share's dot inside the frame
    axes.grid(alpha=0.3)
    figure.legend(loc="outside upper right", ncols=2)
    return _png(figure)


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def write_report(model: TopicModel, directory, reference: Corpus,
                 metrics: Sequence[dict] = (), top_n: int = 10, relevance: float | None = None,
                 cv_unavailable: str | None = None,
                 topics_over_time: over_time.TopicsOverTime | None = None,
                 pyldavis_page: str | None = None) -> Report:
    """Write the convergence plot and topic pages into `directory` (see the module doc).

    reference: the documents coherence is measured on (the training corpus, usually).
    metrics: the training run's per-iteration records; without them or without matplotlib the
    plot is skipped with a warning saying why.  relevance: lambda of the top words' ranking
    (None: by probability); coherence scores the words shown.  cv_unavailable: why the
    reference has no token order for c_v (coherence.cv_unavailable), None to measure it.
    topics_over_time, pyldavis_page: written beside the pages when given.
    """
    directory = pathlib.Path(directory)
    counts = cooccurrence(model, reference, top_n, relevance=relevance)
    scores = {measure: counts.score(measure) for measure in MEASURES}
    if cv_unavailable is None:
        scores["c_v"] = cv_cooccurrence(model, reference, top_n,
                                        relevance=relevance).score("c_v")
    diversity = topic_diversity(model)
    shares = model.topic_shares()
    no_score = np.full(model.num_topics, np.nan)
    rows = sorted((TopicRow(k, float(shares[k]), float(model.alpha[k]),
                            [model.vocab[v] for v in counts.top_word_ids[k]],
                            float(scores["npmi"].per_topic[k]), float(scores["umass"].per_topic[k]),
                            float(scores.get("c_v", CoherenceScores("c_v", top_n, no_score,
                                                                    np.nan)).per_topic[k]))
                   for k in range(model.num_topics)), key=lambda row: (-row.share, row.topic))
    summary = model_summary(model, metrics, scores, reference)
    summary.append(("c_v", f"{scores['c_v'].mean:.3f} (mean over topics; sliding windows)"
                    if "c_v" in scores else cv_unavailable))
    summary.append(("topic diversity", f"{diversity:.3f} (distinct words among every topic's "
                    f"top 25)"))
    if relevance is not None:
        summary.append(("top words", f"ranked by relevance, lambda = {relevance:g}"))
    title = f"Topics of {model.config.get('corpus_name') or 'a saberjax model'}"

    files = []
    plot, plot_skipped = _convergence_plot(metrics)
    if plot_skipped:
        warnings.warn(plot_skipped, stacklevel=2)
    else:
        files.append(_write_bytes(directory / PLOT_FILE, plot))
    prior_plot = _prior_plot(model)
    if prior_plot is not None:
        files.append(_write_bytes(directory / PRIOR_FILE, prior_plot))
    plots = {name: png for name, png in ((PLOT_FILE, plot), (PRIOR_FILE, prior_plot))
             if png is not None}
    files.append(_write_bytes(directory / MARKDOWN_FILE,
                              topics_markdown(title, summary, rows, list(plots)).encode()))
    files.append(_write_bytes(directory / HTML_FILE,
                              topics_html(title, summary, rows, plots).encode()))
    if topics_over_time is not None:
        files += _write_over_time(directory, topics_over_time, model)
    if pyldavis_page is not None:
        files.append(_write_bytes(directory / PYLDAVIS_FILE, pyldavis_page.encode()))
    return Report(files, scores, plot_skipped, diversity)


def _write_over_time(directory: pathlib.Path, result: over_time.TopicsOverTime,
                     model: TopicModel) -> list[pathlib.Path]:
    """The topics-over-time table, and its plot where matplotlib is installed (a warning
    otherwise)."""
    files = [_write_bytes(directory / OVER_TIME_TABLE, over_time.write_table(result).encode())]
    labels = [f"{k}: {' '.join(words)}" for k, words in enumerate(model.top_words(3))]
    try:
        files.append(_write_bytes(directory / OVER_TIME_PLOT,
                                  over_time.shares_png(result, labels)))
    except ImportError:
        warnings.warn(f"no topics-over-time plot: it needs matplotlib ({MATPLOTLIB_HINT})",
                      stacklevel=3)
    return files


def _prior_plot(model: TopicModel) -> bytes | None:
    """alpha.png's bytes where alpha was learned and matplotlib is installed, else None."""
    if np.ptp(model.alpha) == 0:
        return None
    try:
        return prior_png(model)
    except ImportError:
        return None


def _convergence_plot(metrics: Sequence[dict]) -> tuple[bytes | None, str | None]:
    """(PNG bytes, None), or (None, why there is no plot)."""
    if not metrics:
        return None, "no convergence plot: no training metrics (metrics.jsonl) were given"
    try:
        return convergence_png(metrics), None
    except ImportError:
        return None, f"no convergence plot: it needs matplotlib ({MATPLOTLIB_HINT})"


def _write_bytes(path: pathlib.Path, content: bytes) -> pathlib.Path:
    atomic_write(path, lambda file: file.write(content))
    return path


def model_summary(model: TopicModel, metrics: Sequence[dict],
                  scores: dict[str, CoherenceScores], reference: Corpus) -> list[tuple[str, str]]:
    """(label, text) lines describing the model, its training run and its mean coherence."""
    config = model.config
    alpha = model.alpha
    alpha_text = (f"{alpha[0]:.4g} (every topic)" if np.all(alpha == alpha[0]) else
                  f"learned, {alpha.min():.4g} to {alpha.max():.4g} (sum {alpha.sum():.4g})")
    lines = [("topics", f"{model.num_topics:,}"), ("alpha", alpha_text),
             ("beta", f"{model.beta:.4g}"), ("vocabulary", f"{model.num_words:,} words")]
    seeds = model.seed_prior
    if seeds is not None:
        seeded_topics = sorted({topic for topics in seeds.topics for topic in topics})
        lines.append(("seed words", f"{len(seeds.rows):,} words seeding {len(seeded_topics):,} "
                      f"topics ({', '.join(map(str, seeded_topics[:10]))}"
                      f"{', ...' if len(seeded_topics) > 10 else ''}), weight "
                      f"{seeds.weight:g}"))
    if "corpus_docs" in config:
        source = (config["corpus_path"] or "bundled") if "corpus_path" in config else \
            "path not recorded"
        lines.append(("training corpus", f"{config.get('corpus_name') or '?'} ({source}): "
                      f"{config['corpus_docs']:,} documents, {config['corpus_tokens']:,} tokens"))
    iterations = config.get("iterations_run", len(metrics))
    if iterations:
        lines.append(("iterations", f"{iterations:,}"))
    scored = [record for record in metrics if "heldout_loglik_per_token" in record]
    if scored:
        final = scored[-1]
        lines.append(("final held-out log-likelihood",
                      f"{final['heldout_loglik_per_token']:.4f} per token (iteration "
                      f"{final['iteration']}, perplexity {final['perplexity']:,.1f})"))
    if metrics:
        speed = np.median([record["tokens_per_second"] for record in metrics]) / 1e6
        where = f", {config['backend']} backend" if "backend" in config else ""
        lines.append(("throughput", f"{speed:,.2f} Mtoken/s (median over iterations{where})"))
    top_n = scores["npmi"].top_n
    lines.append(("coherence", f"NPMI {scores['npmi'].mean:.3f}, UMass {scores['umass'].mean:.3f} "
                  f"(means over topics; top {top_n} words; documents of "
                  f"{reference.name or 'the reference corpus'}: {reference.num_docs:,})"))
    return lines


def _number(value: float, digits: int) -> str:
    return "n/a" if np.isnan(value) else f"{value:.{digits}f}"


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|])")


def _markdown_escape(text: str) -> str:
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def topics_markdown(title: str, summary: list[tuple[str, str]], rows: list[TopicRow],
                    plot_files: Sequence[str] = ()) -> str:
    """The topics page in Markdown, showing the plots written beside it (plot_files)."""
    lines = [f"# {_markdown_escape(title)}", ""]
    lines += [f"- **{label}**: {_markdown_escape(text)}" for label, text in summary]
    for name in plot_files:
        lines += ["", f"![{name.split('.')[0]}]({name})"]
    lines += ["", "| rank | topic | share | alpha | NPMI | UMass | c_v | top words |",
              "|---:|---:|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {rank} | {row.topic} | {100 * row.share:.2f}% | {row.alpha:.4g} | "
              f"{_number(row.npmi, 3)} | {_number(row.umass, 3)} | {_number(row.cv, 3)} | "
              f"{' '.join(map(_markdown_escape, row.words))} |"
              for rank, row in enumerate(rows, 1)]
    return "\n".join(lines) + "\n"


_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2328;
       margin: 2em auto; max-width: 1180px; padding: 0 1.5em; }
h1 { font-size: 1.6em; margin-bottom: .4em; }
dl.summary { display: grid; grid-template-columns: max-content auto; gap: .15em 1.2em;
             background: #f6f8fa; border: 1px solid #d0d7de; border-radius: 8px;
             padding: .9em 1.2em; }
dl.summary dt { font-weight: 600; color: #57606a; }
dl.summary dd { margin: 0; }
img.plot { width: 100%; margin: 1.2em 0 .4em; border: 1px solid #d0d7de; border-radius: 8px; }
p.legend { color: #57606a; font-size: .9em; }
table { border-collapse: collapse; width: 100%; }
th { position: sticky; top: 0; background: #fff; border-bottom: 2px solid #d0d7de;
     text-align: right; padding: .45em .6em; font-size: .85em; color: #57606a; }
th.words { text-align: left; }
td { padding: .35em .6em; border-bottom: 1px solid #eaeef2; text-align: right;
     font-variant-numeric: tabular-nums; vertical-align: middle; white-space: nowrap; }
tr:hover td { background: #f6f8fa; }
td.share { width: 9em; }
td.share .bar { display: block; height: 4px; background: #54aeff; border-radius: 2px;
                margin-top: 2px; margin-left: auto; }
td.npmi span { border-radius: 4px; padding: .05em .4em; }
td.words { text-align: left; white-space: normal; }
td.words span { display: inline-block; background: #eef2f6; border-radius: 4px;
                padding: 0 .4em; margin: .1em .15em; }
td.words span:first-child { font-weight: 600; }
"""


def _npmi_cell(npmi: float) -> str:
    """An NPMI value on a red (incoherent) to green (coherent) background."""
    if np.isnan(npmi):
        return "<td class=npmi>n/a</td>"
    hue = 60 * (1 + np.clip(npmi / NPMI_COLOUR_RANGE, -1, 1))
    return f'<td class=npmi><span style="background:hsl({hue:.0f},70%,86%)">{npmi:.3f}</span></td>'


def topics_html(title: str, summary: list[tuple[str, str]], rows: list[TopicRow],
                plots: dict[str, bytes] | None = None) -> str:
    """The topics page as one self-contained HTML document (words and labels escaped), the
    plots (PNG bytes by file name) embedded."""
    escape = html.escape
    largest = max((row.share for row in rows), default=0.0) or 1.0
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{escape(title)}</h1>", '<dl class="summary">']
    parts += [f"<dt>{escape(label)}</dt><dd>{escape(text)}</dd>" for label, text in summary]
    parts.append("</dl>")
    for name, png in (plots or {}).items():
        parts.append(f'<img class="plot" alt="{name.split(".")[0]} plot" '
                     f'src="data:image/png;base64,{base64.b64encode(png).decode()}">')
    parts.append(f'<p class="legend">Topics by share of training tokens. NPMI (in [-1, 1]) '
                 f'shaded red at {-NPMI_COLOUR_RANGE} and below to green at '
                 f'{NPMI_COLOUR_RANGE} and above; UMass is the mean over word pairs, as '
                 "gensim's u_mass (at most about 0, higher is more coherent).</p>")
    parts.append('<table><thead><tr><th>rank</th><th>topic</th><th>share</th><th>alpha</th>'
                 '<th>NPMI</th><th>UMass</th><th>c_v</th><th class="words">top words</th>'
                 '</tr></thead>'
                 '<tbody>')
    for rank, row in enumerate(rows, 1):
        words = "".join(f"<span>{escape(word)}</span>" for word in row.words)
        parts.append(
            f"<tr><td>{rank}</td><td>{row.topic}</td><td class=share>{100 * row.share:.2f}%"
            f'<span class=bar style="width:{100 * row.share / largest:.1f}%"></span></td>'
            f"<td>{row.alpha:.4g}</td>{_npmi_cell(row.npmi)}<td>{_number(row.umass, 3)}</td>"
            f"<td>{_number(row.cv, 3)}</td>"
            f"<td class=words>{words}</td></tr>")
    parts.append("</tbody></table></body></html>")
    return "\n".join(parts) + "\n"
