"""Raw documents from any text source, as blocks of UTF-8 bytes: the input side of plain text.

`document_blocks(source)` yields DocumentBlocks in document order, each holding the bytes of
consecutive documents concatenated with their offsets (and, where an id field is named, their
ids), about `block_bytes` at a time, so that a tokeniser reads text of any size in native code
without a Python object per document where the format allows.  Files (FORMATS, detected by
extension when format is "auto"):

- "text": a file of one document a line (each document keeps its line feed, and the CR of a
  CRLF, as whitespace), or a folder or glob of ``.txt`` files, one document each;
- "jsonl": JSON Lines, one object a line, the document in its `text_field` (pyarrow.json);
- "csv", "tsv": a header line naming the columns, the document in `text_column`
  (pyarrow.csv; quoted values may hold delimiters and line breaks);
- "parquet": the document in `text_column` (pyarrow.parquet, a row group batch at a time);
- any of these gzip- or zstd-compressed (recognised by their magic numbers, named .gz/.zst),
  and any of them as a folder or glob of shards (``data/*.parquet``), read in sorted order.

From Python: a pyarrow Table, RecordBatch, Array or ChunkedArray, a pandas DataFrame or
Series, a Hugging Face ``datasets.Dataset`` (duck-typed: read through its Arrow format), a
numpy array of strings, or any iterable of strings (batched, never gathered into one list).
Text fields and columns are read from Arrow's buffers without a copy; `text_field` and
`text_column` (likewise `id_field` and `id_column`) are two names for the same option.

The blocks' types and the plain text readers are saberjax.corpus.text_blocks', the readers
of records and columns saberjax.corpus.columnar_sources'.  Bytes are passed on as they are,
undecoded: the tokeniser reports text that is not UTF-8.
Bad input is a CorpusFormatError of one line naming the file (and line, for JSON Lines): an
unreadable file, binary data in a text file, a missing field or column (naming those there
are), a malformed JSON line, no documents at all.
"""

from __future__ import annotations

from __future__ import annotations

import functools
import glob
import os
import queue
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from saberjax.corpus.columnar_sources import (
    csv_blocks,
    jsonl_blocks,
    object_blocks,
    parquet_blocks,
    tsv_blocks,
)
from saberjax.corpus.text_blocks import (
    COMPRESSIONS,
    DEFAULT_BLOCK_BYTES,
    DocumentBlock,
    Fields,
    LineRange,
    compression_of,
    file_blocks,
    line_blocks,
    line_ranges,
    reading_fields,
)
from saberjax.errors import CorpusFormatError

# shards (files of a folder or glob) read at once ahead of the one being consumed, and the
# blocks each may hold meanwhile: every 8 cores keep one more shard's reader busy
SHARDS_AHEAD = max(1, (os.cpu_count() or 1) // 8)
SHARD_BLOCKS_AHEAD = 2
# file name extensions (before any compression ending) of each format's files
EXTENSIONS = {"text": (".txt",), "jsonl": (".jsonl", ".ndjson", ".json"), "csv": (".csv",),
              "tsv": (".tsv", ".tab"), "parquet": (".parquet", ".pq")}
FORMATS = tuple(EXTENSIONS)
FIELD_FORMATS = FORMATS[1:]  # the formats of named fields or columns
DETECTION_RULE = ("text (a .txt file of one document a line, or a folder or glob of .txt "
                  "files), jsonl (.jsonl/.ndjson/.json), csv, tsv and parquet (a file, or a folder "
                  "or glob of them, optionally .gz or .zst)")


def document_blocks(source, *, format: str = "auto", block_bytes: int | None = None,
                    text_field: str | None = None, id_field: str | None = None,
                    text_column: str | None = None, id_column: str | None = None,
                    parsed: bool = True, share: list[FileShare] | None = None
                    ) -> Iterator[DocumentBlock]:
    """The documents of `source` (a path or glob, or a Python object: see the module) in
    order, in blocks of about `block_bytes` (default DEFAULT_BLOCK_BYTES; from half to twice
    as much; a document larger than that is a block of its own).  `format` ("auto" or one of
    FORMATS) applies to paths.  A text file of one document a line gives blocks of lines
    (offsets None: DocumentBlock), of block_bytes; JSON Lines, when not `parsed`, blocks of
    lines of records left for the tokenising threads to parse (DocumentBlock.parse).  When
    not `parsed`, an uncompressed file of lines (text or JSON Lines) gives LineRanges
    instead, which the tokenising workers read themselves.  CorpusFormatError when the
    source cannot be read, lacks the fields named or holds no document; TypeError for an
    object that is not a source of documents.  share: only these of a path's files
    (source_files) or of their lines, one process's share of them (saberjax.shared_text),
    which may hold no document."""
    block_bytes = DEFAULT_BLOCK_BYTES if block_bytes is None else block_bytes
    if block_bytes < 1:
        raise ValueError(f"block_bytes must be positive, got {block_bytes}")
    fields = reading_fields(text_field, id_field, text_column, id_column)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        blocks, name = _path_blocks(path, format, fields, block_bytes, parsed, share), str(path)
    else:
        blocks, name = object_blocks(source, fields, block_bytes), type(source).__name__
    blocks = _rechunked(blocks, block_bytes)
    yield from blocks if share is not None else _nonempty(blocks, name)


class FileShare(NamedTuple):
    """A file of a source, or, of an uncompressed file of lines (plain text, JSON Lines) or
    Parquet file, the lines (text_blocks.line_span) or row groups
    (columnar_sources.row_group_starts) beginning in its bytes [first, last) (`span`)."""

    path: Path
    span: tuple[int, int] | None = None


def _path_blocks(path: Path, format: str, fields: Fields, block_bytes: int, parsed: bool,
                 share: list[FileShare] | None = None) -> Iterator[DocumentBlock]:
    chosen = detect_text_format(path) if format == "auto" else format
    if chosen not in FORMATS:
        raise ValueError(f"{chosen!r} is not a text format; expected one of {FORMATS}")
    if chosen == "text" and (fields.id is not None or fields != Fields()):
        raise ValueError(f"{path}: plain text has no fields; text_field and id_field apply to "
                         f"{', '.join(FIELD_FORMATS)}")
    if share is None:
        share = [FileShare(file) for file in source_files(path, chosen)]
    if chosen == "text":
        if is_collection(path):
            yield from file_blocks([file.path for file in share], block_bytes)
        else:
            for file in share:
                yield from (line_ranges(file.path, block_bytes, span=file.span)
                            if not parsed and compression_of(file.path) is None
                            else line_blocks(file.path, block_bytes, file.span))
        return
    read = dict(jsonl=functools.partial(jsonl_blocks, parsed=parsed), csv=csv_blocks,
                tsv=tsv_blocks, parquet=parquet_blocks)[chosen]
    yield from _read_ahead([functools.partial(read, file.path, fields, block_bytes,
                                              **({} if file.span is None else
                                                 dict(span=file.span)))
                            for file in share], SHARDS_AHEAD)


def _read_ahead(readers: list, ahead: int) -> Iterator[DocumentBlock]:
    """The blocks of each reader (a function returning an iterator of blocks) in turn, while
    up to `ahead` readers after the current one read on threads of their own, each holding
    at most SHARD_BLOCKS_AHEAD blocks of bytes (LineRanges, which hold none, as many as it
    gives, so that the consumer of a file's ranges never waits for its reader's thread to
    be scheduled): shards read at once, documents kept in order.  A reader's error is raised
    when its turn comes."""
    if ahead < 1 or len(readers) < 2:
        for reader in readers:
            yield from reader()
        return
    stop = threading.Event()
    queues = [queue.SimpleQueue() for _ in readers]
    room = [threading.Semaphore(SHARD_BLOCKS_AHEAD) for _ in readers]  # for blocks of bytes

    def put(index: int, item) -> bool:
        """Hand item to the consumer unless it has stopped; whether it was handed."""
        if isinstance(item, DocumentBlock):
            while not room[index].acquire(timeout=0.1):
                if stop.is_set():
                    return False
        if stop.is_set():
            return False
        queues[index].put(item)
        return True

    def fill(index: int) -> None:
        try:
            for block in readers[index]():
                if not put(index, block):
                    return
        except BaseException as error:  # noqa: BLE001 (raised by the consumer in its turn)
            put(index, error)
            return
        put(index, _END_OF_SHARD)

    def start(index: int) -> None:
        if index < len(readers):
            threading.Thread(target=fill, args=(index,), name=f"saberjax-read-{index}",
                             daemon=True).start()

    try:
        for index in range(ahead + 1):
            start(index)
        for index in range(len(readers)):
            while (item := queues[index].get()) is not _END_OF_SHARD:
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, DocumentBlock):
                    room[index].release()
                yield item
            queues[index] = None
            start(index + ahead + 1)
    finally:
        stop.set()


_END_OF_SHARD = object()


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
        raise CorpusFormatError(f"{path}: no {'/'.join(EXTENSIONS[format])} files "
                                f"{'in this folder' if path.is_dir() else 'match'}")
    return files


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
    documents = False
    for block in blocks:
        documents = documents or (block.size > 0 if isinstance(block, LineRange)
                                  or block.offsets is None else block.num_docs > 0)
        yield block
    if not documents:
        raise CorpusFormatError(f"{source}: no documents (the input is empty)")


def _rechunked(blocks: Iterable[DocumentBlock], block_bytes: int) -> Iterator[DocumentBlock]:
    """The documents of `blocks` in blocks of block_bytes / 2 to 2 * block_bytes (one larger
    document alone): larger blocks are cut at document boundaries (without a copy), smaller
    ones joined; blocks of lines pass as they are."""
    pending, size = [], 0
    for block in blocks:
        if isinstance(block, LineRange) or block.offsets is None:
            yield block
            continue
        for piece in _cut(block, block_bytes):
            pending.append(piece)
            size += piece.data.size
            if 2 * size >= block_bytes:
                yield _joined(pending)
                pending, size = [], 0
    if pending:
        yield _joined(pending)


def _cut(block: DocumentBlock, block_bytes: int) -> Iterator[DocumentBlock]:
    """The block, or its pieces of about block_bytes when it is over twice as large."""
    if block.data.size <= 2 * block_bytes:
        yield block
        return
    cuts = np.unique(np.searchsorted(block.offsets, np.arange(block_bytes, block.data.size,
                                                              block_bytes)))
    bounds = [0, *cuts[(cuts > 0) & (cuts < block.num_docs)].tolist(), block.num_docs]
    for first, last in zip(bounds[:-1], bounds[1:]):
        offsets = block.offsets[first:last + 1]
        yield DocumentBlock(block.data[offsets[0]:offsets[-1]], offsets - offsets[0],
                            None if block.ids is None else block.ids[first:last])


def _joined(blocks: list[DocumentBlock]) -> DocumentBlock:
    """One block of consecutive blocks' documents (the block itself when there is one)."""
    if len(blocks) == 1:
        return blocks[0]
    starts = np.cumsum([0] + [block.data.size for block in blocks[:-1]])
    offsets = np.concatenate([blocks[0].offsets[:1]] + [
        block.offsets[1:] + start for block, start in zip(blocks, starts)])
    ids = (None if blocks[0].ids is None
           else np.concatenate([block.ids for block in blocks]))
    return DocumentBlock(np.concatenate([block.data for block in blocks]), offsets, ids)
