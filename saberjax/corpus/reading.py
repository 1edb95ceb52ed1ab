"""Corpus files as bytes: read in blocks, gunzipped when gzipped, and vocabulary files.

Read errors are CorpusFormatErrors naming the file.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path

from saberjax.errors import CorpusFormatError, read_errors

GZIP_MAGIC = b"\x1f\x8b"
_READ_BYTES = 1 << 19  # bytes of a text file read (and decompressed) at a time


def read_bytes(path: Path) -> bytes:
    """The file's content, gunzipped when it starts with the gzip magic number."""
    return b"".join(text_blocks(path))


def text_blocks(path: Path) -> Iterator[bytes]:
    """The file's content in blocks as it is read (_READ_BYTES of the file at a time), gunzipped
    when it starts with the gzip magic number (a .gz file may hold several concatenated gzip
    members), so that a loader parses early blocks while later ones are read and decompressed.
    Read errors are CorpusFormatErrors naming the file."""
    with read_errors(path):
        file = open(path, "rb")
    with file:
        def read() -> bytes:
            with read_errors(path):
                return file.read(_READ_BYTES)

        data = read()
        if not data.startswith(GZIP_MAGIC):
            while data:
                yield data
                data = read()
            return
        decompressor = zlib.decompressobj(wbits=31)
        while data:
            try:
                block = decompressor.decompress(data)
            except zlib.error as error:
                raise CorpusFormatError(f"{path}: corrupt gzip data ({error})") from error
            if block:
                yield block
            if decompressor.eof:  # another member starts in what follows, if anything does
                data = decompressor.unused_data or read()
                if data:
                    decompressor = zlib.decompressobj(wbits=31)
            else:
                data = read()
        if not decompressor.eof:
            raise CorpusFormatError(f"{path}: truncated gzip data")


def read_vocab(path: Path) -> tuple[str, ...]:
    """One word per line (UTF-8, LF or CRLF): 1-based line i holds word id i - 1."""
    data = read_bytes(path)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise CorpusFormatError(f"{path}, line {line}: not valid UTF-8") from error
    words = text.split("\n")
    if words[-1] == "":
        words.pop()
    return tuple(word.removesuffix("\r") for word in words)


def check_not_empty(path: Path, data: bytes) -> None:
    """CorpusFormatError when the file's content is empty or whitespace only."""
    if not data or data.isspace():
        raise CorpusFormatError(f"{path}: file is empty")
