"""The UCI bag-of-words format: ``docword.txt[.gz]`` (header D, W, NNZ, then
``docID wordID count`` lines) and a vocabulary file beside it."""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from saberjax.corpus.parsing import (
    FIELD,
    ParsedLines,
    PieceEntries,
    TextPiece,
    corpus_from_pieces,
    count_problem,
    first_true,
    integer_problem,
    parse_pieces,
    raise_first_bad_line,
    range_problem,
)
from saberjax.corpus.reading import check_not_empty, read_vocab, text_blocks
from saberjax.corpus.core import MAX_COUNT, Corpus
from saberjax.errors import CorpusFormatError

_UCI_DOCWORD_FILES = ("docword.txt", "docword.txt.gz")
UCI_DOCWORD_NAME = re.compile(r"docword(?:\.(?P<tag>.+))?\.txt(?:\.gz)?")


def load_uci(docword_path, vocab_path=None) -> Corpus:
    """Loads a UCI bag-of-words corpus: ``docword.txt[.gz]`` plus a vocabulary file.

    The docword file has header lines D, W, NNZ, then NNZ lines ``docID wordID count``
    (1-based ids; any order, a document's tokens keep file order; blank lines are ignored).
    docword_path may also be a folder holding ``docword.txt`` or ``docword.txt.gz``. Without
    vocab_path, the vocabulary must sit beside it as ``vocab.<tag>.txt`` (for
    ``docword.<tag>.txt``, the UCI naming) or ``vocab.txt``. Documents without entries are dropped.
    """
    docword = Path(docword_path)
    if docword.is_dir():
        docword = uci_docword_in(docword)
    vocab_file = uci_vocab_beside(docword) if vocab_path is None else Path(vocab_path)
    num_docs, num_words, num_entries, body = _read_uci_header(docword)
    pieces = parse_pieces(body, functools.partial(
        _uci_piece_entries, num_docs=num_docs, num_words=num_words))
    vocab = read_vocab(vocab_file)
    if len(vocab) != num_words:
        raise CorpusFormatError(
            f"vocabulary size mismatch: {docword} declares W={num_words} (line 2) but "
            f"{vocab_file} has {len(vocab)} words")
    raise_first_bad_line(docword, 4, pieces,
                         lambda text: _uci_line_problem(text, num_docs, num_words))
    entry_lines = sum(piece.num_records for piece in pieces)
    if entry_lines != num_entries:
        raise CorpusFormatError(
            f"{docword}, line 3: header declares NNZ={num_entries} but "
            f"{entry_lines} entry lines follow")
    tag = UCI_DOCWORD_NAME.fullmatch(docword.name)
    name = tag["tag"] if tag and tag["tag"] else docword.resolve().parent.name
    return corpus_from_pieces(pieces, num_docs, vocab, name, str(docword))


def uci_docwords(directory: Path) -> list[Path]:
    """The UCI docword files (docword.txt, docword.txt.gz) present in a folder."""
    return [directory / name for name in _UCI_DOCWORD_FILES if (directory / name).is_file()]


def uci_docword_in(directory: Path) -> Path:
    """The one docword file of a folder; CorpusFormatError when there is none or several."""
    found = uci_docwords(directory)
    if len(found) != 1:
        raise CorpusFormatError(
            f"{directory}: expected exactly one of {', '.join(_UCI_DOCWORD_FILES)}, "
            f"found {len(found)}")
    return found[0]


def uci_vocab_beside(docword: Path) -> Path:
    """The vocabulary beside a docword file: vocab.<tag>.txt for docword.<tag>.txt, else
    vocab.txt; CorpusFormatError naming the paths looked for when neither exists."""
    tag = UCI_DOCWORD_NAME.fullmatch(docword.name)
    names = [f"vocab.{tag['tag']}.txt"] if tag and tag["tag"] else []
    candidates = [docword.with_name(name) for name in names + ["vocab.txt"]]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise CorpusFormatError(
        f"{docword}: no vocabulary file beside it (looked for "
        f"{', '.join(str(c) for c in candidates)}); pass vocab_path")


def _read_uci_header(path: Path) -> tuple[int, int, int, Iterator[bytes]]:
    """(D, W, NNZ, the body's blocks) of a docword file, read only as far as the header.

    A bad header is reported as _split_uci_header reports it for the whole file (gzip faults
    and emptiness first).
    """
    blocks = text_blocks(path)
    head = b""
    for block in blocks:
        head += block
        if head.count(b"\n") >= 3:
            break
    try:
        *header, rest = _split_uci_header(path, head)
    except CorpusFormatError:
        _split_uci_header(path, head + b"".join(blocks))
        raise
    return *header, itertools.chain([rest], blocks)


def _split_uci_header(path: Path, data: bytes) -> tuple[int, int, int, bytes]:
    """(D, W, NNZ, body) from a docword file; the header is lines 1-3, one integer each."""
    check_not_empty(path, data)
    lines = data.split(b"\n", 3)
    labels = ("D (number of documents)", "W (vocabulary size)", "NNZ (number of entries)")
    header = []
    for number, label in enumerate(labels, start=1):
        if number > len(lines):
            raise CorpusFormatError(
                f"{path}, line {number}: header ended early; expected {label} on line {number}")
        text = lines[number - 1].decode("utf-8", "replace").strip(" \t\r")
        if not re.fullmatch("[0-9]{1,18}", text):
            raise CorpusFormatError(
                f"{path}, line {number}: expected the header integer {label}, found {text!r}")
        header.append(int(text))
    body = lines[3] if len(lines) > 3 else b""
    return *header, body


def _uci_piece_entries(piece: TextPiece, num_docs: int, num_words: int) -> PieceEntries:
    """The validated entries of a piece of a docword body (see PieceEntries)."""
    lines = ParsedLines.parse(piece, b"\n")
    lengths = lines.line_lengths()
    entry_lines = np.flatnonzero(lengths == 3)
    if entry_lines.size == lengths.size:  # no blank or malformed lines: a free strided view
        entries = lines.values.reshape(-1, 4)[:, :3]
    else:
        entries = lines.values[lines.line_ends[entry_lines, None] + np.arange(-3, 0)]
    doc, word, count = entries.T
    bad_entry = ((doc < 1) | (doc > num_docs) | (word < 1) | (word > num_words)
                 | (count < 1) | (count > MAX_COUNT))
    first_bad_entry = first_true(bad_entry)
    bad_lines = [lines.first_foreign_line,
                 first_true((lengths != 0) & (lengths != 3)),
                 None if first_bad_entry is None else int(entry_lines[first_bad_entry])]
    return PieceEntries.of(piece, lines, entry_lines.size, bad_lines, doc - 1, word - 1, count)


def _uci_line_problem(text: str, num_docs: int, num_words: int) -> str | None:
    fields = FIELD.findall(text)
    if len(fields) != 3:
        return f"expected 3 fields 'docID wordID count', found {len(fields)}"
    labels = ("docID", "wordID", "count")
    for label, field in zip(labels, fields):
        if problem := integer_problem(label, field):
            return problem
    doc, word, count = map(int, fields)
    return (range_problem("docID", doc, 1, num_docs)
            or range_problem("wordID", word, 1, num_words)
            or count_problem(count))
