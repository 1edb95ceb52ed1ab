"""Fold-in inference: right topics, the EM estimator exactly, any batching, any input form."""

import json

import numpy as np
import pytest
import scipy.sparse
from helpers import launch, random_corpus, run_launcher

from saberjax.corpus import Corpus, save_native
from saberjax.inference import (DocumentWords, document_totals, fold_in, infer_topics,
                                plan_batches, row_width)
from saberjax.model import TopicModel

NUM_TOPICS, BLOCK = 4, 10  # topic k owns words k*BLOCK .. (k+1)*BLOCK - 1


def separated_model() -> TopicModel:
    """Well-separated topics: each topic's training counts fall on its own block of words."""
    counts = np.zeros((NUM_TOPICS * BLOCK, NUM_TOPICS), np.int32)
    for k in range(NUM_TOPICS):
        counts[k * BLOCK:(k + 1) * BLOCK, k] = 100
    return TopicModel(counts, 0.1, 0.01, tuple(f"w{i}" for i in range(NUM_TOPICS * BLOCK)))


def corpus_of(docs, vocab) -> Corpus:
    lengths = [len(doc) for doc in docs]
    return Corpus(np.append(0, np.cumsum(lengths)), np.concatenate(docs).astype(np.int32),
                  tuple(vocab))


def random_model(num_words=50, num_topics=6, seed=0) -> TopicModel:
    counts = np.random.default_rng(seed).integers(0, 30, (num_words, num_topics)).astype(np.int32)
    return TopicModel(counts, 0.3, 0.01, tuple(f"w{i}" for i in range(num_words)))


def direct_em(model: TopicModel, corpus: Corpus, iterations: int) -> np.ndarray:
    """The EM fold-in written as plain per-document numpy loops over tokens."""
    topic_word = model.topic_word.astype(np.float64)
    theta = np.full((corpus.num_docs, model.num_topics), 1.0 / model.num_topics)
    for d in range(corpus.num_docs):
        tokens = corpus.word_ids[corpus.doc_offsets[d]:corpus.doc_offsets[d + 1]]
        for _ in range(iterations):
            responsibility = theta[d][:, None] * topic_word[:, tokens]
            responsibility /= responsibility.sum(axis=0)
            theta[d] = ((responsibility.sum(axis=1) + model.alpha)
                        / (len(tokens) + model.alpha.sum()))
    return theta


def test_recovers_the_generating_topics():
    model = separated_model()
    rng = np.random.default_rng(0)
    pure = [k * BLOCK + rng.integers(0, BLOCK, 30) for k in range(NUM_TOPICS)]
    mixed = np.concatenate([rng.integers(0, BLOCK, 45), 2 * BLOCK + rng.integers(0, BLOCK, 15)])
    theta = infer_topics(model, corpus_of([*pure, mixed], model.vocab))
    assert theta.shape == (NUM_TOPICS + 1, NUM_TOPICS) and theta.dtype == np.float32
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(theta[:NUM_TOPICS].argmax(axis=1), np.arange(NUM_TOPICS))
    assert theta[np.arange(NUM_TOPICS), np.arange(NUM_TOPICS)].min() > 0.95
    prior = model.alpha[1] / (60 + model.alpha.sum())
    np.testing.assert_allclose(theta[NUM_TOPICS], [0.75, prior, 0.25, prior], atol=0.01)


def test_equals_per_document_em():
    model, corpus = random_model(), random_corpus(num_docs=25, num_words=50, seed=1)
    expected = direct_em(model, corpus, iterations=20)
    np.testing.assert_allclose(infer_topics(model, corpus, iterations=20), expected, atol=2e-5)


def test_deterministic_and_independent_of_batching_devices_and_token_order():
    model, corpus = random_model(), random_corpus(num_docs=60, num_words=50, seed=2)
    theta = infer_topics(model, corpus)
    np.testing.assert_array_equal(infer_topics(model, corpus), theta)
    for batch_slots, num_devices in ((8, 1), (100, 2), (10_000, 0)):
        rebatched = infer_topics(model, corpus, batch_slots=batch_slots, num_devices=num_devices)
        np.testing.assert_allclose(rebatched, theta, atol=1e-6)
    # Words sorted within each document merge into fewer slots; the estimate is the same.
    lengths = corpus.doc_lengths()
    order = np.lexsort((corpus.word_ids, np.repeat(np.arange(corpus.num_docs), lengths)))
    grouped = Corpus(corpus.doc_offsets, corpus.word_ids[order], corpus.vocab)
    assert DocumentWords.from_corpus(grouped).words.size < corpus.num_tokens
    np.testing.assert_allclose(infer_topics(model, grouped), theta, atol=1e-6)
    single = infer_topics(model, corpus.subset([7]))
    np.testing.assert_allclose(single[0], theta[7], atol=1e-6)


def test_batches_hold_whole_documents_in_rows_of_one_shape_and_sum_them_by_document():
    lengths = np.array([3, 0, 17, 8, 1, 40, 9, 0, 16, 2])
    width = 8
    batches = list(plan_batches(lengths, batch_slots=40, width=width))
    # 40 slots of width 8 are 5 rows, which document 5 (40 slots) fills alone
    assert {batch.shape for batch in batches} == {(5, 8)}
    assert np.concatenate([batch.docs for batch in batches]).tolist() == [0, 2, 3, 4, 5, 6, 8, 9]
    slots = DocumentWords(np.append(0, np.cumsum(lengths)),
                          np.arange(lengths.sum(), dtype=np.int32),
                          np.arange(lengths.sum(), dtype=np.float32) + 1)
    for batch in batches:
        words, counts = slots.padded(batch)
        totals = np.asarray(document_totals(counts.sum(axis=1), batch.row_start, batch.row_end))
        for doc, first in zip(batch.docs, batch.first_row):
            rows = -(-lengths[doc] // width)
            mine = slice(slots.offsets[doc], slots.offsets[doc + 1])
            # the document's slots fill its rows in order, then padding
            np.testing.assert_array_equal(words[first:first + rows].ravel()[:lengths[doc]],
                                          slots.words[mine])
            assert counts[first:first + rows].ravel()[lengths[doc]:].sum() == 0
            np.testing.assert_array_equal(totals[first:first + rows], slots.counts[mine].sum())
        used = int(np.sum(-(-lengths[batch.docs] // width)))
        assert not counts[used:].any() and batch.row_start[used:].all()  # padding rows
    # a single small batch is rounded up to a power of two of rows, not the whole budget
    (small,) = plan_batches(np.array([5, 9]), batch_slots=1 << 20, width=8)
    assert small.shape == (4, 8)
    assert row_width(np.array([1, 2, 3, 5])) == 8
    assert row_width(np.full(10, 1000)) > 8


def test_a_run_compiles_one_fold_in_program_whatever_the_document_lengths():
    model = random_model()
    lengths = [1, 3, 9, 30, 70, 200]
    rng = np.random.default_rng(3)
    corpus = Corpus(np.append(0, np.cumsum(lengths)),
                    rng.integers(0, model.num_words, sum(lengths)).astype(np.int32), model.vocab)
    before = fold_in._cache_size()
    infer_topics(model, corpus, iterations=5, batch_slots=64, num_devices=1)
    assert fold_in._cache_size() == before + 1


def test_words_match_by_string_and_documents_without_known_words_get_the_prior_mean():
    model = separated_model()
    reversed_vocab = model.vocab[::-1] + ("unknown",)
    tokens = [np.array([39, 38, 37, 31]), np.array([], np.int64), np.array([40, 40])]
    with pytest.warns(UserWarning, match="dropped 2 of 6 tokens"):
        theta = infer_topics(model, corpus_of(tokens, reversed_vocab))
    in_model_vocab = infer_topics(model, corpus_of([39 - tokens[0]], model.vocab))
    np.testing.assert_array_equal(theta[0], in_model_vocab[0])
    np.testing.assert_array_equal(theta[1:], np.full((2, NUM_TOPICS), 1 / NUM_TOPICS, np.float32))


def test_count_matrices_give_the_corpus_result_row_for_row():
    model, corpus = random_model(), random_corpus(num_docs=20, num_words=50, seed=3)
    dense = np.zeros((corpus.num_docs + 1, model.num_words), np.int64)  # last row empty
    np.add.at(dense, (np.repeat(np.arange(corpus.num_docs), corpus.doc_lengths()),
                      corpus.word_ids), 1)
    expected = np.vstack([infer_topics(model, corpus), np.full(model.num_topics, 1 / 6)])
    for matrix in (dense, scipy.sparse.csr_matrix(dense), scipy.sparse.coo_array(dense)):
        np.testing.assert_allclose(model.transform(matrix), expected, atol=1e-6)
    with pytest.raises(ValueError, match="model's 50 words"):
        model.transform(dense[:, :40])
    with pytest.raises(ValueError, match="non-negative"):
        model.transform(-dense)


def test_saved_model_transforms_identically(tmp_path):
    model, corpus = random_model(seed=4), random_corpus(num_docs=15, num_words=50, seed=4)
    before = model.transform(corpus)
    model.save(tmp_path / "model")
    np.testing.assert_array_equal(TopicModel.load(tmp_path / "model").transform(corpus), before)


def test_infer_launcher_writes_a_loadable_theta(tmp_path):
    model, corpus = random_model(seed=5), random_corpus(num_docs=12, num_words=50, seed=5)
    model.save(tmp_path / "model")
    save_native(corpus, tmp_path / "docs")
    output = tmp_path / "out" / "theta.npy"
    stdout = launch("infer.py", f"--model={tmp_path / 'model'}", f"--corpus={tmp_path / 'docs'}",
                    f"--output={output}", "--iterations=30", timeout=300)
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["documents"] == 12 and summary["docs_per_second"] > 0
    np.testing.assert_allclose(np.load(output), infer_topics(model, corpus, iterations=30),
                               atol=1e-6)
    assert [path.name for path in output.parent.iterdir()] == ["theta.npy"]


def test_esca_fold_in_agrees_with_em_and_is_reproducible():
    model = separated_model()
    rng = np.random.default_rng(4)
    docs = corpus_of([np.concatenate([rng.integers(0, BLOCK, 60),
                                      3 * BLOCK + rng.integers(0, BLOCK, 20)]),
                      BLOCK + rng.integers(0, BLOCK, 50)], model.vocab)
    em = infer_topics(model, docs)
    sampled = infer_topics(model, docs, method="esca", iterations=40, seed=3)
    np.testing.assert_array_equal(sampled, infer_topics(model, docs, method="esca",
                                                        iterations=40, seed=3))
    np.testing.assert_allclose(sampled.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(sampled.argmax(axis=1), em.argmax(axis=1))
    assert np.abs(sampled - em).max() < 0.05
    with pytest.raises(ValueError, match="method must be one of"):
        infer_topics(model, docs, method="gibbs")


def test_esca_fold_in_keeps_every_row_of_a_count_matrix():
    model = separated_model()
    matrix = np.zeros((3, model.num_words), np.int64)
    matrix[0, :BLOCK] = 3
    matrix[2, 2 * BLOCK:3 * BLOCK] = 2
    theta = infer_topics(model, scipy.sparse.csr_matrix(matrix), method="esca", iterations=10)
    assert theta.shape == (3, NUM_TOPICS)
    np.testing.assert_allclose(theta[1], 1.0 / NUM_TOPICS, rtol=1e-6)  # empty: the prior mean
    np.testing.assert_array_equal(theta[[0, 2]].argmax(axis=1), [0, 2])


def word_model() -> TopicModel:
    """Two well-separated topics over real words: space (topic 0) and water (topic 1)."""
    vocab = ("comet", "delta", "flood", "orbit", "planet", "rain", "river", "sun")
    counts = np.array([[50, 0], [0, 50], [0, 50], [50, 0], [50, 0], [0, 50], [0, 50], [50, 0]],
                      np.int32)
    return TopicModel(counts, 0.1, 0.01, vocab, {"text_options": {"min_df": 5}})


def test_raw_text_is_tokenised_against_the_model_vocabulary_without_df_rules():
    model = word_model()
    documents = ["The Comet's orbit around the Sun!", "Rain, rain: the river floods its delta",
                 "nothing known here"]
    with pytest.warns(UserWarning, match=r"documents: 2 of 9 tokens \(22\.2%\) are words "
                                         r"outside the model's vocabulary of 8 words"):
        theta = model.transform(documents)
    expected = infer_topics(model, corpus_of([np.array([0, 3, 7]), np.array([5, 5, 6, 1]),
                                              np.array([], np.int64)], model.vocab))
    np.testing.assert_array_equal(theta, expected)
    assert theta[0].argmax() == 0 and theta[1].argmax() == 1
    np.testing.assert_array_equal(theta[2], [0.5, 0.5])  # no known word: the prior mean
    assert infer_topics(model, ["sun sun comet"], method="esca")[0].argmax() == 0
    with pytest.raises(ValueError, match="none of the 2 tokens of its 2 document"):
        model.transform(["unknown words", "only"])
    with pytest.raises(TypeError, match="one string"):
        model.transform("comet orbit")


def test_infer_launcher_reads_a_folder_of_new_texts(tmp_path):
    """Two .txt files used to fail ("no word is in at least min_df=5 ... of the 2
    documents"): the model's vocabulary applies, not a new one."""
    word_model().save(tmp_path / "model")
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "a.txt").write_text("A comet crossed the orbit of the planet.")
    (tmp_path / "new" / "b.txt").write_text("The river delta floods after rain; boats wait.")
    output = tmp_path / "theta.npy"
    result = run_launcher("infer.py", f"--model={tmp_path / 'model'}",
                          f"--corpus={tmp_path / 'new'}", f"--output={output}")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert (summary["documents"], summary["tokens"], summary["unknown_tokens"]) == (2, 6, 4)
    assert "4 of 10 tokens (40.0%) are words outside" in result.stderr
    np.testing.assert_array_equal(np.load(output).argmax(axis=1), [0, 1])


def test_inference_that_does_not_fit_the_device_is_refused_before_allocating(monkeypatch):
    from saberjax import inference
    from saberjax.execution import memory
    from saberjax.model import TopicModel

    model = TopicModel(np.ones((50, 4), np.int32), 0.5, 0.01, tuple(f"w{i}" for i in range(50)))
    corpus = random_corpus(num_docs=5, num_words=50, seed=3)
    monkeypatch.setattr(memory, "free_device_memory", lambda device=None: 1000)
    for method in inference.METHODS:
        with pytest.raises(MemoryError, match="fold-in of this model needs .* GB on the device"):
            inference.infer_topics(model, corpus, method=method)
