"""saberjax.corpus.bundled: the corpora shipped in saberjax.data."""

import pytest

from saberjax.corpus import bundled_corpus_path, load_bundled


def test_bundled_kos_loads_with_published_statistics():
    corpus = load_bundled("kos")
    assert (corpus.num_docs, corpus.num_words, corpus.num_tokens) == (3430, 6906, 467714)
    assert corpus.name == "kos" and corpus.dropped_empty_docs == 0
    assert corpus.vocab[:2] == ("aarp", "abandon")


def test_bundled_kos_readme_states_source_and_license():
    readme = (bundled_corpus_path("kos") / "README.md").read_text(encoding="utf-8")
    assert "UCI Machine Learning Repository" in readme and "CC BY 4.0" in readme


def test_unknown_bundled_corpus_lists_the_available_ones():
    with pytest.raises(ValueError, match="no bundled corpus 'nope'; available: kos"):
        bundled_corpus_path("nope")
