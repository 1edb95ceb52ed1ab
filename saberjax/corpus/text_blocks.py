"""Blocks of raw documents (DocumentBlock) and the readers of plain text files: the bytes every
raw-text input becomes before saberjax.corpus.tokenizing reads it.

A DocumentBlock holds the UTF-8 bytes of consecutive documents, concatenated, and where each
begins; a block of lines leaves the line breaks for the tokenising threads to find, so that
reading a text file of one document a line costs a read and a search for its last line feed
a block, on one core, and nothing per document.  Compressed files are read through pyarrow's
streams, which decompress gzip and zstd; others as they are.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from saberjax.errors import CorpusFormatError, read_errors

DEFAULT_BLOCK_BYTES = 1 << 23  # bytes of documents per block (the engine cuts them in pieces)
SNIFF_BYTES = 1 << 20  # bytes at the start of a line file whose control characters are counted
DEFAULT_TEXT_FIELD = "text"
# file name endings of compressed files, and the magic numbers their contents start with
COMPRESSIONS = {".gz": ("gzip", b"\x1f\x8b"), ".zst": ("zstd", b"\x28\xb5\x2f\xfd")}
_LINE_FEED = 10


class DocumentBlock(NamedTuple):
    """Consecutive documents: document i is ``data[offsets[i]:offsets[i + 1]]``, UTF-8 bytes
    (as the source holds them: invalid UTF-8 is left for the tokeniser to report).

    data: uint8 [bytes]; offsets: int64 [n + 1], non-decreasing, offsets[0] == 0 and
    offsets[-1] == data.size, or None when data is lines, one document each with its line
    break (line_offsets; found by the thread that tokenises the block); ids: the documents'
    ids, a 1-D object array of str [n], when an id field is named, else None.  parse: when
    given, data holds whole lines of records (offsets and ids None) that parse(data) turns
    into the block of their documents, on the thread that tokenises them (parsed).
    """

    data: np.ndarray
    offsets: np.ndarray | None
    ids: np.ndarray | None = None
    parse: Callable[[np.ndarray], DocumentBlock] | None = None

    def parsed(self) -> DocumentBlock:
        """The block of documents: itself, or that of its records."""
        return self if self.parse is None else self.parse(self.data)

    def document_offsets(self) -> np.ndarray:
        """offsets, or the lines' offsets of a block of lines."""
        return line_offsets(self.data) if self.offsets is None else self.offsets

    @property
    def num_docs(self) -> int:
        return self.document_offsets().size - 1

    @property
    def size(self) -> int:
        """Its bytes."""
        return self.data.size

    def document(self, i: int) -> bytes:
        """Document i's bytes."""
        offsets = self.document_offsets()
        return self.data[offsets[i]:offsets[i + 1]].tobytes()


class LineRange(NamedTuple):
    """The lines of an uncompressed file (one document, or one record, a line) that begin in
    its bytes [start, end), a line beginning at the file's start or after a line feed: where
    lines are, handed to whoever tokenises them, who reads them (parsed) so that the reader of
    a large file passes on no bytes.  The ranges of a file, in order, hold each of its lines
    once.  parse: as DocumentBlock's."""

    path: Path
    start: int
    end: int
    parse: Callable[[np.ndarray], DocumentBlock] | None = None

    @property
    def size(self) -> int:
        """Its bytes (of the file's, nominally: its lines end where they end)."""
        return self.end - self.start

    def parsed(self) -> DocumentBlock:
        """The block of its documents (read_lines, then parse)."""
        return DocumentBlock(read_lines(self.path, self.start, self.end), None, None,
                             self.parse).parsed()


def nul_byte_error(path: Path, offset: int) -> CorpusFormatError:
    """The one-line error for a NUL byte at `offset` of a file read as text (binary data)."""
    return CorpusFormatError(f"{path}: binary data, not text (a NUL byte at offset {offset}); "
                             f"plain text input is UTF-8 or Latin-1")


RANGE_TAIL_BYTES = 1 << 16  # read at a time past a range's end, to the end of its last line


def read_lines(path: Path, start: int, end: int) -> np.ndarray:
    """The bytes of the lines of the file that begin in [start, end) (LineRange), each with its
    line break; CorpusFormatError for a NUL byte in them (binary data)."""
    first = max(start - 1, 0)  # a line begins at start when the byte before it is a line feed
    with read_errors(path), open(path, "rb") as file:
        data = bytearray(end - first)
        del data[os.preadv(file.fileno(), [data], first):]  # short at the file's end
        begin = 0 if start == 0 else data.find(b"\n") + 1
        if begin == 0 and start > 0 or first + begin >= end:
            return np.zeros(0, np.uint8)  # no line begins in the range
        stop = len(data)
        if stop == end - first and data[-1] != _LINE_FEED:  # the last line goes on
            while tail := os.pread(file.fileno(), RANGE_TAIL_BYTES, first + len(data)):
                line_end = tail.find(b"\n")
                data += tail if line_end < 0 else tail[:line_end + 1]
                if line_end >= 0:
                    break
            stop = len(data)
    if (nul := data.find(b"\0", begin, stop)) >= 0:
        raise nul_byte_error(path, first + nul)
    return np.frombuffer(data, np.uint8)[begin:stop]


def line_ranges(path: Path, range_bytes: int, parse=None, span: tuple[int, int] | None = None
                ) -> Iterator[LineRange]:
    """The lines of an uncompressed file as LineRanges of range_bytes, the file first checked
    to be text (check_is_text of its first SNIFF_BYTES, a NUL byte there refused).  span:
    only the lines beginning in the bytes [first, last) (line_span, as line_blocks' span:
    the share of the file one reader of several reads, saberjax.shared_text), the first
    SNIFF_BYTES of those lines checked."""
    with read_errors(path), open(path, "rb") as file:
        first, last = ((0, os.fstat(file.fileno()).st_size) if span is None
                       else line_span(file, path, *span))
        head = os.pread(file.fileno(), min(SNIFF_BYTES, last - first), first)
    if (nul := head.find(b"\0")) >= 0:
        raise nul_byte_error(path, first + nul)
    check_is_text(path, np.frombuffer(head, np.uint8))
    for start in range(first, last, range_bytes):
        yield LineRange(path, start, min(start + range_bytes, last), parse)


def line_offsets(data: np.ndarray) -> np.ndarray:
    """Offsets of the lines of `data` (each with its line break; a last line without one
    too)."""
    breaks = np.flatnonzero(data == _LINE_FEED) + 1
    tail = [data.size] if data.size and data[-1] != _LINE_FEED else []
    return np.concatenate([[0], breaks, tail]).astype(np.int64)


class Fields(NamedTuple):
    """The names of the field or column holding the documents and of the one holding their
    ids (None: no ids)."""

    text: str = DEFAULT_TEXT_FIELD
    id: str | None = None


FIELD_OPTIONS = ("text_field", "id_field", "text_column", "id_column")


def reading_fields(text_field: str | None = None, id_field: str | None = None,
                   text_column: str | None = None, id_column: str | None = None) -> Fields:
    """The Fields of the reading options (FIELD_OPTIONS: `text_column` and `id_column` are
    other names of `text_field` and `id_field`); ValueError when the two names of one option
    disagree or a name is not a non-empty string."""
    text = _one_name("text_field", text_field, "text_column", text_column)
    return Fields(DEFAULT_TEXT_FIELD if text is None else text,
                  _one_name("id_field", id_field, "id_column", id_column))


def _one_name(name: str, value, alias: str, alias_value) -> str | None:
    if value is not None and alias_value is not None and value != alias_value:
        raise ValueError(f"{name}={value!r} and {alias}={alias_value!r} name the same field; "
                         f"give one of them")
    chosen = value if value is not None else alias_value
    if chosen is not None and (not isinstance(chosen, str) or not chosen):
        raise ValueError(f"{name} must be a non-empty string, got {chosen!r}")
    return chosen


def open_stream(path: Path):
    """A binary stream of the file's content: the file itself, or pyarrow's stream of it
    decompressed when it is gzip or zstd data (so that plain files are read without
    pyarrow)."""
    with read_errors(path):
        compression = compression_of(path)
        if compression is None:
            return open(path, "rb")
        import pyarrow as pa

        return pa.input_stream(str(path), compression=compression)


def compression_of(path: Path) -> str | None:
    """"gzip" or "zstd" when the file's content starts with their magic number, else None."""
    with read_errors(path), open(path, "rb") as file:
        head = file.read(4)
    return next((name for name, magic in COMPRESSIONS.values() if head.startswith(magic)),
                None)


def read_block(stream, path: Path, size: int | None) -> np.ndarray:
    """Up to `size` bytes of the stream (None: all the rest) as uint8, without a copy."""
    try:
        if hasattr(stream, "read_buffer"):  # pyarrow's
            return np.frombuffer(stream.read_buffer(size), np.uint8)
        return np.frombuffer(stream.read(-1 if size is None else size), np.uint8)
    except (OSError, ValueError) as error:  # pyarrow.ArrowInvalid is a ValueError
        raise CorpusFormatError(f"{path}: cannot read: {error}") from error


def _read_into(stream, path: Path, buffer: memoryview) -> int:
    """Fills `buffer` from the stream (less only at its end); the bytes read."""
    done = 0
    try:
        while done < len(buffer) and (read := stream.readinto(buffer[done:])):
            done += read
    except (OSError, ValueError) as error:
        raise CorpusFormatError(f"{path}: cannot read: {error}") from error
    return done


def line_blocks(path: Path, block_bytes: int = DEFAULT_BLOCK_BYTES,
                span: tuple[int, int] | None = None) -> Iterator[DocumentBlock]:
    """A document per line of a file (its line break kept at its end, as whitespace): blocks
    of whole lines of about block_bytes, read into fresh buffers (no copy but the part of a
    line a block ends in), their offsets left to the tokenising threads (DocumentBlock); a
    last line without a line break is a document too, an empty file holds none.  The file is
    refused as binary data for a NUL byte anywhere (a memchr a block), or for control
    characters in its first SNIFF_BYTES (check_is_text).  span: only the lines beginning in
    the bytes [first, last) of an uncompressed file (line_span), the share of the file one
    reader of several reads (saberjax.shared_text); control characters are counted in the
    span's first SNIFF_BYTES."""
    with open_stream(path) as stream:
        offset, left = 0, None
        if span is not None:
            offset, end = line_span(stream, path, *span)
            stream.seek(offset)
            left = end - offset
        rest, start = b"", offset
        while left is None or left > 0:
            size = block_bytes if left is None else min(block_bytes, left)
            buffer = bytearray(len(rest) + size)
            buffer[:len(rest)] = rest
            read = _read_into(stream, path, memoryview(buffer)[len(rest):])
            if not read:
                break
            left = None if left is None else left - read
            size = len(rest) + read
            if (nul := buffer.find(b"\0", len(rest), size)) >= 0:
                raise nul_byte_error(path, offset + nul - len(rest))
            if offset == start:
                check_is_text(path, np.frombuffer(buffer, np.uint8, min(size, SNIFF_BYTES)))
            offset += read
            end = buffer.rfind(b"\n", 0, size) + 1
            if end:
                yield DocumentBlock(np.frombuffer(buffer, np.uint8, end), None)
            rest = bytes(buffer[end:size])
        if rest:
            yield DocumentBlock(np.frombuffer(rest, np.uint8), None)


def line_span(stream, path: Path, first: int, last: int) -> tuple[int, int]:
    """The bytes [start, end) of the lines of a file (an open, seekable stream) that begin in
    its bytes [first, last): those from the first line beginning at `first` or after, to
    the first beginning at `last` or after.  The spans of consecutive ranges that cover a
    file hold each of its lines once."""
    def line_start(position: int) -> int:
        if position <= 0:
            return 0
        stream.seek(position - 1)
        while chunk := read_block(stream, path, 1 << 16).tobytes():
            if (found := chunk.find(b"\n")) >= 0:
                return position + found
            position += len(chunk)
        return position - 1  # the end of the file
    start = line_start(first)
    return start, max(start, line_start(last))


def file_blocks(files: list[Path], block_bytes: int = DEFAULT_BLOCK_BYTES
                ) -> Iterator[DocumentBlock]:
    """One document a file (each checked to be text: check_is_text), about block_bytes of
    files a block."""
    pieces, size = [], 0
    for file in files:
        with open_stream(file) as stream:
            content = read_block(stream, file, None)
        check_is_text(file, content)
        pieces.append(content)
        size += content.size
        if size >= block_bytes:
            yield block_of_documents(pieces)
            pieces, size = [], 0
    if pieces:
        yield block_of_documents(pieces)


def block_of_documents(documents: list[np.ndarray]) -> DocumentBlock:
    """The block of these documents' bytes (uint8 arrays)."""
    offsets = np.zeros(len(documents) + 1, np.int64)
    np.cumsum([document.size for document in documents], out=offsets[1:])
    return DocumentBlock(np.concatenate(documents) if documents else np.zeros(0, np.uint8),
                         offsets)


# Control characters that text does not contain: all but tab, line feed, vertical tab, form
# feed and carriage return, plus DEL.
_BINARY_BYTES = np.zeros(256, bool)
_BINARY_BYTES[sorted({*range(32), 127} - set(b"\t\n\v\f\r"))] = True
MAX_CONTROL_FRACTION = 0.01  # of the bytes checked; binary data has ~12%


def check_is_text(path: Path, data: np.ndarray) -> None:
    """Refuses binary data (a NUL byte, or more than MAX_CONTROL_FRACTION control characters),
    which would otherwise be read as nonsense words."""
    # bytes below 32 but tab, line feed, vertical tab, form feed and carriage return (9 to
    # 13), and DEL: two whole-array passes, the few bytes below 32 told apart after
    low = data.take(np.flatnonzero(data < 32))
    count = np.count_nonzero((low - np.uint8(9)) >= 5) + np.count_nonzero(data == 127)
    if count and (not data.all() or count > MAX_CONTROL_FRACTION * data.size):
        first = int(np.argmax(_BINARY_BYTES[data]))
        raise CorpusFormatError(
            f"{path}: binary data, not text (control byte {int(data[first]):#04x} at offset "
            f"{first}, {count} of {data.size} bytes); plain text input is UTF-8 or Latin-1")
