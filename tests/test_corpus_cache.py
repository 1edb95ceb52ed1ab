"""saberjax.corpus.cache: native copies of corpora read from text formats, keyed by content and
reading options, never trusted when stale or damaged."""

import json
import os
import time
import warnings

import pytest
from corpus_helpers import (
    UCI_TEXT,
    assert_same_corpus,
    count_hashing,
    is_memory_mapped,
    write_uci,
)
from helpers import ENTRY_DAMAGES, damage_entry

from saberjax.corpus import cache as corpus_cache
from saberjax.corpus import Corpus, load_corpus, save_native

# documents 1 and 4 of 5 have entries; 2, 3 and 5 are dropped as empty
SPARSE_UCI = "5\n4\n3\n1 2 2\n4 1 1\n4 4 3\n"
TEXTS = ("the orbit of the comet around the sun", "a comet tail points away from the sun",
         "river banks flood after rain", "rain falls on the river delta")


def entries(cache_dir):
    return sorted(path for path in cache_dir.iterdir() if not path.name.startswith("."))


def load_quietly(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a valid entry or a fresh one: no warning at all
        return corpus_cache.load_corpus(*args, **kwargs)


def test_second_load_is_the_memory_mapped_copy_with_the_same_corpus(tmp_path):
    source, cache = write_uci(tmp_path / "tiny", SPARSE_UCI), tmp_path / "cache"
    with pytest.warns(UserWarning, match="docword.txt: dropped 3 empty document"):
        expected = load_corpus(source.parent)
    with pytest.warns(UserWarning, match="docword.txt: dropped 3 empty document"):
        first = corpus_cache.load_corpus(source.parent, cache_dir=cache)
    (entry,) = entries(cache)
    with pytest.warns(UserWarning, match="docword.txt: dropped 3 empty document"):
        second = corpus_cache.load_corpus(source.parent, cache_dir=cache)
    for corpus in (first, second):
        assert_same_corpus(corpus, expected)
        assert (corpus.name, corpus.dropped_empty_docs) == ("tiny", 3)
        assert corpus.fingerprint() == expected.fingerprint()
    assert is_memory_mapped(second.word_ids) and not is_memory_mapped(first.word_ids)
    assert json.loads((entry / "cache.json").read_text())["source"] == str(source.parent)


def test_a_changed_source_gets_a_new_entry_and_the_old_one_goes(tmp_path):
    source, cache = write_uci(tmp_path / "tiny"), tmp_path / "cache"
    load_quietly(source.parent, cache_dir=cache)
    (old,) = entries(cache)
    source.write_text(UCI_TEXT.replace("3 3 1", "3 4 1"))
    changed = load_quietly(source.parent, cache_dir=cache)
    assert_same_corpus(changed, load_corpus(source.parent))
    assert changed.word_ids[-1] == 3
    (new,) = entries(cache)
    assert new != old


def test_reading_options_key_the_entry(tmp_path):
    folder, cache = tmp_path / "texts", tmp_path / "cache"
    folder.mkdir()
    for i, text in enumerate(TEXTS):
        (folder / f"{i}.txt").write_text(text)
    strict = load_quietly(folder, cache_dir=cache, min_df=2)
    loose = load_quietly(folder, cache_dir=cache, min_df=1, max_df=1.0)
    assert len(entries(cache)) == 2
    assert strict.vocab == ("comet", "rain", "river", "sun")
    assert len(loose.vocab) > len(strict.vocab)
    assert load_quietly(folder, cache_dir=cache, min_df=2).vocab == strict.vocab
    assert load_quietly(folder, cache_dir=cache, min_df=1, max_df=1.0).vocab == loose.vocab


def synced_files(monkeypatch) -> list[str]:
    """The names of the files fsynced or given a write-back start from now on."""
    from saberjax import files

    synced = []
    fsync, start_write_back = os.fsync, files.start_write_back

    def recorded_fsync(fd):
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        fsync(fd)

    def recorded_write_back(fd, offset, size):
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        start_write_back(fd, offset, size)

    monkeypatch.setattr(os, "fsync", recorded_fsync)
    monkeypatch.setattr(files, "start_write_back", recorded_write_back)
    return synced


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names fds through /proc")
def test_a_text_entry_is_left_to_write_back_and_a_written_corpus_is_synced(tmp_path,
                                                                          monkeypatch):
    text = tmp_path / "texts.txt"
    text.write_text("\n".join(TEXTS) + "\n")
    synced = synced_files(monkeypatch)
    cached = load_quietly(text, cache_dir=tmp_path / "cache", min_df=1)
    assert "word_ids.npy" not in synced  # every load checks the entry's fingerprint instead
    from saberjax.corpus.plain_text import load_text

    written = load_text(text, directory=tmp_path / "native", min_df=1)
    assert "word_ids.npy" in synced and "doc_offsets.npy" in synced
    assert_same_corpus(cached, written)
    synced.clear()
    in_memory = load_text(text, min_df=1)  # its ids pass through a file read back at once
    assert synced == []
    assert_same_corpus(in_memory, written)


@pytest.mark.parametrize("damage", ENTRY_DAMAGES)
def test_a_damaged_entry_is_detected_and_rebuilt(tmp_path, damage):
    """A flipped token leaves a valid corpus: only the fingerprint tells."""
    source, cache = write_uci(tmp_path / "tiny"), tmp_path / "cache"
    load_quietly(source.parent, cache_dir=cache)
    (entry,) = entries(cache)
    damage_entry(entry / "corpus" / "word_ids.npy", entry / "cache.json", damage)
    with pytest.warns(UserWarning, match="damaged or stale.*rebuilding"):
        rebuilt = corpus_cache.load_corpus(source.parent, cache_dir=cache)
    assert_same_corpus(rebuilt, load_corpus(source.parent))
    assert_same_corpus(load_quietly(source.parent, cache_dir=cache), rebuilt)


@pytest.mark.parametrize("damage", ["flip a token", "cut short"])
def test_a_text_entry_in_parts_loads_mapped_and_a_damaged_part_is_rebuilt(tmp_path,
                                                                        monkeypatch, damage):
    """A text corpus's entry holds its word ids in parts (word_id_parts) beyond
    PART_BYTES: its next load maps them as one array; a damaged part is told by the
    fingerprint, or by its size, and the entry rebuilt."""
    from saberjax.corpus import word_id_parts

    monkeypatch.setattr(word_id_parts, "PART_BYTES", 1 << 16)
    words = [a + b for a in "bcdfg" for b in ("ane", "ore", "ist", "und", "elt")]
    text = tmp_path / "texts.txt"  # 1,500 documents of 14 words: 21,000 tokens, 2 parts
    text.write_text("".join(" ".join(words[(d * 7 + w * 3) % 25] for w in range(14)) + "\n"
                            for d in range(1500)))
    cache = tmp_path / "cache"
    first = load_quietly(text, cache_dir=cache, min_df=1, max_df=1.0)
    (entry,) = entries(cache)
    assert (entry / "corpus" / "word_ids.npy.1").is_file()
    second = load_quietly(text, cache_dir=cache, min_df=1, max_df=1.0)
    assert is_memory_mapped(second.word_ids)
    assert_same_corpus(second, first)
    damage_entry(entry / "corpus" / "word_ids.npy.1", entry / "cache.json", damage)
    with pytest.warns(UserWarning, match="damaged or stale.*rebuilding"):
        rebuilt = corpus_cache.load_corpus(text, cache_dir=cache, min_df=1, max_df=1.0)
    from saberjax.corpus.plain_text import load_text

    read = load_text(text, min_df=1, max_df=1.0)  # in memory (the first maps the damaged part)
    assert_same_corpus(rebuilt, read)
    assert_same_corpus(load_quietly(text, cache_dir=cache, min_df=1, max_df=1.0), read)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_cache_is_a_warning_not_an_error(tmp_path):
    source, cache = write_uci(tmp_path / "tiny"), tmp_path / "cache"
    cache.mkdir(mode=0o500)
    with pytest.warns(UserWarning, match="not written"):
        corpus = corpus_cache.load_corpus(source.parent, cache_dir=cache)
    assert_same_corpus(corpus, load_corpus(source.parent))


def test_a_cache_path_that_is_a_file_is_a_warning_not_an_error(tmp_path):
    source, cache = write_uci(tmp_path / "tiny"), tmp_path / "cache"
    cache.write_text("not a folder")
    with pytest.warns(UserWarning, match="not written"):
        corpus = corpus_cache.load_corpus(source.parent, cache_dir=cache)
    assert_same_corpus(corpus, load_corpus(source.parent))


def test_native_corpora_and_source_errors_bypass_the_cache(tmp_path):
    cache = tmp_path / "cache"
    save_native(load_corpus(write_uci(tmp_path / "tiny").parent), tmp_path / "native")
    assert is_memory_mapped(load_quietly(tmp_path / "native", cache_dir=cache).word_ids)
    bad = write_uci(tmp_path / "bad", UCI_TEXT.replace("3 3 1", "3 9 1"))
    with pytest.raises(ValueError, match="wordID 9 is out of range"):
        corpus_cache.load_corpus(bad.parent, cache_dir=cache)
    with pytest.raises(ValueError, match="no such file"):
        corpus_cache.load_corpus(tmp_path / "missing", cache_dir=cache)
    assert not cache.exists()


def test_default_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SABERJAX_CACHE_DIR", str(tmp_path / "mine"))
    assert corpus_cache.default_cache_dir() == tmp_path / "mine" / "corpora"
    monkeypatch.delenv("SABERJAX_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert corpus_cache.default_cache_dir() == tmp_path / "xdg" / "saberjax" / "corpora"



def write_tiny_uci(folder, text=UCI_TEXT):
    source = write_uci(folder, text)
    past = 1_600_000_000_000_000_000  # mtime in 2020; ctime stays now
    for file in (source, source.parent / "vocab.txt"):
        os.utime(file, ns=(past, past))
    return source


def test_a_settled_source_is_known_by_its_record_without_hashing(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus_cache, "SETTLED_SECONDS", -60.0)  # fresh files count as settled
    source, cache = write_tiny_uci(tmp_path / "tiny"), tmp_path / "cache"
    hashed = count_hashing(monkeypatch)
    first = load_quietly(source.parent, cache_dir=cache)
    (entry,) = entries(cache)
    record = json.loads((entry / "source.json").read_text())
    assert record["key"] == json.loads((entry / "cache.json").read_text())["key"]
    assert record["source"] == str(source.parent.resolve())
    second = load_quietly(source.parent, cache_dir=cache)
    assert len(hashed) == 1  # the second load took the key from the record
    assert_same_corpus(second, first)
    assert is_memory_mapped(second.word_ids)
    other = load_quietly(source.parent, cache_dir=cache, format="uci")  # same options
    assert_same_corpus(other, first)
    assert len(hashed) == 1


def test_a_source_changed_after_its_record_is_hashed_again(tmp_path, monkeypatch):
    """Same size, modification time set back: its ctime moved, and the sample would see it."""
    monkeypatch.setattr(corpus_cache, "SETTLED_SECONDS", -60.0)
    monkeypatch.setattr(corpus_cache, "SAMPLE_BYTES", 4)  # the change lies outside the sample
    source, cache = write_tiny_uci(tmp_path / "tiny"), tmp_path / "cache"
    load_quietly(source.parent, cache_dir=cache)
    before = os.stat(source)
    time.sleep(0.05)  # beyond a tick of the file system's clock
    source.write_text(UCI_TEXT.replace("1 4 1", "1 3 1"))
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(source)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    hashed = count_hashing(monkeypatch)
    changed = load_quietly(source.parent, cache_dir=cache)
    assert len(hashed) == 1
    assert_same_corpus(changed, load_corpus(source.parent))
    assert changed.word_ids[2] == 2


def test_a_change_that_stat_misses_is_caught_by_the_content_sample(tmp_path, monkeypatch):
    """A file system that keeps no ctime: the record's stat matches the changed file."""
    monkeypatch.setattr(corpus_cache, "SETTLED_SECONDS", -60.0)
    source, cache = write_tiny_uci(tmp_path / "tiny"), tmp_path / "cache"
    load_quietly(source.parent, cache_dir=cache)
    (entry,) = entries(cache)
    source.write_text(UCI_TEXT.replace("3 3 1", "3 4 1"))
    record = json.loads((entry / "source.json").read_text())
    record["files"] = corpus_cache._file_stats([source, source.parent / "vocab.txt"])
    (entry / "source.json").write_text(json.dumps(record))
    hashed = count_hashing(monkeypatch)
    changed = load_quietly(source.parent, cache_dir=cache)
    assert len(hashed) == 1
    assert changed.word_ids[-1] == 3


def test_a_freshly_changed_source_gets_no_record(tmp_path, monkeypatch):
    """Files changed within SETTLED_SECONDS of their hashing could change again within the
    same tick of the clock, unseen by stat: they are hashed on every load until settled."""
    source, cache = write_uci(tmp_path / "tiny"), tmp_path / "cache"
    hashed = count_hashing(monkeypatch)
    for _ in range(2):
        load_quietly(source.parent, cache_dir=cache)
    (entry,) = entries(cache)
    assert not (entry / "source.json").exists() and len(hashed) == 2


@pytest.mark.parametrize("record", ["not json", "another key", "another source"])
def test_a_foreign_or_broken_record_is_not_trusted(tmp_path, monkeypatch, record):
    monkeypatch.setattr(corpus_cache, "SETTLED_SECONDS", -60.0)
    source, cache = write_tiny_uci(tmp_path / "tiny"), tmp_path / "cache"
    load_quietly(source.parent, cache_dir=cache)
    (entry,) = entries(cache)
    written = json.loads((entry / "source.json").read_text())
    if record == "not json":
        (entry / "source.json").write_text("{not json")
    elif record == "another key":
        other = "f" * 64
        (entry / "source.json").write_text(json.dumps(dict(written, key=other)))
    else:
        (entry / "source.json").write_text(json.dumps(dict(written, source="/elsewhere")))
    hashed = count_hashing(monkeypatch)
    assert_same_corpus(load_quietly(source.parent, cache_dir=cache), load_corpus(source.parent))
    assert len(hashed) == 1
    assert json.loads((entry / "source.json").read_text()) == written  # written anew


def test_a_damaged_entry_with_a_record_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus_cache, "SETTLED_SECONDS", -60.0)
    source, cache = write_tiny_uci(tmp_path / "tiny"), tmp_path / "cache"
    load_quietly(source.parent, cache_dir=cache)
    (entry,) = entries(cache)
    word_ids = entry / "corpus" / "word_ids.npy"
    data = bytearray(word_ids.read_bytes())
    data[-4] ^= 1
    word_ids.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="damaged or stale.*rebuilding"):
        rebuilt = corpus_cache.load_corpus(source.parent, cache_dir=cache)
    assert_same_corpus(rebuilt, load_corpus(source.parent))
    assert_same_corpus(load_quietly(source.parent, cache_dir=cache), rebuilt)
    assert (entry / "source.json").exists()


@pytest.mark.parametrize("version, former_fingerprint", [
    (1, Corpus.legacy_fingerprint), (3, Corpus.earlier_fingerprint)])
def test_an_entry_of_a_former_cache_version_is_replaced_quietly(tmp_path, monkeypatch, version,
                                                                 former_fingerprint):
    """Version 1 recorded the fingerprint of before it was hashed in blocks, and a source
    record without a version; version 3 the fingerprint of blocks of 64 MiB: neither is
    trusted; the source is read again, with no warning, and the new entry replaces the old
    one."""
    monkeypatch.setattr(corpus_cache, "SETTLED_SECONDS", -60.0)
    source, cache = write_tiny_uci(tmp_path / "tiny"), tmp_path / "cache"
    with monkeypatch.context() as former:
        former.setattr(corpus_cache, "CACHE_VERSION", version)
        former.setattr(Corpus, "fingerprint", former_fingerprint)
        load_quietly(source.parent, cache_dir=cache)
    (old,) = entries(cache)
    record = json.loads((old / "source.json").read_text())
    del record["version"]
    (old / "source.json").write_text(json.dumps(record))
    manifest = json.loads((old / "cache.json").read_text())
    assert manifest["version"] == version
    hashed = count_hashing(monkeypatch)
    corpus = load_quietly(source.parent, cache_dir=cache)
    assert len(hashed) == 1
    assert_same_corpus(corpus, load_corpus(source.parent))
    assert manifest["corpus_fingerprint"] == former_fingerprint(corpus) != corpus.fingerprint()
    (new,) = entries(cache)
    assert new != old
    assert json.loads((new / "cache.json").read_text())["corpus_fingerprint"] == \
        corpus.fingerprint()
    assert json.loads((new / "source.json").read_text())["version"] == corpus_cache.CACHE_VERSION
    assert is_memory_mapped(load_quietly(source.parent, cache_dir=cache).word_ids)
    assert len(hashed) == 1  # the new record is trusted
