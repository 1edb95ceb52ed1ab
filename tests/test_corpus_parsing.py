"""saberjax.corpus.parsing and reading: text bodies read in blocks and parsed in pieces of whole
lines give what one pass over the whole text gives, values, corpora and errors alike."""

import gzip
import re
import warnings

import numpy as np
import pytest
from corpus_helpers import (
    LDAC_ERRORS,
    LDAC_TEXT,
    UCI_ERRORS,
    UCI_TEXT,
    WORD_IDS,
    assert_same_corpus,
    error_at,
    tiny_corpus,
    write_text,
    write_uci,
    write_vocab,
)

from saberjax.corpus import CorpusFormatError, load_ldac, load_uci, parsing, reading


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
        body = body.replace(b":", b" %d " % parsing.PAIR_COLON)
    text = body.replace(b"\n", b" %d\n" % parsing.LINE_END)
    if body and not body.endswith(b"\n"):
        text += b" %d" % parsing.LINE_END
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # np.fromstring's text mode
        values = np.fromstring(text, dtype=np.int64, sep=" ")
    return values, np.flatnonzero(values == parsing.LINE_END)


def random_blocks(rng, data: bytes) -> list[bytes]:
    """data cut at random positions (empty blocks included)."""
    cuts = np.sort(rng.integers(0, len(data) + 1, rng.integers(0, 40)))
    return [data[start:end] for start, end in zip([0, *cuts], [*cuts, len(data)])]


def parsed_in_pieces(blocks, piece_bytes: int, colons: bool):
    """(values, line_ends, first foreign line, pieces' text) of the text of blocks parsed in
    pieces, as the loaders join them."""
    values, line_ends, foreign, texts, num_values, num_lines = [], [], [], [], 0, 0
    for piece in parsing._line_pieces(blocks, piece_bytes):
        assert piece.text().endswith(b"\n") and len(piece.buffer) >= piece.size + 8
        lines = parsing.ParsedLines.parse(piece, b"\n:" if colons else b"\n")
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
        lines = parsing.ParsedLines.parse(
            next(parsing._line_pieces([text.encode()], 1)), b"\n")
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
    monkeypatch.setattr(reading, "_READ_BYTES", 5)
    monkeypatch.setattr(parsing, "_PIECE_BYTES", 3)


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
