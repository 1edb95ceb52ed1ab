"""Topic coherence: agrees with a direct per-pair count, ranks coherent topics first, and does
not depend on batching or on how the reference spells its vocabulary order."""

import inspect
import itertools
import json
import math

import numpy as np
import pytest
from helpers import launch, random_corpus

import saberjax
import saberjax.coherence as module
from saberjax import coherence
from saberjax.coherence import cooccurrence
from saberjax.corpus import Corpus, load_bundled, save_native, train_test_split
from saberjax.model import TopicModel



def direct_scores(top_ids, corpus: Corpus) -> dict[str, list[float]]:
    """UMass and NPMI of every topic, pair by pair from per-document word sets."""
    documents = [set(corpus.word_ids[start:stop].tolist())
                 for start, stop in zip(corpus.doc_offsets[:-1], corpus.doc_offsets[1:])]

    def docs_with(*words):
        return sum(all(word in document for word in words) for document in documents)

    umass, npmi = [], []
    for words in top_ids.tolist():
        umass.append(float(np.mean([
            math.log((docs_with(words[i], words[j]) + 1) / docs_with(words[j]))
            for i in range(len(words)) for j in range(i)])))
        pair_npmi = []
        for first, second in itertools.combinations(words, 2):
            joint = docs_with(first, second) / len(documents) + coherence.NPMI_EPSILON
            independent = docs_with(first) * docs_with(second) / len(documents) ** 2
            pair_npmi.append(math.log(joint / independent) / -math.log(joint))
        npmi.append(float(np.mean(pair_npmi)))
    return dict(umass=umass, npmi=npmi)


def corpus_of(documents: list[list[int]], num_words: int) -> Corpus:
    offsets = np.cumsum([0] + [len(document) for document in documents])
    return Corpus(offsets, np.concatenate(documents).astype(np.int32),
                  tuple(f"w{i}" for i in range(num_words)))


def test_scores_equal_a_direct_per_pair_computation():
    corpus = random_corpus(num_docs=80, num_words=30, mean_length=8, seed=3)
    topic_word = np.random.default_rng(0).random((6, corpus.num_words))
    counts = coherence.cooccurrence(topic_word, corpus, top_n=5)
    expected = direct_scores(counts.top_word_ids, corpus)
    for measure in coherence.MEASURES:
        scores = counts.score(measure)
        np.testing.assert_allclose(scores.per_topic, expected[measure], rtol=1e-12)
        assert scores.mean == pytest.approx(np.mean(expected[measure]))
        assert (scores.measure, scores.top_n) == (measure, 5)
    single = coherence.coherence(topic_word, corpus, top_n=5, measure="umass")
    np.testing.assert_array_equal(single.per_topic, counts.score("umass").per_topic)


def test_umass_is_the_mean_over_word_pairs_as_gensim_reports_it():
    # Documents as word sets: {0, 1}, {0, 1, 2}, {0}, {0, 2}, {1, 3}, so D(0) = 4, D(1) = 3,
    # D(3) = 1; D(0, 1) = 2, D(0, 2) = 2, D(1, 2) = 1, D(1, 3) = 1, D(0, 3) = 0.
    documents = [[0, 1], [0, 1, 2, 1], [0], [2, 0], [1, 3]]
    topic_word = np.array([[3.0, 2.0, 1.0, 0.0], [1.0, 2.0, 0.0, 3.0]])  # top 0 1 2; 3 1 0
    scores = coherence.coherence(topic_word, corpus_of(documents, 4), top_n=3, measure="umass")
    # Each later word given each earlier one: log((D(later, earlier) + 1) / D(earlier)).
    topic_0 = [math.log(3 / 4), math.log(3 / 4), math.log(2 / 3)]  # 1|0, 2|0, 2|1
    topic_1 = [math.log(2 / 1), math.log(1 / 1), math.log(3 / 3)]  # 1|3, 0|3, 0|1
    assert scores.per_topic.tolist() == pytest.approx([sum(topic_0) / 3, sum(topic_1) / 3],
                                                      rel=1e-12)
    assert scores.mean == pytest.approx((sum(topic_0) + sum(topic_1)) / 6, rel=1e-12)


def test_the_package_exports_coherence_as_a_callable_module():
    assert "coherence" in saberjax.__all__ and saberjax.coherence is module is coherence
    assert module.cooccurrence is cooccurrence
    corpus = random_corpus(num_docs=30, num_words=12, seed=5)
    topic_word = np.random.default_rng(5).random((3, corpus.num_words))
    called = saberjax.coherence(topic_word, corpus, top_n=4, measure="umass")
    np.testing.assert_array_equal(
        called.per_topic, module.coherence(topic_word, corpus, 4, "umass").per_topic)
    assert "measure" in str(inspect.signature(saberjax.coherence))


def test_words_that_always_co_occur_beat_words_that_never_do():
    # Words 0-2 fill documents 0-9 together; words 3-5 each have documents of their own.
    documents = [[0, 1, 2, 0]] * 10 + [[3 + d % 3, 6] for d in range(30)]
    topic_word = np.zeros((2, 7))
    topic_word[0, :3] = topic_word[1, 3:6] = [3, 2, 1]
    npmi = coherence.coherence(topic_word, corpus_of(documents, 7), top_n=3).per_topic
    assert npmi[0] == pytest.approx(1.0, abs=1e-9)
    assert npmi[1] < -0.85  # -1 + log(1 / P(w_i) P(w_j)) / -log(epsilon): -0.90 here


def test_batching_over_documents_gives_identical_counts():
    corpus = random_corpus(num_docs=50, num_words=40, mean_length=10, seed=1)
    topic_word = np.random.default_rng(1).random((7, corpus.num_words))
    whole = coherence.cooccurrence(topic_word, corpus, top_n=6)
    for batch_docs in (1, 7, 49):
        batched = coherence.cooccurrence(topic_word, corpus, top_n=6, batch_docs=batch_docs)
        np.testing.assert_array_equal(batched.pair_docs, whole.pair_docs)


def test_a_model_scores_its_own_top_words_on_a_reference_matched_by_word():
    corpus = random_corpus(num_docs=60, num_words=25, seed=2)
    counts = np.random.default_rng(2).integers(0, 4, (corpus.num_words, 5)).astype(np.int32)
    model = TopicModel(counts, 0.1, 0.01, corpus.vocab)  # small counts: many ties
    scored = coherence.cooccurrence(model, corpus, top_n=4)
    assert [[model.vocab[v] for v in row] for row in scored.top_word_ids] == model.top_words(4)

    # The same documents with the vocabulary listed backwards.
    backwards = Corpus(corpus.doc_offsets, corpus.num_words - 1 - corpus.word_ids,
                       corpus.vocab[::-1])
    np.testing.assert_array_equal(coherence.cooccurrence(model, backwards, 4).pair_docs,
                                  scored.pair_docs)


def test_a_topic_with_a_word_missing_from_the_reference_has_no_score():
    documents = [[0, 1], [1, 2], [0, 2], [0, 1, 2]]
    topic_word = np.array([[3.0, 2.0, 1.0, 0.0], [0.0, 1.0, 2.0, 3.0]])  # word 3: no document
    for measure in coherence.MEASURES:
        scores = coherence.coherence(topic_word, corpus_of(documents, 4), top_n=3,
                                     measure=measure)
        assert not np.isnan(scores.per_topic[0]) and np.isnan(scores.per_topic[1])
        assert scores.mean == scores.per_topic[0]
    with pytest.raises(ValueError, match="unknown coherence measure"):
        coherence.coherence(topic_word, corpus_of(documents, 4), top_n=3, measure="cv")


def test_evaluate_launcher_reports_coherence_on_the_training_documents(tmp_path):
    corpus = load_bundled("kos").subset(np.arange(300))
    save_native(corpus, tmp_path / "corpus")
    train = train_test_split(corpus, 0.1, seed=0)[0]
    counts = np.random.default_rng(0).integers(0, 50, (corpus.num_words, 4)).astype(np.int32)
    counts[train.word_counts() == 0] = 0  # top words from the training documents
    config = dict(corpus_path=str(tmp_path / "corpus"), test_fraction=0.1, seed=0,
                  corpus_fingerprint=train.fingerprint())
    TopicModel(counts, 0.5, 0.01, corpus.vocab, config).save(tmp_path / "model")

    assert coherence.default_reference(TopicModel.load(tmp_path / "model")).fingerprint() == \
        train.fingerprint()
    stdout = launch("evaluate.py", f"--model={tmp_path / 'model'}", "--top_n=5", timeout=300)
    scores = json.loads(stdout.strip().splitlines()[-1])
    counted = coherence.cooccurrence(counts.T.astype(float), train, top_n=5)
    assert scores["coherence_umass"] == pytest.approx(counted.score("umass").mean)
    assert scores["coherence_npmi"] == pytest.approx(counted.score("npmi").mean)
    assert scores["heldout_loglik_per_token"] < 0
