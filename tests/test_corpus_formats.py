"""saberjax.corpus.formats: format detection, load_corpus and convert_to_native."""

import re
from pathlib import Path

import pytest
from corpus_helpers import (
    LDAC_TEXT,
    UCI_TEXT,
    assert_same_corpus,
    tiny_corpus,
    write_text,
    write_uci,
    write_vocab,
)

from saberjax.corpus import (
    CorpusFormatError,
    convert_to_native,
    load_corpus,
    load_native,
    save_native,
)


def test_load_corpus_detects_each_format(tmp_path):
    write_uci(tmp_path / "uci")
    write_text(tmp_path / "uci" / "docword.tiny.txt.gz", UCI_TEXT)
    (tmp_path / "ldac").mkdir()
    write_text(tmp_path / "ldac" / "tiny.dat", LDAC_TEXT)
    write_vocab(tmp_path / "ldac" / "vocab.txt")
    save_native(tiny_corpus(), tmp_path / "native")
    for path in ("uci", "uci/docword.txt", "uci/docword.tiny.txt.gz", "ldac/tiny.dat", "native"):
        assert_same_corpus(load_corpus(tmp_path / path), tiny_corpus())


def test_load_corpus_format_argument_overrides_detection(tmp_path):
    path = write_uci(tmp_path, name="counts.dat")
    assert_same_corpus(load_corpus(path, format="uci"), tiny_corpus())
    with pytest.raises(ValueError, match="unknown corpus format 'xml'"):
        load_corpus(path, format="xml")


def native_and_uci_in_one_folder(path: Path) -> None:
    save_native(tiny_corpus(), path)
    write_uci(path)


@pytest.mark.parametrize("setup, verdict", [
    (lambda path: write_text(path, "hello world\n"), "format unknown"),
    (lambda path: path.mkdir(), "format unknown"),
    (native_and_uci_in_one_folder, r"matches several formats \(native, uci\)"),
])
def test_load_corpus_names_the_path_and_formats_tried(tmp_path, setup, verdict):
    path = tmp_path / "corpus"
    setup(path)
    with pytest.raises(CorpusFormatError,
                       match=f"{re.escape(str(path))}: {verdict}; tried native .* uci .* ldac"):
        load_corpus(path)


def test_load_corpus_reports_a_missing_path(tmp_path):
    with pytest.raises(CorpusFormatError, match="no such file or directory"):
        load_corpus(tmp_path / "nowhere")


def test_convert_to_native_then_load_gives_the_same_corpus(tmp_path):
    converted = convert_to_native(write_uci(tmp_path / "tiny"), tmp_path / "native")
    assert_same_corpus(load_native(tmp_path / "native"), converted)
    assert load_native(tmp_path / "native").name == "tiny"
