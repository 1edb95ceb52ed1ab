"""Records made before corpus fingerprints were hashed in blocks (Corpus.legacy_fingerprint):
a model's recorded training corpus is still recognised, and what is keyed by the fingerprint
(layout cache entries, chunk stores) is rebuilt with at most a warning, never an error.
Checkpoints: tests/test_checkpoint.py; corpus cache entries: tests/test_corpus_cache.py."""

import contextvars
import json
import warnings

import numpy as np
import pytest
from helpers import random_corpus

from saberjax import chunk_store, coherence, layout_cache
from saberjax.execution import memory
from saberjax.execution.placement import place
from saberjax.config import Hyperparams
from saberjax.corpus import Corpus
from saberjax.layout import build_layout
from saberjax.model import TopicModel


def model_trained_on(corpus: Corpus, fingerprint: str) -> TopicModel:
    counts = np.ones((corpus.num_words, 3), np.int32)
    return TopicModel(counts, 0.5, 0.01, corpus.vocab, dict(corpus_fingerprint=fingerprint))


def test_a_model_recording_the_legacy_fingerprint_keeps_its_coherence_reference():
    corpus = random_corpus(num_docs=30, seed=6)
    for recorded in (corpus.fingerprint(), corpus.legacy_fingerprint()):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert coherence.default_reference(model_trained_on(corpus, recorded),
                                               training=corpus) is corpus
    other = random_corpus(num_docs=30, seed=7)
    with pytest.warns(UserWarning, match="fingerprints differ"):
        coherence.default_reference(model_trained_on(corpus, other.legacy_fingerprint()),
                                    training=corpus)


def test_a_layout_cached_under_the_legacy_fingerprint_is_rebuilt_quietly(tmp_path, monkeypatch):
    corpus = random_corpus(num_docs=50, seed=3)

    def cached():
        layout_cache.use(tmp_path)
        return layout_cache.cached_layout(corpus, 300, 2)

    with monkeypatch.context() as former:
        former.setattr(Corpus, "fingerprint", Corpus.legacy_fingerprint)
        contextvars.copy_context().run(cached)
    (old,) = tmp_path.iterdir()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rebuilt = contextvars.copy_context().run(cached)
    assert sorted(tmp_path.iterdir()) == sorted([old, tmp_path / layout_cache.cache_key(
        corpus, 300, 2, None)[:32]])
    expected = build_layout(corpus, 300, 2)
    for mine, theirs in zip(rebuilt.chunks, expected.chunks):
        np.testing.assert_array_equal(mine.word, theirs.word)
        np.testing.assert_array_equal(mine.doc_major_pos, theirs.doc_major_pos)


def test_a_chunk_store_keyed_by_the_legacy_fingerprint_is_rebuilt_with_a_warning(tmp_path,
                                                                                monkeypatch):
    monkeypatch.setattr(memory, "anonymous_host_memory", lambda: 0)
    corpus = random_corpus(num_docs=200, num_words=40, mean_length=30, seed=23)
    hyper, directory = Hyperparams.create(6), tmp_path / "store"

    def stored():
        return place(corpus, hyper, 1, chunk_tokens=1500, stream=True,
                     host_memory_gb=2.3e-4, chunk_store_dir=directory)

    with monkeypatch.context() as former:
        former.setattr(Corpus, "fingerprint", Corpus.legacy_fingerprint)
        first = stored()
        assert first.stored and first.slots.build_seconds > 0
        del first
    manifest = json.loads((directory / chunk_store.MANIFEST).read_text())
    assert manifest["key"]["corpus_fingerprint"] == corpus.legacy_fingerprint()
    with pytest.warns(UserWarning, match="rebuilding the chunk store .*another corpus"):
        rebuilt = stored()
    assert rebuilt.slots.build_seconds > 0
    manifest = json.loads((directory / chunk_store.MANIFEST).read_text())
    assert manifest["key"]["corpus_fingerprint"] == corpus.fingerprint()
