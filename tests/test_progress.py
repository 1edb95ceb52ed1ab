"""Issue 14, section 5: logs worth reading.  A progress line every --log_every iterations and
after the last (iteration, Mtoken/s, ETA, latest held-out score), no backend-probe noise, and
no evaluation time counted as training time."""

import re
import time

import pytest
from helpers import random_corpus, run_launcher

from saberjax import corpus as corpus_io
from saberjax import trainer
from saberjax.corpus import save_native
from saberjax.progress import Progress, chain


def record(seconds: float, tokens: int = 1_000_000, score: float | None = None) -> dict:
    return dict(seconds=seconds, tokens_per_second=tokens / seconds,
                **({} if score is None else {"heldout_loglik_per_token": score}))


def test_progress_lines_every_n_iterations_and_after_the_last():
    lines = []
    progress = Progress(iterations=5, every=2, log=lines.append)
    for iteration, seconds in enumerate([0.5, 0.5, 1.0, 1.0, 2.0], start=1):
        progress(iteration, record(seconds, score=-7.5 if iteration == 2 else None))
    assert lines == [
        "iteration 2/5: 2.00 Mtoken/s, ETA 2 s, held-out log-likelihood -7.5000 (iteration 2)",
        "iteration 4/5: 1.00 Mtoken/s, ETA 1 s, held-out log-likelihood -7.5000 (iteration 2)",
        "iteration 5/5: 0.50 Mtoken/s, ETA 0 s, held-out log-likelihood -7.5000 (iteration 2)",
    ]


def test_progress_reports_long_etas_in_minutes_and_hours():
    lines = []
    progress = Progress(iterations=10_000, every=1, log=lines.append)
    progress(1, record(0.5))
    progress(2, record(2.0))
    assert lines == ["iteration 1/10000: 2.00 Mtoken/s, ETA 1 h 23 min",
                     "iteration 2/10000: 0.50 Mtoken/s, ETA 5 h 33 min"]


def test_chain_calls_every_callback_and_stops_when_one_asks():
    calls = []
    stop = chain(lambda *args: calls.append("first"), None, lambda *args: True)
    assert stop(1, {}, None) is True and calls == ["first"]


def test_train_logs_progress_lines_and_no_backend_probe(tmp_path):
    save_native(random_corpus(num_docs=40, num_words=30, mean_length=20), tmp_path / "corpus")
    result = run_launcher("train.py", f"--corpus={tmp_path / 'corpus'}",
                          f"--output={tmp_path / 'out'}", "--num_topics=3", "--iterations=5",
                          "--log_every=2", "--eval_every=2", "--backend=xla", "--top_words=0",
                          timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "libtpu" not in result.stderr and "Unable to initialize backend" not in result.stderr
    progress = re.findall(r"iteration (\d+)/5: [\d.]+ Mtoken/s, ETA \d+ s, held-out "
                          r"log-likelihood -[\d.]+ \(iteration (\d+)\)", result.stderr)
    assert progress == [("2", "2"), ("4", "4"), ("5", "5")], result.stderr


def test_host_work_between_iterations_is_not_counted_as_training_time():
    documents = random_corpus(num_docs=40, num_words=30, mean_length=20)
    train, test = corpus_io.train_test_split(documents, 0.25, seed=0)
    # long beside an iteration even on a loaded CI machine, where one took 0.68 s
    pause = 2.0

    def slow_host(iteration, metrics, state):  # as an evaluation on the host would be
        if iteration == 2:
            time.sleep(pause)

    result = trainer.train(train, trainer.TrainConfig(num_topics=3, iterations=4,
                                                      backend="xla", eval_every=2),
                           corpus_io.split_document_halves(test), callback=slow_host)
    assert [m["iteration"] for m in result.metrics] == [1, 2, 3, 4]
    assert result.metrics[2]["seconds"] < pause / 2, result.metrics


def test_train_from_python_prints_progress_with_verbose(capsys):
    result = trainer.train(random_corpus(num_docs=20, num_words=20, mean_length=10),
                           trainer.TrainConfig(num_topics=3, iterations=3, backend="xla"),
                           verbose=2)
    lines = [line for line in capsys.readouterr().err.splitlines() if "Mtoken/s" in line]
    assert [line.split()[1] for line in lines] == ["2/3:", "3/3:"] and len(result.metrics) == 3
