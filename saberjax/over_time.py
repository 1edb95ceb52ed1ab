"""Topics over time: each topic's share of the documents of every period (as BERTopic's
topics_over_time shows it), from the documents' topic proportions and a date per document.

A period's share of topic k is the mean of theta_dk over its documents (each document counts
once, whatever its length).  Dates are ISO 8601 strings: YYYY, YYYY-MM, YYYY-MM-DD, with a
time after a T or a space; a document without a date (an empty string) is left out, counted in
a warning.  `write_table` gives the periods as CSV rows (period, documents, one column a topic)
and `shares_png` plots the largest topics' shares against the periods.
"""

from __future__ import annotations

import dataclasses
import io
import warnings
from collections.abc import Sequence

import numpy as np

PERIODS = ("month", "year")
PLOTTED_TOPICS = 10  # topics drawn in the plot: the largest over all periods
_UNITS = dict(month="M", year="Y")


@dataclasses.dataclass(frozen=True)
class TopicsOverTime:
    """The topic shares of every period that has documents, periods in order."""

    period: str  # "month" or "year"
    periods: tuple[str, ...]  # "2024-03" (month) or "2024" (year)
    documents: np.ndarray  # int64 [P]: documents of each period
    shares: np.ndarray  # float64 [P, K]: mean topic proportions of the period's documents


def parse_dates(values: Sequence[str], source: str) -> np.ndarray:
    """datetime64[D] of every value (NaT for an empty one); ValueError naming the source and
    the document (from 0) of the first value that is no ISO date."""
    values = [str(value).strip() for value in values]
    parsed = {}
    for index, value in enumerate(values):
        if value in parsed:
            continue
        try:
            parsed[value] = (np.datetime64("NaT", "D") if not value else
                             np.datetime64(value.replace(" ", "T", 1)).astype("datetime64[D]"))
        except ValueError:
            raise ValueError(f"{source}: document {index}'s date {value!r} is not an ISO date "
                             f"(YYYY-MM-DD, YYYY-MM or YYYY)") from None
    return np.array([parsed[value] for value in values], dtype="datetime64[D]")


def read_dates_file(path, num_docs: int) -> list[str]:
    """The lines of a file of one date per document; ValueError when it has another number of
    lines than the num_docs documents."""
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.read().splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"--dates={path}: cannot read ({error})") from None
    if len(lines) != num_docs:
        raise ValueError(f"--dates={path}: {len(lines):,} lines, but the corpus has "
                         f"{num_docs:,} documents (one date a line, in the documents' order)")
    return lines


def topics_over_time(theta: np.ndarray, dates: np.ndarray, period: str) -> TopicsOverTime:
    """The mean topic proportions theta [D, K] of each period's documents (dates:
    datetime64 [D], NaT left out with a warning)."""
    if period not in PERIODS:
        raise ValueError(f"period must be one of {PERIODS}, got {period!r}")
    theta = np.asarray(theta, np.float64)
    dated = ~np.isnat(dates)
    if not dated.all():
        warnings.warn(f"topics over time: {int((~dated).sum()):,} document(s) without a date "
                      f"left out", stacklevel=2)
    if not dated.any():
        raise ValueError("topics over time: no document has a date")
    buckets = dates[dated].astype(f"datetime64[{_UNITS[period]}]")
    periods, which = np.unique(buckets, return_inverse=True)
    documents = np.bincount(which, minlength=periods.size)
    sums = np.zeros((periods.size, theta.shape[1]))
    np.add.at(sums, which, theta[dated])
    return TopicsOverTime(period, tuple(str(p) for p in periods), documents,
                          sums / documents[:, None])


def write_table(result: TopicsOverTime) -> str:
    """CSV: a header (period, documents, topic_0 .. topic_K-1), then one row a period."""
    buffer = io.StringIO()
    num_topics = result.shares.shape[1]
    buffer.write(",".join(["period", "documents", *(f"topic_{k}" for k in range(num_topics))])
                 + "\n")
    for name, count, shares in zip(result.periods, result.documents, result.shares):
        buffer.write(",".join([name, str(int(count)), *(f"{share:.6f}" for share in shares)])
                     + "\n")
    return buffer.getvalue()


def shares_png(result: TopicsOverTime, labels: Sequence[str]) -> bytes:
    """PNG bytes: the shares of the PLOTTED_TOPICS largest topics (over all documents) per
    period, each line labelled `labels[k]`; ImportError without matplotlib."""
    from matplotlib.figure import Figure  # noqa: PLC0415 (optional dependency)

    overall = result.documents @ result.shares
    largest = np.argsort(-overall, kind="stable")[:PLOTTED_TOPICS]
    figure = Figure(figsize=(12, 4.5), dpi=100, layout="constrained")
    axes = figure.subplots()
    x = np.arange(len(result.periods))
    for topic in largest:
        axes.plot(x, 100 * result.shares[:, topic], marker=".", label=labels[topic])
    step = max(1, len(x) // 12)
    axes.set_xticks(x[::step], [result.periods[i] for i in x[::step]], rotation=30, ha="right")
    axes.set(xlabel=result.period, ylabel="share of the period's documents (%)",
             title=f"topics over time: the {len(largest)} largest topics by {result.period}")
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    figure.legend(loc="outside right upper", fontsize="small")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()
