"""Tests for saberjax.corpus: loaders, error reporting, native format, splits, bundled data."""

import collections
import gzip
import json
import mmap
import os
import re
import subprocess
import sys
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse
from helpers import random_corpus

from saberjax import corpus as corpus_module
from saberjax.corpus import (
    Corpus,
    align_vocabulary,
    CorpusFormatError,
    NativeCorpusWriter,
    bundled_corpus_path,
    convert_to_native,
    from_count_matrix,
    load_bundled,
    load_corpus,
    load_ldac,
    load_native,
    load_uci,
    save_native,
    split_document_halves,
    train_test_split,
)

VOCAB = ("apple", "banana", "cherry", "date")
# docs (0-based word ids): [1, 1, 3], [0, 0, 0], [1, 2]
UCI_LINES = ["1 2 2", "1 4 1", "2 1 3", "3 2 1", "3 3 1"]
UCI_TEXT = "3\n4\n5\n" + "".join(line + "\n" for line in UCI_LINES)
LDAC_TEXT = "2 1:2 3:1\n1 0:3\n2 1:1 2:1\n"
OFFSETS = [0, 3, 6, 8]
WORD_IDS = [1, 1, 3, 0, 0, 0, 1, 2]
COUNTS = np.array([[0, 2, 0, 1], [3, 0, 0, 0], [0, 1, 1, 0]])


def tiny_corpus(name="tiny") -> Corpus:
    return Corpus(np.array(OFFSETS), np.array(WORD_IDS), VOCAB, name=name)


def one_token_docs(num_docs: int) -> Corpus:
    """Doc i is the single token i, so a split's word_ids reveal the original doc indices."""
    return Corpus(np.arange(num_docs + 1), np.arange(num_docs), [f"w{i}" for i in range(num_docs)])


def assert_same_corpus(actual: Corpus, expected: Corpus) -> None:
    assert actual.doc_offsets.dtype == np.int64 and actual.word_ids.dtype == np.int32
    np.testing.assert_array_equal(actual.doc_offsets, expected.doc_offsets)
    np.testing.assert_array_equal(actual.word_ids, expected.word_ids)
    assert actual.vocab == expected.vocab


def write_vocab(path: Path, words=VOCAB) -> Path:
    path.write_text("".join(word + "\n" for word in words), encoding="utf-8")
    return path


def write_text(path: Path, text: str) -> Path:
    data = text.encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def write_uci(folder: Path, text: str = UCI_TEXT, name: str = "docword.txt") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_vocab(folder / "vocab.txt")
    return write_text(folder / name, text)


def error_at(path: Path, line: int, message: str) -> str:
    """pytest.raises pattern for an error naming path and line."""
    return f"{re.escape(str(path))}, line {line}: {message}"


def is_memory_mapped(array: np.ndarray) -> bool:
    while array is not None:
        if isinstance(array, (np.memmap, mmap.mmap)):
            return True
        array = getattr(array, "base", None)
    return False


@pytest.fixture
def shared_data() -> Path:
    root = Path(os.environ.get("SABERJAX_SHARED_DATA")
                or Path(__file__).resolve().parents[2] / "shared" / "data")
    if not root.is_dir():
        pytest.skip(f"shared corpora not found at {root}")
    return root


# ----------------------------------------------------------------------------- UCI


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


# ----------------------------------------------------------------------------- LDA-C


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


# ----------------------------------------------------------------------------- count matrices


@pytest.mark.parametrize("make_matrix", [
    lambda counts: counts,
    lambda counts: counts.astype(np.float32),
    lambda counts: counts.tolist(),
    scipy.sparse.csr_matrix,
    scipy.sparse.csc_matrix,
    scipy.sparse.coo_array,
], ids=["dense", "dense-float", "list", "csr", "csc", "coo"])
def test_count_matrix_gives_same_corpus_as_uci(tmp_path, make_matrix):
    corpus = from_count_matrix(make_matrix(COUNTS), VOCAB)
    assert_same_corpus(corpus, load_uci(write_uci(tmp_path)))


def test_count_matrix_coo_duplicates_and_explicit_zeros_add_up(tmp_path):
    rows, cols = np.nonzero(COUNTS)
    counts = COUNTS[rows, cols]
    # every entry split into ones, shuffled, plus an explicit zero
    rows, cols = np.repeat(rows, counts), np.repeat(cols, counts)
    order = np.random.default_rng(0).permutation(rows.size)
    matrix = scipy.sparse.coo_matrix(
        (np.append(np.ones(rows.size), 0), (np.append(rows[order], 2), np.append(cols[order], 3))),
        shape=COUNTS.shape)
    assert_same_corpus(from_count_matrix(matrix, VOCAB), load_uci(write_uci(tmp_path)))


@pytest.mark.parametrize("bad_value", [-1, 1.5, np.nan, np.inf, 2.0**40])
@pytest.mark.parametrize("sparse", [False, True])
def test_count_matrix_rejects_bad_counts_naming_row_and_column(bad_value, sparse):
    matrix = COUNTS.astype(float)
    matrix[2, 1] = bad_value
    matrix[2, 3] = bad_value
    with pytest.raises(CorpusFormatError, match=r"row 2, column 1 \(0-based\)"):
        from_count_matrix(scipy.sparse.csr_matrix(matrix) if sparse else matrix)


def test_count_matrix_rejects_non_numeric_and_non_2d_input():
    with pytest.raises(CorpusFormatError, match="dtype"):
        from_count_matrix(np.array([["a", "b"]]))
    with pytest.raises(CorpusFormatError, match="2-D"):
        from_count_matrix(np.ones(3))


def test_count_matrix_vocab_must_match_columns():
    with pytest.raises(CorpusFormatError, match="3 words but the count matrix has 4 columns"):
        from_count_matrix(COUNTS, VOCAB[:3])


def test_count_matrix_defaults_vocab_and_drops_empty_rows():
    with pytest.warns(UserWarning, match="count matrix: dropped 1 empty document"):
        corpus = from_count_matrix(np.vstack([COUNTS[:1], np.zeros(4, int), COUNTS[1:]]))
    assert corpus.vocab == ("w0", "w1", "w2", "w3")
    assert corpus.dropped_empty_docs == 1
    np.testing.assert_array_equal(corpus.word_ids, WORD_IDS)


def test_count_matrix_keeps_empty_rows_when_asked():
    """One document per row (inference), empty ones included, without a warning."""
    matrix = np.vstack([np.zeros(4, int), COUNTS[:1], np.zeros(4, int), COUNTS[1:]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        corpus = from_count_matrix(matrix, keep_empty=True)
    assert corpus.num_docs == 5 and corpus.dropped_empty_docs == 0
    np.testing.assert_array_equal(np.diff(corpus.doc_offsets), matrix.sum(axis=1))
    np.testing.assert_array_equal(corpus.word_ids, WORD_IDS)


def test_importing_corpus_module_does_not_import_scipy():
    # Runs corpus.py alone (not the package __init__), so only its own imports count.
    module = Path(__file__).resolve().parents[1] / "saberjax" / "corpus.py"
    code = ("import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('corpus_alone', {str(module)!r})\n"
            "module = sys.modules['corpus_alone'] = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(module)\n"
            "print('scipy' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"


# ----------------------------------------------------------------------------- malformed input

UCI_ERRORS = [  # (docword text, line named, message)
    ("3\nfour\n5\n", 2, "expected the header integer W"),
    ("3\n4", 3, "header ended early"),
    ("3\n4\n\n", 3, "expected the header integer NNZ"),
    (UCI_TEXT.replace("1 4 1", "1 4"), 5, "expected 3 fields 'docID wordID count', found 2"),
    (UCI_TEXT.replace("1 4 1", "1 4 1 7"), 5, "expected 3 fields .* found 4"),
    (UCI_TEXT.replace("1 4 1", "1 x 1"), 5, "wordID 'x' is not a decimal integer"),
    (UCI_TEXT.replace("1 4 1", "1 4 1.5"), 5, "count '1.5' is not a decimal integer"),
    (UCI_TEXT.replace("1 4 1", "4 4 1"), 5, r"docID 4 is out of range 1\.\.3"),
    (UCI_TEXT.replace("1 4 1", "0 4 1"), 5, r"docID 0 is out of range 1\.\.3"),
    (UCI_TEXT.replace("1 4 1", "1 5 1"), 5, r"wordID 5 is out of range 1\.\.4"),
    (UCI_TEXT.replace("1 4 1", "1 4 0"), 5, "count 0 must be in 1..2147483647"),
    (UCI_TEXT.replace("1 4 1", "1 4 -2"), 5, "count -2 must be in 1.."),
    (UCI_TEXT.replace("1 4 1", "1 4 99999999999"), 5, "count 99999999999 must be in 1.."),
    (UCI_TEXT.replace("1 4 1", "1 4 1234567890123456789012"), 5, "count .* is not a decimal"),
    # two bad lines whose field counts compensate: still caught, the first one named
    (UCI_TEXT.replace("1 2 2\n1 4 1", "1 2\n2 1 4 1"), 4, "expected 3 fields"),
    # several kinds of fault: the earliest line wins whatever its kind
    (UCI_TEXT.replace("1 2 2", "1 2").replace("3 2 1", "3 x 1"), 4, "expected 3 fields"),
    (UCI_TEXT.replace("1 2 2", "1 x 2").replace("3 2 1", "3 2"), 4, "wordID 'x'"),
    (UCI_TEXT.replace("1 2 2", "1 2 0").replace("3 2 1", "3 2"), 4, "count 0"),
]


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


LDAC_ERRORS = [  # (LDA-C text, line named, message)
    (LDAC_TEXT.replace("1 0:3", "2 0:3"), 2, "N is 2 but the line has 1 id:count pairs"),
    (LDAC_TEXT.replace("1 0:3", "1 03"), 2, "malformed pair '03', expected id:count"),
    (LDAC_TEXT.replace("1 0:3", "1 0:3:4"), 2, "malformed pair '0:3:4'"),
    (LDAC_TEXT.replace("1 0:3", "1 0 :3"), 2, "malformed pair '0'"),
    (LDAC_TEXT.replace("1 0:3", "1 0: 3"), 2, "malformed pair '0:'"),
    (LDAC_TEXT.replace("1 0:3", "1 0:3:"), 2, "malformed pair '0:3:'"),
    (LDAC_TEXT.replace("1 0:3", "1 0:x"), 2, "malformed pair '0:x'"),
    (LDAC_TEXT.replace("1 0:3", "x 0:3"), 2, "pair count N 'x' is not a decimal integer"),
    (LDAC_TEXT.replace("1 0:3", "1 4:3"), 2, r"word id 4 is out of range 0\.\.3"),
    (LDAC_TEXT.replace("1 0:3", "1 0:0"), 2, "count 0 must be in 1.."),
    (LDAC_TEXT.replace("1 0:3", "1 0:-3"), 2, "count -3 must be in 1.."),
    (LDAC_TEXT.replace("1 0:3", "1 -1:3"), 2, r"word id -1 is out of range"),
    (LDAC_TEXT.replace("1 0:3", "1 0:3").replace("2 1:1 2:1", "2 1:1 2:0"), 3, "count 0"),
    (LDAC_TEXT.replace("2 1:2 3:1", "2 1:2 3:1 0:1").replace("1 0:3", "1 0:x"), 1, "N is 2"),
]


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


# ----------------------------------------------------------------------------- text in pieces

SEPARATORS = [" ", "  ", "\t", " \t ", "\r", " \r "]


def random_body(rng, num_lines: int, colons: bool) -> str:
    """Lines of 0 to 6 fields (some ``a:b`` pairs when colons) of 1 to 18 digits, leading zeros
    included, with varied separators, blank lines, LF or CRLF endings, maybe no final newline."""
    lines = []
    for _ in range(num_lines):
        fields = []
        for _ in range(rng.integers(0, 7)):
            digits = "".join(rng.choice(list("0123456789"), rng.integers(1, 19)))
            if colons and rng.random() < 0.5:
                digits += ":" + "".join(rng.choice(list("0123456789"), rng.integers(1, 19)))
            fields.append(digits)
        line = "".join(rng.choice(SEPARATORS) + field for field in fields)
        lines.append(line + rng.choice(["", " ", "\t", "\r"]))
    text = "".join(line + rng.choice(["\n", "\r\n"]) for line in lines)
    return text.rstrip("\r\n") if rng.random() < 0.5 else text


def reference_lines(body: bytes, colons: bool) -> tuple[np.ndarray, np.ndarray]:
    """(values, line_ends) as np.fromstring parses the body with the markers spelled out."""
    if colons:
        body = body.replace(b":", b" %d " % corpus_module._PAIR_COLON)
    text = body.replace(b"\n", b" %d\n" % corpus_module._LINE_END)
    if body and not body.endswith(b"\n"):
        text += b" %d" % corpus_module._LINE_END
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # np.fromstring's text mode
        values = np.fromstring(text, dtype=np.int64, sep=" ")
    return values, np.flatnonzero(values == corpus_module._LINE_END)


def random_blocks(rng, data: bytes) -> list[bytes]:
    """data cut at random positions (empty blocks included)."""
    cuts = np.sort(rng.integers(0, len(data) + 1, rng.integers(0, 40)))
    return [data[start:end] for start, end in zip([0, *cuts], [*cuts, len(data)])]


def parsed_in_pieces(blocks, piece_bytes: int, colons: bool):
    """(values, line_ends, first foreign line, pieces' text) of the text of blocks parsed in
    pieces, as the loaders join them."""
    values, line_ends, foreign, texts, num_values, num_lines = [], [], [], [], 0, 0
    for piece in corpus_module._line_pieces(blocks, piece_bytes):
        assert piece.text().endswith(b"\n") and len(piece.buffer) >= piece.size + 8
        lines = corpus_module._ParsedLines.parse(piece, b"\n:" if colons else b"\n")
        values.append(lines.values)
        line_ends.append(lines.line_ends + num_values)
        if lines.first_foreign_line is not None:
            foreign.append(num_lines + lines.first_foreign_line)
        texts.append(piece.text())
        num_values += lines.values.size
        num_lines += lines.line_ends.size
    return (np.concatenate([np.empty(0, np.int64)] + values),
            np.concatenate([np.empty(0, np.int64)] + line_ends),
            min(foreign, default=None), b"".join(texts))


@pytest.mark.parametrize("colons", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_pieces_parse_as_numpy_fromstring_does(seed, colons):
    rng = np.random.default_rng(seed)
    body = random_body(rng, int(rng.integers(0, 60)), colons).encode()
    values, line_ends = reference_lines(body, colons)
    assert values.size and values.max() >= 10**16 or not body.strip()  # long fields occur
    for piece_bytes in (1, 7, 64, 1 << 22):
        actual = parsed_in_pieces(random_blocks(rng, body), piece_bytes, colons)
        np.testing.assert_array_equal(actual[0], values)
        np.testing.assert_array_equal(actual[1], line_ends)
        assert actual[2] is None
        assert actual[3] == (body if not body or body.endswith(b"\n") else body + b"\n")


@pytest.mark.parametrize("field, value", [
    ("7", 7), ("00000000000000000000000012", 2**63 - 1),  # more than 18 digits: out of range
    ("123456789", 123456789), ("12345678", 12345678), ("999999999999999999", 10**18 - 1),
    ("1234567812345678", 1234567812345678), ("12345678901234567", 12345678901234567),
    ("1" * 19, 2**63 - 1), ("9" * 40, 2**63 - 1)])
def test_a_field_parses_at_the_start_middle_and_end_of_a_piece(field, value):
    for text in (f"{field} 1\n", f"1 {field} 2\n", f"1 {field}\n", field):
        lines = corpus_module._ParsedLines.parse(
            next(corpus_module._line_pieces([text.encode()], 1)), b"\n")
        assert value in lines.values.tolist()


@pytest.mark.parametrize("colons", [False, True])
def test_pieces_find_the_first_line_with_a_foreign_byte(colons):
    rng = np.random.default_rng(3)
    for foreign in b"x-.\x00\xff\x0b" + (b"" if colons else b":"):
        body = random_body(rng, 40, colons).encode()
        lines = body.split(b"\n")
        bad = [int(rng.integers(0, len(lines))) for _ in range(2)]
        for line in bad:
            at = int(rng.integers(0, len(lines[line]) + 1))
            lines[line] = lines[line][:at] + bytes([foreign]) + lines[line][at:]
        for piece_bytes in (1, 16, 1 << 22):
            blocks = random_blocks(rng, b"\n".join(lines))
            assert parsed_in_pieces(blocks, piece_bytes, colons)[2] == min(bad)


@pytest.fixture
def tiny_pieces(monkeypatch):
    """Files read 5 bytes at a time and parsed in pieces of a line or so, on several threads."""
    monkeypatch.setattr(corpus_module, "_READ_BYTES", 5)
    monkeypatch.setattr(corpus_module, "_PIECE_BYTES", 3)


@pytest.mark.parametrize("name", ["docword.txt", "docword.txt.gz"])
def test_tiny_pieces_load_the_same_corpora(tmp_path, tiny_pieces, name):
    uci = UCI_TEXT.replace("\n", "\r\n").replace("1 4 1", "1\t4  1") + "\n\n3 3 1"
    uci = uci.replace("3\r\n4\r\n5\r\n", "3\n4\n6\n")
    corpus = load_uci(write_uci(tmp_path / "uci", uci, name=name))
    np.testing.assert_array_equal(corpus.word_ids, WORD_IDS + [2])
    np.testing.assert_array_equal(corpus.doc_offsets, [0, 3, 6, 9])
    ldac = write_text(tmp_path / f"tiny.ldac{name.removeprefix('docword.txt')}",
                      "\n" + LDAC_TEXT + "0\n\n")
    with pytest.warns(UserWarning, match="dropped 1 empty document"):
        corpus = load_ldac(ldac, write_vocab(tmp_path / "vocab.txt"))
    assert_same_corpus(corpus, tiny_corpus())


def test_unsorted_documents_across_pieces_are_grouped(tmp_path, tiny_pieces):
    lines = ["2 1 1", "1 2 2", "2 3 1", "1 4 1", "1 1 1"]
    corpus = load_uci(write_uci(tmp_path, "2\n4\n5\n" + "\n".join(lines)))
    np.testing.assert_array_equal(corpus.doc_offsets, [0, 4, 6])
    np.testing.assert_array_equal(corpus.word_ids, [1, 1, 3, 0, 0, 2])


def test_gzip_members_are_read_in_turn(tmp_path, tiny_pieces):
    path = tmp_path / "docword.txt.gz"
    write_vocab(tmp_path / "vocab.txt")
    path.write_bytes(gzip.compress(UCI_TEXT[:11].encode()) + gzip.compress(b"")
                     + gzip.compress(UCI_TEXT[11:].encode()))
    assert_same_corpus(load_uci(path), tiny_corpus())
    path.write_bytes(path.read_bytes() + b"junk")
    with pytest.raises(CorpusFormatError, match=f"{re.escape(str(path))}: corrupt gzip"):
        load_uci(path)


@pytest.mark.parametrize("text, line, message", UCI_ERRORS)
def test_tiny_pieces_report_malformed_uci_as_one_piece_does(tmp_path, tiny_pieces, text, line,
                                                           message):
    path = write_uci(tmp_path, text, name="docword.txt.gz")
    with pytest.raises(CorpusFormatError, match=error_at(path, line, message)):
        load_uci(path)


@pytest.mark.parametrize("text, line, message", LDAC_ERRORS)
def test_tiny_pieces_report_malformed_ldac_as_one_piece_does(tmp_path, tiny_pieces, text, line,
                                                            message):
    path = write_text(tmp_path / "tiny.ldac", "\n" + text)
    with pytest.raises(CorpusFormatError, match=error_at(path, line + 1, message)):
        load_ldac(path, write_vocab(tmp_path / "vocab.txt"))


def test_faults_of_the_file_come_before_those_of_the_vocabulary(tmp_path):
    vocab = tmp_path / "missing_vocab.txt"
    for text, message in (("", "file is empty"), (" \n\x0b\n", "file is empty")):
        path = write_text(tmp_path / "tiny.ldac", text)
        with pytest.raises(CorpusFormatError, match=f"{re.escape(str(path))}: {message}"):
            load_ldac(path, vocab)
    path = write_uci(tmp_path, UCI_TEXT, name="docword.txt.gz")
    path.write_bytes(path.read_bytes()[:-12])
    with pytest.raises(CorpusFormatError, match="truncated gzip"):
        load_uci(path, vocab)


def test_whitespace_only_ldac_file_is_empty_and_one_without_fields_is_not(tmp_path):
    path = write_text(tmp_path / "tiny.ldac", " \n\t\x0c\n\n")
    with pytest.raises(CorpusFormatError, match=f"{re.escape(str(path))}: file is empty"):
        load_ldac(path, write_vocab(tmp_path / "vocab.txt"))
    path = write_text(tmp_path / "tiny.ldac", "\n x\n")
    with pytest.raises(CorpusFormatError, match=error_at(path, 2, "pair count N 'x'")):
        load_ldac(path, write_vocab(tmp_path / "vocab.txt"))


# ----------------------------------------------------------------------------- empty documents


def test_uci_drops_empty_documents_with_a_warning_and_counts_them(tmp_path):
    path = write_uci(tmp_path, "5\n4\n3\n1 1 1\n3 2 2\n5 3 1\n")
    with pytest.warns(UserWarning, match="dropped 2 empty document") as record:
        corpus = load_uci(path)
    assert record[0].filename == __file__  # attributed to the caller, not to saberjax
    assert corpus.dropped_empty_docs == 2
    np.testing.assert_array_equal(corpus.doc_offsets, [0, 1, 3, 4])
    np.testing.assert_array_equal(corpus.word_ids, [0, 1, 1, 2])


def test_ldac_drops_empty_documents_and_ignores_blank_lines(tmp_path):
    path = write_text(tmp_path / "tiny.ldac", "0\n" + LDAC_TEXT.replace("1 0:3\n", "1 0:3\n\n0\n"))
    with pytest.warns(UserWarning, match="dropped 2 empty document"):
        corpus = load_ldac(path, write_vocab(tmp_path / "vocab.txt"))
    assert corpus.dropped_empty_docs == 2
    assert_same_corpus(corpus, tiny_corpus())


# ----------------------------------------------------------------------------- the Corpus


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


def test_word_counts_are_counted_a_block_at_a_time(monkeypatch):
    corpus = random_corpus(num_docs=50, num_words=30, seed=3)
    expected = np.bincount(np.asarray(corpus.word_ids), minlength=30)
    monkeypatch.setattr(corpus_module, "WORD_COUNT_BLOCK", 7)  # a last block of another size
    assert corpus.num_tokens % 7
    np.testing.assert_array_equal(corpus.word_counts(), expected)
    assert corpus.word_counts().dtype == np.int64


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
        "b2773285c48e2aae78fba6c64e10f40b507233b5fd09d49aad82216561d49e9d")


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


# ----------------------------------------------------------------------------- native format


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
    for name in os.listdir(tmp_path / "whole"):
        streamed, whole = (tmp_path / folder / name for folder in ("streamed", "whole"))
        assert streamed.read_bytes() == whole.read_bytes()


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


# ----------------------------------------------------------------------------- any format


def test_load_corpus_detects_each_format(tmp_path):
    write_uci(tmp_path / "uci")
    write_text(tmp_path / "uci" / "docword.tiny.txt.gz", UCI_TEXT)
    (tmp_path / "ldac").mkdir()
    write_text(tmp_path / "ldac" / "tiny.dat", LDAC_TEXT)
    write_vocab(tmp_path / "ldac" / "vocab.txt")
    save_native(tiny_corpus(), tmp_path / "native")
    for path in ("uci", "uci/docword.txt", "uci/docword.tiny.txt.gz", "ldac/tiny.dat", "native"):
        assert_same_corpus(load_corpus(tmp_path / path), tiny_corpus())


def test_load_corpus_format_argument_overrides_detection(tmp_path):
    path = write_uci(tmp_path, name="counts.dat")
    assert_same_corpus(load_corpus(path, format="uci"), tiny_corpus())
    with pytest.raises(ValueError, match="unknown corpus format 'csv'"):
        load_corpus(path, format="csv")


def native_and_uci_in_one_folder(path: Path) -> None:
    save_native(tiny_corpus(), path)
    write_uci(path)


@pytest.mark.parametrize("setup, verdict", [
    (lambda path: write_text(path, "hello world\n"), "format unknown"),
    (lambda path: path.mkdir(), "format unknown"),
    (native_and_uci_in_one_folder, r"matches several formats \(native, uci\)"),
])
def test_load_corpus_names_the_path_and_formats_tried(tmp_path, setup, verdict):
    path = tmp_path / "corpus"
    setup(path)
    with pytest.raises(CorpusFormatError,
                       match=f"{re.escape(str(path))}: {verdict}; tried native .* uci .* ldac"):
        load_corpus(path)


def test_load_corpus_reports_a_missing_path(tmp_path):
    with pytest.raises(CorpusFormatError, match="no such file or directory"):
        load_corpus(tmp_path / "nowhere")


def test_convert_to_native_then_load_gives_the_same_corpus(tmp_path):
    converted = convert_to_native(write_uci(tmp_path / "tiny"), tmp_path / "native")
    assert_same_corpus(load_native(tmp_path / "native"), converted)
    assert load_native(tmp_path / "native").name == "tiny"


# ----------------------------------------------------------------------------- splits


def test_train_test_split_partitions_documents_keeping_order():
    train, test = train_test_split(one_token_docs(1000), 0.25, seed=3)
    assert (train.num_docs, test.num_docs) == (750, 250)
    assert np.all(np.diff(train.word_ids) > 0) and np.all(np.diff(test.word_ids) > 0)
    np.testing.assert_array_equal(np.sort(np.concatenate([train.word_ids, test.word_ids])),
                                  np.arange(1000))


def test_train_test_split_is_pinned_per_seed():
    # Pinned values: the split must not drift across numpy versions or platforms.
    assert train_test_split(one_token_docs(10), 0.3, seed=0)[1].word_ids.tolist() == [1, 2, 3]
    first = train_test_split(one_token_docs(500), 0.2, seed=1)[1]
    again = train_test_split(one_token_docs(500), 0.2, seed=1)[1]
    other = train_test_split(one_token_docs(500), 0.2, seed=2)[1]
    np.testing.assert_array_equal(first.word_ids, again.word_ids)
    assert not np.array_equal(first.word_ids, other.word_ids)


@pytest.mark.parametrize("fraction, num_test", [(0.0, 0), (0.25, 2), (0.35, 4), (0.99, 10)])
def test_train_test_split_sizes_round_the_test_fraction(fraction, num_test):
    train, test = train_test_split(one_token_docs(10), fraction)
    assert (train.num_docs, test.num_docs) == (10 - num_test, num_test)


@pytest.mark.parametrize("fraction", [-0.1, 1.0, 1.5])
def test_train_test_split_rejects_fractions_outside_0_1(fraction):
    with pytest.raises(ValueError, match="test_fraction"):
        train_test_split(tiny_corpus(), fraction)


def test_document_halves_partition_each_document():
    corpus = load_bundled("kos")
    observed, held_out = split_document_halves(corpus, seed=0)
    lengths = corpus.doc_lengths()
    np.testing.assert_array_equal(observed.doc_lengths(), (lengths + 1) // 2)
    np.testing.assert_array_equal(held_out.doc_lengths(), lengths // 2)
    assert observed.vocab == held_out.vocab == corpus.vocab

    def doc_word_totals(*parts):
        keys = np.concatenate([np.repeat(np.arange(p.num_docs), p.doc_lengths()) * p.num_words
                               + p.word_ids for p in parts])
        return np.unique(keys, return_counts=True)

    for expected, actual in zip(doc_word_totals(corpus), doc_word_totals(observed, held_out)):
        np.testing.assert_array_equal(actual, expected)


def test_document_halves_keep_token_order_and_one_token_documents():
    corpus = Corpus(np.array([0, 1, 6, 6, 9]), np.array([4, 0, 1, 2, 3, 4, 0, 2, 4]),
                    [f"w{i}" for i in range(5)])
    observed, held_out = split_document_halves(corpus, seed=5)
    np.testing.assert_array_equal(observed.doc_lengths(), [1, 3, 0, 2])
    np.testing.assert_array_equal(held_out.doc_lengths(), [0, 2, 0, 1])
    assert observed.word_ids[0] == 4
    for half in (observed, held_out):
        for d in range(half.num_docs):
            assert np.all(np.diff(half.word_ids[half.doc_offsets[d]:half.doc_offsets[d + 1]]) > 0)


def test_document_halves_are_pinned_per_seed():
    corpus = Corpus(np.array([0, 10]), np.arange(10), [f"w{i}" for i in range(10)])
    # Pinned values: the split must not drift across numpy versions or platforms.
    assert split_document_halves(corpus, seed=0)[0].word_ids.tolist() == [1, 3, 5, 6, 7]
    kos = load_bundled("kos")
    first, again, other = (split_document_halves(kos, seed)[0].word_ids for seed in (1, 1, 2))
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


# ----------------------------------------------------------------------------- bundled data


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


def test_align_vocabulary_maps_words_by_string_and_drops_unknown_ones():
    source = Corpus(np.array([0, 3, 5]), np.array([0, 1, 2, 2, 1]), ("a", "b", "c"))
    with pytest.warns(UserWarning, match="dropped 2 of 5 tokens"):
        aligned = align_vocabulary(source, ("c", "a", "z"))
    assert aligned.vocab == ("c", "a", "z")
    np.testing.assert_array_equal(aligned.doc_offsets, [0, 2, 3])
    np.testing.assert_array_equal(aligned.word_ids, [1, 0, 0])
    assert align_vocabulary(source, source.vocab) is source
