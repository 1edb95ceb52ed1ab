"""Plain text input: the shared corpora's tokenising rules, vocabulary rules, the other rules
as options, the block engine against the reader it replaced, and training on text."""

import json
import subprocess
import sys

import numpy as np
import pytest
import text_reference
from helpers import launch

from saberjax import text
from saberjax.corpus import (
    corpus_from_documents,
    load_corpus,
    text_corpus,
    text_pieces,
    text_workers,
    tokens_in_vocabulary,
)
from saberjax.corpus.plain_text import text_rules
from saberjax.corpus.text_sources import document_blocks
from saberjax.corpus.text_corpus import build_corpus
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
    corpus = corpus_from_documents(documents, min_df=1, max_df=1.0, max_features=3)
    assert corpus.vocab == ("wolf", "yak", "zebra")  # xerus ties with wolf on count, loses
    words = [corpus.vocab[i] for i in corpus.word_ids]
    assert words == ["zebra"] * 3 + ["yak", "yak", "wolf", "zebra", "yak", "wolf"]


@pytest.mark.parametrize("options", [dict(min_df=0), dict(max_df=0.0), dict(max_df=1.5),
                                     dict(max_features=0)])
def test_invalid_vocabulary_rules_are_refused(options):
    with pytest.raises(ValueError, match="min_df >= 1"):
        corpus_from_documents(THEMED, **options)


@pytest.mark.parametrize("options, match", [
    (dict(strip_accents="latin"), "strip_accents"), (dict(token_pattern="[a-"), "token_pattern"),
    (dict(max_vocab=10), "unknown text option")])
def test_invalid_rules_and_unknown_options_are_refused(options, match):
    with pytest.raises(ValueError, match=match):
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


def test_a_file_that_is_not_utf8_is_read_as_latin1_and_counted(tmp_path):
    (tmp_path / "old.txt").write_bytes("café naïve\n".encode("latin-1") * 5)
    with pytest.warns(UserWarning, match="5 document.s. are not valid UTF-8; read as Latin-1"):
        corpus = load_corpus(tmp_path / "old.txt", min_df=1, max_df=1.0)
    assert corpus.vocab == ("cafe", "naive")


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


def _varied_documents(seed: int, count: int = 400) -> list[str]:
    """Documents of words drawn from a small pool with accents, ligatures, capitals, digits,
    punctuation, other scripts, stop words, long words, and empty or stop-word-only ones."""
    pool = ["apple", "Banana", "CHERRY", "café", "naïve", "Ünter", "straße", "ﬁsh", "the", "and",
            "x", "ab", "don't", "3D-printer", "a1b2c3", "internationalization",
            "abcdefghijkl", "abcdefghijklm", "Москва", "日本語", "ab中cd", "Ⅻ", "e\u0301t\u00e9",
            "ÅNGSTRÖM", "œuvre", "x42abc", "﻿bom", "tab\there", "crlf\r", "😀smile",
            "supercalifragilisticexpialidocious", "½cup", "résumé"]
    rng = np.random.default_rng(seed)
    documents = []
    for _ in range(count):
        length = int(rng.integers(0, 30))
        words = rng.choice(pool, length)
        separators = rng.choice([" ", ", ", ".", "-", "  "], length)
        documents.append("".join(w + s for w, s in zip(words, separators)))
    return documents


def _assert_same_corpus(corpus, entries):
    assert corpus.vocab == entries.vocab
    assert corpus.num_docs == np.unique(entries.doc_ids).size
    np.testing.assert_array_equal(corpus.word_ids, entries.word_ids)
    _, lengths = np.unique(entries.doc_ids, return_counts=True)
    np.testing.assert_array_equal(corpus.doc_lengths(), lengths)


@pytest.mark.parametrize("directory", [None, "native"])
def test_words_of_many_tokens_in_a_piece_are_counted_exactly(monkeypatch, tmp_path, directory):
    # a piece's words' tokens are kept in a byte each, those of SMALL_COUNT or more apart;
    # a stop word of many tokens is left out, the others kept, in the first of several pieces
    many = ["the"] * 700 + ["frequent"] * 700 + ["rare"] * 254 + ["seldom"] * 255
    documents = [" ".join(many), "rare seldom"] + _varied_documents(5, 40)
    monkeypatch.setattr(text_pieces, "PIECE_BYTES", 500)
    with pytest.warns(UserWarning, match="dropped"):
        corpus = build_corpus(document_blocks(documents), vocabulary=text.VocabularyRules(
            min_df=1, max_df=1.0), workers=2, directory=directory and tmp_path / directory
                              ).corpus
    _assert_same_corpus(corpus, text_reference.token_entries(documents, min_df=1, max_df=1.0))
    assert "frequent" in corpus.vocab and "the" not in corpus.vocab


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_engine_gives_the_corpus_of_the_reader_it_replaced(seed):
    documents = _varied_documents(seed)
    expected = text_reference.token_entries(documents, min_df=2, max_df=0.9, max_vocab=40)
    with pytest.warns(UserWarning, match="empty document"):
        corpus = corpus_from_documents(documents, min_df=2, max_df=0.9, max_features=40)
    _assert_same_corpus(corpus, expected)


def test_latin1_lines_of_a_file_give_the_corpus_the_latin1_file_gave(tmp_path):
    documents = [d.encode("latin-1", "ignore").decode("latin-1")
                 for d in _varied_documents(3, 100)]
    documents = [d.replace("\r", " ") for d in documents]
    (tmp_path / "latin.txt").write_bytes("\n".join(documents).encode("latin-1") + b"\n")
    expected = text_reference.token_entries(
        text_reference.read_documents(tmp_path / "latin.txt"), min_df=1, max_df=1.0)
    with pytest.warns(UserWarning):
        corpus = load_corpus(tmp_path / "latin.txt", min_df=1, max_df=1.0)
    _assert_same_corpus(corpus, expected)


@pytest.mark.parametrize("rules", [text.DEFAULT_RULES,
                                   text.TextRules(token_pattern=r"(?u)\b\w\w+\b")])
def test_the_corpus_is_the_same_whatever_the_threads_blocks_pieces_and_memory(
        rules, monkeypatch, tmp_path):
    documents = _varied_documents(4, 600)
    vocabulary = text.VocabularyRules(min_df=2, max_df=0.9, max_features=50)
    with pytest.warns(UserWarning, match="dropped"):
        reference = build_corpus(document_blocks(documents), rules, vocabulary, workers=1).corpus
    for workers, block_bytes, memory, directory, piece in (
            (1, 1 << 20, None, None, 700), (3, 1000, 0, None, 300),
            (2, 5000, 3000, tmp_path / "n", 90)):
        monkeypatch.setattr(text_pieces, "PIECE_BYTES", piece)
        with pytest.warns(UserWarning, match="dropped"):
            built = build_corpus(document_blocks(documents, block_bytes=block_bytes), rules, vocabulary,
                                 workers=workers, memory_bytes=memory,
                                 directory=directory).corpus
        assert built.vocab == reference.vocab
        np.testing.assert_array_equal(built.doc_offsets, reference.doc_offsets)
        np.testing.assert_array_equal(built.word_ids, reference.word_ids)
        assert built.dropped_empty_docs == reference.dropped_empty_docs


@pytest.mark.parametrize("processes", [False, True])
def test_the_pieces_tokenised_are_the_blocks_cut_at_the_piece_size(monkeypatch, processes,
                                                                    tmp_path):
    """Each block is cut at the reader's piece size, whatever the size of the pieces collected
    before it (the blocks' last pieces are smaller)."""
    from saberjax.corpus import text_corpus, text_pieces

    documents = _varied_documents(4, 300)
    monkeypatch.setattr(text_pieces, "PIECE_BYTES", 300)
    monkeypatch.setattr(text_pieces, "TASK_BYTES", 900)
    expected = [piece.size for block in document_blocks(documents, block_bytes=1000)
                for piece in text_pieces.block_pieces(block, 300)]
    sizes = {}  # by the first piece's index: the workers call at once
    tokenised_pieces = text_corpus.tokenised_pieces
    if processes:  # the collecting process cuts the blocks; the sizes come back with results
        monkeypatch.setattr(text_corpus, "_tokenising_pool",
                            lambda workers, processes: text_corpus.WorkerThreads(workers))
        monkeypatch.setattr(text_corpus, "WorkerProcesses", text_corpus.WorkerThreads)

    def recorded(worker, first, blocks, *args):
        sizes[first] = [block.size for block in blocks]
        return tokenised_pieces(worker, first, blocks, *args)

    monkeypatch.setattr(text_corpus, "tokenised_pieces", recorded)
    with pytest.warns(UserWarning, match="dropped"):
        build_corpus(document_blocks(documents, block_bytes=1000), workers=2,
                     processes=processes, directory=tmp_path / "corpus")
    assert [size for first in sorted(sizes) for size in sizes[first]] == expected
    assert len(set(expected)) > 1


def test_a_worker_writes_its_pieces_and_deletes_its_spill_file(tmp_path):
    from saberjax.corpus import text_workers
    from saberjax.corpus.tokenizing import word_strings
    from saberjax.corpus.word_id_parts import WordIdParts

    documents = ["apple banana cherry", "banana cherry", "cherry durian apple"]
    worker = dict(worker=0)
    for index, part in enumerate(document_blocks(documents, block_bytes=10)):
        text_workers.tokenised(worker, index, part, text.DEFAULT_RULES, (str(tmp_path), 0))
    assert [path.name for path in tmp_path.iterdir()] == ["worker-0.ids"]  # every piece's ids
    index, report, counts, doc_freq = text_workers.worker_words(worker)
    assert (index, report.worker, report.first) == (0, 0, 0)  # every word, none reported
    words = word_strings(report.words.keys)
    assert dict(zip(words, counts.tolist())) == dict(apple=2, banana=2, cherry=3, durian=1)
    assert dict(zip(words, doc_freq.tolist())) == dict(apple=2, banana=2, cherry=3, durian=1)
    vocabulary_ids = np.array([0 if word == "cherry" else -1  # the vocabulary's one word
                               for word in words], np.int32)
    assert text_workers.worker_places(worker, vocabulary_ids) == {0: 1, 1: 1, 2: 1}
    target = tmp_path / "ids"
    target.write_bytes(b"\xff" * 4 * 5)  # -1 where nothing is written
    parts = WordIdParts((str(target),), 1 << 16, 4, 3)
    mapped = text_workers.worker_mapped(worker, np.array([0, 1, 2, 3]), parts, True)
    assert sorted(mapped) == [0, 1, 2]
    assert [lengths.tolist() for lengths, _ in mapped.values()] == [[1], [1], [1]]
    assert np.fromfile(target, np.int32).tolist() == [-1, 0, 0, 0, -1]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["ids"]  # the spill deleted
    assert worker == dict(worker=0)  # the worker forgets its pieces


def test_counts_unpickled_from_a_worker_are_added_as_numpys_own_int64(monkeypatch):
    """A worker's counts arrive unpickled, their dtype object equal to int64 but not numpy's
    (numpy 2.5), for which np.add.at leaves its fast loop: added_at hands add.at numpy's."""
    import pickle
    import types

    from saberjax.corpus import text_words

    counts = pickle.loads(pickle.dumps(np.array([3, 4, 5], np.int64), 5))
    given = []

    def at(target, numbers, values):
        given.append(values.dtype)
        np.add.at(target, numbers, values)

    monkeypatch.setattr(text_words, "np", types.SimpleNamespace(
        asarray=np.asarray, int64=np.int64, add=types.SimpleNamespace(at=at)))
    target = np.zeros(4, np.int64)
    text_words.added_at(target, np.array([2, 0, 3], np.int32), counts)
    assert target.tolist() == [4, 0, 3, 5]
    assert given[0] is np.dtype(np.int64)


def test_words_reported_in_any_order_number_each_workers_words_in_the_corpus():
    from saberjax.corpus import text_workers
    from saberjax.corpus.text_words import CorpusWords, merged_words

    long = "internationalization"  # a long word (its bytes numbered apart)
    parts = [[f"apple {long} banana", "cherry apple"], ["durian banana", f"{long} elder"],
             ["fig apple", "grape cherry"], [f"{long}s durian", "honey fig"]]
    workers, reports = [dict(worker=0), dict(worker=1)], []
    for index, documents in enumerate(parts):
        worker = workers[index % 2]
        for block in document_blocks(documents):
            results, report = text_workers.tokenised_pieces(
                worker, index, [block], text.DEFAULT_RULES, ("", float("inf")))
            text_workers._add_pending(worker)  # each part's words numbered now
            reports.append(text_workers._new_words(worker))
    own = [worker["words"].strings() for worker in workers]  # by the workers' numbers
    corpus_words = CorpusWords()
    for report in reports[::-1]:  # a worker's reports in any order
        corpus_words.add(report)
    words, numbers = merged_words(corpus_words, [text_workers.worker_words(worker)
                                                 for worker in workers])
    strings = words.strings()
    counted = dict(zip(strings, words.counts[:len(strings)].tolist()))
    assert counted == {"apple": 3, long: 2, "banana": 2, "cherry": 2, "durian": 2,
                       "elder": 1, "fig": 2, "grape": 1, f"{long}s": 1, "honey": 1}
    assert [[strings[n] for n in worker_numbers] for worker_numbers in numbers] == own
    assert [sorted(words) for words in own] == [
        sorted(["apple", long, "banana", "cherry", "fig", "grape"]),
        sorted(["durian", "banana", long, "elder", f"{long}s", "honey", "fig"])]
    assert all(len(report.words.keys) for report in reports)  # each part brought new words


@pytest.mark.parametrize("rules", [text.DEFAULT_RULES,
                                   text.TextRules(token_pattern=r"(?u)\b\w\w+\b")])
def test_words_of_one_hash_are_still_told_apart(rules, monkeypatch):
    from saberjax.corpus import key_tables
    documents = _varied_documents(3, 300)
    vocabulary = text.VocabularyRules(min_df=1, max_df=1.0)
    with pytest.warns(UserWarning, match="dropped"):
        reference = build_corpus(document_blocks(documents), rules, vocabulary).corpus
    assert sum(len(word) > 12 for word in reference.vocab) >= 2  # long words, by their bytes
    monkeypatch.setattr(key_tables, "chunk_hashes",
                        lambda chunks: np.full(chunks.lengths.size, 99, np.uint64))
    monkeypatch.setattr(text_pieces, "PIECE_BYTES", 500)
    with pytest.warns(UserWarning, match="dropped"):
        collided = build_corpus(document_blocks(documents), rules, vocabulary, workers=2).corpus
    assert collided.vocab == reference.vocab
    np.testing.assert_array_equal(collided.word_ids, reference.word_ids)
    np.testing.assert_array_equal(collided.doc_offsets, reference.doc_offsets)


def test_a_rare_long_word_does_not_widen_the_vocabulary_choice():
    import tracemalloc
    words = [f"w{i:05d}" for i in range(2000)] + ["x" * 20_000]  # the run is in one document
    doc_freq = np.array([3] * 2000 + [1])
    tracemalloc.start()
    chosen = text_corpus.choose_vocabulary(words, doc_freq * 2, doc_freq, 10,
                                           text.VocabularyRules(min_df=2, max_features=1000))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert chosen.tolist() == list(range(1000))
    assert peak < 1 << 20  # not 2001 words of 20,000 characters (160 MB)


def test_tokens_in_vocabulary_match_the_reader_it_replaced():
    documents = _varied_documents(5, 200)
    vocab = ("apple", "banana", "cafe", "internationalization", "zebra", "uber", "abcdefghijklm")
    expected = text_reference.tokens_in_vocabulary(documents, vocab)
    matched = tokens_in_vocabulary(documents, vocab)
    assert (matched.unknown, matched.tokens) == (expected.unknown, expected.tokens)
    np.testing.assert_array_equal(matched.corpus.word_ids, expected.entries.word_ids)
    lengths = np.bincount(expected.entries.doc_ids, minlength=expected.entries.num_docs)
    np.testing.assert_array_equal(matched.corpus.doc_lengths(), lengths)


def test_a_text_file_in_a_vocabulary_matches_its_documents_as_strings(tmp_path):
    from saberjax.corpus.plain_text import corpus_in_vocabulary, text_in_vocabulary
    documents = _varied_documents(6, 50)
    (tmp_path / "new.txt").write_text("\n".join(d.replace("\r", " ") for d in documents) + "\n")
    vocab = ("apple", "banana", "cafe", "naive", "uber")
    with pytest.warns(UserWarning, match="words outside"):
        from_file = text_in_vocabulary(tmp_path / "new.txt", vocab)
    with pytest.warns(UserWarning, match="words outside"):
        from_strings = corpus_in_vocabulary([d.replace("\r", " ") for d in documents], vocab)
    assert from_file.num_docs == 50
    np.testing.assert_array_equal(from_file.doc_offsets, from_strings.doc_offsets)
    np.testing.assert_array_equal(from_file.word_ids, from_strings.word_ids)


def test_other_languages_with_unicode_rules():
    documents = ["L'été dernier, les élèves français étudiaient à l'école.",
                 "Die Straße in München ist schön; Müller läuft über die Brücke.",
                 "Москва — столица России, большой город.",
                 "Les élèves aiment l'école et l'été.",
                 "Müller und die schöne Straße.",
                 "Город Москва большой."]
    unicode = corpus_from_documents(documents, min_df=2, max_df=1.0, stop_words=None,
                                    strip_accents=None, token_pattern=r"(?u)\b\w\w+\b")
    assert {"école", "élèves", "été", "straße", "müller", "москва", "город"} <= set(unicode.vocab)
    stripped = corpus_from_documents(documents, min_df=2, max_df=1.0, stop_words=None,
                                     strip_accents="unicode", token_pattern=r"(?u)\b\w\w+\b")
    assert {"ecole", "eleves", "ete", "straße", "muller", "москва"} <= set(stripped.vocab)
    words = [stripped.vocab[i] for i in stripped.word_ids[stripped.doc_offsets[2]:
                                                          stripped.doc_offsets[3]]]
    assert words == ["москва", "большои", "город"]  # in text order; "й" loses its breve


def test_stop_words_case_and_pretokenized_options(tmp_path):
    documents = ["The Cat sat", "the cat Sat", "a dog"]
    with pytest.warns(UserWarning, match="dropped"):
        every = corpus_from_documents(documents, min_df=2, max_df=1.0, stop_words=None)
    assert every.vocab == ("cat", "sat", "the")
    (tmp_path / "stop.txt").write_text("cat\nsat\n")
    with pytest.warns(UserWarning, match="dropped"):
        only = corpus_from_documents(documents, min_df=2, max_df=1.0,
                                     stop_words=tmp_path / "stop.txt")
    assert only.vocab == ("the",)
    cased = corpus_from_documents(documents, min_df=1, max_df=1.0, stop_words=None,
                                  lowercase=False, token_pattern=r"\w+")
    assert cased.vocab == ("Cat", "Sat", "The", "a", "cat", "dog", "sat", "the")
    segmented = corpus_from_documents(["東京 大学 東京", "大学 京都"], min_df=1, max_df=1.0,
                                      stop_words=None, strip_accents=None, pretokenized=True)
    assert segmented.vocab == ("京都", "大学", "東京")
    assert segmented.doc_lengths().tolist() == [3, 2]


def test_text_rules_split_options():
    rules, vocabulary = text_rules(min_df=3, lowercase=False)
    assert (rules.lowercase, vocabulary.min_df) == (False, 3)
    assert not rules.is_default() and text_rules()[0].is_default()


def test_train_launcher_trains_on_a_folder_of_text_files(tmp_path):
    folder = tmp_path / "posts"
    folder.mkdir()
    for index, document in enumerate(THEMED):
        (folder / f"{index:02d}.txt").write_text(document)
    output = tmp_path / "model"
    stdout = launch("train.py", f"--corpus={folder}", "--num_topics=3", "--iterations=2",
                    "--backend=xla", f"--output={output}", "--num_devices=1", "--max_df=1.0",
                    "--stop_words=none", timeout=300)
    assert stdout.count("topic ") == 3
    assert json.loads(stdout.strip().splitlines()[-1])["iterations"] == 2
    vocab = (output / "vocab.txt").read_text().splitlines()
    assert "goalkeeper" in vocab and "flour" in vocab
    assert "the" in vocab and "and" in vocab  # the flags reached the reader
    with np.load(output / "model.npz") as model:
        assert model["word_topic_counts"].shape == (len(vocab), 3)


def test_word_keys_are_exact_and_decode_to_their_words():
    from saberjax.corpus.text_blocks import DocumentBlock
    from saberjax.corpus.tokenizing import block_words, dictionary_words
    rng = np.random.default_rng(0)
    words = ["".join(chr(97 + c) for c in rng.integers(0, 26, int(n)))
             for n in rng.integers(3, 20, 20000)]
    words += ["zzzzzzzzzzzz", "aaaaaaaaa", "zzzzzzzzz", "aaaaaaaaaaaa", "zzzzzzzz", "aaa"]
    data = " ".join(words).encode()
    tokens = block_words(DocumentBlock(np.frombuffer(data, np.uint8), np.array([0, len(data)])))
    dictionary = dictionary_words(tokens)
    assert len(dictionary) == len(set(words))
    assert [dictionary[i] for i in tokens.token_ids] == words


def test_a_piece_counts_each_words_tokens_and_documents_past_16_bit_word_ids():
    from saberjax.corpus.key_tables import Strings
    from saberjax.corpus.tokenizing import LONG_KEY, BlockWords
    rng = np.random.default_rng(3)
    num_words = (1 << 16) + 4464  # ids sorted by two 16-bit digits
    token_ids = np.concatenate([np.arange(num_words), rng.integers(0, num_words, 60_000),
                                rng.integers(num_words - 5, num_words, 20_000)])
    token_ids = rng.permutation(token_ids).astype(np.int32)
    cuts = rng.integers(0, token_ids.size, 3000)
    doc_tokens = np.sort(np.concatenate([[0, 0], cuts, cuts[:5], [token_ids.size] * 3]))
    lengths = np.diff(doc_tokens)
    words = BlockWords(LONG_KEY + np.arange(num_words, dtype=np.uint64), Strings.empty(),
                       token_ids, doc_tokens, 0)
    counts, doc_freq = text_workers.frequencies(words)
    docs = np.repeat(np.arange(lengths.size), lengths)
    pairs = np.unique(docs.astype(np.int64) * num_words + token_ids)
    np.testing.assert_array_equal(counts, np.bincount(token_ids, minlength=num_words))
    np.testing.assert_array_equal(doc_freq, np.bincount(pairs % num_words, minlength=num_words))


def test_pieces_past_16_bit_word_ids_read_back_from_spill_files(tmp_path):
    letters = np.random.default_rng(5).integers(ord("a"), ord("z") + 1, (70_000, 8), np.uint8)
    words = letters.view("S8").ravel().astype(str)
    assert np.unique(words).size > 1 << 16  # one piece's ids need 32 bits
    documents = [" ".join(words[i:i + 500]) for i in range(0, words.size, 500)]
    vocabulary = text.VocabularyRules(min_df=1, max_df=1.0, max_features=100_000)
    in_memory = build_corpus(document_blocks(documents), vocabulary=vocabulary,
                             workers=1).corpus
    spilled = build_corpus(document_blocks(documents), vocabulary=vocabulary, workers=1,
                           memory_bytes=0, directory=tmp_path / "native").corpus
    assert spilled.vocab == in_memory.vocab
    np.testing.assert_array_equal(spilled.word_ids, in_memory.word_ids)
    np.testing.assert_array_equal(spilled.doc_offsets, in_memory.doc_offsets)


def test_reading_plain_text_imports_neither_jax_nor_pyarrow(tmp_path):
    (tmp_path / "lines.txt").write_text("\n".join(THEMED) + "\n")
    code = ("import sys\n"
            "from saberjax.corpus.plain_text import load_text\n"
            f"load_text({str(tmp_path / 'lines.txt')!r}, {str(tmp_path / 'native')!r})\n"
            "print(sorted(name for name in ('jax', 'pyarrow') if name in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"
    assert (tmp_path / "native" / "vocab.txt").exists()


def test_synthetic_text_reads_back_as_its_corpus():
    from saberjax import synth_text
    lengths = np.array([3, 0, 2])
    ids = np.array([5, 0, 5, 27, 1])
    words = synth_text.text_words(30)
    assert words[:3] == ["qaa", "qab", "qac"] and words[27] == "qbb"
    assert synth_text.text_bytes(lengths, ids, words) == b"qaf qaa qaf \n\nqbb qab \n"
    assert synth_text.text_bytes(lengths[:1], ids[:3], words, "jsonl") == \
        b'{"text": "qaf qaa qaf "}\n'


def test_a_long_read_logs_progress_lines(tmp_path, monkeypatch):
    from saberjax.corpus.plain_text import load_text
    (tmp_path / "lines.txt").write_text("\n".join(THEMED * 20) + "\n")
    monkeypatch.setattr(text_corpus, "PROGRESS_SECONDS", 0.0)
    monkeypatch.setattr(text_pieces, "PIECE_BYTES", 1000)
    lines = []
    load_text(tmp_path / "lines.txt", log=lines.append, max_df=1.0)
    assert len(lines) > 5
    assert lines[-1].startswith(f"reading {tmp_path / 'lines.txt'}: 0.00 GB, 400 documents, ")
    assert "Mtoken/s, ETA 0 s" in lines[-1]


@pytest.mark.parametrize("ending", ["", "\n", "\r\n"])
def test_a_line_file_splits_as_the_old_reader_split_it(tmp_path, ending, monkeypatch):
    from saberjax.corpus import text_sources
    monkeypatch.setattr(text_sources, "DEFAULT_BLOCK_BYTES", 64)  # lines across blocks
    lines = ["apple banana cherry", "", "banana apple", "x" * 200 + " cherry apple",
             "cherry banana", "", ""]
    (tmp_path / "lines.txt").write_bytes((ending or "\n").join(lines).encode() + ending.encode())
    expected = text_reference.token_entries(
        text_reference.read_documents(tmp_path / "lines.txt"), min_df=1, max_df=1.0)
    with pytest.warns(UserWarning, match="dropped"):
        corpus = load_corpus(tmp_path / "lines.txt", min_df=1, max_df=1.0)
    _assert_same_corpus(corpus, expected)
    assert corpus.num_docs + corpus.dropped_empty_docs == expected.num_docs
