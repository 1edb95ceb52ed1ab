"""Corpora from plain text: files or document strings, tokenised under saberjax.text's rules
(saberjax.corpus.tokenizing, text_corpus), with a vocabulary chosen by document frequency or a
model's fixed vocabulary.

The text options every loader takes (text_rules): token_pattern, lowercase, strip_accents,
pretokenized (text.TextRules) and min_df, max_df, max_features, stop_words
(text.VocabularyRules).  Documents that are not valid UTF-8 are read as Latin-1, and counted
in a warning.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
from absl import flags
import pyarrow.compute as pc

from saberjax import text
from saberjax.corpus.core import PACKAGE_DIR, Corpus, offsets_from_lengths
from saberjax.corpus.text_corpus import TextCorpus, build_corpus
from saberjax.corpus.tokenizing import DocumentBlock, block_words, dictionary_words
from saberjax.errors import CorpusFormatError

BLOCK_BYTES = 1 << 24  # bytes of a text file read as one block
SNIFF_BYTES = 1 << 20  # bytes at the start of a file whose control characters are counted
_RULE_NAMES = {field.name for field in dataclasses.fields(text.TextRules)}
_VOCABULARY_NAMES = {field.name for field in dataclasses.fields(text.VocabularyRules)}
TEXT_OPTIONS = tuple(sorted(_RULE_NAMES | _VOCABULARY_NAMES))


def text_rules(**options) -> tuple[text.TextRules, text.VocabularyRules]:
    """The tokenising and vocabulary rules the text options name (TEXT_OPTIONS; the others
    keep their defaults); ValueError naming an unknown option or a bad value."""
    unknown = sorted(set(options) - _RULE_NAMES - _VOCABULARY_NAMES)
    if unknown:
        raise ValueError(f"unknown text option(s) {', '.join(unknown)}; the text options are "
                         f"{', '.join(TEXT_OPTIONS)}")
    return (text.TextRules(**{k: v for k, v in options.items() if k in _RULE_NAMES}),
            text.VocabularyRules(**{k: v for k, v in options.items() if k in _VOCABULARY_NAMES}))


def tokenizing_rules(options: dict) -> text.TextRules:
    """The tokenising rules among text options (a model's recorded text_options, say), the
    vocabulary options left out: how a model trained on text reads new text."""
    return text.TextRules(**{name: value for name, value in options.items()
                             if name in _RULE_NAMES})


def recorded_options(**options) -> dict:
    """Every text option (the defaults filled in) as JSON values, stop words as their sorted
    list unless "english" or None: what decides the corpus, for a cache key or a record."""
    text_rules(**options)  # refuses bad options
    recorded = {name: field.default for rules in (text.TextRules, text.VocabularyRules)
                for name, field in rules.__dataclass_fields__.items()}
    recorded.update(options)
    if recorded["stop_words"] not in ("english", None):
        recorded["stop_words"] = sorted(text.stop_word_set(recorded["stop_words"]))
    return recorded


def define_flags() -> None:
    """The launchers' text option flags (absl), named as the options are (text_rules)."""
    flags.DEFINE_integer("min_df", None, "Plain text: keep words in at least N documents "
                         f"(default {text.DEFAULT_MIN_DF}).", lower_bound=1)
    flags.DEFINE_float("max_df", None, "Plain text: keep words in at most this fraction of "
                       f"documents (default {text.DEFAULT_MAX_DF}).")
    flags.register_validator("max_df", lambda max_df: max_df is None or 0 < max_df <= 1,
                             "--max_df must be in (0, 1]")
    flags.DEFINE_integer("max_features", None, "Plain text: keep at most N words, the most "
                         f"frequent (default {text.DEFAULT_MAX_FEATURES:,}).", lower_bound=1)
    flags.DEFINE_string("stop_words", None, "Plain text: 'english' (default), 'none', or a file "
                        "of stop words, one a line.")
    flags.DEFINE_string("token_pattern", None, "Plain text: tokens are this regular "
                        f"expression's matches (default {text.DEFAULT_TOKEN_PATTERN!r}, after "
                        "accents are stripped and the text lowercased).")
    flags.DEFINE_bool("lowercase", True, "Plain text: lowercase the text.")
    flags.DEFINE_enum("strip_accents", None, ["ascii", "unicode", "none"], "Plain text: 'ascii' "
                      "(default: NFKD, non-ASCII characters dropped), 'unicode' (NFKD, combining "
                      "marks dropped) or 'none'.")
    flags.DEFINE_bool("pretokenized", False, "Plain text: the tokens are the text's "
                      "whitespace-separated pieces (--token_pattern unused).")


def flagged_options() -> dict:
    """The text options the command line gives (define_flags); defaults stand for the rest."""
    options = {name: flags.FLAGS[name].value for name in TEXT_OPTIONS if flags.FLAGS[name].present}
    if options.get("strip_accents") == "none":
        options["strip_accents"] = None
    return options


def load_text(path, directory=None, log: Callable[[str], None] | None = None,
              workers: int | None = None, memory_bytes: int | None = None,
              **options) -> Corpus:
    """A corpus from plain text (a folder of .txt files, a document each, or a file of one
    document a line) under the text `options` (text_rules).  directory, log, workers,
    memory_bytes: see text_corpus.build_corpus; written into a directory, the token ids go to
    a temporary file beside it as they are read unless memory_bytes says otherwise (out of
    core: memory holds the pieces in flight and the words' counts, never the corpus)."""
    if directory is not None and memory_bytes is None:
        memory_bytes = 0
    path = Path(path)
    rules, vocabulary = text_rules(**options)
    name = path.name if path.is_dir() else path.stem
    files = text.document_files(path)
    total = sum(file.stat().st_size for file in files)
    blocks = _file_blocks(files) if path.is_dir() else _line_blocks(path)
    built = build_corpus(blocks, rules, vocabulary, name=name, source=str(path),
                         directory=directory, workers=workers, memory_bytes=memory_bytes,
                         total_bytes=total, log=log)
    _warn_invalid_utf8(str(path), built)
    return built.corpus


def corpus_from_documents(documents: Iterable[str], name: str = "", source: str = "text",
                          **options) -> Corpus:
    """A corpus from document strings: tokens in text order, vocabulary by the text `options`
    (text_rules); documents left without a vocabulary word are dropped (counted, as for
    files).  `source` names the input in warnings and errors."""
    rules, vocabulary = text_rules(**options)
    built = build_corpus(string_blocks(documents), rules, vocabulary, name=name, source=source)
    _warn_invalid_utf8(source, built)
    return built.corpus


class VocabularyTokens(NamedTuple):
    """The tokens of documents that are words of a given vocabulary (a corpus over it, every
    document kept, empty or not), and how many tokens were not: `unknown` of `tokens`."""

    corpus: Corpus
    unknown: int
    tokens: int


def tokens_in_vocabulary(documents: Iterable[str], vocab,
                         rules: text.TextRules = text.DEFAULT_RULES,
                         stop_words=text.ENGLISH_STOP_WORDS) -> VocabularyTokens:
    """The tokens (`rules`, stop words left out) of document strings matched to a fixed
    vocabulary, as a trained model sees new text: no document-frequency rule, and tokens of
    other words are counted, not kept."""
    return vocabulary_tokens(string_blocks(documents), vocab, rules, stop_words)


def vocabulary_tokens(blocks: Iterable[DocumentBlock], vocab,
                      rules: text.TextRules = text.DEFAULT_RULES,
                      stop_words=text.ENGLISH_STOP_WORDS) -> VocabularyTokens:
    """tokens_in_vocabulary of the documents of DocumentBlocks."""
    vocab = tuple(vocab)
    vocab_words = pa.array([word.encode("utf-8", "surrogateescape") for word in vocab],
                           pa.large_binary())
    stop_list = pa.array([word.encode("utf-8", "surrogateescape") for word in stop_words],
                         pa.large_binary())
    lengths, word_ids, unknown = [], [], 0
    for block in blocks:
        words = block_words(block, rules)
        every = dictionary_words(words)
        mapping = pc.index_in(every, vocab_words).fill_null(-1).to_numpy().astype(np.int32)
        mapping[pc.is_in(every, stop_list).to_numpy(zero_copy_only=False)] = -2  # left out
        ids = mapping[words.token_ids] if words.token_ids.size else np.zeros(0, np.int32)
        known = ids >= 0
        unknown += int(np.count_nonzero(ids == -1))
        ends = np.zeros(ids.size + 1, np.int64)
        np.cumsum(known, out=ends[1:])
        lengths.append(np.diff(ends[words.doc_tokens]))
        word_ids.append(ids[known])
    lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    ids = np.concatenate(word_ids) if word_ids else np.zeros(0, np.int32)
    return VocabularyTokens(Corpus(offsets_from_lengths(lengths), ids, vocab),
                            unknown, unknown + ids.size)


def corpus_in_vocabulary(documents: Iterable[str], vocab: Sequence[str], name: str = "",
                         source: str = "text",
                         rules: text.TextRules = text.DEFAULT_RULES) -> Corpus:
    """One document per string, its tokens (`rules`) matched to a model's vocabulary: no
    document-frequency rule, documents without a known word kept (empty), so that row d is
    document d.  Tokens of other words are skipped and counted: a warning says how many of
    all, and CorpusFormatError is raised when no token at all is known (scoring or inferring
    nothing would look like an answer)."""
    return _matched(tokens_in_vocabulary(documents, vocab, rules), name, source)


def text_in_vocabulary(path, vocab: Sequence[str],
                       rules: text.TextRules = text.DEFAULT_RULES) -> Corpus:
    """corpus_in_vocabulary of a plain text file or folder (load_text's inputs)."""
    path = Path(path)
    blocks = _file_blocks(text.document_files(path)) if path.is_dir() else _line_blocks(path)
    return _matched(vocabulary_tokens(blocks, vocab, rules), path.stem, str(path))


def _matched(tokens: VocabularyTokens, name: str, source: str) -> Corpus:
    corpus = dataclasses.replace(tokens.corpus, name=name)
    vocabulary = f"the model's vocabulary of {corpus.num_words:,} words"
    if corpus.num_docs and not corpus.num_tokens:
        raise CorpusFormatError(f"{source}: shares no word with {vocabulary} (none of the "
                                f"{tokens.tokens:,} tokens of its {corpus.num_docs:,} "
                                f"document(s) is one); is the text in the model's language?")
    if tokens.unknown:
        warnings.warn(f"{source}: {tokens.unknown:,} of {tokens.tokens:,} tokens "
                      f"({tokens.unknown / tokens.tokens:.1%}) are words outside {vocabulary}; "
                      f"they are skipped", stacklevel=3, skip_file_prefixes=(PACKAGE_DIR,))
    return dataclasses.replace(corpus, unknown_tokens=tokens.unknown)


def string_blocks(documents: Iterable[str], block_bytes: int = BLOCK_BYTES
                  ) -> Iterator[DocumentBlock]:
    """DocumentBlocks of document strings (UTF-8 encoded, a block of about block_bytes at a
    time, so that the strings are never all encoded at once)."""
    if isinstance(documents, (str, bytes)):
        raise TypeError("documents is one string; pass a list of document strings")
    encoded, size = [], 0
    for document in documents:
        if not isinstance(document, str):
            raise TypeError(f"documents must be strings, got {type(document).__name__}")
        encoded.append(document.encode("utf-8", "ignore"))
        size += len(encoded[-1])
        if size >= block_bytes:
            yield _joined(encoded)
            encoded, size = [], 0
    if encoded:
        yield _joined(encoded)


def _joined(documents: list[bytes]) -> DocumentBlock:
    lengths = np.fromiter(map(len, documents), np.int64, len(documents))
    return DocumentBlock(np.frombuffer(b"".join(documents), np.uint8),
                         offsets_from_lengths(lengths))


def _file_blocks(files: list[Path]) -> Iterator[DocumentBlock]:
    """A document per file, files joined into blocks of about BLOCK_BYTES."""
    documents, size = [], 0
    for file in files:
        documents.append(_read_checked(file))
        size += len(documents[-1])
        if size >= BLOCK_BYTES:
            yield _joined(documents)
            documents, size = [], 0
    if documents:
        yield _joined(documents)


def _line_blocks(path: Path) -> Iterator[DocumentBlock]:
    """A document per line of a file (its line break kept at its end): blocks of whole lines
    of about BLOCK_BYTES, their offsets left to the tokenising threads (DocumentBlock); a line
    break ending the file ends the last line.  The file is refused as binary data for a NUL
    byte anywhere, or for control characters in its first SNIFF_BYTES (_TextCheck)."""
    try:
        file = open(path, "rb")
    except OSError as error:
        raise CorpusFormatError(f"{path}: cannot read ({error.strerror})") from error
    with file:
        rest, offset = b"", 0
        while True:
            buffer = bytearray(len(rest) + BLOCK_BYTES)
            buffer[:len(rest)] = rest
            try:
                read = file.readinto(memoryview(buffer)[len(rest):])
            except OSError as error:
                raise CorpusFormatError(f"{path}: cannot read ({error.strerror})") from error
            if not read:
                break
            size = len(rest) + read
            if (nul := buffer.find(b"\0", len(rest), size)) >= 0:
                raise CorpusFormatError(f"{path}: binary data, not text (a NUL byte at offset "
                                        f"{offset + nul - len(rest)}); plain text input is "
                                        f"UTF-8 or Latin-1")
            if offset == 0:
                checker = _TextCheck(path)
                checker.add(np.frombuffer(buffer, np.uint8, min(size, SNIFF_BYTES)))
                checker.finish()
            offset += read
            end = buffer.rfind(b"\n", 0, size) + 1
            if end:
                yield DocumentBlock(np.frombuffer(buffer, np.uint8, end), None)
            rest = bytes(buffer[end:size])
        if rest:
            yield DocumentBlock(np.frombuffer(rest, np.uint8), None)


def _read_checked(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise CorpusFormatError(f"{path}: cannot read ({error.strerror})") from error
    checker = _TextCheck(path)
    checker.add(np.frombuffer(data, np.uint8))
    checker.finish()
    return data


# Control characters that text does not contain: all but tab, line feed, vertical tab, form
# feed and carriage return, plus DEL.
_BINARY_BYTES = np.zeros(256, bool)
_BINARY_BYTES[sorted({*range(32), 127} - set(b"\t\n\v\f\r"))] = True
MAX_CONTROL_FRACTION = 0.01  # of a file's bytes; binary data has ~12%


class _TextCheck:
    """Refuses binary data (a NUL byte, or more than MAX_CONTROL_FRACTION control characters
    in the file), which Latin-1 would otherwise decode into nonsense words."""

    def __init__(self, path: Path):
        self.path, self.size, self.control, self.first = path, 0, 0, None

    def add(self, data: np.ndarray) -> None:
        count = (np.count_nonzero(data < 32) - np.count_nonzero(data - np.uint8(9) < 5)
                 + np.count_nonzero(data == 127))  # bytes 0-31 but 9-13, and 127
        if count and self.first is None:
            at = int(np.argmax(_BINARY_BYTES[data]))
            self.first = (self.size + at, int(data[at]))
        self.size += data.size
        self.control += int(count)
        if count and not data.all():  # a NUL byte
            self._refuse()

    def finish(self) -> None:
        if self.control > MAX_CONTROL_FRACTION * self.size:
            self._refuse()

    def _refuse(self) -> None:
        offset, byte = self.first
        raise CorpusFormatError(
            f"{self.path}: binary data, not text (control byte {byte:#04x} at offset {offset}, "
            f"{self.control} control bytes in the first {self.size} bytes); plain text input "
            f"is UTF-8 or Latin-1")


def _warn_invalid_utf8(source: str, built: TextCorpus) -> None:
    if built.invalid_utf8_docs:
        warnings.warn(f"{source}: {built.invalid_utf8_docs:,} document(s) are not valid UTF-8; "
                      f"read as Latin-1", stacklevel=3, skip_file_prefixes=(PACKAGE_DIR,))
