"""Raw documents of records and columns, as DocumentBlocks (saberjax.corpus.text_blocks):
JSON Lines (pyarrow.json), CSV and TSV (pyarrow.csv), Parquet (pyarrow.parquet) files, and
documents given in Python (pyarrow tables and arrays, pandas and polars columns, Hugging Face
datasets, numpy arrays, iterables of strings).  Text fields and columns are read from Arrow's
buffers without a copy; the id field, where one is named, travels as the blocks' ids.  Bad
input is a CorpusFormatError of one line naming the file (and line, for JSON Lines).
"""

from __future__ import annotations

import csv
import functools
import io
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from saberjax.corpus.text_blocks import (
    DocumentBlock,
    Fields,
    compression_of,
    line_blocks,
    line_ranges,
    open_stream,
    read_block,
)
from saberjax.errors import CorpusFormatError

MIN_PARSE_BYTES = 1 << 20  # fewest bytes pyarrow's JSON and CSV readers parse at a time
FIRST_RECORD_BYTES = 1 << 16  # read at first for a JSON Lines file's first record
DATASET_BATCH_ROWS = 10_000  # rows of a datasets.Dataset read at a time


def jsonl_blocks(path: Path, fields: Fields, block_bytes: int, parsed: bool = True,
                 span: tuple[int, int] | None = None) -> Iterator[DocumentBlock]:
    """JSON Lines: the text field of each object (a record without it is an empty document;
    the first record must have it, so that a misnamed field is caught at once).  Blocks of
    whole lines, each parsed by pyarrow.json on one thread: here, or, when not `parsed`, by
    the thread that tokenises it (DocumentBlock.parse; an uncompressed file's lines as
    LineRanges, which that thread reads too), so that parsing runs on every core with the
    tokenising.  span: only the lines beginning in those bytes (line_blocks, line_ranges)."""
    import pyarrow as pa
    import pyarrow.json as pa_json

    first = _first_json_record(path, fields, span)
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
    parse = functools.partial(_parsed_json_lines, path, fields, options)
    if not parsed and compression_of(path) is None:
        yield from line_ranges(path, max(block_bytes, MIN_PARSE_BYTES), parse, span)
        return
    for lines in line_blocks(path, max(block_bytes, MIN_PARSE_BYTES), span):
        yield parse(lines.data) if parsed else DocumentBlock(lines.data, None, None, parse)


def _parsed_json_lines(path: Path, fields: Fields, options, lines: np.ndarray
                       ) -> DocumentBlock:
    """The block of the records of whole JSON lines (pyarrow.json, on this thread)."""
    import pyarrow as pa
    import pyarrow.json as pa_json

    if not lines.size:  # no lines (a LineRange within one line): no records
        lines = np.frombuffer(b"\n", np.uint8)
    try:
        batch = pa_json.read_json(
            pa.BufferReader(pa.py_buffer(lines)), parse_options=options,
            read_options=pa_json.ReadOptions(use_threads=False, block_size=lines.size + 1))
    except pa.ArrowException as error:
        raise CorpusFormatError(_json_error(path, fields, error)) from None
    return _arrow_block(batch.column(fields.text), _ids_of(batch, fields, path), path)


def _arrow_id_type(value):
    """The Arrow type JSON ids like `value` (the first record's) are read as."""
    import pyarrow as pa

    return {int: pa.int64(), float: pa.float64(), bool: pa.bool_()}.get(type(value),
                                                                         pa.string())


_JSON_TYPE_NAMES = {str: "a string", int: "a number", float: "a number", bool: "true or false",
                    list: "an array", dict: "an object", type(None): "null"}


def _json_lines(path: Path, first_bytes: int = MIN_PARSE_BYTES) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, line) of a JSON Lines file, for finding what its reader refused
    (or its first record), read first_bytes at first, then twice as many a time up to
    MIN_PARSE_BYTES."""
    with open_stream(path) as stream:
        number, carried, size = 0, b"", first_bytes
        while chunk := read_block(stream, path, size).tobytes():
            size = min(2 * size, MIN_PARSE_BYTES)
            lines = (carried + chunk).split(b"\n")
            carried = lines.pop()
            for line in lines:
                number += 1
                yield number, line
        if carried:
            yield number + 1, carried


def _first_json_record(path: Path, fields: Fields, span: tuple[int, int] | None = None
                       ) -> dict | None:
    """The first record of a JSON Lines file, or of its lines beginning in the bytes `span`
    (line_blocks; one that is not a JSON object is reported at the file's first bad line:
    _json_error); None when there is none."""
    if span is None:
        for number, line in _json_lines(path, FIRST_RECORD_BYTES):
            if line.strip():
                return _json_record(path, number, line)
        return None
    for lines in line_blocks(path, MIN_PARSE_BYTES, span):
        for line in lines.data.tobytes().split(b"\n"):
            if line.strip():
                try:
                    record = json.loads(line)
                except ValueError as error:
                    raise CorpusFormatError(_json_error(path, fields, error)) from None
                if not isinstance(record, dict):
                    raise CorpusFormatError(_json_error(path, fields, ValueError(line[:40])))
                return record
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


def csv_blocks(path: Path, fields: Fields, block_bytes: int, delimiter: str = ","
                ) -> Iterator[DocumentBlock]:
    """CSV with a header line: the text column of each row (pyarrow.csv; the text is read as
    bytes, not checked to be UTF-8 here).  The header is checked first, without pyarrow, so
    that a missing column never leaves an Arrow reader's read-ahead to the process's exit."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    columns = [name for name in fields if name is not None]
    types = {fields.text: pa.large_binary()}
    if fields.id is not None:
        types[fields.id] = pa.string()
    parse = pa_csv.ParseOptions(delimiter=delimiter, newlines_in_values=True)
    present = _csv_columns(path, delimiter)
    if present is None:  # an empty file: no documents
        return
    if any(name not in present for name in columns):
        raise CorpusFormatError(_missing_column(path, columns, present))
    with open_stream(path) as stream:
        try:
            reader = pa_csv.open_csv(
                stream, parse_options=parse,
                read_options=pa_csv.ReadOptions(block_size=max(block_bytes, MIN_PARSE_BYTES)),
                convert_options=pa_csv.ConvertOptions(include_columns=columns,
                                                      column_types=types))
            with reader:  # closed before its stream: its read-ahead never outlives the file
                for batch in reader:
                    yield _arrow_block(batch.column(fields.text), _ids_of(batch, fields, path),
                                       path)
        except pa.ArrowException as error:
            raise CorpusFormatError(
                f"{path}: not readable as {_DELIMITED[delimiter]} ({error})") from None


_DELIMITED = {",": "CSV", "\t": "TSV"}


def tsv_blocks(path: Path, fields: Fields, block_bytes: int) -> Iterator[DocumentBlock]:
    """TSV: CSV with tabs between values."""
    return csv_blocks(path, fields, block_bytes, delimiter="\t")


def _csv_columns(path: Path, delimiter: str) -> list[str] | None:
    """The column names of a CSV file's header record, None for an empty file.  Read by
    Python's csv module, not pyarrow: an Arrow reader's read-ahead calls back into Python from
    Arrow's threads, and one still running as the process exits after an error aborts it."""
    with open_stream(path) as stream:
        text = io.TextIOWrapper(stream, encoding="utf-8-sig", errors="replace", newline="")
        try:
            return next(csv.reader(text, delimiter=delimiter), None)
        except csv.Error as error:
            raise CorpusFormatError(
                f"{path}: not readable as {_DELIMITED[delimiter]} ({error})") from None
        finally:
            text.detach()  # the stream is closed by its own `with`


def _missing_column(source, wanted: list[str], present: list[str]) -> str:
    """The message of a column of `wanted` that `present` lacks."""
    missing = next(name for name in wanted if name not in present)
    shown = ", ".join(map(repr, present[:20])) + (", ..." if len(present) > 20 else "")
    return f"{source}: no column {missing!r} (its columns: {shown or 'none'})"


def parquet_blocks(path: Path, fields: Fields, block_bytes: int,
                   span: tuple[int, int] | None = None) -> Iterator[DocumentBlock]:
    """Parquet: the text column, in batches of about block_bytes of rows (by the file's
    recorded sizes).  A gzip- or zstd-compressed file is decompressed into memory first
    (Parquet compresses inside; reading needs random access).  span: only the row groups
    beginning in the bytes [first, last) of an uncompressed file (row_group_starts), the
    share of the file one reader of several reads (saberjax.shared_text)."""
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
    groups = None
    if span is not None:
        starts = row_group_starts(metadata)
        groups = [group for group, start in enumerate(starts) if span[0] <= start < span[1]]
        if not groups:
            return
    try:
        for batch in parquet.iter_batches(batch_size=max(1, int(block_bytes / max(row_bytes, 1))),
                                          row_groups=groups, columns=columns):
            yield _arrow_block(batch.column(fields.text), _ids_of(batch, fields, path), path)
    except (pa.ArrowException, OSError) as error:
        raise CorpusFormatError(f"{path}: cannot read: {error}") from None


def row_group_starts(metadata) -> list[int]:
    """The byte offset in a Parquet file of each row group's first page (of any column):
    where the row group begins, for cutting the file into byte ranges of whole row groups."""
    starts = []
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        starts.append(min(
            column.dictionary_page_offset if column.has_dictionary_page
            else column.data_page_offset
            for column in map(row_group.column, range(row_group.num_columns))))
    return starts


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


def object_blocks(source, fields: Fields, block_bytes: int) -> Iterator[DocumentBlock]:
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
