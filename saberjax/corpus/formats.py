"""Corpora in any supported format: FORMATS, format detection, load_corpus, the files a
load reads, and conversion to the native format."""

from __future__ import annotations

from pathlib import Path

from saberjax.corpus.ldac import LDAC_VOCAB_FILE, load_ldac, starts_like_ldac
from saberjax.corpus.native import META_FILE, load_native, native_files, save_native
from saberjax.corpus.plain_text import load_text
from saberjax.corpus.core import Corpus
from saberjax.corpus.text_sources import (
    DETECTION_RULE,
    detected_text_formats,
    is_collection,
)
from saberjax.corpus.text_sources import FORMATS as TEXT_FORMATS
from saberjax.corpus.text_sources import source_files as text_source_files
from saberjax.corpus.uci import (
    UCI_DOCWORD_NAME,
    load_uci,
    uci_docword_in,
    uci_docwords,
    uci_vocab_beside,
)
from saberjax.errors import CorpusFormatError

# the formats of counts, then those of raw text (TEXT_FORMATS)
FORMATS = ("uci", "ldac", "native", *TEXT_FORMATS)


def load_corpus(path, format: str = "auto", checked: bool = True, **text_options) -> Corpus:
    """Loads a corpus in any supported format; format is "auto" or one of FORMATS.

    "auto" picks: a folder with corpus.json -> native; a folder with docword.txt[.gz] or a
    file named docword*.txt[.gz] -> uci; a file starting ``N id:count`` -> ldac, with the
    vocabulary in ``vocab.txt`` beside it; otherwise raw text by the files' extensions
    (text_sources: a folder or glob of .txt files or a .txt file of one document a line,
    .jsonl, .csv, .tsv, .parquet, each also .gz or .zst, or folders and globs of them),
    tokenised by load_text with `text_options`: the text and reading options of
    plain_text (text_rules; text_field and id_field for the formats with fields).
    checked=False: a native corpus's word ids are left to whoever counts them (load_native).
    """
    path = Path(path)
    chosen = _chosen_format(path, format)
    if chosen in TEXT_FORMATS:
        return load_text(path, format=chosen, **text_options)
    if text_options:
        raise ValueError(f"{', '.join(text_options)} only apply to text input; {path} is {chosen}")
    if chosen == "native":
        return load_native(path, checked=checked)
    if chosen == "uci":
        return load_uci(path)
    return load_ldac(path, path.with_name(LDAC_VOCAB_FILE))


def source_files(path, format: str = "auto") -> list[Path]:
    """The files load_corpus(path, format) reads, in a fixed order (what a copy of the corpus,
    such as saberjax.corpus.cache's, depends on)."""
    path = Path(path)
    chosen = _chosen_format(path, format)
    if chosen in TEXT_FORMATS:
        return text_source_files(path, chosen)
    if chosen == "native":
        return native_files(path)
    if chosen == "uci":
        docword = uci_docword_in(path) if path.is_dir() else path
        return [docword, uci_vocab_beside(docword)]
    return [path, path.with_name(LDAC_VOCAB_FILE)]


def _chosen_format(path: Path, format: str) -> str:
    """format, or the detected one for "auto"; ValueError for an unknown format name."""
    if format != "auto" and format not in FORMATS:
        raise ValueError(f"unknown corpus format {format!r}; expected 'auto' or one of {FORMATS}")
    return detect_format(path) if format == "auto" else format


def detect_format(path) -> str:
    """The format load_corpus(path) reads path in: one of FORMATS (CorpusFormatError when
    none or several match; see load_corpus)."""
    path = Path(path)
    if path.is_dir():
        matches = [fmt for fmt, present in (
            ("native", (path / META_FILE).is_file()),
            ("uci", bool(uci_docwords(path))),
        ) if present]
        if not matches:
            matches = detected_text_formats(path)
    elif path.is_file():
        if UCI_DOCWORD_NAME.fullmatch(path.name):
            matches = ["uci"]
        elif starts_like_ldac(path):
            matches = ["ldac"]
        else:
            matches = detected_text_formats(path)
    elif is_collection(path):
        matches = detected_text_formats(path)
    else:
        raise CorpusFormatError(f"{path}: no such file or directory")
    if len(matches) == 1:
        return matches[0]
    verdict = f"matches several formats ({', '.join(matches)})" if matches else "format unknown"
    raise CorpusFormatError(
        f"{path}: {verdict}; tried native (folder with {META_FILE}), uci (folder with "
        f"docword.txt[.gz] or file docword*.txt[.gz]), ldac (file starting 'N id:count') and "
        f"{DETECTION_RULE}; pass format= to choose")


def convert_to_native(source, directory, format: str = "auto") -> Corpus:
    """Loads source (see load_corpus) and saves it as a native folder; returns the corpus."""
    corpus = load_corpus(source, format)
    save_native(corpus, directory)
    return corpus
