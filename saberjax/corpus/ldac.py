"""Blei's LDA-C format: one document per line, ``N id:count id:count ...``, with a
vocabulary file."""

from __future__ import annotations

import functools
import gzip
import re
from pathlib import Path

import numpy as np

from saberjax.corpus.parsing import (
    FIELD,
    PAIR_COLON,
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
from saberjax.corpus.reading import GZIP_MAGIC, check_not_empty, read_bytes, read_vocab, text_blocks
from saberjax.corpus.core import MAX_COUNT, Corpus
from saberjax.errors import CorpusFormatError

LDAC_VOCAB_FILE = "vocab.txt"  # the vocabulary load_corpus reads beside an LDA-C file

_LDAC_START = re.compile(rb"[ \t]*[0-9]+[ \t]+[0-9]+:[0-9]+")
_LDAC_PAIR = re.compile(r"(-?[0-9]{1,18}):(-?[0-9]{1,18})")


def load_ldac(path, vocab_path) -> Corpus:
    """Loads Blei's LDA-C format: one document per line, ``N id:count id:count ...``.

    Ids are 0-based into the vocabulary file (one word per line); N is the number of pairs.
    A line ``0`` is an empty document (dropped); blank lines are ignored. Gzip is detected.
    """
    path, vocab_file = Path(path), Path(vocab_path)
    try:
        vocab = read_vocab(vocab_file)
    except CorpusFormatError:
        check_not_empty(path, read_bytes(path))  # faults of the file itself come first
        raise
    pieces = parse_pieces(text_blocks(path),
                          functools.partial(_ldac_piece_entries, num_words=len(vocab)))
    if all(piece.blank for piece in pieces):
        raise CorpusFormatError(f"{path}: file is empty")
    raise_first_bad_line(path, 1, pieces, lambda text: _ldac_line_problem(text, len(vocab)))
    first_docs = np.cumsum([0] + [piece.num_records for piece in pieces])
    name = Path(path.name.removesuffix(".gz")).stem
    return corpus_from_pieces(pieces, int(first_docs[-1]), vocab, name, str(path),
                              doc_bases=first_docs[:-1])


def starts_like_ldac(path: Path) -> bool:
    """Whether the file (gzipped or not) starts with an LDA-C line ``N id:count``."""
    try:
        with open(path, "rb") as raw:
            gzipped = raw.read(2) == GZIP_MAGIC
            raw.seek(0)
            stream = gzip.GzipFile(fileobj=raw) if gzipped else raw
            head = stream.readline(4096)
    except (OSError, EOFError):
        return False
    return _LDAC_START.match(head) is not None


def _ldac_piece_entries(piece: TextPiece, num_words: int) -> PieceEntries:
    """The validated pairs of a piece of an LDA-C file (see PieceEntries)."""
    lines = ParsedLines.parse(piece, b"\n:")
    lengths = lines.line_lengths()
    doc_lines = np.flatnonzero(lengths > 0)
    starts = lines.line_ends[doc_lines] - lengths[doc_lines]
    num_pairs = lines.values[starts]
    first_missized = first_true(lengths[doc_lines] != 1 + 3 * num_pairs)
    # Lines before the first mis-sized one hold exactly N pairs each: without each line's N and
    # end marker, their fields form an [id, colon, count] table.
    num_sized = doc_lines.size if first_missized is None else first_missized
    sized_end = lines.values.size if first_missized is None else starts[first_missized]
    is_pair_field = np.ones(sized_end, bool)
    is_pair_field[starts[:num_sized]] = False
    is_pair_field[lines.line_ends[:np.searchsorted(lines.line_ends, sized_end)]] = False
    word, colon, count = lines.values[:sized_end][is_pair_field].reshape(-1, 3).T
    bad_pair = ((colon != PAIR_COLON) | (word < 0) | (word >= num_words)
                | (count < 1) | (count > MAX_COUNT))
    first_bad_pair = first_true(bad_pair)
    pair_doc = np.repeat(np.arange(num_sized), num_pairs[:num_sized])
    bad_lines = [lines.first_foreign_line,
                 _first_line_with_loose_colon(piece.array()),
                 None if first_missized is None else int(doc_lines[first_missized]),
                 None if first_bad_pair is None else int(doc_lines[pair_doc[first_bad_pair]])]
    return PieceEntries.of(piece, lines, doc_lines.size, bad_lines, pair_doc, word, count)


def _first_line_with_loose_colon(raw: np.ndarray) -> int | None:
    """First line (0-based) with a colon not between two digits, as in ``3 :4`` or ``3:``."""
    colons = np.flatnonzero(raw == ord(":"))
    before = raw[np.maximum(colons - 1, 0)]
    after = raw[np.minimum(colons + 1, raw.size - 1)]
    loose = ((colons == 0) | (colons == raw.size - 1)
             | (before < ord("0")) | (before > ord("9")) | (after < ord("0")) | (after > ord("9")))
    first = first_true(loose)
    return None if first is None else int(np.count_nonzero(raw[:colons[first]] == ord("\n")))


def _ldac_line_problem(text: str, num_words: int) -> str | None:
    head, *pairs = FIELD.findall(text)
    if problem := integer_problem("pair count N", head):
        return problem
    for pair in pairs:
        match = _LDAC_PAIR.fullmatch(pair)
        if not match:
            return f"malformed pair {pair!r}, expected id:count"
        word, count = int(match[1]), int(match[2])
        if problem := range_problem("word id", word, 0, num_words - 1) or count_problem(count):
            return problem
    if int(head) != len(pairs):
        return f"N is {head} but the line has {len(pairs)} id:count pairs"
    return None
