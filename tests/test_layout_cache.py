"""The layout cache (saberjax.layout_cache): a run on the corpus and chunking of an earlier run
loads its layout, memory-mapped, equal to a fresh build; a changed corpus, setting or code
never finds an old entry, and a damaged entry is rebuilt."""

import contextvars
import json
import os

import numpy as np
import pytest
from helpers import ENTRY_DAMAGES, damage_entry, random_corpus

from saberjax import layout_cache
from saberjax.layout import build_layout


def cached(cache, corpus, *args, **kwargs):
    """layout_cache.cached_layout with the cache in `cache`, leaving the setting as it was."""
    def run():
        layout_cache.use(cache)
        return layout_cache.cached_layout(corpus, *args, **kwargs)
    return contextvars.copy_context().run(run)


def entries(cache):
    return sorted(path for path in cache.iterdir() if not path.name.startswith("."))


def assert_same_layout(actual, expected):
    assert actual.chunk_docs == expected.chunk_docs
    assert (actual.num_words, actual.num_docs, actual.num_tokens) == (
        expected.num_words, expected.num_docs, expected.num_tokens)
    np.testing.assert_array_equal(actual.word_order, expected.word_order)
    assert len(actual.chunks) == len(expected.chunks)
    for mine, theirs in zip(actual.chunks, expected.chunks):
        assert (mine is None) == (theirs is None)
        if mine is not None:
            assert (mine.tile_tokens, mine.block_tokens) == (theirs.tile_tokens,
                                                             theirs.block_tokens)
            for name in layout_cache._CHUNK_ARRAYS:
                assert getattr(mine, name).dtype == getattr(theirs, name).dtype
                np.testing.assert_array_equal(getattr(mine, name), getattr(theirs, name))


@pytest.mark.parametrize("settings", [dict(), dict(chunk_tokens=300, num_parts=2),
                                      dict(chunk_tokens=300, num_parts=2, parts=[1])])
def test_second_build_is_the_memory_mapped_copy_of_the_same_layout(tmp_path, settings):
    corpus = random_corpus(num_docs=50, seed=3)
    expected = build_layout(corpus, **settings)
    assert_same_layout(cached(tmp_path, corpus, **settings), expected)
    (entry,) = entries(tmp_path)
    again = cached(tmp_path, corpus, **settings)
    assert_same_layout(again, expected)
    assert isinstance(again.chunks[-1].word, np.memmap)
    assert entries(tmp_path) == [entry]


def test_without_a_cache_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    corpus = random_corpus(num_docs=20, seed=4)
    assert_same_layout(layout_cache.cached_layout(corpus), build_layout(corpus))
    assert_same_layout(cached(None, corpus), build_layout(corpus))
    assert not any(tmp_path.iterdir())


def test_corpus_settings_and_code_key_the_entry(tmp_path, monkeypatch):
    corpus, other = random_corpus(num_docs=30, seed=5), random_corpus(num_docs=30, seed=6)
    for args in [(corpus,), (other,), (corpus, 200), (corpus, 200, 2), (corpus, 200, 2, [0])]:
        cached(tmp_path, *args)
    assert len(entries(tmp_path)) == layout_cache.KEPT_ENTRIES  # the oldest went
    key = layout_cache.cache_key(corpus, None, 1, None)
    assert not (tmp_path / key[:32]).exists()
    monkeypatch.setattr(layout_cache, "_code_digest", lambda: "other code")
    assert layout_cache.cache_key(corpus, None, 1, None) != key


@pytest.mark.parametrize("damage", ENTRY_DAMAGES + ("other shape",))
def test_a_damaged_entry_is_detected_and_rebuilt(tmp_path, damage):
    """A flipped token leaves a valid array: only the digest tells."""
    corpus = random_corpus(num_docs=40, seed=7)
    cached(tmp_path, corpus, 400, 2)
    (entry,) = entries(tmp_path)
    array, manifest = entry / "chunk1.doc_major_pos.npy", entry / layout_cache.MANIFEST
    if damage == "other shape":
        recorded = json.loads(manifest.read_text())
        recorded["arrays"]["chunk1.doc_major_pos.npy"]["shape"] = [1]
        manifest.write_text(json.dumps(recorded))
    else:
        damage_entry(array, manifest, damage)
    with pytest.warns(UserWarning, match="damaged or stale.*rebuilding"):
        rebuilt = cached(tmp_path, corpus, 400, 2)
    assert_same_layout(rebuilt, build_layout(corpus, 400, 2))
    assert_same_layout(cached(tmp_path, corpus, 400, 2), rebuilt)


def test_an_unwritable_cache_is_a_warning_not_an_error(tmp_path):
    corpus = random_corpus(num_docs=20, seed=8)
    blocked = tmp_path / "file"
    blocked.write_text("")
    with pytest.warns(UserWarning, match="not written"):
        assert_same_layout(cached(blocked / "layouts", corpus), build_layout(corpus))
    assert os.path.isfile(blocked)
