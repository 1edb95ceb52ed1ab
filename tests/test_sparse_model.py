"""A model whose B is held sparse (CSR by word) answers every question as its dense form does,
is stored sparse in model.npz when dense would be large, and at large K never forms K x V."""

import dataclasses
import itertools
import json
import tracemalloc

import numpy as np
import pytest
from helpers import launch

from saberjax import coherence, evaluate, model_files, report, trainer
from saberjax import sparse_word_topic as swt
from saberjax.corpus import load_bundled, save_native, split_document_halves, train_test_split
from saberjax.inference import BatchWordRows, infer_topics
from saberjax.model import TopicModel
from saberjax.model_files import ModelFormatError


@pytest.fixture(name="trained", scope="module")
def fixture_trained():
    """(a tiny trained model, with sparse B, its training and test documents)."""
    corpus = load_bundled("kos").subset(np.arange(120))
    train, test = train_test_split(corpus, 0.2, seed=0)
    model = trainer.train(train, trainer.TrainConfig(num_topics=12, iterations=6,
                                                     backend="xla")).model
    assert np.count_nonzero(model.word_topic_counts == 0) > model.word_topic_counts.size // 2
    return model, sparse_of(model), train, test


def sparse_of(model: TopicModel) -> TopicModel:
    return dataclasses.replace(model, word_topic_counts=swt.from_dense(model.word_topic_counts))


def test_sparse_model_answers_as_the_dense_model(trained):
    dense, sparse, _, _ = trained
    assert sparse.is_sparse and not dense.is_sparse
    assert sparse.num_topics == dense.num_topics and sparse.num_words == dense.num_words
    for n in (1, 10, dense.num_words):
        assert sparse.top_words(n) == dense.top_words(n)
        assert sparse.top_words(n, with_weights=True) == dense.top_words(n, with_weights=True)
    np.testing.assert_array_equal(sparse.top_word_ids(10), dense.top_word_ids(10))
    np.testing.assert_array_equal(sparse.topic_shares(), dense.topic_shares())
    np.testing.assert_array_equal(sparse.topic_totals, dense.topic_totals)
    for word in dense.vocab[:30]:
        assert sparse.word_topics(word) == dense.word_topics(word)
    words = np.array([0, 7, 7, dense.num_words - 1])
    np.testing.assert_array_equal(sparse.bhat_rows(words), dense.topic_word[:, words].T)
    np.testing.assert_array_equal(dense.bhat_rows(words), dense.topic_word[:, words].T)
    topics = [3, 0, 3, dense.num_topics - 1]
    np.testing.assert_array_equal(sparse.topic_word_rows(topics), dense.topic_word[topics])
    np.testing.assert_array_equal(dense.topic_word_rows(topics), dense.topic_word[topics])
    np.testing.assert_array_equal(sparse.topic_word, dense.topic_word)
    np.testing.assert_array_equal(sparse.dense_word_topic_counts(), dense.word_topic_counts)


def test_sparse_model_infers_and_scores_as_the_dense_model(trained):
    dense, sparse, _, test = trained
    for method in ("em", "esca"):
        np.testing.assert_allclose(infer_topics(sparse, test, 20, method=method),
                                   infer_topics(dense, test, 20, method=method), atol=1e-6)
    # several batches: each gathers its own words' rows
    np.testing.assert_allclose(infer_topics(sparse, test, 20, batch_slots=64),
                               infer_topics(dense, test, 20), atol=1e-6)
    halves = split_document_halves(test, seed=0)
    sparse_score = evaluate.model_heldout_loglik(sparse, *halves, em_iterations=20)
    dense_score = evaluate.model_heldout_loglik(dense, *halves, em_iterations=20)
    assert sparse_score.tokens == dense_score.tokens > 0
    assert sparse_score.loglik_per_token == pytest.approx(dense_score.loglik_per_token, abs=1e-6)


def test_sparse_model_has_the_dense_models_coherence_and_report(trained, tmp_path):
    dense, sparse, train, _ = trained
    ours, theirs = (coherence.cooccurrence(m, train, 8) for m in (sparse, dense))
    np.testing.assert_array_equal(ours.top_word_ids, theirs.top_word_ids)
    np.testing.assert_array_equal(ours.pair_docs, theirs.pair_docs)
    for name, model in (("sparse", sparse), ("dense", dense)):
        with pytest.warns(UserWarning, match="no convergence plot"):  # no metrics given
            report.write_report(model, tmp_path / name, train, top_n=8)
    for page in (report.MARKDOWN_FILE, report.HTML_FILE):
        assert (tmp_path / "sparse" / page).read_bytes() == (tmp_path / "dense" / page).read_bytes()


def test_model_npz_stores_b_sparse_when_dense_would_be_large(trained, tmp_path, monkeypatch):
    dense, sparse, _, _ = trained
    for name, model in (("small_dense", dense), ("small_sparse", sparse)):
        model.save(tmp_path / name)
        with np.load(tmp_path / name / "model.npz") as arrays:
            assert "word_topic_counts" in arrays and "topic_word" in arrays
        loaded = TopicModel.load(tmp_path / name)
        assert not loaded.is_sparse
        np.testing.assert_array_equal(loaded.word_topic_counts, dense.word_topic_counts)
    # the rule at a threshold this model's dense B passes: CSR when it is smaller
    monkeypatch.setattr(model_files, "SPARSE_FILE_BYTES", dense.word_topic_counts.nbytes)
    shape = dense.num_words, dense.num_topics
    assert model_files.stores_sparse(*shape, sparse.word_topic_counts.nnz)
    assert not model_files.stores_sparse(*shape, dense.word_topic_counts.size)  # CSR larger
    for name, model in (("large_dense", dense), ("large_sparse", sparse)):
        model.save(tmp_path / name)
        with np.load(tmp_path / name / "model.npz") as arrays:
            assert set(arrays) == {"word_topic_indptr", "word_topic_topics", "word_topic_values",
                                   "num_topics", "alpha", "beta", "format_version"}
            assert int(arrays["format_version"]) == model_files.FORMAT_VERSION
        config = json.loads((tmp_path / name / "config.json").read_text())
        assert config["format_version"] == model_files.FORMAT_VERSION
        loaded = TopicModel.load(tmp_path / name)
        assert loaded.is_sparse
        for field in ("indptr", "topics", "counts"):
            np.testing.assert_array_equal(getattr(loaded.word_topic_counts, field),
                                          getattr(sparse.word_topic_counts, field))
        assert loaded.top_words(5, with_weights=True) == dense.top_words(5, with_weights=True)
    # the disk room training asks for bounds the file of either form
    tokens = int(dense.topic_totals.sum())
    for name, threshold in (("small_dense", 1 << 40), ("large_sparse", 0)):
        monkeypatch.setattr(model_files, "SPARSE_FILE_BYTES", threshold)
        bound = model_files.model_file_bytes(dense.num_words, dense.num_topics, tokens)
        assert (tmp_path / name / "model.npz").stat().st_size <= bound + 4096  # + headers


def test_a_damaged_sparse_model_npz_is_named(trained, tmp_path, monkeypatch):
    _, sparse, _, _ = trained
    monkeypatch.setattr(model_files, "SPARSE_FILE_BYTES", 0)
    sparse.save(tmp_path / "m")
    path = tmp_path / "m" / "model.npz"
    with np.load(path) as stored:
        arrays = dict(stored)
    arrays["word_topic_values"] = -arrays["word_topic_values"]
    np.savez(path, **arrays)
    with pytest.raises(ModelFormatError, match=r"model\.npz: .*counts must be positive"):
        TopicModel.load(tmp_path / "m")


def test_large_k_sparse_model_loads_reports_and_infers_without_k_by_v(tmp_path):
    """K = 200,000 topics over 2,000 words: dense B would be 1.6 GB (and topic_word as much);
    saving, loading, top word ids, word_topics and inference take an eighth of that of host
    memory at their peak (tracemalloc counts numpy's allocations), most of it K x 10 top words."""
    num_words, num_topics = 2_000, 200_000
    rng = np.random.default_rng(0)
    words = np.repeat(np.arange(num_words), 8)
    b = swt.from_entries(words, rng.integers(0, num_topics, words.size),
                         rng.integers(1, 50, words.size), num_words, num_topics)
    vocab = tuple("q" + "".join(letters)
                  for letters in itertools.product("abcdefgh", repeat=4))[:num_words]
    TopicModel(b, 0.1, 0.01, vocab).save(tmp_path / "m")
    documents = [" ".join(vocab[v] for v in (1, 2, 3, 3, 1999)), f"{vocab[17]} {vocab[18]}",
                 f"{vocab[5]} " * 40]
    dense_bytes = 4 * num_words * num_topics

    tracemalloc.start()
    model = TopicModel.load(tmp_path / "m")
    top_ids = model.top_word_ids(10)
    topics_of_word = model.word_topics(vocab[3])
    topic_row = model.topic_word_rows([int(np.argmax(model.topic_totals))])
    theta = model.transform(documents, iterations=5)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()

    assert model.is_sparse and model.num_topics == num_topics
    assert top_ids.shape == (num_topics, 10)
    assert topic_row.shape == (1, num_words) and topic_row.sum() == pytest.approx(1, rel=1e-5)
    # top_words adds K x 10 Python pairs, the answer itself, to top_word_ids' arrays
    top = model.top_words(10, with_weights=True)
    heaviest_topic = int(np.argmax(model.topic_totals))
    assert [word for word, _ in top[heaviest_topic]] == [vocab[v] for v in top_ids[heaviest_topic]]
    heaviest = b.topics[b.indptr[3] + np.argmax(b.counts[b.indptr[3]:b.indptr[4]])]
    assert topics_of_word[0][0] == heaviest
    assert theta.shape == (3, num_topics)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-5)
    assert peak < dense_bytes / 8, f"peak {peak / 1e6:.0f} MB of host memory"


def test_infer_and_evaluate_commands_read_a_sparse_model_file(trained, tmp_path, monkeypatch):
    dense, sparse, _, test = trained
    monkeypatch.setattr(model_files, "SPARSE_FILE_BYTES", 0)
    sparse.save(tmp_path / "model")
    save_native(test, tmp_path / "docs")
    output = tmp_path / "theta.npy"
    launch("infer.py", f"--model={tmp_path / 'model'}", f"--corpus={tmp_path / 'docs'}",
           f"--output={output}", "--iterations=20", timeout=300)
    np.testing.assert_allclose(np.load(output), infer_topics(dense, test, 20), atol=1e-6)
    stdout = launch("evaluate.py", f"--model={tmp_path / 'model'}",
                    f"--corpus={tmp_path / 'docs'}", "--em_iterations=20", "--coherence=",
                    "--seed=0", timeout=300)
    score = json.loads(stdout.strip().splitlines()[-1])
    expected = evaluate.model_heldout_loglik(dense, *split_document_halves(test, seed=0),
                                             em_iterations=20)
    assert score["heldout_loglik_per_token"] == pytest.approx(expected.loglik_per_token,
                                                              abs=1e-6)


def test_batch_word_rows_are_bhat_rows_formed_on_the_device(trained):
    import jax

    dense, sparse, _, _ = trained
    words = np.array([[5, 9, 5], [0, 3, 9]])
    gathered = BatchWordRows.of(sparse, 8, words)
    assert gathered.rows.size & (gathered.rows.size - 1) == 0  # a power of two
    table = np.asarray(gathered.table(jax.device_put(sparse.bhat_floor), jax.devices()[0]))
    assert table.shape == (8, dense.num_topics)
    np.testing.assert_array_equal(table[gathered.words[0]],
                                  dense.topic_word[:, words].transpose(1, 2, 0))
    np.testing.assert_array_equal(table[4:], np.tile(sparse.bhat_floor, (4, 1)))
