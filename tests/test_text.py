"""Plain text input: the shared corpora's tokenising rules, vocabulary rules, and training on it."""

import json

import numpy as np
import pytest
from helpers import launch

from saberjax.corpus import load_corpus
from saberjax.corpus import corpus_from_documents
from saberjax.text import ENGLISH_STOP_WORDS, tokenize


# Two themes over 20 documents: each word is in 10 of them, within the default max_df of 50%.
THEMED = ([f"Football match {i}: the striker scored; goalkeeper, referee and stadium."
           for i in range(10)]
          + [f"Recipe {i}: the baker mixed flour, butter and sugar in the oven."
             for i in range(10)])


def test_tokens_are_folded_lowercased_letter_runs_of_three_or_more_without_stop_words():
    assert tokenize("The CAFÉ's naïve 3D-printer x42abc ab ÜBER") == [
        "cafe", "naive", "printer", "abc", "uber"]
    assert tokenize("don't 2024 a1b2c3 ---") == ["don"]
    assert len(ENGLISH_STOP_WORDS) == 318 and {"the", "couldnt", "noone"} <= ENGLISH_STOP_WORDS


def test_vocabulary_keeps_words_within_the_document_frequency_bounds_sorted():
    documents = ["apple banana cherry", "apple banana", "apple banana", "apple date", "apple"]
    with pytest.warns(UserWarning, match="dropped 2 empty document"):
        corpus = corpus_from_documents(documents, min_df=2, max_df=0.8)
    # apple is in all 5 documents (> 0.8 * 5), cherry and date in one (< min_df 2)
    assert corpus.vocab == ("banana",)
    assert corpus.doc_lengths().tolist() == [1, 1, 1]
    assert corpus.dropped_empty_docs == 2


def test_vocabulary_cap_keeps_the_most_frequent_words_ties_alphabetical():
    documents = ["zebra zebra zebra yak yak xerus wolf", "zebra yak xerus wolf"]
    corpus = corpus_from_documents(documents, min_df=1, max_df=1.0, max_vocab=3)
    assert corpus.vocab == ("wolf", "yak", "zebra")  # xerus ties with wolf on count, loses
    words = [corpus.vocab[i] for i in corpus.word_ids]
    assert words == ["zebra"] * 3 + ["yak", "yak", "wolf", "zebra", "yak", "wolf"]


@pytest.mark.parametrize("options", [dict(min_df=0), dict(max_df=0.0), dict(max_df=1.5),
                                     dict(max_vocab=0)])
def test_invalid_vocabulary_rules_are_refused(options):
    with pytest.raises(ValueError, match="min_df >= 1"):
        corpus_from_documents(THEMED, **options)


def test_a_folder_of_files_and_a_one_document_per_line_file_give_the_same_corpus(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    for index, document in enumerate(THEMED):
        (folder / f"post{index:02d}.txt").write_text(document)
    (tmp_path / "lines.txt").write_text("\n".join(THEMED) + "\n")
    from_folder = load_corpus(folder)
    from_lines = load_corpus(tmp_path / "lines.txt")
    assert from_folder.vocab == from_lines.vocab
    assert "striker" in from_folder.vocab and "the" not in from_folder.vocab
    np.testing.assert_array_equal(from_folder.doc_offsets, from_lines.doc_offsets)
    np.testing.assert_array_equal(from_folder.word_ids, from_lines.word_ids)
    assert (from_folder.name, from_folder.num_docs) == ("docs", 20)


def test_a_file_that_is_not_utf8_is_read_as_latin1(tmp_path):
    (tmp_path / "old.txt").write_bytes("café naïve\n".encode("latin-1") * 5)
    assert load_corpus(tmp_path / "old.txt", min_df=1, max_df=1.0).vocab == ("cafe", "naive")


def test_documents_left_empty_are_dropped_and_counted():
    documents = THEMED + ["", "the and of it", "12345 ok"]
    with pytest.warns(UserWarning, match="dropped 3 empty document"):
        corpus = corpus_from_documents(documents)
    assert corpus.num_docs == 20 and corpus.dropped_empty_docs == 3


def test_text_options_are_refused_for_count_formats(tmp_path):
    (tmp_path / "docword.txt").write_text("1\n1\n1\n1 1 1\n")
    (tmp_path / "vocab.txt").write_text("word\n")
    with pytest.raises(ValueError, match="min_df only apply to text input"):
        load_corpus(tmp_path, min_df=2)


def test_train_launcher_trains_on_a_folder_of_text_files(tmp_path):
    folder = tmp_path / "posts"
    folder.mkdir()
    for index, document in enumerate(THEMED):
        (folder / f"{index:02d}.txt").write_text(document)
    output = tmp_path / "model"
    stdout = launch("train.py", f"--corpus={folder}", "--num_topics=3", "--iterations=2",
                    "--backend=xla", f"--output={output}", "--num_devices=1", timeout=300)
    assert stdout.count("topic ") == 3
    assert json.loads(stdout.strip().splitlines()[-1])["iterations"] == 2
    vocab = (output / "vocab.txt").read_text().splitlines()
    assert "goalkeeper" in vocab and "flour" in vocab
    with np.load(output / "model.npz") as model:
        assert model["word_topic_counts"].shape == (len(vocab), 3)
