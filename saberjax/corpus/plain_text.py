"""Corpora from plain text: files or document strings, tokenised by saberjax.text's rules,
with a vocabulary chosen by document frequency or a model's fixed vocabulary."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from saberjax import text
from saberjax.corpus.core import PACKAGE_DIR, Corpus, from_entries
from saberjax.errors import CorpusFormatError

def load_text(path, min_df: int = text.DEFAULT_MIN_DF, max_df: float = text.DEFAULT_MAX_DF,
              max_vocab: int = text.DEFAULT_MAX_VOCAB) -> Corpus:
    """A corpus from plain text (text.read_documents) under saberjax.text's tokenising rules."""
    path = Path(path)
    name = path.name if path.is_dir() else path.stem
    return corpus_from_documents(text.read_documents(path), min_df, max_df, max_vocab,
                                 name=name, source=str(path))


def corpus_from_documents(documents: Iterable[str], min_df: int = text.DEFAULT_MIN_DF,
                          max_df: float = text.DEFAULT_MAX_DF,
                          max_vocab: int = text.DEFAULT_MAX_VOCAB, name: str = "",
                          source: str = "text") -> Corpus:
    """A corpus from document strings: tokens in text order, vocabulary by saberjax.text's df
    rules; documents left without a vocabulary word are dropped (counted, as for files).
    `source` names the input in warnings and errors."""
    entries = text.token_entries(documents, min_df, max_df, max_vocab, source)
    return from_entries(entries.doc_ids, entries.word_ids,
                        np.ones(entries.word_ids.size, np.int64), entries.num_docs,
                        entries.vocab, name, source)


def corpus_in_vocabulary(documents: Iterable[str], vocab: Sequence[str], name: str = "",
                         source: str = "text") -> Corpus:
    """One document per string, its tokens (saberjax.text's rules) matched to a model's
    vocabulary: no document-frequency rule, documents without a known word kept (empty), so
    that row d is document d.  Tokens of other words are skipped and counted: a warning says
    how many of all, and CorpusFormatError is raised when no token at all is known (scoring
    or inferring nothing would look like an answer)."""
    tokens = text.tokens_in_vocabulary(documents, vocab)
    entries = tokens.entries
    corpus = from_entries(entries.doc_ids, entries.word_ids,
                          np.ones(entries.word_ids.size, np.int64), entries.num_docs,
                          entries.vocab, name, source, keep_empty=True)
    vocabulary = f"the model's vocabulary of {len(entries.vocab):,} words"
    if corpus.num_docs and not corpus.num_tokens:
        raise CorpusFormatError(f"{source}: shares no word with {vocabulary} (none of the "
                                f"{tokens.tokens:,} tokens of its {entries.num_docs:,} "
                                f"document(s) is one); is the text in the model's language?")
    if tokens.unknown:
        warnings.warn(f"{source}: {tokens.unknown:,} of {tokens.tokens:,} tokens "
                      f"({tokens.unknown / tokens.tokens:.1%}) are words outside {vocabulary}; "
                      f"they are skipped", stacklevel=2, skip_file_prefixes=(PACKAGE_DIR,))
    return dataclasses.replace(corpus, unknown_tokens=tokens.unknown)
