"""The parser of text bodies shared by the UCI and LDA-C loaders.

A body is cut into pieces of whole lines (TextPiece) as its blocks are read, and the pieces
are parsed on a thread per core by whole-array numpy passes (ParsedLines) into validated
entries (PieceEntries); only when something is wrong is the first bad line located and
described (raise_first_bad_line with a format's line checker, built from range_problem,
count_problem and integer_problem), so errors name the file and line without slowing valid
loads.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from saberjax import platform
from saberjax.corpus.core import MAX_COUNT, Corpus, from_doc_runs, from_entries
from saberjax.errors import CorpusFormatError

_PIECE_BYTES = 1 << 21  # bytes of text parsed as one task
_SLACK = 8  # bytes readable after a piece's text (see TextPiece)
_SEPARATORS = b" \t\r"  # between the fields of a UCI or LDA-C line
LINE_END = -1  # parsed where each line ends
PAIR_COLON = -2  # parsed where an LDA-C ``id:count`` colon was
_INTEGER = re.compile(r"-?[0-9]{1,18}")
FIELD = re.compile(r"[^ \t\r]+")


@dataclasses.dataclass(frozen=True)
class TextPiece:
    """Whole lines of a text, ``buffer[:size]``, the last one ending with a newline.

    At least _SLACK more bytes of buffer follow the text, so that 8 bytes can be read from
    every position of the text at once (windows).
    """

    buffer: bytes
    size: int

    def array(self) -> np.ndarray:
        return np.frombuffer(self.buffer, np.uint8, count=self.size)

    def windows(self) -> np.ndarray:
        """uint64 of the 8 bytes from each position of the text on, little-endian (a view)."""
        return np.ndarray((self.size,), "<u8", self.buffer, strides=(1,))

    def text(self) -> bytes:
        return self.buffer[:self.size]

    def line_text(self, line: int) -> str:
        """Line `line` (0-based in the piece) without its line break, for error messages."""
        newlines = np.flatnonzero(self.array() == ord("\n"))
        start = newlines[line - 1] + 1 if line else 0
        return self.buffer[start:newlines[line]].decode("utf-8", "replace").rstrip("\r")


def _line_pieces(blocks: Iterable[bytes], piece_bytes: int) -> Iterator[TextPiece]:
    """The text of blocks as pieces of whole lines, each of piece_bytes or more but the last.

    A piece ends at the last newline that leaves _SLACK bytes of the following text in its
    buffer, so the text is copied once (the blocks' join); the last piece gets a newline if the
    text does not end with one, and zeros as slack.
    """
    pending, size = [], 0
    for block in blocks:
        pending.append(block)
        size += len(block)
        if size < piece_bytes + _SLACK:
            continue
        buffer = b"".join(pending)
        stop = buffer.rfind(b"\n", 0, len(buffer) - _SLACK) + 1
        if stop:
            yield TextPiece(buffer, stop)
            buffer = buffer[stop:]
        pending, size = [buffer], len(buffer)
    rest = b"".join(pending)
    if rest:
        if not rest.endswith(b"\n"):
            rest += b"\n"
        yield TextPiece(rest + bytes(_SLACK), len(rest))


def parse_pieces(blocks: Iterable[bytes], parse_piece: Callable[[TextPiece], PieceEntries]
                 ) -> list[PieceEntries]:
    """parse_piece of each piece of whole lines of the text in blocks (_line_pieces), in order.

    The pieces are parsed on a thread per core while the following blocks are read and
    decompressed on this one; numpy's whole-array passes and zlib release the GIL, so a large
    gzipped file takes about as long as its decompression.
    """
    pool = ThreadPoolExecutor(platform.cpu_cores())
    try:
        futures = [pool.submit(parse_piece, piece)
                   for piece in _line_pieces(blocks, _PIECE_BYTES)]
        return [future.result() for future in futures]
    finally:
        pool.shutdown(cancel_futures=True)


@dataclasses.dataclass(frozen=True)
class ParsedLines:
    """Every integer field of a piece of text in file order, parsed by whole-array passes.

    ``values`` holds ``LINE_END`` after each line's fields (and ``PAIR_COLON`` where an LDA-C
    colon is); ``line_ends[i]`` indexes line i's end marker. A field of more than 18 digits
    parses as the largest int64, outside every valid range. Bytes outside the format's
    alphabet (digits, _SEPARATORS and the markers) separate fields so that the pass completes;
    the first line holding one is ``first_foreign_line`` and gets reported like any other bad
    line.
    """

    values: np.ndarray
    line_ends: np.ndarray
    first_foreign_line: int | None

    @classmethod
    def parse(cls, piece: TextPiece, markers: bytes) -> ParsedLines:
        """Parses piece, whose markers are b"\\n" (UCI) or b"\\n:" (LDA-C).

        A field is a run of digits; the fields' first bytes and the marker bytes are the
        tokens, in order, and each field's value comes from 8 bytes read at its start.
        """
        raw = piece.array()
        digit = np.zeros(raw.size + 2, bool)  # digit[i + 1]: raw[i] is a digit
        np.less(raw - ord("0"), 10, out=digit[1:-1])
        token = digit[1:-1] > digit[:-2]  # a field starts
        for marker in markers:
            token |= raw == marker
        tokens = np.flatnonzero(token)
        kinds = raw[tokens]
        is_field = kinds - ord("0") < 10
        starts = tokens[is_field]
        lengths = np.flatnonzero(digit[1:] < digit[:-1]) - starts  # ends minus starts
        values = np.full(tokens.size, LINE_END, np.int64)
        values[is_field] = _decimal_values(piece.windows(), starts, lengths)
        if b":" in markers:
            values[kinds == ord(":")] = PAIR_COLON
        known = (lengths.sum() + tokens.size - starts.size
                 + sum(np.count_nonzero(raw == byte) for byte in _SEPARATORS))
        first_foreign_line = None
        if known != raw.size:
            alphabet = np.frombuffer(b"0123456789" + _SEPARATORS + markers, np.uint8)
            first = int(np.argmax(~np.isin(raw, alphabet)))
            first_foreign_line = int(np.count_nonzero(raw[:first] == ord("\n")))
        return cls(values, np.flatnonzero(kinds == ord("\n")), first_foreign_line)

    def line_lengths(self) -> np.ndarray:
        """Fields (colon markers included) on each line."""
        return np.diff(self.line_ends, prepend=-1) - 1


def _decimal_values(windows: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """int64 values of the runs of lengths[i] digits at starts[i] (windows: TextPiece.windows).

    Up to 8 digits are read at once, longer runs 8 digits at a time; a run of more than 18
    digits gets the largest int64.
    """
    values = _leading_digits(windows, starts, np.minimum(lengths, 8))
    longest = int(lengths.max(initial=0))
    for done in range(8, min(longest, 19), 8):
        longer = np.flatnonzero(lengths > done)
        digits = np.minimum(lengths[longer] - done, 8)
        values[longer] = (values[longer] * 10 ** digits
                          + _leading_digits(windows, starts[longer] + done, digits))
    if longest > 18:
        values[lengths > 18] = np.iinfo(np.int64).max
    return values


_UNUSED_BITS = np.array([64 - 8 * digits for digits in range(9)], np.uint64)


def _leading_digits(windows: np.ndarray, starts: np.ndarray, digits: np.ndarray) -> np.ndarray:
    """int64 values of the digits[i] (1 to 8) digits at starts[i], by SWAR on 8-byte windows.

    Shifting out the bytes after the digits leaves an 8-digit number with leading zeros,
    first digit in the low byte; three multiply-shifts combine neighbouring digits, pairs
    and quadruples.
    """
    x = windows[starts]
    x <<= _UNUSED_BITS[digits]
    x &= 0x0F0F0F0F0F0F0F0F
    x *= 1 + (10 << 8)
    x >>= 8
    x &= 0x00FF00FF00FF00FF
    x *= 1 + (100 << 16)
    x >>= 16
    x &= 0x0000FFFF0000FFFF
    x *= 1 + (10000 << 32)
    x >>= 32
    return x.view(np.int64)


@dataclasses.dataclass(frozen=True)
class PieceEntries:
    """The entries of a piece of a text body: its tokens, or the first line that is bad.

    word_ids: the tokens in file order; run_docs / run_tokens: the 0-based document of each
    run of entries of one document and its number of tokens (LDA-C documents are numbered
    from the piece's first document line); num_lines: lines in the piece; num_records: entry
    lines (UCI) or document lines (LDA-C); blank: the piece is whitespace only; bad_line: the
    first line (0-based in the piece) that is not valid, with its text; then the arrays are
    empty.
    """

    num_lines: int
    num_records: int
    blank: bool
    bad_line: int | None = None
    bad_text: str = ""
    word_ids: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.int32))
    run_docs: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.int64))
    run_tokens: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.int64))

    @classmethod
    def of(cls, piece: TextPiece, lines: ParsedLines, num_records: int,
           bad_lines: Iterable[int | None], doc, word, count) -> PieceEntries:
        """The entries (doc, word, count: 0-based ids, in file order) of a parsed piece, or the
        earliest of bad_lines (None: no bad line of a kind)."""
        num_lines = lines.line_ends.size
        blank = lines.values.size == num_lines and piece.text().isspace()
        found = [line for line in bad_lines if line is not None]
        if found:
            line = min(found)
            return cls(num_lines, num_records, blank, line, piece.line_text(line))
        run_starts = np.flatnonzero(np.diff(doc, prepend=-1))
        run_tokens = (np.add.reduceat(count, run_starts) if run_starts.size
                      else np.empty(0, np.int64))
        return cls(num_lines, num_records, blank,
                   word_ids=np.repeat(word.astype(np.int32), count),
                   run_docs=doc[run_starts], run_tokens=run_tokens)


def raise_first_bad_line(path: Path, first_line_number: int, pieces: Sequence[PieceEntries],
                         describe: Callable[[str], str | None]) -> None:
    """Raises for the first bad line of the pieces, if any, naming the file and line (the
    pieces' text starts at line first_line_number)."""
    line_number = first_line_number
    for piece in pieces:
        if piece.bad_line is not None:
            problem = describe(piece.bad_text) or "malformed line"
            raise CorpusFormatError(f"{path}, line {line_number + piece.bad_line}: {problem} "
                                    f"(line: {piece.bad_text[:80]!r})")
        line_number += piece.num_lines


def corpus_from_pieces(pieces: Sequence[PieceEntries], num_docs: int,
                       vocab: tuple[str, ...], name: str, source: str,
                       doc_bases: Sequence[int] | None = None) -> Corpus:
    """The corpus of valid pieces' tokens; doc_bases[i] is added to piece i's documents."""
    bases = [0] * len(pieces) if doc_bases is None else doc_bases
    word_ids = np.concatenate([np.empty(0, np.int32)] + [p.word_ids for p in pieces])
    run_docs = np.concatenate(
        [np.empty(0, np.int64)] + [p.run_docs + base for p, base in zip(pieces, bases)])
    run_tokens = np.concatenate([np.empty(0, np.int64)] + [p.run_tokens for p in pieces])
    if np.any(run_docs[1:] < run_docs[:-1]):  # documents interleave: tokens sorted by document
        return from_entries(np.repeat(run_docs, run_tokens), word_ids,
                            np.ones(word_ids.size, np.int64), num_docs, vocab, name, source)
    return from_doc_runs(run_docs, run_tokens, word_ids, num_docs, vocab, name, source)


def first_true(mask: np.ndarray) -> int | None:
    """Index of the first True of mask, or None."""
    return int(np.argmax(mask)) if mask.any() else None


def range_problem(label: str, value: int, low: int, high: int) -> str | None:
    """What is wrong with a field outside low..high, or None (the line checkers' parts)."""
    return None if low <= value <= high else f"{label} {value} is out of range {low}..{high}"


def count_problem(count: int) -> str | None:
    """What is wrong with a count outside 1..MAX_COUNT, or None."""
    return None if 1 <= count <= MAX_COUNT else f"count {count} must be in 1..{MAX_COUNT}"


def integer_problem(label: str, field: str) -> str | None:
    """What is wrong with a field that is not a decimal integer of at most 18 digits, or
    None."""
    if _INTEGER.fullmatch(field):
        return None
    return f"{label} {field!r} is not a decimal integer (at most 18 digits)"
