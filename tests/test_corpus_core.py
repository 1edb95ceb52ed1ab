"""saberjax.corpus.core: the Corpus (validation, sizes, subsets, counts, fingerprint) and
align_vocabulary; the passes over word ids (word_ids) and the fingerprint's definitions
(fingerprint) it delegates to."""

import collections
import hashlib
import json
import os
import tracemalloc

import numpy as np
import pytest
from corpus_helpers import OFFSETS, VOCAB, WORD_IDS, tiny_corpus
from helpers import random_corpus

from saberjax.corpus import Corpus, CorpusFormatError, align_vocabulary, load_bundled
from saberjax.corpus import fingerprint as corpus_fingerprint
from saberjax.corpus import word_ids as corpus_word_ids


@pytest.mark.parametrize("offsets, word_ids, message", [
    ([], [], "doc_offsets is empty"),
    ([1, 3], [0, 1], r"doc_offsets\[0\] is 1, expected 0"),
    ([0, 3, 2, 4], [0, 1, 2, 3], r"doc_offsets decrease at index 2 \(3 -> 2\)"),
    ([0, 3], [0, 1], r"doc_offsets\[-1\] is 3, expected num_tokens = 2"),
    ([0, 3], [0, 9, 4], r"word_ids\[1\] is 9, outside the vocabulary range \[0, 4\)"),
    ([0, 1], [-1], r"word_ids\[0\] is -1"),
    ([0, 1], [0.5], "word_ids must be a 1-D integer array"),
    ([[0, 1]], [0], "doc_offsets must be a 1-D integer array"),
])
def test_corpus_rejects_inconsistent_arrays(offsets, word_ids, message):
    with pytest.raises(CorpusFormatError, match=message):
        Corpus(np.array(offsets), np.array(word_ids), VOCAB)


def test_corpus_normalises_dtypes_and_freezes_arrays():
    corpus = Corpus(np.array(OFFSETS, np.int32), np.array(WORD_IDS, np.int64), list(VOCAB))
    assert corpus.doc_offsets.dtype == np.int64 and corpus.word_ids.dtype == np.int32
    assert isinstance(corpus.vocab, tuple)
    with pytest.raises(ValueError, match="read-only"):
        corpus.word_ids[0] = 2


def test_corpus_sizes_and_counts():
    corpus = Corpus(np.array(OFFSETS + [8]), np.array(WORD_IDS), VOCAB)  # last doc empty
    assert (corpus.num_docs, corpus.num_tokens, corpus.num_words) == (4, 8, 4)
    np.testing.assert_array_equal(corpus.doc_lengths(), [3, 3, 2, 0])
    np.testing.assert_array_equal(corpus.word_counts(), [3, 3, 1, 1])
    assert corpus.word_counts().dtype == np.int64


def test_subset_takes_documents_in_the_given_order():
    sub = tiny_corpus().subset([2, 0, 2])
    np.testing.assert_array_equal(sub.doc_offsets, [0, 2, 5, 7])
    np.testing.assert_array_equal(sub.word_ids, [1, 2, 1, 1, 3, 1, 2])
    assert sub.vocab == VOCAB and sub.name == "tiny"
    assert tiny_corpus().subset([]).num_docs == 0
    with pytest.raises(IndexError):
        tiny_corpus().subset([3])


def test_subset_copies_runs_of_documents_with_no_memory_beyond_the_result():
    corpus = load_bundled("kos")
    docs = np.concatenate([np.arange(5, 900), [3, 3], np.arange(1000, 3000, 3), [3429, 0]])
    tracemalloc.start()
    try:
        sub = corpus.subset(docs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    expected = np.concatenate([corpus.word_ids[corpus.doc_offsets[d]:corpus.doc_offsets[d + 1]]
                               for d in docs])
    np.testing.assert_array_equal(sub.word_ids, expected)
    assert sub.word_ids.dtype == np.int32 and type(sub.word_ids) is np.ndarray
    assert peak < 2 * sub.word_ids.nbytes  # an index per token took 7 times the result


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("workers", [None, 1, 2, 3, 64])
def test_word_counts_are_the_same_on_any_threads_and_blocks(monkeypatch, workers, sparse):
    """Counted in pieces on threads, a block at a time (a block of at least V tokens), with a
    last block of another size, or in one block, by np.bincount or (a corpus of at least
    SPARSE_COUNT_TOKENS tokens on several threads) by sparse products: the counts of one
    np.bincount.  Corpora of no token, fewer tokens than a block, exactly a block, a block
    and one."""
    monkeypatch.setattr(corpus_word_ids, "SPARSE_COUNT_TOKENS", 0 if sparse else 10**9)
    counters = []
    for name in ("_bincounter", "_sparse_counter"):
        counter = getattr(corpus_word_ids, name)
        monkeypatch.setattr(corpus_word_ids, name, lambda *args, counter=counter, name=name: (
            counters.append(name) or counter(*args)))
    corpus = random_corpus(num_docs=50, num_words=30, seed=3)
    assert corpus.num_tokens % 30 and corpus.num_tokens % 40
    several = (workers or os.cpu_count()) > 1
    for block in (7, 40, 10**6):  # blocks of 30 (V), 40 and all the tokens
        monkeypatch.setattr(corpus_word_ids, "WORD_COUNT_BLOCK", block)
        monkeypatch.setattr(corpus_word_ids, "SPARSE_COUNT_BLOCK", block)
        for tokens in sorted({0, 1, 29, 30, 31, 39, 40, 41, corpus.num_tokens}):
            docs = int(np.searchsorted(corpus.doc_offsets, tokens, side="right"))
            part = Corpus(np.append(corpus.doc_offsets[:docs], tokens),
                          corpus.word_ids[:tokens], corpus.vocab)
            counters.clear()
            counts = part.word_counts(workers)
            assert counts.dtype == np.int64
            np.testing.assert_array_equal(counts, np.bincount(part.word_ids, minlength=30))
            assert counters == ["_sparse_counter" if sparse and several else "_bincounter"]


def test_doc_word_counts_merge_repeats_sorted_by_doc_then_word():
    corpus = load_bundled("kos").subset(np.arange(0, 3430, 7))
    doc, word, count = corpus.doc_word_counts()
    assert (doc.dtype, word.dtype, count.dtype) == (np.int64, np.int32, np.int32)
    keys = doc * corpus.num_words + word
    assert np.all(np.diff(keys) > 0)
    expected = collections.Counter()
    for d in range(corpus.num_docs):
        tokens = corpus.word_ids[corpus.doc_offsets[d]:corpus.doc_offsets[d + 1]]
        expected.update((d, int(w)) for w in tokens)
    assert dict(zip(zip(doc.tolist(), word.tolist()), count.tolist())) == expected


def test_fingerprint_is_a_fixed_value_across_processes():
    # Pinned: a change here invalidates every cached result keyed by fingerprint.
    assert tiny_corpus().fingerprint() == (
        "bda335d9dad70c2d57739b9c18284eedf404776d95286a206fcfb6d10b793ef8")


def test_the_earlier_fingerprint_is_the_former_one_of_blocks_of_64_mib():
    # Pinned: the value saberjax recorded for this corpus in blocks of 64 MiB (checkpoints,
    # models and caches of then hold it).
    corpus = tiny_corpus()
    assert corpus.earlier_fingerprint() == (
        "0d65e35ac655ba0fd8ade34b9199d9c18e49248ec0aff219b9f1893ca7714e3a")
    assert corpus.has_fingerprint(corpus.earlier_fingerprint())


def test_legacy_fingerprint_is_the_former_serial_fingerprint():
    # Pinned: the value saberjax recorded for this corpus before fingerprints were hashed in
    # blocks (checkpoints and models of then hold it).
    corpus = tiny_corpus()
    assert corpus.legacy_fingerprint() == (
        "b2773285c48e2aae78fba6c64e10f40b507233b5fd09d49aad82216561d49e9d")
    assert corpus.legacy_fingerprint() != corpus.fingerprint()
    assert corpus.has_fingerprint(corpus.fingerprint())
    assert corpus.has_fingerprint(corpus.legacy_fingerprint())
    assert not corpus.has_fingerprint(random_corpus(seed=1).fingerprint())
    assert not corpus.has_fingerprint(None) and not corpus.has_fingerprint("")


def block_fingerprint(corpus, block_bytes: int, format: bytes = b"saberjax-corpus-v3\0") -> str:
    """The fingerprint as its docstring defines it, hashed block after block on one thread."""
    digest = hashlib.sha256(format)
    digest.update(f"{corpus.num_docs} {corpus.num_tokens} {corpus.num_words} "
                  f"{block_bytes}\n".encode())
    for data in (np.asarray(corpus.doc_offsets, "<i8").tobytes(),
                 np.asarray(corpus.word_ids, "<i4").tobytes()):
        for start in range(0, len(data), block_bytes):
            digest.update(hashlib.sha256(data[start : start + block_bytes]).digest())
    digest.update(json.dumps(corpus.vocab, ensure_ascii=False).encode())
    return digest.hexdigest()


@pytest.mark.parametrize("num_tokens", [0, 1, 15, 16, 17, 63, 64, 65, 300])
@pytest.mark.parametrize("cores", [1, 2, 5])
def test_fingerprint_is_the_hash_of_its_blocks_on_any_number_of_cores(monkeypatch, num_tokens,
                                                                       cores):
    """Blocks of 64 bytes (16 word ids, 8 offsets): fewer tokens than a block, exactly one,
    one more, several with a short last one; an empty corpus (one offset, no token)."""
    monkeypatch.setattr(corpus_fingerprint, "FINGERPRINT_BLOCK_BYTES", 64)
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    rng = np.random.default_rng(num_tokens)
    cuts = np.sort(rng.integers(0, num_tokens + 1, rng.integers(0, 12)))
    corpus = Corpus(np.concatenate([[0], cuts, [num_tokens]]),
                    rng.integers(0, 7, num_tokens), tuple(f"wörd{i}" for i in range(7)))
    assert corpus.fingerprint() == block_fingerprint(corpus, 64)
    whole = Corpus(corpus.doc_offsets, corpus.word_ids, corpus.vocab)
    monkeypatch.setattr(corpus_fingerprint, "FINGERPRINT_BLOCK_BYTES", 1 << 26)
    assert whole.fingerprint() == block_fingerprint(corpus, 1 << 26) != corpus.fingerprint()
    assert corpus.earlier_fingerprint() == block_fingerprint(corpus, 1 << 26,
                                                             b"saberjax-corpus-v2\0")


@pytest.mark.parametrize("num_tokens", [0, 1, 16, 17, 64, 65, 300])
@pytest.mark.parametrize("num_parts", [1, 2, 3, 7])
def test_parts_of_any_cut_combine_into_the_whole_corpus_fingerprint_and_counts(
        monkeypatch, num_tokens, num_parts):
    """Blocks of 16 word ids; parts cut anywhere (inside a block, on its edges, empty, lying in
    one block), sent as bytes and combined in any order."""
    monkeypatch.setattr(corpus_fingerprint, "FINGERPRINT_BLOCK_BYTES", 64)
    rng = np.random.default_rng(num_tokens * 10 + num_parts)
    offsets = np.concatenate([[0], np.sort(rng.integers(0, num_tokens + 1, 5)), [num_tokens]])
    arrays = offsets, rng.integers(0, 7, num_tokens), tuple(f"w{i}" for i in range(7))
    whole = Corpus(*arrays)
    cuts = np.concatenate([[0], np.sort(rng.integers(0, num_tokens + 1, num_parts - 1)),
                           [num_tokens]])
    combined = Corpus(*arrays)
    parts = [combined.part(first, last) for first, last in zip(cuts[:-1], cuts[1:])]
    assert all(len(part.edges) <= 2 for part in parts)
    combined.combine_parts([corpus_fingerprint.CorpusPart.from_bytes(part.to_bytes() + b"padding")
                            for part in reversed(parts)])
    assert combined.fingerprint() == whole.fingerprint() == block_fingerprint(whole, 64)
    np.testing.assert_array_equal(combined.word_counts(), whole.word_counts())


def test_a_part_reads_only_its_tokens_and_parts_must_cover_the_corpus_once(monkeypatch):
    monkeypatch.setattr(corpus_fingerprint, "FINGERPRINT_BLOCK_BYTES", 64)
    corpus = random_corpus(num_docs=20, num_words=9, seed=4)
    garbage = np.array(corpus.word_ids)
    garbage[:40], garbage[90:] = -5, 10**6  # outside the vocabulary: unreadable by a count
    unchecked = Corpus(corpus.doc_offsets, garbage, corpus.vocab, checked=False)
    part = unchecked.part(40, 90)
    assert part.block_digests == corpus.part(40, 90).block_digests
    np.testing.assert_array_equal(part.word_counts, corpus.word_counts(tokens=(40, 90)))
    with pytest.raises(CorpusFormatError, match=r"word_ids\[30\] is -5"):
        unchecked.part(30, 90)
    pieces = [corpus.part(0, 40), part, corpus.part(90, corpus.num_tokens)]
    for wrong in (pieces[:2], [pieces[0], pieces[0], *pieces[1:]], [pieces[0], pieces[2]]):
        with pytest.raises(ValueError, match="the parts cover tokens"):
            corpus.combine_parts(wrong)
    unchecked.combine_parts(pieces)
    assert unchecked.fingerprint() == corpus.fingerprint()


@pytest.mark.parametrize("block", [1, 3, 16, 1 << 20])
@pytest.mark.parametrize("workers", [None, 1, 2, 5])
def test_word_ids_are_checked_in_blocks_on_threads_naming_the_first_bad_id(monkeypatch, block,
                                                                           workers):
    monkeypatch.setattr(corpus_word_ids, "CHECK_BLOCK", block)
    rng = np.random.default_rng(block)
    for size in (0, 1, 15, 16, 17, 50):
        word_ids = rng.integers(0, 7, size)
        corpus_word_ids.check_word_ids(word_ids, 7, workers)  # all in range: no error
        for bad in sorted({0, size // 3, size - 1} - {-1}) if size else []:
            for value in (-1, 7, 2**40):
                wrong = word_ids.copy()
                wrong[bad] = value
                wrong[bad + 1:][::4] = -5  # later bad ids do not matter
                with pytest.raises(CorpusFormatError, match=rf"^word_ids\[{bad}\] is {value}, "
                                   r"outside the vocabulary range \[0, 7\)$"):
                    corpus_word_ids.check_word_ids(wrong, 7, workers)


def _mapped_file_kib() -> int:
    """This process's resident pages of mapped files (RssFile), KiB."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssFile:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux's /proc")
def test_checking_memory_mapped_word_ids_leaves_them_unmapped(tmp_path):
    np.save(tmp_path / "ids.npy", np.arange(16 << 20, dtype=np.int32) % 7)  # 64 MB
    mapped = np.load(tmp_path / "ids.npy", mmap_mode="r")
    before = _mapped_file_kib()
    corpus_word_ids.check_word_ids(mapped, 7)
    assert _mapped_file_kib() - before < 8 << 10  # not the file's 64 MB
    assert int(mapped[(16 << 20) - 1]) == ((16 << 20) - 1) % 7  # read again when needed
    with pytest.raises(CorpusFormatError, match=r"word_ids\[6\] is 6"):
        corpus_word_ids.check_word_ids(np.asarray(mapped), 6)


def test_checking_a_copy_on_write_map_keeps_its_changes(tmp_path):
    np.save(tmp_path / "ids.npy", np.arange(1 << 20, dtype=np.int32) % 7)
    mapped = np.load(tmp_path / "ids.npy", mmap_mode="c")
    mapped[5] = 6  # the file holds 5
    corpus_word_ids.check_word_ids(mapped, 7)
    assert mapped[5] == 6


def test_fingerprint_ignores_name_and_input_dtypes():
    same = Corpus(np.array(OFFSETS, np.int32), np.array(WORD_IDS, np.int64), VOCAB, name="other")
    assert same.fingerprint() == tiny_corpus().fingerprint()


@pytest.mark.parametrize("offsets, word_ids, vocab", [
    (OFFSETS, [1, 1, 3, 0, 0, 0, 1, 3], VOCAB),  # one token differs
    ([0, 2, 6, 8], WORD_IDS, VOCAB),  # a document boundary moves
    (OFFSETS, WORD_IDS, ("apple", "banana", "cherry", "dates")),  # a word differs
    (OFFSETS, WORD_IDS, VOCAB + ("extra",)),  # the vocabulary grows
    (OFFSETS + [8], WORD_IDS, VOCAB),  # an empty document is added
])
def test_fingerprint_changes_with_tokens_boundaries_or_vocab(offsets, word_ids, vocab):
    changed = Corpus(np.array(offsets), np.array(word_ids), vocab)
    assert changed.fingerprint() != tiny_corpus().fingerprint()


def test_align_vocabulary_maps_words_by_string_and_drops_unknown_ones():
    source = Corpus(np.array([0, 3, 5]), np.array([0, 1, 2, 2, 1]), ("a", "b", "c"))
    with pytest.warns(UserWarning, match="dropped 2 of 5 tokens"):
        aligned = align_vocabulary(source, ("c", "a", "z"))
    assert aligned.vocab == ("c", "a", "z")
    np.testing.assert_array_equal(aligned.doc_offsets, [0, 2, 3])
    np.testing.assert_array_equal(aligned.word_ids, [1, 0, 0])
    assert align_vocabulary(source, source.vocab) is source
