"""Corpora from raw text: any input of saberjax.corpus.text_sources (files of plain text, JSON
Lines, CSV, TSV, Parquet, or documents given in Python), tokenised under saberjax.text's rules
(saberjax.corpus.tokenizing, text_corpus), with a vocabulary chosen by document frequency or a
model's fixed vocabulary.

The options every loader takes: the text options (text_rules: token_pattern, lowercase,
strip_accents, pretokenized of text.TextRules, and min_df, max_df, max_features, stop_words
of text.VocabularyRules) and the reading options naming the fields of records (text_blocks.
FIELD_OPTIONS: text_field, id_field, alias text_column, id_column).  Where an id field is
named, the corpus carries the ids of the documents it keeps (Corpus.doc_names).  Documents
that are not valid UTF-8 are read as Latin-1, and counted in a warning.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from saberjax import text
from saberjax.corpus.core import PACKAGE_DIR, Corpus, offsets_from_lengths
from saberjax.corpus.text_blocks import FIELD_OPTIONS, DocumentBlock, compression_of
from saberjax.corpus.text_corpus import TextCorpus, build_corpus
from saberjax.corpus.text_sources import (
    detect_text_format,
    document_blocks,
    source_files,
    source_name,
)
from saberjax.corpus.tokenizing import block_words, dictionary_words
from saberjax.errors import CorpusFormatError

_RULE_NAMES = {field.name for field in dataclasses.fields(text.TextRules)}
_VOCABULARY_NAMES = {field.name for field in dataclasses.fields(text.VocabularyRules)}
TEXT_OPTIONS = tuple(sorted(_RULE_NAMES | _VOCABULARY_NAMES))


def text_rules(**options) -> tuple[text.TextRules, text.VocabularyRules]:
    """The tokenising and vocabulary rules the text options name (TEXT_OPTIONS; the others
    keep their defaults; the reading options, FIELD_OPTIONS, are the reader's and pass);
    ValueError naming an unknown option or a bad value."""
    unknown = sorted(set(options) - _RULE_NAMES - _VOCABULARY_NAMES - set(FIELD_OPTIONS))
    if unknown:
        raise ValueError(f"unknown text option(s) {', '.join(unknown)}; the text options are "
                         f"{', '.join(TEXT_OPTIONS + FIELD_OPTIONS)}")
    return (text.TextRules(**{k: v for k, v in options.items() if k in _RULE_NAMES}),
            text.VocabularyRules(**{k: v for k, v in options.items() if k in _VOCABULARY_NAMES}))


def reading_options(options: dict) -> dict:
    """The reading options (FIELD_OPTIONS) among `options`."""
    return {name: value for name, value in options.items() if name in FIELD_OPTIONS}


def tokenizing_rules(options: dict) -> text.TextRules:
    """The tokenising rules among text options (a model's recorded text_options, say), the
    vocabulary options left out: how a model trained on text reads new text."""
    return text.TextRules(**{name: value for name, value in options.items()
                             if name in _RULE_NAMES})


def recorded_options(**options) -> dict:
    """Every text option (the defaults filled in; reading options left out) as JSON values,
    stop words as their sorted list unless "english" or None: what decides the tokens and
    the vocabulary, for a cache key or a record."""
    text_rules(**options)  # refuses bad options
    recorded = {name: field.default for rules in (text.TextRules, text.VocabularyRules)
                for name, field in rules.__dataclass_fields__.items()}
    recorded.update((name, value) for name, value in options.items()
                    if name not in FIELD_OPTIONS)
    if recorded["stop_words"] not in ("english", None):
        recorded["stop_words"] = sorted(text.stop_word_set(recorded["stop_words"]))
    return recorded


def load_text(path, directory=None, log: Callable[[str], None] | None = None,
              workers: int | None = None, memory_bytes: int | None = None, *,
              format: str = "text", durable: bool = True, **options) -> Corpus:
    """A corpus from raw text files (text_sources.document_blocks: `format` one of
    text_sources.FORMATS or "auto") under the text and reading `options` (see the module).
    directory, log, workers, memory_bytes, durable: see text_corpus.build_corpus; written into a
    directory, the token ids go to a temporary file beside it as they are read unless
    memory_bytes says otherwise (out of core: memory holds the pieces in flight and the
    words' counts, never the corpus)."""
    if directory is not None and memory_bytes is None:
        memory_bytes = 0
    path = Path(path)
    rules, vocabulary = text_rules(**options)
    blocks = document_blocks(path, format=format, parsed=False, **reading_options(options))
    built = build_corpus(blocks, rules, vocabulary, name=source_name(path), source=str(path),
                         directory=directory, workers=workers, memory_bytes=memory_bytes,
                         total_bytes=_plain_size(path, format), log=log, durable=durable)
    return _reported(built, str(path))


def _plain_size(path: Path, format: str) -> int | None:
    """The bytes of the blocks of a plain text or JSON Lines input (its files' sizes, the
    lines read as they are: for the ETA of progress lines, and the reader's choice of
    processes); None for other inputs and compressed files, whose sizes are not their
    blocks'."""
    chosen = detect_text_format(path) if format == "auto" else format
    if chosen not in ("text", "jsonl"):
        return None
    files = source_files(path, chosen)
    if any(compression_of(file) for file in files):
        return None
    return sum(file.stat().st_size for file in files)


def corpus_from_documents(documents, name: str = "", source: str = "text",
                          **options) -> Corpus:
    """A corpus from documents given in Python: an iterable of strings, an Arrow, pandas or
    datasets column or table (text_sources.document_blocks; the reading options name a
    table's text and id columns).  Tokens in text order, vocabulary by the text `options`
    (text_rules); documents left without a vocabulary word are dropped (counted, as for
    files).  `source` names the input in warnings and errors."""
    rules, vocabulary = text_rules(**options)
    blocks = document_blocks(documents, **reading_options(options))
    return _reported(build_corpus(blocks, rules, vocabulary, name=name, source=source), source)


def _reported(built: TextCorpus, source: str) -> Corpus:
    """The corpus built, once a warning has named its documents that were not valid UTF-8."""
    _warn_invalid_utf8(source, built)
    return built.corpus


class VocabularyTokens(NamedTuple):
    """The tokens of documents that are words of a given vocabulary (a corpus over it, every
    document kept, empty or not), and how many tokens were not: `unknown` of `tokens`."""

    corpus: Corpus
    unknown: int
    tokens: int


def tokens_in_vocabulary(documents, vocab, rules: text.TextRules = text.DEFAULT_RULES,
                         stop_words=text.ENGLISH_STOP_WORDS, **reading) -> VocabularyTokens:
    """The tokens (`rules`, stop words left out) of documents given in Python (as
    corpus_from_documents takes them, `reading` naming a table's fields) matched to a fixed
    vocabulary, as a trained model sees new text: no document-frequency rule, and tokens of
    other words are counted, not kept."""
    return vocabulary_tokens(document_blocks(documents, **reading), vocab, rules, stop_words)


def vocabulary_tokens(blocks: Iterable[DocumentBlock], vocab,
                      rules: text.TextRules = text.DEFAULT_RULES,
                      stop_words=text.ENGLISH_STOP_WORDS) -> VocabularyTokens:
    """tokens_in_vocabulary of the documents of DocumentBlocks (their ids, if any, the
    corpus's doc_names)."""
    vocab = tuple(vocab)
    word_id = {word: index for index, word in enumerate(vocab)}
    word_id.update((word, -2) for word in stop_words)  # left out, not unknown
    lengths, word_ids, names, unknown = [], [], [], 0
    for block in blocks:
        block = block.parsed()
        names.append(block.ids)
        words = block_words(block, rules)
        mapping = np.array([word_id.get(word, -1) for word in dictionary_words(words)],
                           np.int32)
        ids = mapping[words.token_ids] if words.token_ids.size else np.zeros(0, np.int32)
        known = ids >= 0
        unknown += int(np.count_nonzero(ids == -1))
        ends = np.zeros(ids.size + 1, np.int64)
        np.cumsum(known, out=ends[1:])
        lengths.append(np.diff(ends[words.doc_tokens]))
        word_ids.append(ids.take(np.flatnonzero(known)))
    lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    ids = np.concatenate(word_ids) if word_ids else np.zeros(0, np.int32)
    doc_names = (None if not names or any(part is None for part in names)
                 else np.concatenate(names))
    return VocabularyTokens(Corpus(offsets_from_lengths(lengths), ids, vocab,
                                   doc_names=doc_names), unknown, unknown + ids.size)


def corpus_in_vocabulary(documents, vocab: Sequence[str], name: str = "",
                         source: str = "text", rules: text.TextRules = text.DEFAULT_RULES,
                         **reading) -> Corpus:
    """One document per string (documents as corpus_from_documents takes them, `reading`
    naming a table's fields: their ids the corpus's doc_names), its tokens (`rules`) matched to a model's vocabulary: no
    document-frequency rule, documents without a known word kept (empty), so that row d is
    document d.  Tokens of other words are skipped and counted: a warning says how many of
    all, and CorpusFormatError is raised when no token at all is known (scoring or inferring
    nothing would look like an answer)."""
    return _matched(tokens_in_vocabulary(documents, vocab, rules, **reading), name, source)


def text_in_vocabulary(path, vocab: Sequence[str], rules: text.TextRules = text.DEFAULT_RULES,
                       format: str = "auto", **reading) -> Corpus:
    """corpus_in_vocabulary of raw text files (load_text's inputs and reading options)."""
    path = Path(path)
    blocks = document_blocks(path, format=format, parsed=False, **reading)
    return _matched(vocabulary_tokens(blocks, vocab, rules), source_name(path), str(path))


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


def _warn_invalid_utf8(source: str, built: TextCorpus) -> None:
    if built.invalid_utf8_docs:
        warnings.warn(f"{source}: {built.invalid_utf8_docs:,} document(s) are not valid UTF-8; "
                      f"read as Latin-1", stacklevel=3, skip_file_prefixes=(PACKAGE_DIR,))
