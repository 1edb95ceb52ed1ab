"""Document-completion scoring equals a direct computation and ranks models sensibly."""

import json
import subprocess
import sys

import jax
import numpy as np
import pytest
from helpers import ROOT, launch, needs_local_devices, random_corpus, run_launcher
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from saberjax import evaluate
from saberjax.execution.mesh import make_mesh
from saberjax.corpus import Corpus, split_document_halves


def direct_score(topic_word, observed, heldout, alpha, em_iterations):
    """The same estimator written as plain per-document numpy loops."""
    num_topics = topic_word.shape[0]
    total = 0.0
    for d in range(observed.num_docs):
        obs = observed.word_ids[observed.doc_offsets[d]:observed.doc_offsets[d + 1]]
        held = heldout.word_ids[heldout.doc_offsets[d]:heldout.doc_offsets[d + 1]]
        theta = np.full(num_topics, 1.0 / num_topics)
        for _ in range(em_iterations):
            responsibility = theta[:, None] * topic_word[:, obs]
            responsibility /= responsibility.sum(axis=0)
            theta = (responsibility.sum(axis=1) + alpha) / (len(obs) + num_topics * alpha)
        total += np.log(theta @ topic_word[:, held]).sum()
    return total / heldout.num_tokens


def test_batched_score_equals_direct_computation():
    corpus = random_corpus(num_docs=30, num_words=40, seed=5)
    observed, heldout = split_document_halves(corpus, seed=1)
    topic_word = np.random.default_rng(0).dirichlet(np.full(40, 0.3), size=7)
    score = evaluate.heldout_loglik(topic_word, observed, heldout, alpha=0.2, em_iterations=20)
    expected = direct_score(topic_word, observed, heldout, 0.2, 20)
    assert abs(score.loglik_per_token - expected) < 1e-4
    assert score.tokens == heldout.num_tokens and score.documents == 30
    assert np.isclose(score.perplexity, np.exp(-expected), rtol=1e-3)


def test_small_batches_give_the_same_score(monkeypatch):
    corpus = random_corpus(num_docs=50, num_words=30, seed=6)
    observed, heldout = split_document_halves(corpus, seed=2)
    topic_word = np.random.default_rng(1).dirichlet(np.full(30, 0.5), size=5)
    whole = evaluate.heldout_loglik(topic_word, observed, heldout, alpha=0.1).loglik_per_token
    monkeypatch.setattr(evaluate, "BATCH_ELEMENTS", 64)  # forces many batches
    batched = evaluate.heldout_loglik(topic_word, observed, heldout, alpha=0.1).loglik_per_token
    assert abs(whole - batched) < 1e-5


def test_true_topics_score_better_than_uniform_topics():
    rng = np.random.default_rng(3)
    num_words, num_topics = 60, 3
    true_topics = np.zeros((num_topics, num_words))
    for k in range(num_topics):  # disjoint vocabularies
        true_topics[k, k * 20:(k + 1) * 20] = 1 / 20
    docs = [rng.choice(num_words, 40, p=true_topics[rng.integers(num_topics)]) for _ in range(40)]
    corpus = Corpus(np.arange(0, 1601, 40), np.concatenate(docs).astype(np.int32),
                    tuple(map(str, range(num_words))))
    observed, heldout = split_document_halves(corpus)
    smoothed = 0.99 * true_topics + 0.01 / num_words
    good = evaluate.heldout_loglik(smoothed, observed, heldout, alpha=0.1).loglik_per_token
    uniform = evaluate.heldout_loglik(np.full((num_topics, num_words), 1 / num_words),
                                      observed, heldout, alpha=0.1).loglik_per_token
    assert good > uniform + 1.0
    assert np.isclose(uniform, -np.log(num_words), atol=1e-5)


def test_a_scorer_prepared_once_scores_any_topics_as_heldout_loglik_does():
    corpus = random_corpus(num_docs=40, num_words=30, seed=7)
    observed, heldout = split_document_halves(corpus, seed=3)
    scorer = evaluate.HeldoutScorer(observed, heldout, 5, 30, em_iterations=10)
    for seed in (1, 2):
        topic_word = np.random.default_rng(seed).dirichlet(np.full(30, 0.5), size=5)
        alpha = np.random.default_rng(seed).uniform(0.05, 0.5, 5)
        once = evaluate.heldout_loglik(topic_word, observed, heldout, alpha, em_iterations=10)
        again = scorer.score(np.asarray(topic_word, np.float32), alpha)
        assert again == once


SPACE = "comet orbit sun planet telescope star galaxy moon rocket astronaut".split()
WATER = "river flood rain delta bank water lake stream ocean tide".split()


def text_lines(num_docs: int, length: int, seed: int) -> str:
    """Documents of one line each, alternately of space and of water words."""
    rng = np.random.default_rng(seed)
    return "".join(" ".join(rng.choice(WATER if d % 2 else SPACE, length)) + "\n"
                   for d in range(num_docs))


@pytest.fixture(scope="module")
def text_model(tmp_path_factory):
    """(a model trained on plain text with a --test_corpus given relative to the training
    run's folder, the final held-out score of its training, the folder)."""
    folder = tmp_path_factory.mktemp("text")
    (folder / "train.txt").write_text(text_lines(60, 20, seed=0))
    (folder / "test.txt").write_text(text_lines(10, 12, seed=1))
    result = subprocess.run([sys.executable, str(ROOT / "launch" / "train.py"),
                             "--corpus=train.txt", "--test_corpus=test.txt", "--num_topics=2",
                             "--iterations=5", "--backend=xla", "--top_words=0",
                             "--output=model"], capture_output=True, text=True, cwd=folder,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return folder / "model", json.loads(result.stdout.splitlines()[-1]), folder


def test_a_model_trained_with_a_test_corpus_is_scored_on_it_by_default(text_model):
    model, trained, _ = text_model
    scored = json.loads(launch("evaluate.py", f"--model={model}", "--coherence=",
                               timeout=300).splitlines()[-1])
    assert scored["documents"] == 10
    assert scored["heldout_loglik_per_token"] == pytest.approx(
        trained["heldout_loglik_per_token"], rel=1e-5)  # topics computed on the host, not device


def test_text_documents_are_read_over_the_models_vocabulary(text_model):
    model, _, folder = text_model
    new = folder / "three"
    new.mkdir()
    for name, words in dict(a="the comet and the planet orbit the sun",
                            b="a river floods the delta after rain",
                            c="moon rocket astronaut").items():
        (new / f"{name}.txt").write_text(words)  # each word in at most 1 of the 3 documents
    result = run_launcher("evaluate.py", f"--model={model}", f"--corpus={new}", "--coherence=",
                          timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    scored = json.loads(result.stdout.splitlines()[-1])
    # held out: half (rounded down) of the 4, 3 and 3 tokens of words the model knows
    assert (scored["documents"], scored["tokens"]) == (3, 4)
    assert "min_df" not in result.stderr


def test_text_sharing_no_word_with_the_model_gets_the_vocabulary_message(text_model):
    model, _, folder = text_model
    (folder / "foreign.txt").write_text("xylophone quartz\nzebra yak\n")
    result = run_launcher("evaluate.py", f"--model={model}", f"--corpus={folder / 'foreign.txt'}",
                          "--coherence=", timeout=300)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {folder / 'foreign.txt'}: shares no word with the model's vocabulary of 20 "
        f"words (none of the 4 tokens of its 2 document(s) is one); is the text in the model's "
        f"language?")


def test_the_devices_of_the_mesh_score_their_own_share_of_the_batches(monkeypatch):
    """A scorer for topics whole on every device of a mesh puts each device's consecutive
    share of the batches on it alone (padded with empty batches to an equal share) and scores
    them all in one call: the score of one device, however many batches are padded at once."""
    needs_local_devices(2)
    corpus = random_corpus(num_docs=43, num_words=30, seed=8)
    observed, heldout = split_document_halves(corpus, seed=4)
    topic_word = np.random.default_rng(2).dirichlet(np.full(30, 0.5), size=5).astype(np.float32)
    monkeypatch.setattr(evaluate, "BATCH_ELEMENTS", 5 * 48)  # many batches, an odd number
    one = evaluate.heldout_loglik(topic_word, observed, heldout, 0.1, em_iterations=10)
    monkeypatch.setattr(evaluate, "PADDING_SLOTS", 100)  # padded a few batches at a time
    mesh = make_mesh(2)
    scorer = evaluate.HeldoutScorer(observed, heldout, 5, 30, 10, NamedSharding(mesh, P()))
    placed, count, _ = scorer._prepared.result()
    assert count > 2 and count % 2 == 1 and placed[0].shape[0] == count + 1
    shards = placed[0].addressable_shards
    assert sorted(shard.device.id for shard in shards) == sorted(d.id for d in mesh.devices.flat)
    assert all(shard.data.shape[0] == (count + 1) // 2 for shard in shards)
    two = scorer.score(jax.device_put(topic_word, NamedSharding(mesh, P())), 0.1)
    assert two.loglik_per_token == one.loglik_per_token  # bit for bit: no order varies
    assert (two.tokens, two.documents) == (one.tokens, one.documents)
