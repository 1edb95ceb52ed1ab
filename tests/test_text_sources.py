"""Raw documents from every text source as DocumentBlocks (saberjax.corpus.text_sources)."""

import gzip
import os
import re

import numpy as np
import pytest

from saberjax.corpus import load_corpus
from saberjax.corpus.text_sources import document_blocks
from saberjax.errors import CorpusFormatError

DOCUMENTS = ["Football match: the striker scored", "", "Le café était fermé; naïve",
             "Über den Wolken", "Москва — столица России", "last one\r"]


def documents_read(source, **options) -> list[bytes]:
    """Every document document_blocks yields, as bytes, checking each block's layout."""
    documents = []
    for block in document_blocks(source, **options):
        block = block.parsed()  # a LineRange read
        offsets = block.document_offsets()  # a block of lines (offsets None) has them too
        assert block.data.dtype == np.uint8 and offsets.dtype == np.int64
        assert offsets[0] == 0 and offsets[-1] == block.data.size
        assert np.all(np.diff(offsets) >= 0)
        documents += [block.document(i) for i in range(block.num_docs)]
    return documents


def write_lines(path, documents, compress=None):
    data = "".join(f"{document}\n" for document in documents).encode()
    path.write_bytes(gzip.compress(data) if compress == "gzip" else data)
    return path


@pytest.mark.parametrize("block_bytes", [1, 7, 64, 1 << 20])
def test_one_document_a_line_gives_each_line_with_its_line_feed_whatever_the_block_size(
        tmp_path, block_bytes):
    path = write_lines(tmp_path / "docs.txt", DOCUMENTS)
    assert documents_read(path, block_bytes=block_bytes) == [
        f"{document}\n".encode() for document in DOCUMENTS]


@pytest.mark.parametrize("range_bytes", [1, 2, 3, 7, 40])
def test_ranges_of_a_file_hold_each_line_once(tmp_path, monkeypatch, range_bytes):
    from saberjax.corpus import text_blocks

    monkeypatch.setattr(text_blocks, "RANGE_TAIL_BYTES", 2)  # lines read on past a range's end
    lines = [b"\n", b"a\n", b"long line of words\n", b"\n", b"\n", b"xy\n", b"last"]
    path = tmp_path / "docs.txt"
    path.write_bytes(b"".join(lines))
    ranges = list(text_blocks.line_ranges(path, range_bytes))
    assert [(part.start, part.end) for part in ranges] == [
        (start, min(start + range_bytes, path.stat().st_size))
        for start in range(0, path.stat().st_size, range_bytes)]
    read = [part.parsed() for part in ranges]
    assert [line for block in read for line in map(block.document, range(block.num_docs))
            ] == lines
    assert documents_read(path, block_bytes=range_bytes, parsed=False) == lines


def test_a_nul_byte_in_a_range_is_binary_data(tmp_path, monkeypatch):
    from saberjax.corpus import text_blocks

    monkeypatch.setattr(text_blocks, "SNIFF_BYTES", 16)  # the NUL past the bytes sniffed
    path = tmp_path / "docs.txt"
    path.write_bytes(b"text\n" * 30 + b"te\0xt\n")
    ranges = list(text_blocks.line_ranges(path, 16))
    with pytest.raises(CorpusFormatError, match="NUL byte at offset 152"):
        [part.parsed() for part in ranges]


def test_a_last_line_without_a_line_feed_is_a_document(tmp_path):
    (tmp_path / "docs.txt").write_bytes(b"one\ntwo")
    assert documents_read(tmp_path / "docs.txt", block_bytes=2) == [b"one\n", b"two"]


def test_a_folder_or_glob_of_txt_files_gives_one_document_a_file_in_name_order(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    for index, document in reversed(list(enumerate(DOCUMENTS))):
        (folder / f"doc{index}.txt").write_text(document)
    (folder / "notes.md").write_text("not a document")
    expected = [document.encode() for document in DOCUMENTS]
    for block_bytes in (1, 30, 1 << 20):
        assert documents_read(folder, block_bytes=block_bytes) == expected
    assert documents_read(folder / "doc*.txt") == expected


def test_gzip_and_zstd_text_is_decompressed(tmp_path):
    import pyarrow as pa

    plain = write_lines(tmp_path / "docs.txt", DOCUMENTS)
    expected = documents_read(plain)
    assert documents_read(write_lines(tmp_path / "docs.txt.gz", DOCUMENTS, "gzip"),
                          block_bytes=5) == expected
    with pa.output_stream(str(tmp_path / "docs.txt.zst"), compression="zstd") as stream:
        stream.write(plain.read_bytes())
    assert documents_read(tmp_path / "docs.txt.zst", block_bytes=5) == expected


def test_concatenated_gzip_members_are_read_whole(tmp_path):
    path = tmp_path / "docs.txt.gz"
    path.write_bytes(gzip.compress(b"one\ntwo\n") + gzip.compress(b"three\n"))
    assert documents_read(path) == [b"one\n", b"two\n", b"three\n"]


def test_compressed_and_plain_text_give_the_same_corpus(tmp_path):
    themed = [f"striker goalkeeper referee match{i % 2}" for i in range(10)]
    plain = load_corpus(write_lines(tmp_path / "a.txt", themed), min_df=1, max_df=1.0)
    packed = load_corpus(write_lines(tmp_path / "b.txt.gz", themed, "gzip"), min_df=1,
                         max_df=1.0)
    assert plain.vocab == packed.vocab
    np.testing.assert_array_equal(plain.word_ids, packed.word_ids)


@pytest.mark.parametrize("content, message", [
    (b"", "no documents"),
    (b"text\0with a NUL byte\n", "binary data, not text"),
])
def test_bad_text_files_are_one_line_errors(tmp_path, content, message):
    (tmp_path / "bad.txt").write_bytes(content)
    with pytest.raises(CorpusFormatError, match=message):
        documents_read(tmp_path / "bad.txt")


def test_text_with_over_one_percent_control_bytes_is_refused_as_binary():
    from pathlib import Path

    from saberjax.corpus.text_blocks import check_is_text

    def checked(content: bytes) -> None:
        check_is_text(Path("x.txt"), np.frombuffer(content, np.uint8))

    checked(b"a\tb\r\n\x0b\x0c " * 100)  # whitespace below 32 is text
    checked(b"x" * 990 + b"\x7f" * 10)  # 1% of control bytes (DEL) passes
    with pytest.raises(CorpusFormatError, match=re.escape(
            "x.txt: binary data, not text (control byte 0x7f at offset 989, 11 of 1000 "
            "bytes)")):
        checked(b"x" * 989 + b"\x7f" * 11)
    with pytest.raises(CorpusFormatError, match=re.escape(
            "control byte 0x01 at offset 3, 100 of 400 bytes")):
        checked(b"ab\n\x01" * 100)


def test_missing_files_and_empty_folders_are_errors(tmp_path):
    with pytest.raises(CorpusFormatError, match="file not found"):
        documents_read(tmp_path / "absent.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusFormatError, match="no .txt files"):
        documents_read(tmp_path / "empty", format="text")
    with pytest.raises(CorpusFormatError, match="no .txt files match"):
        documents_read(tmp_path / "nothing*.txt", format="text")
    with pytest.raises(CorpusFormatError, match="not a text source"):
        documents_read(tmp_path / "empty")


# The same documents in every format: two themes, with ids, one document with no words.
THEMED = [f"Striker {i} scored; the goalkeeper, referee and stadium cheered." if i % 2 else
          f"Baker {i} mixed flour, butter and sugar; the oven was hot, the café closed."
          for i in range(12)] + ["", 'She said "stop, now" and left,\nthen\ttabbed.']
IDS = [f"doc-{i}" for i in range(len(THEMED))]


def write_all_formats(directory) -> dict:
    """THEMED (with IDS where the format has fields) written in every input format: name ->
    (path, reading options)."""
    import json

    import pyarrow as pa
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    directory.mkdir(exist_ok=True)
    table = pa.table({"id": IDS, "body": THEMED})
    sources = {}
    lines = directory / "lines.txt"  # one document a line: no line breaks inside documents
    lines.write_text("".join(document.replace("\n", " ") + "\n" for document in THEMED))
    sources["text lines"] = (lines, dict(format="text"))
    folder = directory / "folder"
    folder.mkdir()
    for index, document in enumerate(THEMED):
        (folder / f"{index:03d}.txt").write_text(document)
    sources["text folder"] = (folder, {})
    records = "".join(json.dumps(dict(id=i, text=d, other=[1])) + "\n" for i, d in
                      zip(IDS, THEMED))
    (directory / "docs.jsonl").write_text(records)
    sources["jsonl"] = (directory / "docs.jsonl", dict(id_field="id"))
    (directory / "docs.jsonl.gz").write_bytes(gzip.compress(records.encode()))
    sources["jsonl.gz"] = (directory / "docs.jsonl.gz", dict(id_field="id"))
    with pa.output_stream(str(directory / "docs.jsonl.zst"), compression="zstd") as stream:
        stream.write(records.encode())
    sources["jsonl.zst"] = (directory / "docs.jsonl.zst", dict(id_field="id"))
    pa_csv.write_csv(table, directory / "docs.csv")
    sources["csv"] = (directory / "docs.csv", dict(text_column="body", id_column="id"))
    pa_csv.write_csv(table, directory / "docs.tsv", pa_csv.WriteOptions(delimiter="\t"))
    sources["tsv"] = (directory / "docs.tsv", dict(text_column="body", id_field="id"))
    pq.write_table(table, directory / "docs.parquet", row_group_size=5)
    sources["parquet"] = (directory / "docs.parquet", dict(text_column="body", id_field="id"))
    shards = directory / "shards"
    shards.mkdir()
    for shard, start in enumerate(range(0, len(THEMED), 5)):
        pq.write_table(table.slice(start, 5), shards / f"part-{shard:02d}.parquet")
    sources["parquet folder"] = (shards, dict(text_column="body", id_field="id"))
    sources["parquet glob"] = (shards / "part-*.parquet", dict(text_column="body",
                                                                id_field="id"))
    return sources


class FakeDataset:
    """What text_sources reads of a Hugging Face datasets.Dataset: column_names, and
    with_format("arrow").iter(batch_size) giving pyarrow Tables."""

    def __init__(self, table):
        self.table, self.column_names = table, table.column_names

    def with_format(self, kind):
        assert kind == "arrow"
        return self

    def iter(self, batch_size):
        for start in range(0, self.table.num_rows, batch_size):
            yield self.table.slice(start, batch_size)


def python_sources() -> dict:
    """THEMED as each kind of Python object: name -> (object, reading options)."""
    import pyarrow as pa

    table = pa.table({"id": IDS, "body": THEMED})
    return {"list": (THEMED, {}), "generator": ((document for document in THEMED), {}),
            "numpy": (np.array(THEMED), {}), "arrow array": (pa.array(THEMED), {}),
            "chunked array": (table.column("body"), {}),
            "arrow table": (table, dict(text_column="body", id_column="id")),
            "dataset": (FakeDataset(table), dict(text_field="body", id_field="id"))}


@pytest.mark.filterwarnings("ignore:.*dropped 1 empty document")
def test_every_format_and_python_object_gives_the_same_corpus_and_ids(tmp_path):
    from saberjax.corpus import corpus_from_documents

    expected = corpus_from_documents(list(THEMED), min_df=1, max_df=1.0)
    sources = write_all_formats(tmp_path)
    corpora = {name: load_corpus(path, min_df=1, max_df=1.0, **options)
               for name, (path, options) in sources.items()}
    corpora.update({name: corpus_from_documents(source, min_df=1, max_df=1.0, **options)
                    for name, (source, options) in python_sources().items()})
    assert expected.dropped_empty_docs == 1 and "cafe" in expected.vocab
    for name, corpus in corpora.items():
        assert corpus.vocab == expected.vocab, name
        np.testing.assert_array_equal(corpus.doc_offsets, expected.doc_offsets, err_msg=name)
        np.testing.assert_array_equal(corpus.word_ids, expected.word_ids, err_msg=name)
        has_ids = "id_field" in sources.get(name, python_sources().get(name))[1] or (
            "id_column" in sources.get(name, python_sources().get(name))[1])
        if has_ids:  # the empty document and its id are dropped
            assert list(corpus.doc_names) == IDS[:12] + IDS[13:], name
        else:
            assert corpus.doc_names is None, name


@pytest.mark.filterwarnings("ignore:.*dropped .* empty document")
@pytest.mark.parametrize("name", ["jsonl", "csv", "parquet folder", "text lines"])
def test_the_engine_gives_one_corpus_and_ids_whatever_the_blocks_pieces_and_threads(
        tmp_path, monkeypatch, name):
    from saberjax import text
    from saberjax.corpus import text_ids, text_pieces
    from saberjax.corpus.text_corpus import build_corpus

    path, options = write_all_formats(tmp_path)[name]
    vocabulary = text.VocabularyRules(min_df=1, max_df=1.0)
    reference = build_corpus(document_blocks(path, **options), vocabulary=vocabulary,
                             workers=1).corpus
    assert reference.dropped_empty_docs == 1
    assert (reference.doc_names is None) == (name == "text lines")
    monkeypatch.setattr(text_pieces, "PIECE_BYTES", 150)  # documents of a block in pieces
    for block_bytes, workers, memory, directory, parsed in (
            (64, 3, 0, None, False), (200, 2, None, "n", True), (1, 1, 100, "m", False)):
        blocks = document_blocks(path, block_bytes=block_bytes, parsed=parsed, **options)
        built = build_corpus(blocks, vocabulary=vocabulary, workers=workers, memory_bytes=memory,
                             directory=directory and tmp_path / directory).corpus
        assert built.vocab == reference.vocab
        np.testing.assert_array_equal(built.doc_offsets, reference.doc_offsets)
        np.testing.assert_array_equal(built.word_ids, reference.word_ids)
        if reference.doc_names is not None:  # the empty document's id dropped with it
            assert list(built.doc_names) == list(reference.doc_names) == IDS[:12] + IDS[13:]


@pytest.mark.parametrize("name", ["jsonl", "jsonl.gz", "csv", "tsv", "parquet",
                                  "parquet folder", "text folder"])
def test_blocks_hold_the_same_documents_and_ids_whatever_their_size(tmp_path, name):
    path, options = write_all_formats(tmp_path)[name]
    layouts = []
    for block_bytes in (1, 40, 1 << 20):
        blocks = list(document_blocks(path, block_bytes=block_bytes, **options))
        assert max(block.data.size for block in blocks) <= max(2 * block_bytes, 200)
        ids = [i for block in blocks for i in (block.ids if block.ids is not None else [])]
        layouts.append((documents_read(path, block_bytes=block_bytes, **options), ids))
    assert layouts[0] == layouts[1] == layouts[2]
    assert layouts[0][0] == [document.encode() for document in THEMED]


def test_format_is_detected_by_extension_through_compression_and_shards(tmp_path):
    from saberjax.corpus import detect_format

    sources = write_all_formats(tmp_path)
    assert {name: detect_format(path) for name, (path, _) in sources.items()} == {
        "text lines": "text", "text folder": "text", "jsonl": "jsonl", "jsonl.gz": "jsonl",
        "jsonl.zst": "jsonl", "csv": "csv", "tsv": "tsv", "parquet": "parquet",
        "parquet folder": "parquet", "parquet glob": "parquet"}


def test_a_chunked_or_sliced_arrow_column_is_read_from_its_buffers(tmp_path):
    import pyarrow as pa

    column = pa.chunked_array([pa.array(["a b", None, "c"], pa.large_string()),
                               pa.array(["dd", "ee"], pa.large_string()).slice(1)])
    assert documents_read(column) == [b"a b", b"", b"c", b"ee"]
    block = next(document_blocks(pa.array(["xyz", "w"]).slice(1)))
    assert block.data.tobytes() == b"w" and block.offsets.tolist() == [0, 1]


def test_fields_are_one_option_under_two_names():
    from saberjax.corpus.text_sources import reading_fields

    assert reading_fields(text_column="body", id_field="key") == ("body", "key")
    assert reading_fields() == ("text", None)
    with pytest.raises(ValueError, match="name the same field"):
        reading_fields(text_field="a", text_column="b")


def write_text(path, content):
    path.write_text(content)
    return path


@pytest.mark.parametrize("file, content, options, message", [
    ("bad.jsonl", '{"text": "ok"}\n\n{"text": "a" "b"}\n', {},
     r"bad.jsonl, line 3: not valid JSON \(Expecting ',' delimiter\)"),
    ("bad.jsonl", '{"text": "ok"}\n[1, 2]\n', {}, "line 2: an array, not a JSON object"),
    ("bad.jsonl", '{"text": "ok"}\n{"text": 7}\n', {},
     "line 2: field 'text' is a number, not a string"),
    ("bad.jsonl", '{"body": "ok", "id": 1}\n', {},
     "no field 'text' in its first record \\(its fields: 'body', 'id'\\)"),
    ("bad.jsonl", '{"text": "a", "id": 1}\n{"text": "b", "id": "x"}\n', dict(id_field="id"),
     "line 2: field 'id' is a string, but a number on line 1"),
    ("bad.jsonl", '{"text": "a", "id": 1}\n{"text": "b"}\n', dict(id_field="id"),
     "1 of 2 records have no 'id'"),
    ("bad.csv", "id,body\n1,hello\n", {}, "no column 'text' \\(its columns: 'id', 'body'\\)"),
    ("bad.csv", "text\nhello\n", dict(id_column="key"), "no column 'key'"),
    ("bad.csv", "text,id\na,1\nb,2,3\n", {}, "Expected 2 columns, got 3"),
    ("bad.tsv", "", {}, "no documents"),
    ("bad.csv", "text\n", {}, "no documents"),
    ("bad.jsonl", "\n\n", {}, "no documents"),
    ("bad.parquet", "not parquet", {}, "not a readable Parquet file"),
])
def test_bad_input_is_a_one_line_error_naming_the_file(tmp_path, file, content, options,
                                                       message):
    path = write_text(tmp_path / file, content)
    with pytest.raises(CorpusFormatError, match=message) as caught:
        documents_read(path, **options)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("content, options, message", [
    ('{"text": "ok"}\n\n{"text": "a" "b"}\n', {}, r"line 3: not valid JSON"),
    ('{"text": "ok"}\n{"text": 7}\n', {}, "line 2: field 'text' is a number, not a string"),
    ('{"text": "a", "id": 1}\n{"text": "b"}\n', dict(id_field="id"), "records have no 'id'"),
])
@pytest.mark.parametrize("processes", [False, True])
def test_json_lines_parsed_by_the_tokenising_workers_report_bad_records(
        tmp_path, monkeypatch, content, options, message, processes):
    from saberjax.corpus import text_corpus, text_pieces
    from saberjax.corpus.plain_text import load_text

    monkeypatch.setattr(text_pieces, "PIECE_BYTES", 1000)  # records parsed in many pieces
    if processes:  # worker processes for this small input
        monkeypatch.setattr(text_corpus, "PROCESS_MIN_WORKERS", 1)
        monkeypatch.setattr(text_corpus, "PROCESS_MIN_BYTES", 0)
    path = write_text(tmp_path / "bad.jsonl", content * 3000)
    with pytest.raises(CorpusFormatError, match=message) as caught:  # processes write folders
        load_text(path, tmp_path / "corpus", format="jsonl", workers=3, min_df=1, max_df=1.0,
                  **options)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)
    assert os.listdir(tmp_path) == ["bad.jsonl"]  # nothing written, no spill files left


def test_a_json_lines_first_record_longer_than_its_first_read_is_read_whole(tmp_path):
    from saberjax.corpus import columnar_sources

    long = " ".join(["word"] * (columnar_sources.FIRST_RECORD_BYTES // 2))  # 2.5 first reads
    path = write_text(tmp_path / "long.jsonl", "\n" + f'{{"id": 7, "text": "{long}"}}\n'
                      + '{"id": 8, "text": "short"}\n')
    assert documents_read(path, id_field="id") == [long.encode(), b"short"]
    with pytest.raises(CorpusFormatError, match="no field 'body' in its first record"):
        documents_read(path, text_field="body")


def test_bad_columns_and_objects_are_refused():
    import pyarrow as pa
    import pyarrow.parquet as pq  # noqa: F401 (imported as the Parquet reader does)

    with pytest.raises(CorpusFormatError, match="no column 'text' \\(its columns: 'body'\\)"):
        documents_read(pa.table({"body": ["a"]}))
    with pytest.raises(CorpusFormatError, match="no column 'text'"):
        documents_read(FakeDataset(pa.table({"body": ["a"]})))
    with pytest.raises(CorpusFormatError, match="of type int64, not text"):
        documents_read(pa.array([1, 2]))
    with pytest.raises(TypeError, match="documents must be strings, got int"):
        documents_read(["a", 3])
    with pytest.raises(CorpusFormatError, match="no documents"):
        documents_read([])


def test_a_missing_parquet_column_names_those_there_are(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"title": ["a"], "body": ["b"]}), tmp_path / "x.parquet")
    with pytest.raises(CorpusFormatError, match="no column 'text' \\(its columns: 'title', "
                                                "'body'\\)"):
        documents_read(tmp_path / "x.parquet")


def test_a_missing_csv_column_opens_no_arrow_reader_and_every_reader_is_closed(
        tmp_path, monkeypatch):
    """An Arrow CSV reader reads ahead on Arrow's threads, calling back into Python; one still
    reading as the process exits (after the error below) aborts it.  The header is checked
    without Arrow, so a missing column opens no Arrow reader; a file with its columns is read
    by one reader, closed at the end."""
    import pyarrow.csv as pa_csv

    opened = []
    open_csv = pa_csv.open_csv

    class RecordedReader:
        """An Arrow CSV reader that notes whether it was closed."""

        def __init__(self, reader):
            self.reader, self.closed = reader, False

        def __getattr__(self, name):
            return getattr(self.reader, name)

        def __iter__(self):
            return iter(self.reader)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.closed = True
            self.reader.close()

    def recording_open_csv(*args, **kwargs):
        reader = RecordedReader(open_csv(*args, **kwargs))
        options = kwargs.get("read_options") or pa_csv.ReadOptions()
        opened.append((options.use_threads, reader))
        return reader

    monkeypatch.setattr(pa_csv, "open_csv", recording_open_csv)
    (tmp_path / "x.csv").write_bytes(b"id,body\n1,a b\n")
    with pytest.raises(CorpusFormatError, match="no column 'text' \\(its columns: 'id', "
                                                "'body'\\)"):
        documents_read(tmp_path / "x.csv")
    assert opened == []
    (tmp_path / "y.csv").write_bytes(b"id,text\n1,a b\n2,c\n")
    opened.clear()
    assert documents_read(tmp_path / "y.csv") == [b"a b", b"c"]
    assert [(threads, reader.closed) for threads, reader in opened] == [(True, True)]


@pytest.mark.parametrize("compress", [False, True])
def test_a_csv_header_is_read_as_arrow_reads_it(tmp_path, compress):
    """The header checked without Arrow agrees with Arrow's reading of it: a byte-order mark
    is not part of the first name, and a quoted name may hold the delimiter and a newline."""
    data = '\ufefftext,"a,\nb"\n"x y",1\nz,2\n'.encode()
    path = tmp_path / ("docs.csv.gz" if compress else "docs.csv")
    path.write_bytes(gzip.compress(data) if compress else data)
    assert documents_read(path) == [b"x y", b"z"]


def test_corrupt_compressed_data_is_a_read_error(tmp_path):
    path = tmp_path / "docs.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"text": "a"}\n' * 100)[:40])
    with pytest.raises(CorpusFormatError, match="docs.jsonl.gz"):
        documents_read(path)


def test_pandas_columns_are_read_when_pandas_is_installed():
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame({"body": THEMED, "id": IDS})
    assert documents_read(frame["body"]) == [document.encode() for document in THEMED]
    blocks = list(document_blocks(frame, text_column="body", id_column="id"))
    assert [i for block in blocks for i in block.ids] == IDS


def test_ids_travel_from_json_lines_to_doc_topics_and_theta(tmp_path):
    import json

    from helpers import launch

    corpus = tmp_path / "posts.jsonl"
    corpus.write_text("".join(json.dumps(dict(key=f"post-{i}", body=document)) + "\n"
                              for i, document in enumerate(THEMED * 2)))
    output = tmp_path / "model"
    launch("train.py", f"--corpus={corpus}", "--text_field=body", "--id_field=key",
           "--num_topics=2", "--iterations=2", "--backend=xla", f"--output={output}",
           "--num_devices=1", "--save_doc_topics", "--min_df=1", "--max_df=1.0",
           f"--cache_dir={tmp_path / 'cache'}", timeout=300)
    kept = [f"post-{i}" for i, document in enumerate(THEMED * 2) if document]
    assert (output / "doc_names.txt").read_text().splitlines() == kept
    assert np.load(output / "doc_topics.npy").shape == (len(kept), 2)
    theta = tmp_path / "theta.npy"
    launch("infer.py", f"--model={output}", f"--corpus={corpus}", "--text_column=body",
           "--id_field=key", f"--output={theta}", "--num_devices=1", timeout=300)
    names = (tmp_path / "theta.doc_names.txt").read_text().splitlines()
    assert names == [f"post-{i}" for i in range(len(THEMED) * 2)]  # every document a row
    assert np.load(theta).shape == (len(names), 2)


@pytest.mark.filterwarnings("ignore:.*dropped 1 empty document")
def test_the_cache_keys_on_the_fields_and_keeps_the_ids(tmp_path):
    from saberjax.corpus import cache

    path, options = write_all_formats(tmp_path / "data")["csv"]
    options = dict(options, min_df=1, max_df=1.0)
    keyed = dict(text_column="body", min_df=1, max_df=1.0)
    assert cache.cache_key(path, **keyed) == cache.cache_key(path, text_field="body",
                                                             min_df=1, max_df=1.0)
    assert cache.cache_key(path, **keyed) != cache.cache_key(path, **options)
    assert cache.cache_key(path, **keyed) != cache.cache_key(path, **dict(keyed,
                                                                          text_column="id"))
    first = cache.load_corpus(path, cache_dir=tmp_path / "cache", **options)
    again = cache.load_corpus(path, cache_dir=tmp_path / "cache", **options)
    assert first.fingerprint() == again.fingerprint()
    assert list(again.doc_names) == list(first.doc_names) == IDS[:12] + IDS[13:]
    assert cache.load_corpus(path, cache_dir=tmp_path / "cache", **keyed).doc_names is None


@pytest.mark.filterwarnings("ignore:.*words are not in the model vocabulary")
def test_doc_names_survive_the_native_format_subsets_and_vocabulary_alignment(tmp_path):
    import pyarrow as pa

    from saberjax.corpus import align_vocabulary, corpus_from_documents, load_native, save_native

    table = pa.table({"text": ["apple pie", "banana split", "cherry apple"],
                      "id": ["a", "b", "c"]})
    corpus = corpus_from_documents(table, min_df=1, max_df=1.0, id_field="id")
    save_native(corpus, tmp_path / "native")
    loaded = load_native(tmp_path / "native")
    assert list(loaded.doc_names) == ["a", "b", "c"]
    assert list(loaded.subset([2, 0]).doc_names) == ["c", "a"]
    assert list(align_vocabulary(loaded, ("apple",)).doc_names) == ["a", "b", "c"]
    with pytest.raises(CorpusFormatError, match="2 names for 3 documents"):
        type(corpus)(corpus.doc_offsets, corpus.word_ids, corpus.vocab, doc_names=["a", "b"])


@pytest.mark.filterwarnings("ignore:.*dropped 2 empty document")
def test_the_estimator_fits_and_transforms_document_columns():
    import pyarrow as pa

    from saberjax.estimator import LDA

    documents = [document for document in THEMED if document] * 2
    lda = LDA(num_topics=2, iterations=2, backend="xla", num_devices=1).fit(
        pa.array(documents))
    assert "goalkeeper" in lda.feature_names_in_
    theta = lda.transform(FakeDataset(pa.table({"text": documents[:3]})))
    assert theta.shape == (3, 2)
    np.testing.assert_allclose(theta, lda.transform(documents[:3]), rtol=1e-6)


@pytest.mark.parametrize("ahead", [0, 1, 3])
def test_shards_read_at_once_keep_their_order(tmp_path, monkeypatch, ahead):
    from saberjax.corpus import text_sources

    monkeypatch.setattr(text_sources, "SHARDS_AHEAD", ahead)
    path, options = write_all_formats(tmp_path)["parquet folder"]
    assert documents_read(path, block_bytes=30, **options) == [d.encode() for d in THEMED]


def test_a_shard_error_comes_in_its_turn_and_stopping_early_ends_the_readers():
    import threading

    from saberjax.corpus.text_sources import DocumentBlock, _read_ahead

    def shard(index):
        def read():
            if index == 2:
                raise CorpusFormatError(f"shard {index} is bad")
            for _ in range(5):
                yield DocumentBlock(np.full(1, index, np.uint8), np.array([0, 1]))
        return read

    seen = []
    with pytest.raises(CorpusFormatError, match="shard 2 is bad"):
        for block in _read_ahead([shard(i) for i in range(4)], ahead=2):
            seen.append(int(block.data[0]))
    assert seen == [0] * 5 + [1] * 5
    blocks = _read_ahead([shard(i) for i in (0, 1, 3)], ahead=2)
    next(blocks)
    blocks.close()
    for thread in threading.enumerate():
        if thread.name.startswith("saberjax-read-"):
            thread.join(timeout=5)
            assert not thread.is_alive()


def test_shard_readers_hold_few_blocks_of_bytes_but_every_range_of_lines():
    import threading
    from pathlib import Path

    from saberjax.corpus.text_sources import (
        SHARD_BLOCKS_AHEAD,
        DocumentBlock,
        LineRange,
        _read_ahead,
    )

    count = 3 * SHARD_BLOCKS_AHEAD
    made = [LineRange(Path("x"), start, start + 1) for start in range(count)]
    for items in (made, [DocumentBlock(np.full(1, i, np.uint8), np.array([0, 1]))
                         for i in range(count)]):
        given, read_ahead = threading.Event(), []

        def next_shard(items=items, given=given):
            yield from items
            given.set()

        def first(given=given, read_ahead=read_ahead):
            yield DocumentBlock(np.zeros(1, np.uint8), np.array([0, 1]))
            read_ahead.append(given.wait(timeout=0.5))  # the next shard's reader meanwhile

        assert list(_read_ahead([first, next_shard], ahead=1))[1:] == items
        assert read_ahead == [items is made]  # blocks of bytes: SHARD_BLOCKS_AHEAD at most


def test_a_recorded_test_corpus_is_read_by_the_training_rules_and_fields(tmp_path):
    from types import SimpleNamespace

    from saberjax.evaluate import test_documents

    path = tmp_path / "held_out.jsonl"
    path.write_text('{"body": "ab cd ab"}\n{"body": "cd ef"}\n')
    options = dict(token_pattern=r"(?u)\b\w\w+\b", text_field="body", min_df=1)
    model = SimpleNamespace(vocab=("ab", "cd", "ef"), has_words=True,
                            config=dict(test_corpus=str(path), text_options=options))
    test, _ = test_documents(model)
    assert test.num_docs == 2 and test.num_tokens == 5


@pytest.mark.filterwarnings("ignore:.*dropped 1 empty document")
def test_load_text_detects_the_format_of_a_folder_of_shards(tmp_path):
    from saberjax.corpus.plain_text import load_text

    path, options = write_all_formats(tmp_path)["parquet folder"]
    corpus = load_text(path, format="auto", min_df=1, max_df=1.0, **options)
    assert list(corpus.doc_names) == IDS[:12] + IDS[13:]


@pytest.mark.filterwarnings("ignore:.*dropped .* empty document")
@pytest.mark.parametrize("name", ["jsonl", "text lines"])
def test_worker_processes_give_the_corpus_of_threads(tmp_path, monkeypatch, name):
    from saberjax import text
    from saberjax.corpus import text_ids, text_pieces
    from saberjax.corpus.text_corpus import build_corpus

    path, options = write_all_formats(tmp_path)[name]
    vocabulary = text.VocabularyRules(min_df=1, max_df=1.0)
    monkeypatch.setattr(text_pieces, "PIECE_BYTES", 150)  # several pieces for each worker
    monkeypatch.setattr(text_pieces, "TASK_BYTES", 450)  # processes: 3 pieces a call
    monkeypatch.setattr(text_ids, "APPEND_PIECES", 2)  # a corpus folder's: 2 pieces at once
    built = []
    for processes, memory, directory in ((False, None, None), (True, 0, "native"),
                                         (True, 150, "some spilled")):
        blocks = document_blocks(path, block_bytes=200, parsed=False, **options)
        built.append(build_corpus(blocks, vocabulary=vocabulary, workers=2,
                                  memory_bytes=memory, processes=processes,
                                  directory=directory and tmp_path / directory).corpus)
    for corpus in built[1:]:
        assert corpus.vocab == built[0].vocab
        np.testing.assert_array_equal(corpus.doc_offsets, built[0].doc_offsets)
        np.testing.assert_array_equal(corpus.word_ids, built[0].word_ids)
        assert corpus.dropped_empty_docs == built[0].dropped_empty_docs > 0
        if name == "jsonl":
            assert list(corpus.doc_names) == list(built[0].doc_names)


def write_many_words(path, docs: int = 2400) -> None:
    """`docs` lines of 9 to 12 words from 400 letter-only words: over 16K tokens."""
    rng = np.random.default_rng(7)
    words = ["".join(chr(97 + int(c)) for c in rng.integers(0, 26, 5)) for _ in range(400)]
    path.write_text("".join(" ".join(words[int(w)] for w in rng.integers(0, 400, n)) + "\n"
                            for n in rng.integers(9, 13, docs)))


def test_worker_processes_write_the_corpus_in_parts_joining_to_the_one_file(tmp_path,
                                                                            monkeypatch):
    """Worker processes writing the word ids in parts of 64 KiB (each in its own order:
    text_workers._writing_order) give the word ids file of one part, byte for byte, once the
    parts are joined in order; the corpus loads as the one file's."""
    from saberjax import text
    from saberjax.corpus import native, text_pieces, word_id_parts
    from saberjax.corpus.text_corpus import build_corpus

    write_many_words(tmp_path / "docs.txt")
    monkeypatch.setattr(text_pieces, "PIECE_BYTES", 4000)
    monkeypatch.setattr(text_pieces, "TASK_BYTES", 12000)
    vocabulary = text.VocabularyRules(min_df=1, max_df=1.0)
    built = {}
    for name, part_bytes, processes in (("one", word_id_parts.PART_BYTES, False),
                                        ("parts", 1 << 16, True)):
        monkeypatch.setattr(word_id_parts, "PART_BYTES", part_bytes)
        blocks = document_blocks(tmp_path / "docs.txt", block_bytes=20000, format="text")
        built[name] = build_corpus(blocks, vocabulary=vocabulary, workers=3,
                                   processes=processes, directory=tmp_path / name).corpus
    names = sorted(os.listdir(tmp_path / "parts"))
    count = sum(name.startswith("word_ids") for name in names)
    assert count == -(-(128 + 4 * built["one"].num_tokens) // (1 << 16)) >= 2
    joined = b"".join((tmp_path / "parts" / name).read_bytes() for name in
                      ["word_ids.npy"] + [f"word_ids.npy.{part}" for part in range(1, count)])
    assert joined == (tmp_path / "one" / "word_ids.npy").read_bytes()
    for name in ("doc_offsets.npy", "vocab.txt"):
        assert (tmp_path / "parts" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
    assert native.load_native(tmp_path / "parts").fingerprint() == built["one"].fingerprint()
    np.testing.assert_array_equal(built["parts"].word_ids, built["one"].word_ids)


def test_a_failed_read_leaves_no_part_of_the_word_ids_behind(tmp_path, monkeypatch):
    """A worker failing while writing the word ids' parts leaves neither the corpus nor any
    part or temporary file beside it."""
    from saberjax import text
    from saberjax.corpus import text_pieces, word_id_parts
    from saberjax.corpus.text_corpus import build_corpus

    write_many_words(tmp_path / "docs.txt")
    monkeypatch.setattr(text_pieces, "PIECE_BYTES", 4000)
    monkeypatch.setattr(word_id_parts, "PART_BYTES", 1 << 16)
    writes = []

    def failing_write(parts, ids, start, write_back=False):
        writes.append(start)
        if len(writes) == 5:
            raise OSError(28, "No space left on device")
        return written(parts, ids, start, write_back)

    written = word_id_parts.WordIdParts.write
    monkeypatch.setattr(word_id_parts.WordIdParts, "write", failing_write)
    blocks = document_blocks(tmp_path / "docs.txt", block_bytes=20000, format="text")
    with pytest.raises(OSError, match="No space left"):
        build_corpus(blocks, vocabulary=text.VocabularyRules(min_df=1, max_df=1.0),
                     workers=2, processes=False, directory=tmp_path / "out" / "corpus")
    assert len(writes) >= 5
    assert os.listdir(tmp_path / "out") == []


def test_processes_tokenise_only_many_workers_on_a_large_input():
    from saberjax.corpus.text_corpus import (
        PROCESS_MIN_BYTES,
        PROCESS_MIN_WORKERS,
        _uses_processes,
    )

    assert _uses_processes(PROCESS_MIN_WORKERS, PROCESS_MIN_BYTES, "corpus")
    assert not _uses_processes(PROCESS_MIN_WORKERS - 1, PROCESS_MIN_BYTES, "corpus")
    assert not _uses_processes(PROCESS_MIN_WORKERS, PROCESS_MIN_BYTES - 1, "corpus")
    assert not _uses_processes(64, None, "corpus")
    assert not _uses_processes(PROCESS_MIN_WORKERS, PROCESS_MIN_BYTES, None)  # in memory


def test_a_file_that_cannot_be_read_is_one_line_naming_it(tmp_path):
    """Every reader of a file's bytes (the corpus formats' blocks, the lines of a text file,
    its ranges, its stream, its compression) says the same line of a missing file and of one
    it cannot read (here a folder)."""
    from saberjax.corpus import reading, text_blocks

    readers = (lambda path: list(reading.text_blocks(path)),
               lambda path: text_blocks.read_lines(path, 0, 10),
               lambda path: list(text_blocks.line_ranges(path, 10)),
               text_blocks.open_stream, text_blocks.compression_of)
    for read in readers:
        for path, message in ((tmp_path / "missing", "file not found"),
                              (tmp_path, "cannot read: Is a directory")):
            with pytest.raises(CorpusFormatError, match=re.escape(f"{path}: {message}") + "$"):
                read(path)
