"""saberjax.corpus.native: the memory-mapped native format, written atomically, loaded exactly,
inconsistent folders reported."""

import json
import os
import re

import numpy as np
import pytest
from corpus_helpers import VOCAB, assert_same_corpus, is_memory_mapped, tiny_corpus, write_vocab

from saberjax.corpus import (
    Corpus,
    CorpusFormatError,
    NativeCorpusWriter,
    load_bundled,
    load_native,
    save_native,
)


@pytest.mark.parametrize("use_mmap", [True, False])
def test_native_round_trip_keeps_tokens_vocab_and_name(tmp_path, use_mmap):
    corpus = load_bundled("kos")
    save_native(corpus, tmp_path / "kos")
    loaded = load_native(tmp_path / "kos", mmap=use_mmap)
    assert_same_corpus(loaded, corpus)
    assert loaded.name == "kos" and loaded.fingerprint() == corpus.fingerprint()
    assert is_memory_mapped(loaded.word_ids) == use_mmap
    assert not loaded.word_ids.flags.writeable
    assert sorted(os.listdir(tmp_path / "kos")) == [
        "corpus.json", "doc_offsets.npy", "vocab.txt", "word_ids.npy"]
    meta = json.loads((tmp_path / "kos" / "corpus.json").read_text())
    assert meta == {"format": "saberjax-native", "version": 1, "name": "kos", "num_docs": 3430,
                    "num_tokens": 467714, "num_words": 6906}


def test_native_keeps_empty_documents_and_odd_vocab_words(tmp_path):
    corpus = Corpus(np.array([0, 0, 2, 2]), np.array([1, 2]), ("", "naïve word", "x\ty"))
    save_native(corpus, tmp_path / "c")
    assert_same_corpus(load_native(tmp_path / "c"), corpus)


def test_native_round_trips_a_corpus_without_documents(tmp_path):
    empty = tiny_corpus().subset([])
    save_native(empty, tmp_path / "empty")
    assert_same_corpus(load_native(tmp_path / "empty"), empty)


def test_native_writer_with_several_appends_writes_the_same_files_as_save_native(tmp_path):
    corpus = load_bundled("kos")
    save_native(corpus, tmp_path / "whole")
    with NativeCorpusWriter(tmp_path / "streamed", corpus.vocab, name="kos") as writer:
        for docs in np.array_split(np.arange(corpus.num_docs), 5):
            part = corpus.subset(docs)
            writer.append(part.doc_lengths(), part.word_ids)
        writer.append([], [])
    assert_same_files(tmp_path / "streamed", tmp_path / "whole")


def test_native_write_failure_leaves_no_target_and_no_staging_dir(tmp_path):
    with pytest.raises(RuntimeError, match="disk on fire"):
        with NativeCorpusWriter(tmp_path / "c", VOCAB) as writer:
            writer.append([3], [0, 1, 2])
            assert len(os.listdir(tmp_path)) == 1  # only the hidden staging folder
            raise RuntimeError("disk on fire")
    assert os.listdir(tmp_path) == []


def test_native_writer_rejects_bad_documents_and_cleans_up(tmp_path):
    with pytest.raises(CorpusFormatError, match="doc_lengths sum to 2 but 3 word ids"):
        with NativeCorpusWriter(tmp_path / "c", VOCAB) as writer:
            writer.append([2], [0, 1, 2])
    with pytest.raises(CorpusFormatError, match=r"outside the vocabulary range \[0, 4\)"):
        with NativeCorpusWriter(tmp_path / "c", VOCAB) as writer:
            writer.append([1], [4])
    assert os.listdir(tmp_path) == []


def test_native_save_replaces_an_existing_corpus(tmp_path):
    save_native(load_bundled("kos"), tmp_path / "c")
    save_native(tiny_corpus(), tmp_path / "c")
    assert_same_corpus(load_native(tmp_path / "c"), tiny_corpus())
    assert os.listdir(tmp_path) == ["c"]


def test_native_failed_rewrite_keeps_the_previous_corpus(tmp_path):
    save_native(tiny_corpus(), tmp_path / "c")
    with pytest.raises(KeyboardInterrupt):
        with NativeCorpusWriter(tmp_path / "c", VOCAB) as writer:
            writer.append([1], [0])
            raise KeyboardInterrupt
    assert_same_corpus(load_native(tmp_path / "c"), tiny_corpus())
    assert os.listdir(tmp_path) == ["c"]


def test_native_save_refuses_to_replace_other_folders_or_files(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    (tmp_path / "file").write_text("keep me")
    for target in ("mine", "file"):
        with pytest.raises(FileExistsError):
            save_native(tiny_corpus(), tmp_path / target)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    assert sorted(os.listdir(tmp_path)) == ["file", "mine"]


@pytest.mark.parametrize("edit, message", [
    (lambda d: (d / "corpus.json").write_text('{"format": "other"}'), "not a saberjax-native"),
    (lambda d: (d / "corpus.json").write_text("{oops"), "not valid JSON"),
    (lambda d: write_vocab(d / "vocab.txt", VOCAB[:3]), "num_words is 4 but .*vocab.txt holds 3"),
    (lambda d: np.save(d / "word_ids.npy", np.zeros(8, np.int64)), "expected a 1-D int32 array"),
    (lambda d: np.save(d / "doc_offsets.npy", np.array([0, 3, 6, 9])), r"doc_offsets\[-1\] is 9"),
    (lambda d: (d / "word_ids.npy").unlink(), "word_ids.npy: file not found"),
])
def test_native_load_reports_inconsistent_folders(tmp_path, edit, message):
    save_native(tiny_corpus(), tmp_path / "c")
    edit(tmp_path / "c")
    with pytest.raises(CorpusFormatError, match=f"{re.escape(str(tmp_path / 'c'))}.*{message}"):
        load_native(tmp_path / "c")


def test_native_writer_takes_word_ids_written_into_its_reserved_file(tmp_path):
    corpus = load_bundled("kos")
    save_native(corpus, tmp_path / "whole")
    with NativeCorpusWriter(tmp_path / "placed", corpus.vocab, name="kos") as writer:
        path, offset = writer.reserve_word_ids(corpus.num_tokens)
        with open(path, "r+b") as file:  # written back to front, as workers may
            for part in np.array_split(np.arange(corpus.num_tokens), 3)[::-1]:
                file.seek(offset + 4 * int(part[0]))
                file.write(corpus.word_ids[part].astype("<i4").tobytes())
        for docs in np.array_split(np.arange(corpus.num_docs), 4):
            writer.append(corpus.subset(docs).doc_lengths(), None)
    assert_same_files(tmp_path / "placed", tmp_path / "whole")


def test_native_writer_refuses_documents_not_holding_the_reserved_tokens(tmp_path):
    with pytest.raises(ValueError, match="reserve_word_ids"):
        with NativeCorpusWriter(tmp_path / "mixed", VOCAB) as writer:
            writer.reserve_word_ids(3)
            writer.append([3], [0, 1, 2])
    with pytest.raises(CorpusFormatError, match="3 word ids were reserved for documents of 2"):
        with NativeCorpusWriter(tmp_path / "short", VOCAB) as writer:
            writer.reserve_word_ids(3)
            writer.append([2], None)
    assert not (tmp_path / "mixed").exists() and not (tmp_path / "short").exists()
    assert os.listdir(tmp_path) == []


def assert_same_files(folder, reference):
    """Every file of `reference` has a byte-identical twin in `folder`."""
    for name in os.listdir(reference):
        assert (folder / name).read_bytes() == (reference / name).read_bytes(), name
