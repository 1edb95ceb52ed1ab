"""saberjax.corpus.ldac: the LDA-C loader, its errors naming the file and line, and the empty
documents it drops."""

import re

import numpy as np
import pytest
from corpus_helpers import (
    LDAC_ERRORS,
    LDAC_TEXT,
    assert_same_corpus,
    error_at,
    shared_data,
    tiny_corpus,
    write_text,
    write_vocab,
)

from saberjax.corpus import CorpusFormatError, load_ldac, load_uci


@pytest.mark.parametrize("name", ["tiny.ldac", "tiny.ldac.gz"])
def test_ldac_plain_and_gzip_give_tokens_in_file_order(tmp_path, name):
    corpus = load_ldac(write_text(tmp_path / name, LDAC_TEXT), write_vocab(tmp_path / "vocab.txt"))
    assert_same_corpus(corpus, tiny_corpus())
    assert corpus.name == "tiny"


def test_ldac_written_from_a_uci_corpus_loads_identically(tmp_path, shared_data):
    uci = load_uci(shared_data / "reuters395")
    doc, word, count = uci.doc_word_counts()
    starts = np.searchsorted(doc, np.arange(uci.num_docs + 1))
    lines = []
    for d in range(uci.num_docs):
        pairs = range(starts[d], starts[d + 1])
        lines.append(f"{len(pairs)} " + " ".join(f"{word[i]}:{count[i]}" for i in pairs))
    path = write_text(tmp_path / "reuters.ldac", "\n".join(lines) + "\n")
    assert_same_corpus(load_ldac(path, shared_data / "reuters395" / "vocab.txt"), uci)


@pytest.mark.parametrize("text, line, message", LDAC_ERRORS)
def test_malformed_ldac_error_names_file_and_line(tmp_path, text, line, message):
    path = write_text(tmp_path / "tiny.ldac", text)
    with pytest.raises(CorpusFormatError, match=error_at(path, line, message)):
        load_ldac(path, write_vocab(tmp_path / "vocab.txt"))


@pytest.mark.parametrize("create, message", [(False, "file not found"), (True, "file is empty")])
def test_missing_or_empty_ldac_file_is_reported(tmp_path, create, message):
    path = tmp_path / "tiny.ldac"
    if create:
        path.write_text("")
    with pytest.raises(CorpusFormatError, match=f"{re.escape(str(path))}: {message}"):
        load_ldac(path, write_vocab(tmp_path / "vocab.txt"))


def test_whitespace_only_ldac_file_is_empty_and_one_without_fields_is_not(tmp_path):
    path = write_text(tmp_path / "tiny.ldac", " \n\t\x0c\n\n")
    with pytest.raises(CorpusFormatError, match=f"{re.escape(str(path))}: file is empty"):
        load_ldac(path, write_vocab(tmp_path / "vocab.txt"))
    path = write_text(tmp_path / "tiny.ldac", "\n x\n")
    with pytest.raises(CorpusFormatError, match=error_at(path, 2, "pair count N 'x'")):
        load_ldac(path, write_vocab(tmp_path / "vocab.txt"))


def test_ldac_drops_empty_documents_and_ignores_blank_lines(tmp_path):
    path = write_text(tmp_path / "tiny.ldac", "0\n" + LDAC_TEXT.replace("1 0:3\n", "1 0:3\n\n0\n"))
    with pytest.warns(UserWarning, match="dropped 2 empty document"):
        corpus = load_ldac(path, write_vocab(tmp_path / "vocab.txt"))
    assert corpus.dropped_empty_docs == 2
    assert_same_corpus(corpus, tiny_corpus())
