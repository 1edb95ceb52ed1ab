"""The plain text reader saberjax had before its block engine (saberjax.corpus.tokenizing,
text_corpus): a Python loop over documents and tokens.  Tests check that the engine gives
exactly its corpus under the default rules."""

from __future__ import annotations

import collections
import re
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from saberjax.errors import CorpusFormatError
from saberjax.text import ENGLISH_STOP_WORDS  # the list is not under test, the rules are

DEFAULT_MIN_DF = 5
DEFAULT_MAX_DF = 0.5
DEFAULT_MAX_VOCAB = 50_000

_WORD = re.compile(r"[a-z]{3,}")  # maximal letter runs of length >= 3 (shorter runs never match)


def tokenize(text: str) -> list[str]:
    """The words of `text` after ASCII folding, lowercasing, length and stop-word filtering."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return [word for word in _WORD.findall(folded.lower()) if word not in ENGLISH_STOP_WORDS]


def document_files(path) -> list[Path]:
    """The files read_documents reads: a folder's .txt files sorted by name, or the file."""
    path = Path(path)
    if not path.is_dir():
        return [path]
    files = sorted(file for file in path.iterdir() if file.suffix == ".txt" and file.is_file())
    if not files:
        raise CorpusFormatError(f"{path}: no .txt files in this folder")
    return files


def read_documents(path) -> Iterator[str]:
    """The documents of a folder of .txt files (sorted by name) or of a one-per-line file."""
    path = Path(path)
    if path.is_dir():
        return (_read_text(file) for file in document_files(path))
    lines = _read_text(path).split("\n")
    return iter(lines[:-1] if lines[-1] == "" else lines)


class TokenEntries(NamedTuple):
    """The vocabulary tokens of num_docs documents: token i is word word_ids[i] of document
    doc_ids[i], documents in order and tokens in text order; vocab sorted alphabetically."""

    doc_ids: np.ndarray
    word_ids: np.ndarray
    num_docs: int
    vocab: tuple[str, ...]


def token_entries(documents: Iterable[str], min_df: int = DEFAULT_MIN_DF,
                  max_df: float = DEFAULT_MAX_DF, max_vocab: int = DEFAULT_MAX_VOCAB,
                  source: str = "text") -> TokenEntries:
    """The tokens of document strings that are in the vocabulary the df rules choose.

    `source` names the input in errors.
    """
    if min_df < 1 or not 0 < max_df <= 1 or max_vocab < 1:
        raise ValueError(f"need min_df >= 1, 0 < max_df <= 1 and max_vocab >= 1, got "
                         f"min_df={min_df}, max_df={max_df}, max_vocab={max_vocab}")
    word_index = collections.defaultdict()  # every word seen -> its id, in order of appearance
    word_index.default_factory = word_index.__len__  # a new word gets the next id
    doc_tokens = []
    for text in documents:
        tokens = tokenize(text)
        doc_tokens.append(np.fromiter(map(word_index.__getitem__, tokens), np.int64, len(tokens)))
    lengths = np.array([tokens.size for tokens in doc_tokens], np.int64)
    seen_ids = np.concatenate(doc_tokens) if doc_tokens else np.zeros(0, np.int64)
    doc_of_token = np.repeat(np.arange(lengths.size), lengths)
    words = np.array(list(word_index), dtype=str)

    vocab_ids = _choose_vocabulary(words, seen_ids, doc_of_token, lengths.size, min_df, max_df,
                                   max_vocab)
    if vocab_ids.size == 0:
        raise CorpusFormatError(
            f"{source}: no word is in at least min_df={min_df} and at most max_df={max_df} of "
            f"the {lengths.size} documents; lower min_df or give more documents")
    new_id = np.full(words.size, -1, np.int64)
    new_id[vocab_ids] = np.arange(vocab_ids.size)
    word_ids = new_id[seen_ids]
    kept = word_ids >= 0
    return TokenEntries(doc_of_token[kept], word_ids[kept], lengths.size,
                        tuple(words[vocab_ids].tolist()))


class VocabularyTokens(NamedTuple):
    """The tokens of documents that are words of a given vocabulary (as TokenEntries, ids into
    that vocabulary), and how many tokens were not: `unknown` of `tokens` in all."""

    entries: TokenEntries
    unknown: int
    tokens: int


def tokens_in_vocabulary(documents: Iterable[str], vocab) -> VocabularyTokens:
    """The tokens (tokenize's rules) of document strings matched to a fixed vocabulary, as a
    trained model sees new text: no document-frequency rule, and tokens of other words are
    counted, not kept."""
    vocab = tuple(vocab)
    word_id = {word: i for i, word in enumerate(vocab)}
    doc_tokens = []
    for document in documents:
        if not isinstance(document, str):
            raise TypeError(f"documents must be strings, got {type(document).__name__}")
        tokens = tokenize(document)
        doc_tokens.append(np.fromiter((word_id.get(token, -1) for token in tokens), np.int64,
                                      len(tokens)))
    lengths = np.array([tokens.size for tokens in doc_tokens], np.int64)
    ids = np.concatenate(doc_tokens) if doc_tokens else np.zeros(0, np.int64)
    known = ids >= 0
    doc_of_token = np.repeat(np.arange(lengths.size), lengths)
    return VocabularyTokens(TokenEntries(doc_of_token[known], ids[known], lengths.size, vocab),
                            int(ids.size - known.sum()), int(ids.size))


def _choose_vocabulary(words: np.ndarray, token_ids: np.ndarray, doc_of_token: np.ndarray,
                       num_docs: int, min_df: int, max_df: float, max_vocab: int) -> np.ndarray:
    """Ids (into `words`) of the vocabulary, in alphabetical order of their words."""
    num_words = words.size
    doc_word_pairs = np.sort(doc_of_token * num_words + token_ids)
    distinct_pairs = doc_word_pairs[np.diff(doc_word_pairs, prepend=-1) != 0]
    doc_frequency = np.bincount(distinct_pairs % max(num_words, 1), minlength=num_words)
    counts = np.bincount(token_ids, minlength=num_words)
    candidates = np.flatnonzero((doc_frequency >= min_df) & (doc_frequency <= max_df * num_docs))
    if candidates.size > max_vocab:  # the most frequent, ties alphabetical
        candidates = candidates[np.lexsort((words[candidates], -counts[candidates]))[:max_vocab]]
    return candidates[np.argsort(words[candidates], kind="stable")]


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise CorpusFormatError(f"{path}: cannot read ({error.strerror})") from error
    _check_is_text(path, data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


# Control characters that text does not contain: all but tab, line feed, vertical tab, form
# feed and carriage return, plus DEL.
_BINARY_BYTES = np.array(sorted({*range(32), 127} - set(b"\t\n\v\f\r")), np.uint8)
MAX_CONTROL_FRACTION = 0.01  # of a file's bytes; binary data has ~12%


def _check_is_text(path: Path, data: bytes) -> None:
    """Refuse binary data (a NUL byte, or more than MAX_CONTROL_FRACTION control characters),
    which Latin-1 would otherwise decode into nonsense words."""
    control = np.isin(np.frombuffer(data, np.uint8), _BINARY_BYTES)
    if b"\0" in data or control.sum() > MAX_CONTROL_FRACTION * len(data):
        first = int(np.argmax(control))
        raise CorpusFormatError(
            f"{path}: binary data, not text (control byte {data[first]:#04x} at offset {first}, "
            f"{int(control.sum())} of {len(data)} bytes); plain text input is UTF-8 or Latin-1")
