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

Bytes are passed on as they are, undecoded: the tokeniser reports text that is not UTF-8.
Bad input is a CorpusFormatError of one line naming the file (and line, for JSON Lines): an
unreadable file, binary data in a text file, a missing field or column (naming those there
are), a malformed JSON line, no documents at all.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import queue
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from saberjax.errors import CorpusFormatError

DEFAULT_BLOCK_BYTES = 1 << 25  # bytes of documents per block: large enough to keep every core busy
MIN_PARSE_BYTES = 1 << 20  # fewest bytes pyarrow's JSON and CSV readers parse at a time
DATASET_BATCH_ROWS = 10_000  # rows of a datasets.Dataset read at a time
# shards (files of a folder or glob) read at once ahead of the one being consumed, and the
# blocks each may hold meanwhile: every 8 cores keep one more shard's reader busy
SHARDS_AHEAD = max(1, (os.cpu_count() or 1) // 8)
SHARD_BLOCKS_AHEAD = 2
DEFAULT_TEXT_FIELD = "text"
# file name extensions (before any compression ending) of each format's files
EXTENSIONS = {"text": (".txt",), "jsonl": (".jsonl", ".ndjson", ".json"), "csv": (".csv",),
              "tsv": (".tsv", ".tab"), "parquet": (".parquet", ".pq")}
FORMATS = tuple(EXTENSIONS)
FIELD_FORMATS = FORMATS[1:]  # the formats of named fields or columns
DETECTION_RULE = ("text (a .txt file of one document a line, or a folder or glob of .txt "
                  "files), jsonl (.jsonl/.ndjson/.json), csv, tsv and parquet (a file, or a folder "
                  "or glob of them, optionally .gz or .zst)")
# file name endings of compressed files, and the magic numbers their contents start with
COMPRESSIONS = {".gz": ("gzip", b"\x1f\x8b"), ".zst": ("zstd", b"\x28\xb5\x2f\xfd")}
_LINE_FEED = 10


class DocumentBlock(NamedTuple):
    """Consecutive documents: document i is ``data[offsets[i]:offsets[i + 1]]``, UTF-8 bytes
    (as the source holds them: invalid UTF-8 is left for the tokeniser to report).

    data: uint8 [bytes]; offsets: int64 [n + 1], non-decreasing, offsets[0] == 0 and
    offsets[-1] == data.size; ids: the documents' ids, a 1-D object array of str [n], when
    an id field is named, else None.
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


class Fields(NamedTuple):
    """The names of the field or column holding the documents and of the one holding their
    ids (None: no ids)."""

    text: str = DEFAULT_TEXT_FIELD
    id: str | None = None


def reading_fields(text_field: str | None = None, id_field: str | None = None,
                   text_column: str | None = None, id_column: str | None = None) -> Fields:
    """The Fields of document_blocks's options; ValueError when the two names of one option
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


def document_blocks(source, *, format: str = "auto", block_bytes: int = DEFAULT_BLOCK_BYTES,
                    text_field: str | None = None, id_field: str | None = None,
                    text_column: str | None = None, id_column: str | None = None
                    ) -> Iterator[DocumentBlock]:
    """The documents of `source` (a path or glob, or a Python object: see the module) in
    order, in blocks of about `block_bytes` (from half to twice as much; a document larger
    than that is a block of its own).  `format` ("auto" or one of FORMATS) applies to paths.
    CorpusFormatError when the source cannot be read, lacks the fields named or holds no
    document; TypeError for an object that is not a source of documents."""
    if block_bytes < 1:
        raise ValueError(f"block_bytes must be positive, got {block_bytes}")
    fields = reading_fields(text_field, id_field, text_column, id_column)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        blocks, name = _path_blocks(path, format, fields, block_bytes), str(path)
    else:
        blocks, name = _object_blocks(source, fields, block_bytes), type(source).__name__
    yield from _nonempty(_rechunked(blocks, block_bytes), name)


def _path_blocks(path: Path, format: str, fields: Fields, block_bytes: int
                 ) -> Iterator[DocumentBlock]:
    chosen = detect_text_format(path) if format == "auto" else format
    if chosen not in FORMATS:
        raise ValueError(f"{chosen!r} is not a text format; expected one of {FORMATS}")
    if chosen == "text" and (fields.id is not None or fields.text != DEFAULT_TEXT_FIELD):
        raise ValueError(f"{path}: plain text has no fields; text_field and id_field apply to "
                         f"{', '.join(FIELD_FORMATS)}")
    files = source_files(path, chosen)
    if chosen == "text":
        if is_collection(path):
            yield from _file_documents(files, block_bytes)
        else:
            yield from _line_documents(files[0], block_bytes)
        return
    read = dict(jsonl=_jsonl_blocks, csv=_csv_blocks, tsv=_tsv_blocks,
                parquet=_parquet_blocks)[chosen]
    yield from _read_ahead([functools.partial(read, file, fields, block_bytes)
                            for file in files], SHARDS_AHEAD)


def _read_ahead(readers: list, ahead: int) -> Iterator[DocumentBlock]:
    """The blocks of each reader (a function returning an iterator of blocks) in turn, while
    up to `ahead` readers after the current one read on threads of their own, each holding
    at most SHARD_BLOCKS_AHEAD blocks: shards read at once, documents kept in order.  A
    reader's error is raised when its turn comes."""
    if ahead < 1 or len(readers) < 2:
        for reader in readers:
            yield from reader()
        return
    stop = threading.Event()
    queues = [queue.Queue(SHARD_BLOCKS_AHEAD) for _ in readers]

    def put(index: int, item) -> bool:
        """Hand item to the consumer unless it has stopped; whether it was handed."""
        while not stop.is_set():
            try:
                queues[index].put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

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
    """A binary stream (pyarrow) of the file's content, decompressed when it is gzip or zstd
    data."""
    import pyarrow as pa

    try:
        return pa.input_stream(str(path), compression=compression_of(path))
    except FileNotFoundError:
        raise CorpusFormatError(f"{path}: file not found") from None
    except OSError as error:
        raise CorpusFormatError(f"{path}: cannot read: {error.strerror or error}") from error


def compression_of(path: Path) -> str | None:
    """"gzip" or "zstd" when the file's content starts with their magic number, else None."""
    try:
        with open(path, "rb") as file:
            head = file.read(4)
    except FileNotFoundError:
        raise CorpusFormatError(f"{path}: file not found") from None
    except OSError as error:
        raise CorpusFormatError(f"{path}: cannot read: {error.strerror or error}") from error
    return next((name for name, magic in COMPRESSIONS.values() if head.startswith(magic)),
                None)


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
    for lines, ends in _whole_lines(path, block_bytes):
        check_is_text(path, lines)
        yield DocumentBlock(lines, np.concatenate([np.zeros(1, np.int64), ends]))


def _whole_lines(path: Path, size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The file's content in pieces of about `size` bytes cut after a line feed, each with
    the ends of its lines (int64, after each line feed; a last line without one ends the
    file)."""
    with open_stream(path) as stream:
        carried = np.zeros(0, np.uint8)  # the part of a line the previous piece ended in
        while (read := read_block(stream, path, size)).size:
            data = np.concatenate([carried, read]) if carried.size else read
            ends = np.flatnonzero(data == _LINE_FEED) + 1
            if ends.size:
                yield data[:ends[-1]], ends
            carried = data[ends[-1]:] if ends.size else data
        if carried.size:
            yield carried, np.array([carried.size], np.int64)


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
    # bytes below 32 but tab, line feed, vertical tab, form feed and carriage return (9 to
    # 13), and DEL: a few whole-array passes, where np.isin makes one per byte value
    whitespace = np.count_nonzero((data - np.uint8(9)) < 5)
    count = np.count_nonzero(data < 32) - whitespace + np.count_nonzero(data == 127)
    if count and (not data.all() or count > MAX_CONTROL_FRACTION * data.size):
        first = int(np.argmax(np.isin(data, _BINARY_BYTES)))
        raise CorpusFormatError(
            f"{path}: binary data, not text (control byte {int(data[first]):#04x} at offset "
            f"{first}, {count} of {data.size} bytes); plain text input is UTF-8 or Latin-1")


def _jsonl_blocks(path: Path, fields: Fields, block_bytes: int) -> Iterator[DocumentBlock]:
    """JSON Lines: the text field of each object (a record without it is an empty document;
    the first record must have it, so that a misnamed field is caught at once)."""
    import pyarrow as pa
    import pyarrow.json as pa_json

    first = _first_json_record(path)
    if first is None:
        return
    for name, option in ((fields.text, "text_field"), (fields.id, "id_field")):
        if name is not None and name not in first:
            raise CorpusFormatError(
                f"{path}: no field {name!r} in its first record (its fields: "
                f"{', '.join(map(repr, first)) or 'none'}); choose one with --{option}")
    schema = [(fields.text, pa.large_string())]
    if fields.id is not None:
        schema.append((fields.id, _arrow_id_type(first[fields.id])))
    options = pa_json.ParseOptions(explicit_schema=pa.schema(schema),
                                   unexpected_field_behavior="ignore")
    try:
        for lines, ends in _whole_lines(path, max(block_bytes, MIN_PARSE_BYTES)):
            # blocks (what pyarrow's threads parse) of a share of the piece, whole lines
            # (records never hold a line feed), so that it is parsed on all cores at once
            longest = int(np.diff(ends, prepend=0).max())
            share = lines.size // (4 * (os.cpu_count() or 1))
            batch = pa_json.read_json(
                pa.BufferReader(pa.py_buffer(lines)), parse_options=options,
                read_options=pa_json.ReadOptions(block_size=max(longest + 1, share, 1 << 16)))
            yield _arrow_block(batch.column(fields.text), _ids_of(batch, fields, path), path)
    except pa.ArrowException as error:
        raise CorpusFormatError(_json_error(path, fields, error)) from None


def _arrow_id_type(value):
    """The Arrow type JSON ids like `value` (the first record's) are read as."""
    import pyarrow as pa

    return {int: pa.int64(), float: pa.float64(), bool: pa.bool_()}.get(type(value),
                                                                         pa.string())


_JSON_TYPE_NAMES = {str: "a string", int: "a number", float: "a number", bool: "true or false",
                    list: "an array", dict: "an object", type(None): "null"}


def _json_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, line) of a JSON Lines file, for finding what its reader refused."""
    with open_stream(path) as stream:
        number, carried = 0, b""
        while chunk := read_block(stream, path, MIN_PARSE_BYTES).tobytes():
            lines = (carried + chunk).split(b"\n")
            carried = lines.pop()
            for line in lines:
                number += 1
                yield number, line
        if carried:
            yield number + 1, carried


def _first_json_record(path: Path) -> dict | None:
    """The first record of a JSON Lines file (None when it has none)."""
    for number, line in _json_lines(path):
        if line.strip():
            return _json_record(path, number, line)
    return None


def _json_record(path: Path, number: int, line: bytes) -> dict:
    try:
        record = json.loads(line)
    except ValueError as error:
        reason = error.msg if isinstance(error, json.JSONDecodeError) else str(error)
        raise CorpusFormatError(f"{path}, line {number}: not valid JSON ({reason})") from None
    if not isinstance(record, dict):
        raise CorpusFormatError(f"{path}, line {number}: {_JSON_TYPE_NAMES.get(type(record))}, "
                                f"not a JSON object")
    return record


def _json_error(path: Path, fields: Fields, error: Exception) -> str:
    """The one-line message of the first line of a JSON Lines file that pyarrow's reader
    refused (`error`): malformed JSON, not an object, a text field that is not a string, or
    an id of another type than the first record's."""
    id_type = None
    for number, line in _json_lines(path):
        if not line.strip():
            continue
        try:
            record = _json_record(path, number, line)
        except CorpusFormatError as located:
            return str(located)
        text = record.get(fields.text)
        if not isinstance(text, (str, type(None))):
            return (f"{path}, line {number}: field {fields.text!r} is "
                    f"{_JSON_TYPE_NAMES.get(type(text), type(text).__name__)}, not a string")
        if fields.id is not None and record.get(fields.id) is not None:
            kind = _JSON_TYPE_NAMES.get(type(record[fields.id]))
            if id_type is not None and kind != id_type[0]:
                return (f"{path}, line {number}: field {fields.id!r} is {kind}, but {id_type[0]}"
                        f" on line {id_type[1]}; ids must be of one type")
            id_type = id_type or (kind, number)
    return f"{path}: not valid JSON Lines ({error})"


def _csv_blocks(path: Path, fields: Fields, block_bytes: int, delimiter: str = ","
                ) -> Iterator[DocumentBlock]:
    """CSV with a header line: the text column of each row (pyarrow.csv; the text is read as
    bytes, not checked to be UTF-8 here)."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    columns = [name for name in fields if name is not None]
    types = {fields.text: pa.large_binary()}
    if fields.id is not None:
        types[fields.id] = pa.string()
    parse = pa_csv.ParseOptions(delimiter=delimiter, newlines_in_values=True)
    with open_stream(path) as stream:
        try:
            reader = pa_csv.open_csv(
                stream, parse_options=parse,
                read_options=pa_csv.ReadOptions(block_size=max(block_bytes, MIN_PARSE_BYTES)),
                convert_options=pa_csv.ConvertOptions(include_columns=columns,
                                                      column_types=types))
        except pa.ArrowKeyError:
            raise CorpusFormatError(_missing_column(path, columns, _csv_columns(path, parse))
                                    ) from None
        except pa.ArrowInvalid as error:
            if "Empty CSV file" in str(error):
                return
            raise CorpusFormatError(f"{path}: not readable as {_DELIMITED[delimiter]} ({error})"
                                    ) from None
        try:
            for batch in reader:
                yield _arrow_block(batch.column(fields.text), _ids_of(batch, fields, path), path)
        except pa.ArrowException as error:
            raise CorpusFormatError(f"{path}: not readable as {_DELIMITED[delimiter]} ({error})"
                                    ) from None


_DELIMITED = {",": "CSV", "\t": "TSV"}


def _tsv_blocks(path: Path, fields: Fields, block_bytes: int) -> Iterator[DocumentBlock]:
    """TSV: CSV with tabs between values."""
    return _csv_blocks(path, fields, block_bytes, delimiter="\t")


def _csv_columns(path: Path, parse) -> list[str]:
    """The column names of a CSV file's header line."""
    import pyarrow.csv as pa_csv

    with open_stream(path) as stream:
        return pa_csv.open_csv(stream, parse_options=parse).schema.names


def _missing_column(source, wanted: list[str], present: list[str]) -> str:
    """The message of a column of `wanted` that `present` lacks."""
    missing = next(name for name in wanted if name not in present)
    shown = ", ".join(map(repr, present[:20])) + (", ..." if len(present) > 20 else "")
    return f"{source}: no column {missing!r} (its columns: {shown or 'none'})"


def _parquet_blocks(path: Path, fields: Fields, block_bytes: int) -> Iterator[DocumentBlock]:
    """Parquet: the text column, in batches of about block_bytes of rows (by the file's
    recorded sizes).  A gzip- or zstd-compressed file is decompressed into memory first
    (Parquet compresses inside; reading needs random access)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = [name for name in fields if name is not None]
    try:
        if compression_of(path) is None:
            parquet = pq.ParquetFile(str(path))
        else:
            with open_stream(path) as stream:
                parquet = pq.ParquetFile(pa.BufferReader(stream.read_buffer()))
    except (pa.ArrowException, OSError) as error:
        raise CorpusFormatError(f"{path}: not a readable Parquet file ({error})") from None
    names = parquet.schema_arrow.names
    if any(name not in names for name in columns):
        raise CorpusFormatError(_missing_column(path, columns, names))
    metadata = parquet.metadata
    row_bytes = sum(metadata.row_group(group).total_byte_size
                    for group in range(metadata.num_row_groups)) / max(metadata.num_rows, 1)
    try:
        for batch in parquet.iter_batches(batch_size=max(1, int(block_bytes / max(row_bytes, 1))),
                                          columns=columns):
            yield _arrow_block(batch.column(fields.text), _ids_of(batch, fields, path), path)
    except (pa.ArrowException, OSError) as error:
        raise CorpusFormatError(f"{path}: cannot read: {error}") from None


def _ids_of(table, fields: Fields, source) -> np.ndarray | None:
    """The id column of a table or record batch as strings (None when no id field is named):
    CorpusFormatError for a missing id or one holding a line break."""
    if fields.id is None:
        return None
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = table.column(fields.id)
    if ids.null_count:
        raise CorpusFormatError(f"{source}: {ids.null_count} of {len(ids)} records have no "
                                f"{fields.id!r} (every document needs an id)")
    try:
        ids = ids.cast(pa.large_string())
    except pa.ArrowException as error:
        raise CorpusFormatError(f"{source}: the ids of {fields.id!r} are not strings or "
                                f"numbers ({error})") from None
    if pc.any(pc.match_substring(ids, "\n")).as_py():
        raise CorpusFormatError(f"{source}: an id of {fields.id!r} holds a line break")
    return np.asarray(ids.to_numpy(zero_copy_only=False), dtype=object)


def _arrow_block(texts, ids: np.ndarray | None = None, source="documents") -> DocumentBlock:
    """The block of an Arrow array (or chunked array) of strings or bytes, null for empty,
    read from its value and offset buffers without a copy (a chunked array's chunks are
    concatenated)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks != 1 else texts.chunk(0)
    kind = texts.type
    if pa.types.is_dictionary(kind) or kind in (pa.string_view(), pa.binary_view()):
        texts, kind = texts.cast(pa.large_string()), pa.large_string()
    if kind not in (pa.string(), pa.large_string(), pa.binary(), pa.large_binary()):
        raise CorpusFormatError(f"{source}: the documents are of type {kind}, not text")
    if texts.null_count:
        texts = pc.fill_null(texts, pa.scalar(b"" if "binary" in str(kind) else "", kind))
    if len(texts) == 0:
        return DocumentBlock(np.zeros(0, np.uint8), np.zeros(1, np.int64), ids)
    _, offset_buffer, data_buffer = texts.buffers()
    wide = kind in (pa.large_string(), pa.large_binary())
    offsets = np.frombuffer(offset_buffer, np.int64 if wide else np.int32)[
        texts.offset:texts.offset + len(texts) + 1]
    start, end = int(offsets[0]), int(offsets[-1])
    data = (np.frombuffer(data_buffer, np.uint8)[start:end] if data_buffer is not None
            else np.zeros(0, np.uint8))
    return DocumentBlock(data, offsets.astype(np.int64) - start, ids)


def _object_blocks(source, fields: Fields, block_bytes: int) -> Iterator[DocumentBlock]:
    """The documents of a Python object (see the module)."""
    import pyarrow as pa

    if isinstance(source, (bytes, bytearray)):
        raise TypeError("documents must be a path or an iterable of strings, got bytes")
    name = type(source).__name__
    if isinstance(source, (pa.Table, pa.RecordBatch)):
        yield _table_block(source, fields, name)
    elif _is_dataset(source):
        columns = source.column_names
        if isinstance(columns, dict):
            raise TypeError(f"a {name} holds several splits ({', '.join(columns)}); pass one")
        if any(column not in columns for column in fields if column is not None):
            raise CorpusFormatError(_missing_column(name, [c for c in fields if c], columns))
        for table in source.with_format("arrow").iter(batch_size=DATASET_BATCH_ROWS):
            yield _table_block(table, fields, name)
    elif _is_frame(source):
        columns = [str(column) for column in source.columns]
        wanted = [column for column in fields if column is not None]
        if any(column not in columns for column in wanted):
            raise CorpusFormatError(_missing_column(name, wanted, columns))
        yield _table_block(pa.table({column: _arrow_array(source[column]) for column in wanted}),
                           fields, name)
    else:
        if fields.id is not None:
            raise ValueError(f"id_field applies to tables (pyarrow, pandas, datasets); a "
                             f"{name} has no fields")
        if isinstance(source, (pa.Array, pa.ChunkedArray, np.ndarray)) or _is_pandas(source):
            yield _arrow_block(_arrow_array(source), None, name)
        else:
            yield from _string_blocks(source, block_bytes)


def _table_block(table, fields: Fields, source: str) -> DocumentBlock:
    names = table.column_names if hasattr(table, "column_names") else table.schema.names
    wanted = [column for column in fields if column is not None]
    if any(column not in names for column in wanted):
        raise CorpusFormatError(_missing_column(source, wanted, names))
    return _arrow_block(table.column(fields.text), _ids_of(table, fields, source), source)


def _arrow_array(column):
    """An Arrow array of a column (pyarrow, pandas, polars, numpy): TypeError when it does not
    hold strings."""
    import pyarrow as pa

    if isinstance(column, (pa.Array, pa.ChunkedArray)):
        return column
    try:
        return pa.array(column, from_pandas=True)
    except (pa.ArrowException, TypeError) as error:
        raise TypeError(f"documents must be strings ({error})") from None


def is_document_column(documents) -> bool:
    """Whether `documents` is a column of raw documents that document_blocks reads (as
    opposed to counts): a list or tuple holding strings, a 1-D numpy array of strings or
    objects, a pyarrow array of strings, a pandas or polars Series of strings, or a
    datasets.Dataset."""
    if isinstance(documents, (list, tuple)):
        return any(isinstance(document, str) for document in documents)
    if isinstance(documents, np.ndarray):
        return documents.ndim == 1 and documents.dtype.kind in "UO"
    if _is_dataset(documents):
        return True
    if _is_pandas(documents):
        return not _is_frame(documents) and str(documents.dtype).lower().startswith(
            ("object", "str", "utf8", "large_string"))
    pyarrow = sys.modules.get("pyarrow")  # an Arrow array exists only where it is imported
    return (pyarrow is not None and isinstance(documents, (pyarrow.Array, pyarrow.ChunkedArray))
            and str(documents.type) in ("string", "large_string", "string_view"))


def _is_dataset(source) -> bool:
    """Whether source looks like a Hugging Face datasets.Dataset (Arrow-formatted batches)."""
    return hasattr(source, "with_format") and hasattr(source, "column_names")


def _is_pandas(source) -> bool:
    return type(source).__module__.partition(".")[0] in ("pandas", "polars")


def _is_frame(source) -> bool:
    """Whether source is a data frame (pandas, polars): columns selected by name."""
    return _is_pandas(source) and hasattr(source, "columns")


def _string_blocks(documents: Iterable, block_bytes: int) -> Iterator[DocumentBlock]:
    """An iterable of strings in blocks of about block_bytes characters (each block converted
    to Arrow in native code): TypeError for anything but a string."""
    import pyarrow as pa

    batch, size = [], 0
    for document in documents:
        if not isinstance(document, str):
            raise TypeError(f"documents must be strings, got {type(document).__name__}")
        batch.append(document)
        size += len(document)
        if size >= block_bytes:
            yield _arrow_block(pa.array(batch, pa.large_string()))
            batch, size = [], 0
    if batch:
        yield _arrow_block(pa.array(batch, pa.large_string()))


def _rechunked(blocks: Iterable[DocumentBlock], block_bytes: int) -> Iterator[DocumentBlock]:
    """The documents of `blocks` in blocks of block_bytes / 2 to 2 * block_bytes (one larger
    document alone): larger blocks are cut at document boundaries (without a copy), smaller
    ones joined."""
    pending, size = [], 0
    for block in blocks:
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
