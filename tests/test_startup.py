"""Start-up of a training run (issue 15, section 1): where the time went, and the launcher's
corpus cache, timing line and training documents' topic proportions."""

import json
import pathlib
import re
import subprocess
import sys
import time

import numpy as np
from helpers import random_corpus, run_launcher

from saberjax import timing, trainer
from saberjax.execution.placement import Placement
from saberjax.corpus import split_document_halves, train_test_split
from saberjax.evaluate import heldout_loglik
from saberjax.layout import build_layout
from saberjax.model import TopicModel
from saberjax.progress import memory_line, time_line


def test_phases_count_each_second_once_and_only_when_recorded():
    phases = timing.Phases()
    with timing.phase("layout"):  # nobody records: nothing happens
        pass
    with phases.recording():
        with phases.phase("training"):
            time.sleep(0.05)
            with timing.phase("evaluation"):
                time.sleep(0.1)
        with timing.phase("evaluation"):
            time.sleep(0.05)
    with timing.phase("evaluation"):  # recording is over
        time.sleep(0.1)
    assert set(phases.seconds) == {"training", "evaluation"}
    assert 0.05 <= phases.seconds["training"] < 0.1
    assert 0.15 <= phases.seconds["evaluation"] < 0.2


def test_layout_and_evaluation_are_phases_of_their_own():
    corpus = random_corpus(num_docs=30, seed=2)
    model = TopicModel(np.ones((corpus.num_words, 3), np.int32), 0.1, 0.01, corpus.vocab)
    phases = timing.Phases()
    with phases.recording():
        build_layout(corpus)
        heldout_loglik(model.topic_word, *split_document_halves(corpus), model.alpha)
    assert set(phases.seconds) == {"layout", "evaluation"}


def test_time_line_splits_the_training_call_into_the_trainers_figures():
    line = time_line(dict(load=0.5, layout=1.0, training=10.0, evaluation=0.25, save=2.0),
                     init=1.5, compile=2.0, iterations=6.0, total=14.0)
    assert line == ("time: load 0.50 s, layout 1.00 s, transfer 0.50 s, init 1.50 s, compile "
                    "2.00 s, training 6.00 s, evaluation 0.25 s, save 2.00 s (total 14.00 s)")
    marked = time_line(dict(load=0.5, layout=1.0, transfer=0.25, training=9.75, save=2.0),
                       init=1.5, compile=2.0, iterations=6.0, total=14.0)
    assert "transfer 0.50 s" in marked  # the marked phase plus the rest of the call


def uci_folder(path, corpus):
    """corpus written as a UCI bag-of-words folder (docword.txt + vocab.txt)."""
    path.mkdir()
    doc, word, count = corpus.doc_word_counts()
    lines = [f"{corpus.num_docs}\n{corpus.num_words}\n{doc.size}\n"]
    lines += [f"{d + 1} {w + 1} {c}\n" for d, w, c in zip(doc, word, count)]
    (path / "docword.txt").write_text("".join(lines))
    (path / "vocab.txt").write_text("".join(f"{w}\n" for w in corpus.vocab))
    return path


def train(tmp_path, *flags):
    result = run_launcher("train.py", f"--corpus={tmp_path / 'uci'}", "--num_topics=4",
                          "--iterations=2", "--backend=xla", "--top_words=0",
                          f"--cache_dir={tmp_path / 'cache'}", *flags)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_train_logs_where_the_time_went_and_reads_the_corpus_from_the_cache(tmp_path):
    """The timing line ends the log, the corpus, layout and compiled iteration are cached,
    --save_doc_topics writes every document's proportions, and a second run reads the
    cached copy and, with --overwrite, replaces the run directory holding them."""
    corpus = random_corpus(num_docs=40, seed=5)
    uci_folder(tmp_path / "uci", corpus)
    first = train(tmp_path, f"--output={tmp_path / 'run'}", "--save_doc_topics")
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".")] == []
    last_log_line = first.stderr.strip().splitlines()[-1]
    assert re.search(r"time: load \d+\.\d\d s, layout \d+\.\d\d s, transfer \d+\.\d\d s, init "
                     r"\d+\.\d\d s, compile \d+\.\d\d s, training \d+\.\d\d s, evaluation "
                     r"\d+\.\d\d s, save \d+\.\d\d s \(total \d+\.\d\d s\)$", last_log_line)
    (entry,) = (tmp_path / "cache" / "corpora").iterdir()
    assert (entry / "corpus" / "word_ids.npy").is_file()
    assert any((tmp_path / "cache" / "xla").iterdir())  # the compiled iteration, kept
    (layout,) = (tmp_path / "cache" / "layouts").iterdir()  # read by the second run
    first_model = TopicModel.load(tmp_path / "run")
    theta = np.load(tmp_path / "run" / "doc_topics.npy")
    assert theta.shape == (40, 4) and theta.dtype == np.float32
    np.testing.assert_allclose(theta.sum(axis=1), 1, rtol=1e-5)
    np.testing.assert_allclose(theta, first_model.transform(corpus), atol=1e-6)
    # the second run reads the cached copy: same model, and its source may even be gone
    (tmp_path / "uci" / "docword.txt").rename(tmp_path / "docword.txt")
    assert run_launcher("train.py", f"--corpus={tmp_path / 'uci'}", "--num_topics=4",
                        f"--cache_dir={tmp_path / 'cache'}", f"--output={tmp_path / 'x'}"
                        ).returncode == 1  # the key needs the source: never a stale copy
    (tmp_path / "docword.txt").rename(tmp_path / "uci" / "docword.txt")
    # a run directory holding doc_topics.npy is still the run's own: --overwrite replaces it
    train(tmp_path, f"--output={tmp_path / 'run'}", "--overwrite")
    assert not (tmp_path / "run" / "doc_topics.npy").exists()
    second_model = TopicModel.load(tmp_path / "run")
    np.testing.assert_array_equal(first_model.word_topic_counts, second_model.word_topic_counts)
    assert first_model.config["corpus_fingerprint"] == second_model.config["corpus_fingerprint"]


def test_first_iteration_tool_times_train_up_to_its_first_iteration(tmp_path):
    """The tool's runs stop at the first iteration, and --nocache (passed through to
    train.py) leaves no cache entry: the corpus and the compiled iteration, written before
    that point, would be."""
    uci_folder(tmp_path / "uci", random_corpus(num_docs=30, seed=8))
    tool = pathlib.Path(__file__).resolve().parents[1] / "tools" / "first_iteration.py"
    done = subprocess.run(
        [sys.executable, str(tool), "--repeats=1", "--", f"--corpus={tmp_path / 'uci'}",
         "--num_topics=4", "--iterations=3", "--backend=xla", f"--output={tmp_path / 'run'}",
         "--overwrite", f"--cache_dir={tmp_path / 'cache'}", "--nocache"], capture_output=True,
        text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (tmp_path / "cache").exists()
    figures = json.loads(done.stdout)
    assert len(figures["runs"]) == 1 and 0 < figures["best"] == figures["runs"][0]["seconds"]
    assert not list(tmp_path.glob("run*/model.npz"))  # stopped before training: no model


def test_a_run_too_short_to_learn_alpha_compiles_no_alpha_update(monkeypatch):
    compiled = []
    learn = Placement.compile_alpha_update
    monkeypatch.setattr(Placement, "compile_alpha_update",
              lambda *args: compiled.append(args) or learn(*args))
    corpus = random_corpus(num_docs=20, seed=3)
    for iterations in (2, 3):
        trainer.train(corpus, trainer.TrainConfig(num_topics=4, iterations=iterations,
                                                  optimize_alpha_every=3, backend="xla"))
    assert len(compiled) == 1  # the 3-iteration run learns alpha after its third


def test_the_arrays_offered_ahead_are_the_trained_models_and_save_as_it_does(tmp_path):
    """trainer.train's on_model: the model's arrays while its last iteration is scored, and
    a model.npz written from them is the one TopicModel.save writes (train.py moves it)."""
    corpus = random_corpus(num_docs=40, seed=9)
    halves = split_document_halves(random_corpus(num_docs=10, seed=10), 0)
    offered = []
    config = trainer.TrainConfig(num_topics=4, iterations=3, backend="xla")
    result = trainer.train(corpus, config, halves, on_model=offered.append)
    (ahead,) = offered
    np.testing.assert_array_equal(ahead.word_topic_counts, result.model.word_topic_counts)
    np.testing.assert_array_equal(ahead.alpha, result.model.alpha)
    assert (ahead.beta, ahead.vocab) == (result.model.beta, result.model.vocab)
    ahead.write_arrays(tmp_path / "ahead" / "model.npz")
    result.model.save(tmp_path / "moved", arrays=tmp_path / "ahead" / "model.npz")
    result.model.save(tmp_path / "written")
    for name in ("model.npz", "vocab.txt", "config.json", "metrics.jsonl"):
        assert (tmp_path / "moved" / name).read_bytes() == (tmp_path / "written" / name
                                                           ).read_bytes()
    assert not (tmp_path / "ahead" / "model.npz").exists()
    stopped = []
    trainer.train(corpus, config, halves, callback=lambda iteration, *_: iteration == 2,
                  on_model=stopped.append)
    assert stopped == []  # stopped before the last iteration: nothing offered


def test_compiling_beside_initialisation_trains_and_scores_the_same_model(monkeypatch):
    """The iteration and the alpha update compile, and the held-out scorer prepares, while
    the state initialises on accelerators (trainer.compiles_beside_init); here on the CPU
    devices too: same model, same scores."""
    corpus = random_corpus(num_docs=40, seed=11)
    train, test = train_test_split(corpus, 0.25, seed=1)
    halves = split_document_halves(test, seed=2)
    config = trainer.TrainConfig(num_topics=4, iterations=3, optimize_alpha_every=2,
                                 backend="xla", eval_every=1)
    apart = trainer.train(train, config, heldout=halves)
    monkeypatch.setattr(trainer, "compiles_beside_init", lambda placement: True)
    beside = trainer.train(train, config, heldout=halves)
    np.testing.assert_array_equal(beside.model.word_topic_counts, apart.model.word_topic_counts)
    np.testing.assert_array_equal(beside.model.alpha, apart.model.alpha)
    scores = [[record["heldout_loglik_per_token"] for record in result.metrics]
              for result in (apart, beside)]
    assert len(scores[0]) == 3 and scores[0] == scores[1]


def test_phases_record_the_peak_memory_at_their_end_for_the_memory_line():
    phases = timing.Phases()
    with phases.recording():
        with timing.phase("load"):
            pass
        with timing.phase("layout"):
            held = np.ones(1 << 20)  # touched: resident
    assert 0 < phases.peak_rss["load"] <= phases.peak_rss["layout"] <= timing.peak_rss_bytes()
    assert held.nbytes <= phases.peak_rss["layout"]
    line = memory_line(dict(save=6.02e9, load=5.1e9, layout=5.314e9), 6.5e9)
    assert line == "peak RSS after load 5.10 GB, layout 5.31 GB, save 6.02 GB (run 6.50 GB)"
