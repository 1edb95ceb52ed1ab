"""Corpora from raw text: files, or documents from Python, tokenised by saberjax.text's
rules, with a vocabulary chosen by document frequency or a model's fixed vocabulary.

Every raw-text input reaches the tokeniser through `corpus_of_blocks`, as the DocumentBlocks
of saberjax.corpus.text_sources; where the source names an id field, the corpus carries the
ids of the documents it keeps (Corpus.doc_names)."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from saberjax import text
from saberjax.corpus.core import PACKAGE_DIR, Corpus, from_entries
from saberjax.corpus.text_sources import (
    DocumentBlock,
    document_blocks,
    documents_of_blocks,
    source_name,
)
from saberjax.errors import CorpusFormatError


def load_text(path, min_df: int = text.DEFAULT_MIN_DF, max_df: float = text.DEFAULT_MAX_DF,
              max_vocab: int = text.DEFAULT_MAX_VOCAB, *, format: str = "text",
              **fields) -> Corpus:
    """A corpus from raw text files (text_sources.document_blocks: `format` one of
    text_sources.FORMATS or "auto", `fields` its text_field and id_field) under
    saberjax.text's tokenising rules."""
    path = Path(path)
    return corpus_of_blocks(document_blocks(path, format=format, **fields), min_df, max_df,
                            max_vocab, name=source_name(path), source=str(path))


def corpus_from_documents(documents, min_df: int = text.DEFAULT_MIN_DF,
                          max_df: float = text.DEFAULT_MAX_DF,
                          max_vocab: int = text.DEFAULT_MAX_VOCAB, name: str = "",
                          source: str = "text", **fields) -> Corpus:
    """A corpus from documents given in Python: an iterable of strings, an Arrow, pandas or
    datasets column or table (text_sources.document_blocks; `fields` names a table's text
    and id columns).  Tokens in text order, vocabulary by saberjax.text's df rules;
    documents left without a vocabulary word are dropped (counted, as for files).  `source`
    names the input in warnings and errors."""
    return corpus_of_blocks(document_blocks(documents, **fields), min_df, max_df, max_vocab,
                            name=name, source=source)


def corpus_in_vocabulary(documents, vocab: Sequence[str], name: str = "",
                         source: str = "text", **fields) -> Corpus:
    """One document per string (documents as corpus_from_documents takes them), its tokens
    (saberjax.text's rules) matched to a model's vocabulary: no document-frequency rule,
    documents without a known word kept (empty), so that row d is document d.  Tokens of
    other words are skipped and counted: a warning says how many of all, and
    CorpusFormatError is raised when no token at all is known (scoring or inferring nothing
    would look like an answer)."""
    return corpus_of_blocks(document_blocks(documents, **fields), vocab=vocab, name=name,
                            source=source)


def corpus_of_blocks(blocks: Iterable[DocumentBlock], min_df: int = text.DEFAULT_MIN_DF,
                     max_df: float = text.DEFAULT_MAX_DF, max_vocab: int = text.DEFAULT_MAX_VOCAB,
                     name: str = "", source: str = "text", vocab: Sequence[str] | None = None
                     ) -> Corpus:
    """The corpus of blocks of raw documents: the vocabulary chosen by the df rules
    (min_df, max_df, max_vocab; documents left without a vocabulary word dropped and
    counted), or, given a model's `vocab`, the documents matched to it as
    corpus_in_vocabulary describes.  The blocks' ids, if any, become the corpus's doc_names
    (those of the documents kept).  `source` names the input in warnings and errors."""
    names = []
    documents = _decoded(blocks, names)
    if vocab is None:
        entries = text.token_entries(documents, min_df, max_df, max_vocab, source)
        corpus = from_entries(entries.doc_ids, entries.word_ids,
                              np.ones(entries.word_ids.size, np.int64), entries.num_docs,
                              entries.vocab, name, source)
        kept = np.bincount(entries.doc_ids, minlength=entries.num_docs) > 0
    else:
        corpus = _in_vocabulary(documents, vocab, name, source)
        kept = slice(None)
    if names:
        corpus = dataclasses.replace(corpus, doc_names=np.concatenate(names)[kept])
    return corpus


def _decoded(blocks: Iterable[DocumentBlock], names: list) -> Iterator[str]:
    """The documents of the blocks as strings (text_sources.documents_of_blocks), their ids
    appended to `names` as each block is read."""
    for block in blocks:
        if block.ids is not None:
            names.append(block.ids)
        yield from documents_of_blocks([block])


def _in_vocabulary(documents: Iterable[str], vocab: Sequence[str], name: str,
                   source: str) -> Corpus:
    """corpus_in_vocabulary of document strings."""
    tokens = text.tokens_in_vocabulary(documents, vocab)
    entries = tokens.entries
    corpus = from_entries(entries.doc_ids, entries.word_ids,
                          np.ones(entries.word_ids.size, np.int64), entries.num_docs,
                          entries.vocab, name, source, keep_empty=True)
    vocabulary = f"the model's vocabulary of {len(entries.vocab):,} words"
    if corpus.num_docs and not corpus.num_tokens:
        raise CorpusFormatError(f"{source}: none of the {tokens.tokens:,} tokens of its "
                                f"{entries.num_docs:,} document(s) is a word of {vocabulary}; "
                                f"is the text in the model's language?")
    if tokens.unknown:
        warnings.warn(f"{source}: {tokens.unknown:,} of {tokens.tokens:,} tokens "
                      f"({tokens.unknown / tokens.tokens:.1%}) are words outside {vocabulary}; "
                      f"they are skipped", stacklevel=2, skip_file_prefixes=(PACKAGE_DIR,))
    return dataclasses.replace(corpus, unknown_tokens=tokens.unknown)
