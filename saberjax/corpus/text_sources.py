"""Raw documents from any text source, as blocks of UTF-8 bytes: the input side of plain text.

`document_blocks(source)` yields DocumentBlocks in document order, each holding the bytes of
consecutive documents concatenated with their offsets (and, where an id field is named, their
ids), about `block_bytes` at a time, so that a tokeniser reads text of any size in native code
without a Python object per document where the format allows.  Sources:

- a text file of one document a line ("text"; each document keeps its line feed, and the CR
  of a CRLF, as whitespace), or a folder (or glob) of ``.txt`` files, one document each,
  in file name order;
- any of these gzip- or zstd-compressed (recognised by their magic numbers).

Bytes are passed on as they are, undecoded: the tokeniser reports text that is not UTF-8.
Errors (an unreadable file, binary data in a text file, no documents at all) are
CorpusFormatErrors of one line naming the file.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from saberjax.errors import CorpusFormatError

DEFAULT_BLOCK_BYTES = 1 << 25  # bytes of documents per block: large enough to keep every core busy
TEXT_FORMATS = ("text",)
# file name endings of compressed files, and the magic numbers their contents start with
COMPRESSIONS = {".gz": ("gzip", b"\x1f\x8b"), ".zst": ("zstd", b"\x28\xb5\x2f\xfd")}
_LINE_FEED = 10


class DocumentBlock(NamedTuple):
    """Consecutive documents: document i is ``data[offsets[i]:offsets[i + 1]]``, UTF-8 bytes
    (as the source holds them: invalid UTF-8 is left for the tokeniser to report).

    data: uint8 [bytes]; offsets: int64 [n + 1], non-decreasing, offsets[0] == 0 and
    offsets[-1] == data.size; ids: the documents' ids as a 1-D array of strings [n] when the
    source names an id field, else None.
    """

    data: np.ndarray
    offsets: np.ndarray
    ids: np.ndarray | None = None

    @property
    def num_docs(self) -> int:
        return self.offsets.size - 1

    def document(self, i: int) -> bytes:
        """Document i's bytes."""
        return self.data[self.offsets[i]:self.offsets[i + 1]].tobytes()


def document_blocks(source, *, format: str = "auto", block_bytes: int = DEFAULT_BLOCK_BYTES
                    ) -> Iterator[DocumentBlock]:
    """The documents of `source` (see the module) in order, in blocks of about `block_bytes`
    (a single document larger than that is a block of its own).  CorpusFormatError when the
    source cannot be read or holds no document."""
    if block_bytes < 1:
        raise ValueError(f"block_bytes must be positive, got {block_bytes}")
    path = Path(source)
    chosen = detect_text_format(path) if format == "auto" else format
    if chosen not in TEXT_FORMATS:
        raise ValueError(f"{chosen!r} is not a text format; expected one of {TEXT_FORMATS}")
    files = source_files(path, chosen)
    if is_collection(path):
        blocks = _file_documents(files, block_bytes)
    else:
        blocks = _line_documents(files[0], block_bytes)
    yield from _nonempty(blocks, str(path))


# file name extensions (before any compression ending) of each format's files
EXTENSIONS = {"text": (".txt",)}
DETECTION_RULE = "text (folder or glob of .txt files, or a .txt file of one document a line)"


def detected_text_formats(path: Path) -> list[str]:
    """The text formats whose extension a file has, or the files of a folder or glob have."""
    if is_collection(path):
        names = {_base_name(Path(file)) for file in _collection_members(path)}
    else:
        names = {_base_name(path)}
    return [fmt for fmt, extensions in EXTENSIONS.items()
            if any(name.endswith(extensions) for name in names)]


def detect_text_format(path: Path) -> str:
    """The one text format of a file, folder or glob by its name (CorpusFormatError when
    none or several match)."""
    matches = detected_text_formats(path)
    if len(matches) != 1:
        raise CorpusFormatError(f"{path}: {'not a' if not matches else 'several kinds of'} "
                                f"text source; expected {DETECTION_RULE}")
    return matches[0]


def _collection_members(path: Path) -> list[Path]:
    """The files of a folder or a glob."""
    candidates = path.iterdir() if path.is_dir() else map(Path, glob.glob(str(path)))
    return [file for file in candidates if file.is_file()]


def is_collection(path: Path) -> bool:
    """Whether `path` names several files: a folder, or a glob pattern (``data/*.txt``)."""
    return path.is_dir() or (not path.exists() and glob.has_magic(str(path)))


def source_files(path, format: str = "text") -> list[Path]:
    """The files document_blocks(path, format=format) reads, in reading order:
    CorpusFormatError when a folder or glob matches none."""
    path = Path(path)
    if not is_collection(path):
        return [path]
    files = sorted((file for file in _collection_members(path)
                    if _base_name(file).endswith(EXTENSIONS[format])),
                   key=lambda file: file.name if path.is_dir() else str(file))
    if not files:
        raise CorpusFormatError(f"{path}: no .txt files "
                                f"{'in this folder' if path.is_dir() else 'match'}")
    return files


def documents_of_blocks(blocks: Iterable[DocumentBlock]) -> Iterator[str]:
    """Each document of the blocks as a string: UTF-8, or Latin-1 where a document is not
    valid UTF-8 (saberjax.text's rules read strings)."""
    for block in blocks:
        data = block.data.tobytes()
        offsets = block.offsets.tolist()
        for start, end in zip(offsets[:-1], offsets[1:]):
            document = data[start:end]
            try:
                yield document.decode("utf-8")
            except UnicodeDecodeError:
                yield document.decode("latin-1")


def source_name(path: Path) -> str:
    """The corpus name of a source: a folder's name, a glob's folder's name, or a file's name
    without its extensions (.txt, .gz)."""
    if is_collection(path):
        return path.name if path.is_dir() else path.parent.name
    return Path(_base_name(path)).stem


def _base_name(path: Path) -> str:
    """The file's name without a compression ending (.gz, .zst)."""
    name = path.name
    for ending in COMPRESSIONS:
        name = name.removesuffix(ending)
    return name


def _nonempty(blocks: Iterable[DocumentBlock], source: str) -> Iterator[DocumentBlock]:
    """The blocks, then CorpusFormatError when there were no documents in them."""
    documents = 0
    for block in blocks:
        documents += block.num_docs
        yield block
    if not documents:
        raise CorpusFormatError(f"{source}: no documents (the input is empty)")


def open_stream(path: Path):
    """A binary stream of the file's content, decompressed when it is gzip or zstd data."""
    import pyarrow as pa

    try:
        with open(path, "rb") as file:
            head = file.read(4)
        compression = next((name for name, magic in COMPRESSIONS.values()
                            if head.startswith(magic)), None)
        return pa.input_stream(str(path), compression=compression)
    except FileNotFoundError:
        raise CorpusFormatError(f"{path}: file not found") from None
    except OSError as error:
        raise CorpusFormatError(f"{path}: cannot read: {error.strerror or error}") from error


def read_block(stream, path: Path, size: int | None) -> np.ndarray:
    """Up to `size` bytes of the stream (None: all the rest) as uint8, without a copy."""
    try:
        return np.frombuffer(stream.read_buffer(size), np.uint8)
    except (OSError, ValueError) as error:  # pyarrow.ArrowInvalid is a ValueError
        raise CorpusFormatError(f"{path}: cannot read: {error}") from error


def _line_documents(path: Path, block_bytes: int) -> Iterator[DocumentBlock]:
    """One document a line, each with its line feed (whitespace to the tokeniser, and no
    copy): the file read `block_bytes` at a time and cut after its last line feed (a last
    line without one is a document too; an empty file holds none)."""
    with open_stream(path) as stream:
        carried = np.zeros(0, np.uint8)  # the part of a line the previous block ended in
        while (read := read_block(stream, path, block_bytes)).size:
            check_is_text(path, read)
            data = np.concatenate([carried, read]) if carried.size else read
            ends = np.flatnonzero(data == _LINE_FEED) + 1
            if ends.size:
                yield DocumentBlock(data[:ends[-1]], np.concatenate([[0], ends]))
            carried = data[ends[-1]:] if ends.size else data
        if carried.size:
            yield DocumentBlock(carried, np.array([0, carried.size], np.int64))


def _file_documents(files: list[Path], block_bytes: int) -> Iterator[DocumentBlock]:
    """One document a file, about block_bytes of files a block."""
    pieces, size = [], 0
    for file in files:
        with open_stream(file) as stream:
            content = read_block(stream, file, None)
        check_is_text(file, content)
        pieces.append(content)
        size += content.size
        if size >= block_bytes:
            yield _block_of_documents(pieces)
            pieces, size = [], 0
    if pieces:
        yield _block_of_documents(pieces)


def _block_of_documents(documents: list[np.ndarray]) -> DocumentBlock:
    """The block of these documents' bytes."""
    offsets = np.zeros(len(documents) + 1, np.int64)
    np.cumsum([document.size for document in documents], out=offsets[1:])
    return DocumentBlock(np.concatenate(documents) if documents else np.zeros(0, np.uint8),
                         offsets)


# Control characters that text does not contain: all but tab, line feed, vertical tab, form
# feed and carriage return, plus DEL.
_BINARY_BYTES = np.array(sorted({*range(32), 127} - set(b"\t\n\v\f\r")), np.uint8)
MAX_CONTROL_FRACTION = 0.01  # of a file's (or a block's) bytes; binary data has ~12%


def check_is_text(path: Path, data: np.ndarray) -> None:
    """Refuse binary data (a NUL byte, or more than MAX_CONTROL_FRACTION control
    characters), which would otherwise be read as nonsense words."""
    control = np.isin(data, _BINARY_BYTES)
    count = int(control.sum())
    if count and (not data.all() or count > MAX_CONTROL_FRACTION * data.size):
        first = int(np.argmax(control))
        raise CorpusFormatError(
            f"{path}: binary data, not text (control byte {int(data[first]):#04x} at offset "
            f"{first}, {count} of {data.size} bytes); plain text input is UTF-8 or Latin-1")
