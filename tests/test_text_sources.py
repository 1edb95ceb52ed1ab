"""Raw documents from every text source as DocumentBlocks (saberjax.corpus.text_sources)."""

import gzip

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
        assert block.data.dtype == np.uint8 and block.offsets.dtype == np.int64
        assert block.offsets[0] == 0 and block.offsets[-1] == block.data.size
        assert np.all(np.diff(block.offsets) >= 0)
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
