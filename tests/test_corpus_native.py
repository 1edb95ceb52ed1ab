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
    word_id_parts,
)
from saberjax.corpus.word_ids import release_mapped


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


@pytest.mark.parametrize("part_bytes", [None, 1 << 18])  # one part (the default), 8 parts
def test_native_writer_takes_word_ids_written_into_its_reserved_parts(tmp_path, monkeypatch,
                                                                      part_bytes):
    """Ids written into the reserved parts in any order, across the parts' ends, give the
    corpus whose word ids file is the parts' bytes joined in order; loaded as one array."""
    if part_bytes is not None:
        monkeypatch.setattr(word_id_parts, "PART_BYTES", part_bytes)
    corpus = load_bundled("kos")
    save_native(corpus, tmp_path / "whole")
    with NativeCorpusWriter(tmp_path / "placed", corpus.vocab, name="kos") as writer:
        parts = writer.reserve_word_ids(corpus.num_tokens)
        for piece in np.array_split(np.arange(corpus.num_tokens), 7)[::-1]:  # back to front,
            parts.write(corpus.word_ids[piece], int(piece[0]))  # as workers may
        parts.write(np.zeros(0, np.int32), corpus.num_tokens)  # an empty piece: nothing
        for docs in np.array_split(np.arange(corpus.num_docs), 4):
            writer.append(corpus.subset(docs).doc_lengths(), None)
    placed, whole = tmp_path / "placed", tmp_path / "whole"
    count = 1 if part_bytes is None else 8  # 128 + 4 x 467,714 bytes in parts of 256 KiB
    names = ["word_ids.npy"] + [f"word_ids.npy.{part}" for part in range(1, count)]
    assert sorted(os.listdir(placed)) == sorted([*names, "corpus.json", "doc_offsets.npy",
                                                 "vocab.txt"])
    joined = b"".join((placed / name).read_bytes() for name in names)
    assert joined == (whole / "word_ids.npy").read_bytes()
    meta = json.loads((placed / "corpus.json").read_text())
    assert (meta.get("word_ids_parts"), meta.get("word_ids_part_bytes")) == (
        (None, None) if count == 1 else (count, part_bytes))
    for name in ("doc_offsets.npy", "vocab.txt") + (("corpus.json",) if count == 1 else ()):
        assert (placed / name).read_bytes() == (whole / name).read_bytes(), name
    for use_mmap in (True, False):
        loaded = load_native(placed, mmap=use_mmap)
        assert_same_corpus(loaded, corpus)
        assert is_memory_mapped(loaded.word_ids) == use_mmap
        assert not loaded.word_ids.flags.writeable


@pytest.mark.parametrize("tokens", [16352, 16353, 32736, 32737])
def test_word_ids_parts_end_where_the_ids_end(tmp_path, tokens):
    """Parts of 64 KiB hold the .npy header (128 bytes) and the ids: 16,352 ids fill one part
    exactly, 16,353 leave 4 bytes in a second, 32,736 fill two (no empty third); each part
    is written, found and mapped at its place."""
    ids = np.random.default_rng(tokens).integers(0, 1000, tokens).astype(np.int32)
    whole = b"".join([np.lib.format.magic(1, 0), b"X" * 120]) + ids.tobytes()  # any header
    parts = word_id_parts.sized_parts(tmp_path / "ids", 128, tokens, 1 << 16)
    assert len(parts.paths) == -(-(128 + 4 * tokens) // (1 << 16))
    with open(parts.paths[0], "r+b") as file:
        file.write(whole[:128])
    for piece in np.array_split(np.arange(tokens), 5)[::-1]:
        parts.write(ids[piece], int(piece[0]))
    assert b"".join(open(path, "rb").read() for path in parts.paths) == whole
    np.testing.assert_array_equal(parts.read(), ids)
    mapped = parts.mapped()
    assert isinstance(mapped, np.memmap) and mapped.mode == "r"
    np.testing.assert_array_equal(mapped, ids)
    release_mapped(mapped[100:])  # drops the pages it maps, whatever part holds them
    np.testing.assert_array_equal(mapped, ids)


def test_native_load_reports_a_missing_or_cut_part_of_the_word_ids(tmp_path, monkeypatch):
    monkeypatch.setattr(word_id_parts, "PART_BYTES", 1 << 16)
    corpus = load_bundled("kos").subset(np.arange(300))  # 41,111 tokens: 3 parts
    save_parted(corpus, tmp_path / "c")
    assert load_native(tmp_path / "c").fingerprint() == corpus.fingerprint()
    (tmp_path / "c" / "word_ids.npy.2").write_bytes(b"\0" * 12)
    with pytest.raises(CorpusFormatError, match=r"word_ids.npy.2: holds 12 bytes, expected"):
        load_native(tmp_path / "c")
    (tmp_path / "c" / "word_ids.npy.2").unlink()
    with pytest.raises(CorpusFormatError, match=r"word_ids.npy.2: file not found"):
        load_native(tmp_path / "c")
    meta = json.loads((tmp_path / "c" / "corpus.json").read_text())
    (tmp_path / "c" / "corpus.json").write_text(json.dumps(dict(meta, word_ids_parts=2)))
    with pytest.raises(CorpusFormatError, match=r"fill 3 parts of 65536 bytes, not 2"):
        load_native(tmp_path / "c")
    (tmp_path / "c" / "corpus.json").write_text(json.dumps(dict(meta, word_ids_part_bytes=5)))
    with pytest.raises(CorpusFormatError, match=r"word_ids_part_bytes a positive multiple"):
        load_native(tmp_path / "c")


def test_a_parted_corpus_is_replaced_whole_by_another(tmp_path, monkeypatch):
    """A folder holding a corpus in parts is a corpus's folder to replace; the new corpus
    leaves none of the old parts behind."""
    monkeypatch.setattr(word_id_parts, "PART_BYTES", 1 << 16)
    save_parted(load_bundled("kos").subset(np.arange(300)), tmp_path / "c")
    assert len(os.listdir(tmp_path / "c")) == 6
    save_native(tiny_corpus(), tmp_path / "c")
    assert sorted(os.listdir(tmp_path / "c")) == [
        "corpus.json", "doc_offsets.npy", "vocab.txt", "word_ids.npy"]
    assert_same_corpus(load_native(tmp_path / "c"), tiny_corpus())


def save_parted(corpus, directory):
    """Writes `corpus` through reserve_word_ids, in word_id_parts.PART_BYTES parts."""
    with NativeCorpusWriter(directory, corpus.vocab, name=corpus.name) as writer:
        writer.reserve_word_ids(corpus.num_tokens).write(corpus.word_ids, 0)
        writer.append(corpus.doc_lengths(), None)


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
