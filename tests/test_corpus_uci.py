"""saberjax.corpus.uci: the UCI bag-of-words loader, its vocabulary files, its errors naming
the file and line, and the empty documents it drops."""

import re

import numpy as np
import pytest
from corpus_helpers import (
    UCI_ERRORS,
    UCI_TEXT,
    VOCAB,
    assert_same_corpus,
    error_at,
    shared_data,
    tiny_corpus,
    write_text,
    write_uci,
    write_vocab,
)

from saberjax.corpus import CorpusFormatError, load_corpus, load_uci


@pytest.mark.parametrize("name", ["docword.txt", "docword.txt.gz"])
def test_uci_plain_and_gzip_give_tokens_in_file_order(tmp_path, name):
    path = write_uci(tmp_path / "tiny", name=name)
    corpus = load_uci(path)
    assert_same_corpus(corpus, tiny_corpus())
    assert corpus.name == "tiny" and corpus.dropped_empty_docs == 0


def test_uci_groups_unsorted_entries_by_doc_keeping_file_order(tmp_path):
    path = write_uci(tmp_path, "2\n4\n4\n2 4 1\n1 3 1\n2 1 2\n1 2 1\n")
    corpus = load_uci(path)
    np.testing.assert_array_equal(corpus.doc_offsets, [0, 2, 5])
    np.testing.assert_array_equal(corpus.word_ids, [2, 1, 3, 0, 0])


def test_uci_accepts_crlf_tabs_and_blank_lines(tmp_path):
    text = UCI_TEXT.replace("\n", "\r\n").replace("1 4 1", "1\t4  1") + "\r\n\n"
    assert_same_corpus(load_uci(write_uci(tmp_path, text)), tiny_corpus())


def test_uci_finds_tagged_vocab_and_names_corpus_after_tag(tmp_path):
    path = write_text(tmp_path / "docword.tiny.txt", UCI_TEXT)
    write_vocab(tmp_path / "vocab.tiny.txt")
    corpus = load_uci(path)
    assert corpus.name == "tiny" and corpus.vocab == VOCAB


def test_uci_uses_explicit_vocab_path(tmp_path):
    path = write_text(tmp_path / "counts.txt", UCI_TEXT)
    vocab = write_vocab(tmp_path / "words.txt", ["a", "b", "c", "d"])
    assert load_uci(path, vocab).vocab == ("a", "b", "c", "d")


@pytest.mark.parametrize("folder, num_docs, num_words, num_tokens, num_pairs, min_len, max_len", [
    ("reuters395", 395, 4258, 84010, 60114, 36, 541),
    ("kos", 3430, 6906, 467714, 353160, 25, 670),
])
def test_shared_corpora_match_their_readme_statistics(
        shared_data, folder, num_docs, num_words, num_tokens, num_pairs, min_len, max_len):
    corpus = load_corpus(shared_data / folder)
    assert (corpus.num_docs, corpus.num_words, corpus.num_tokens) == (num_docs, num_words,
                                                                       num_tokens)
    assert len(corpus.doc_word_counts()[0]) == num_pairs
    assert (corpus.doc_lengths().min(), corpus.doc_lengths().max()) == (min_len, max_len)


@pytest.mark.parametrize("text, line, message", UCI_ERRORS)
def test_malformed_uci_error_names_file_and_line(tmp_path, text, line, message):
    path = write_uci(tmp_path, text)
    with pytest.raises(CorpusFormatError, match=error_at(path, line, message)):
        load_uci(path)


def test_uci_entry_count_must_match_header_nnz(tmp_path):
    path = write_uci(tmp_path, UCI_TEXT.replace("3\n4\n5\n", "3\n4\n6\n"))
    with pytest.raises(CorpusFormatError,
                       match=error_at(path, 3, "header declares NNZ=6 but 5 entry lines follow")):
        load_uci(path)


@pytest.mark.parametrize("text", ["", " \n\n"])
def test_empty_uci_file_is_reported(tmp_path, text):
    path = write_uci(tmp_path, text)
    with pytest.raises(CorpusFormatError, match=f"{re.escape(str(path))}: file is empty"):
        load_uci(path)


def test_missing_uci_file_is_reported(tmp_path):
    path = tmp_path / "docword.txt"
    with pytest.raises(CorpusFormatError, match=f"{re.escape(str(path))}: file not found"):
        load_uci(path, write_vocab(tmp_path / "vocab.txt"))


def test_uci_vocab_size_mismatch_names_both_files_and_sizes(tmp_path):
    path = write_uci(tmp_path)
    vocab = write_vocab(tmp_path / "vocab.txt", VOCAB[:3])
    with pytest.raises(CorpusFormatError, match=(
            f"{re.escape(str(path))} declares W=4 .* but {re.escape(str(vocab))} has 3 words")):
        load_uci(path)


def test_missing_uci_vocab_names_the_paths_looked_for(tmp_path):
    path = write_text(tmp_path / "docword.kos.txt", UCI_TEXT)
    with pytest.raises(CorpusFormatError, match="vocab.kos.txt, .*vocab.txt"):
        load_uci(path)


def test_non_utf8_vocab_names_file_and_line(tmp_path):
    path = write_uci(tmp_path)
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes(b"apple\nbanana\nch\xffrry\ndate\n")
    with pytest.raises(CorpusFormatError, match=error_at(vocab, 3, "not valid UTF-8")):
        load_uci(path)


def test_corrupt_gzip_is_reported(tmp_path):
    path = write_uci(tmp_path, name="docword.txt.gz")
    path.write_bytes(path.read_bytes()[:-12])
    pattern = f"{re.escape(str(path))}: (truncated|corrupt) gzip"
    with pytest.raises(CorpusFormatError, match=pattern):
        load_uci(path)


def test_uci_drops_empty_documents_with_a_warning_and_counts_them(tmp_path):
    path = write_uci(tmp_path, "5\n4\n3\n1 1 1\n3 2 2\n5 3 1\n")
    with pytest.warns(UserWarning, match="dropped 2 empty document") as record:
        corpus = load_uci(path)
    assert record[0].filename == __file__  # attributed to the caller, not to saberjax
    assert corpus.dropped_empty_docs == 2
    np.testing.assert_array_equal(corpus.doc_offsets, [0, 1, 3, 4])
    np.testing.assert_array_equal(corpus.word_ids, [0, 1, 1, 2])
