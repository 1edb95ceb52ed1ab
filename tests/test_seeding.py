"""Seed words (guided topics): the topic-word prior beta_kv, read, trained with on every
backend and partition, saved and loaded."""

import json
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from helpers import ROOT

from saberjax import mstep, report
from saberjax.config import Hyperparams, TrainConfig
from saberjax.corpus import Corpus
from saberjax.corpus.native import save_native
from saberjax.estimator import LDA
from saberjax.model import TopicModel
from saberjax.pallas import bhat_tree as pallas_bhat_tree
from saberjax.seeding import SeedPrior, read_seed_words, seed_prior
from saberjax.trainer import train

THEMES, THEME_WORDS = 6, 20
# topic k is seeded with three words of theme PERMUTATION[k]
PERMUTATION = (3, 0, 5, 1, 4, 2)
SEEDS = {k: [f"t{theme}w{i}" for i in range(3)] for k, theme in enumerate(PERMUTATION)}


def themed_corpus(docs: int = 300, length: int = 60, seed: int = 0) -> Corpus:
    """Documents mixing THEMES themes (Dirichlet 0.2), theme t owning words t{t}w0 .. w19."""
    rng = np.random.default_rng(seed)
    vocab = tuple(f"t{t}w{i}" for t in range(THEMES) for i in range(THEME_WORDS))
    words = []
    for _ in range(docs):
        themes = rng.choice(THEMES, size=length, p=rng.dirichlet(np.full(THEMES, 0.2)))
        words.append(themes * THEME_WORDS + rng.integers(0, THEME_WORDS, length))
    offsets = np.arange(docs + 1, dtype=np.int64) * length
    return Corpus(offsets, np.concatenate(words).astype(np.int32), vocab, name="themes")


def theme_hits(model: TopicModel) -> list[float]:
    """Share of each topic's top 10 words from the theme its seeds name."""
    return [np.mean([word.startswith(f"t{PERMUTATION[k]}w") for word in words])
            for k, words in enumerate(model.top_words(10))]


def config(**settings) -> TrainConfig:
    return TrainConfig(**dict(dict(num_topics=THEMES, iterations=30, backend="xla",
                                   num_devices=1), **settings))


def test_seeded_model_is_the_same_on_every_partition():
    """Two devices by words and on the two-axis mesh (hosts x gpus 2 x 1, the documents
    split between the hosts, and 1 x 2) train the one-device model: each device finds the
    seeded rows among its own (by word, rows reordered; on 2 x 1 split between the hosts)."""
    corpus = themed_corpus(docs=120)
    settings = dict(seed_words=json.dumps(SEEDS), iterations=3)
    one = train(corpus, config(**settings)).model
    for mesh in (dict(num_devices=2, partition="words"),
                 dict(num_devices=0, mesh="2x1"), dict(num_devices=0, mesh="1x2")):
        other = train(corpus, config(**settings, **mesh)).model
        np.testing.assert_array_equal(one.word_topic_counts, other.word_topic_counts)


def test_seeded_bhat_is_the_topic_word_prior():
    """float32_bhat with seeds is (B + beta_kv) / (n_k + sum_v beta_kv) of a dense beta_kv,
    and bhat_and_tree's seeded rows (found from first_row on) carry that B-hat and its trees."""
    num_words, num_topics, beta, weight = 9, 5, 0.1, 7.0
    counts = np.random.default_rng(0).integers(0, 6, (num_words, 32)).astype(np.int32)
    counts[:, num_topics:] = 0
    prior = SeedPrior((2, 6), ((0, 3), (1,)), weight)
    beta_kv = np.full((num_words, num_topics), beta)
    beta_kv[2, [0, 3]] += weight
    beta_kv[6, 1] += weight
    expected = (counts[:, :num_topics] + beta_kv) / (counts[:, :num_topics].sum(0)
                                                    + beta_kv.sum(0))
    bhat = mstep.float32_bhat(jnp.asarray(counts), jnp.asarray(counts.sum(0)), num_topics, beta,
                              seeds=prior)
    np.testing.assert_allclose(np.asarray(bhat)[:, :num_topics], expected, rtol=1e-6)
    assert not np.asarray(bhat)[:, num_topics:].any()
    # rows 4 .. 8 of the model: seeded row 6 is local row 2, row 2 lies elsewhere
    alpha = jnp.where(jnp.arange(32) < num_topics, 0.5, 0.0)
    block, tree = mstep.bhat_and_tree(jnp.asarray(counts[4:]), jnp.asarray(counts.sum(0)),
                                      alpha, num_topics, beta, num_words, prior, first_row=4)
    np.testing.assert_allclose(np.asarray(block, np.float32)[:, :num_topics], expected[4:],
                               rtol=2**-8)


def test_pallas_kernel_applies_the_seeds_as_the_reference():
    """The Pallas B-hat pass with seeds: B-hat and trees as mstep's (rounding apart)."""
    num_words, num_topics = 5, 100
    hyper = Hyperparams.create(num_topics, backend="xla")
    counts = np.zeros((num_words, hyper.padded_topics), np.int32)
    counts[:, :num_topics] = np.random.default_rng(3).geometric(0.3, (num_words, num_topics)) - 1
    alpha = jnp.asarray(hyper.initial_alpha())
    prior = SeedPrior((0, 3), ((5, 99), (17,)), 50.0)
    got = pallas_bhat_tree.model_arrays(jnp.asarray(counts), alpha, num_topics, hyper.beta, prior)
    expected = mstep.model_arrays(jnp.asarray(counts), alpha, num_topics, hyper.beta, prior)
    np.testing.assert_allclose(np.asarray(got[1], np.float32), np.asarray(expected[1],
                               np.float32), rtol=2**-8)
    for got_level, expected_level in zip(got[2], expected[2]):
        np.testing.assert_allclose(got_level, expected_level, rtol=1e-5)
    unseeded = mstep.model_arrays(jnp.asarray(counts), alpha, num_topics, hyper.beta)
    assert float(expected[1][3, 17]) > 3 * float(unseeded[1][3, 17])


def test_read_seed_words_formats(tmp_path):
    """Lines `topic word ...` (comments, blank lines, a topic over several lines), JSON objects
    and lists, files or text, all read to the same mapping."""
    lines = tmp_path / "seeds.txt"
    lines.write_text("# space and sports\n0 space nasa\n\n2 game team  # more below\n0 orbit\n")
    expected = {0: ["space", "nasa", "orbit"], 2: ["game", "team"]}
    assert read_seed_words(str(lines)) == expected
    as_json = tmp_path / "seeds.json"
    as_json.write_text(json.dumps({"0": ["space", "nasa", "orbit"], "2": ["game", "team"]}))
    assert read_seed_words(str(as_json)) == expected
    assert read_seed_words('[["space"], [], ["game"]]') == {0: ["space"], 1: [], 2: ["game"]}
    assert read_seed_words({2: ("game",)}) == {2: ["game"]}


@pytest.mark.parametrize("text,message", [
    ("0 space\nthree game\n", "seeds.txt:2: topic index must be a non-negative integer"),
    ("0 space\n1\n", "seeds.txt:2: expected a topic index and its words"),
    ("# nothing\n", "no seed words"),
    ('{"0": "space"}', "topic 0's seed words must be a list of words"),
    ('{"0": ["space"', "not valid JSON")])
def test_bad_seed_files_name_the_line(tmp_path, text, message):
    path = tmp_path / "seeds.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        read_seed_words(str(path))


def test_seed_prior_checks_topics_and_vocabulary():
    """Topic indices below K; seed words missing from the vocabulary left out with a warning,
    an error when none is there; a word seeding two topics holds both."""
    vocab = ("space", "nasa", "game")
    with pytest.warns(UserWarning, match="1 seed word.*orbit"):
        prior = seed_prior({0: ["space", "orbit", "game"], 1: ["game"]}, 5.0, vocab, 2)
    assert prior == SeedPrior((0, 2), ((0,), (0, 1)), 5.0)
    assert prior.topic_weights(32)[:3].tolist() == [10.0, 5.0, 0.0]
    with pytest.raises(ValueError, match="topic 2 is not below num_topics=2"):
        seed_prior({2: ["space"]}, 5.0, vocab, 2)
    with pytest.raises(ValueError, match="none of the 1 seed words"):
        seed_prior({0: ["orbit"]}, 5.0, vocab, 2)
    assert seed_prior(None, 5.0, vocab, 2) is None


def test_lda_seed_words_saved_and_loaded(tmp_path):
    """LDA(seed_words=mapping): each seeded topic's top words come from the theme of its
    seeds (unseeded, topics find the themes in an order of their own: 1 in 720 to be the
    seeds' permutation); the model records the seeds found (JSON) and their weight, its
    topic_word holds beta_kv (rows sum to 1, each seeded cell as the formula), and the
    loaded model and estimator carry the same prior."""
    corpus = themed_corpus(docs=120)
    lda = LDA(num_topics=THEMES, iterations=20, backend="xla", num_devices=1,
              seed_words={**SEEDS, 1: SEEDS[1] + ["absent"]}, seed_weight=40.0)
    with pytest.warns(UserWarning, match="absent"):
        lda.fit(corpus)
    model = lda.model_
    assert min(theme_hits(model)) >= 0.9
    assert json.loads(model.config["seed_words"])["1"] == SEEDS[1]
    assert model.config["seed_weight"] == 40.0
    topic_word = model.topic_word
    np.testing.assert_allclose(topic_word.sum(axis=1), 1.0, rtol=1e-5)
    counts = model.word_topic_counts.astype(np.float64)
    word = corpus.vocab.index(SEEDS[2][0])
    denominator = counts[:, 2].sum() + model.num_words * model.beta + 3 * 40.0
    assert topic_word[2, word] == pytest.approx((counts[word, 2] + model.beta + 40.0)
                                                / denominator, rel=1e-6)
    top = model.top_words(5, with_weights=True)
    assert [weight for _, weight in top[2]] == [
        float(topic_word[2, corpus.vocab.index(w)]) for w, _ in top[2]]
    np.testing.assert_allclose(lda.components_ / lda.components_.sum(axis=1, keepdims=True),
                               topic_word, rtol=1e-5)
    weights = dict(model.word_topics(SEEDS[2][0]))
    assert sum(weights.values()) == pytest.approx(1.0)
    lda.save(tmp_path / "model")
    loaded = TopicModel.load(tmp_path / "model")
    assert loaded.seed_prior == model.seed_prior
    np.testing.assert_array_equal(loaded.topic_word, topic_word)
    assert LDA.load(tmp_path / "model").seed_weight == 40.0
    report.write_report(loaded, tmp_path / "report", corpus)
    assert "18 words seeding 6 topics (0, 1, 2, 3, 4, 5), weight 40" in (
        tmp_path / "report" / report.MARKDOWN_FILE).read_text()


def test_cli_seed_words(tmp_path):
    """train --seed_words=FILE records the seeds in config.json and model.npz's topic_word;
    a bad seed file is one line naming it, before the output exists."""
    corpus = themed_corpus(docs=120)
    save_native(corpus, tmp_path / "corpus")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(f"{k} {' '.join(words)}\n" for k, words in SEEDS.items()))
    common = [sys.executable, "-m", "saberjax", "train", f"--corpus={tmp_path / 'corpus'}",
              f"--num_topics={THEMES}", "--iterations=20", "--backend=xla", "--num_devices=1",
              "--test_fraction=0", "--top_words=0"]
    bad = tmp_path / "bad.txt"
    bad.write_text("0 t0w0\nx t1w1\n")
    failed = subprocess.run([*common, f"--seed_words={bad}", f"--output={tmp_path / 'bad'}"],
                            capture_output=True, text=True, cwd=ROOT)
    assert failed.returncode != 0 and "bad.txt:2: topic index" in failed.stderr
    assert len(failed.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "bad").exists()
    subprocess.run([*common, f"--seed_words={seeds}", f"--output={tmp_path / 'model'}"],
                   check=True, capture_output=True, cwd=ROOT)
    model = TopicModel.load(tmp_path / "model")
    assert json.loads(model.config["seed_words"]) == {str(k): v for k, v in SEEDS.items()}
    assert min(theme_hits(model)) >= 0.9
    with np.load(tmp_path / "model" / "model.npz") as arrays:
        np.testing.assert_array_equal(arrays["topic_word"], model.topic_word)


def test_seeded_views_of_either_form_of_b():
    """A seeded model's topic_word holds beta_kv, and bhat_rows, topic_word_rows and the top
    words' weights read the same values from dense and from sparse B (the seeded cells whose
    count is 0 included)."""
    from saberjax import sparse_word_topic

    rng = np.random.default_rng(5)
    counts = (rng.geometric(0.5, (12, 4)) - 1).astype(np.int32)
    counts[3, 2] = 0  # a seeded cell of no count
    vocab = tuple(f"v{i}" for i in range(12))
    config = dict(seed_words=json.dumps({"2": ["v3", "v7"], "0": ["v7"]}), seed_weight=9.0)
    dense = TopicModel(counts, 0.5, 0.1, vocab, config)
    sparse = TopicModel(sparse_word_topic.from_dense(counts), 0.5, 0.1, vocab, config)
    beta_kv = np.full((12, 4), 0.1)
    beta_kv[3, 2] += 9.0
    beta_kv[7, [0, 2]] += 9.0
    expected = ((counts + beta_kv) / (counts.sum(0) + beta_kv.sum(0))).T
    for model in (dense, sparse):
        np.testing.assert_allclose(model.topic_word, expected, rtol=1e-6)
        np.testing.assert_array_equal(model.bhat_rows([7, 3, 1]), model.topic_word[:, [7, 3, 1]].T)
        np.testing.assert_array_equal(model.topic_word_rows([2, 0]), model.topic_word[[2, 0]])
        for row, words in zip(model.topic_word, model.top_words(4, with_weights=True)):
            assert [weight for _, weight in words] == [float(row[vocab.index(w)])
                                                       for w, _ in words]
