"""Plain text input: raw documents -> tokens -> vocabulary (saberjax.corpus.plain_text makes
the Corpus of it with the public builder corpus.from_entries: load_text, corpus_from_documents,
corpus_in_vocabulary).

The rules are those the shared corpora were built with (shared/data/README.md), so a model
trained on your own text is comparable to the benchmarks:

1. Unicode NFKD, non-ASCII characters dropped ("café" -> "cafe"), lowercased.
2. Tokens are maximal runs of ``[a-z]``, so digits and punctuation split words ("don't" ->
   "don", "t"); tokens shorter than 3 letters and English stop words are dropped.
3. Vocabulary: words in at least `min_df` documents and at most a `max_df` fraction of them;
   if more than `max_vocab` remain, the most frequent (ties alphabetical).  Sorted
   alphabetically, so word id i is the i-th word in alphabetical order.
4. Documents left without a vocabulary word are dropped (counted in dropped_empty_docs).

Documents are strings; saberjax.corpus.text_sources reads them from files.
"""

from __future__ import annotations

import collections
import re
import unicodedata
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from saberjax.errors import CorpusFormatError

DEFAULT_MIN_DF = 5
DEFAULT_MAX_DF = 0.5
DEFAULT_MAX_VOCAB = 50_000

_WORD = re.compile(r"[a-z]{3,}")  # maximal letter runs of length >= 3 (shorter runs never match)

# scikit-learn's sklearn.feature_extraction.text.ENGLISH_STOP_WORDS (BSD-3-Clause; from the
# Glasgow Information Retrieval Group list), the 318 words the shared corpora removed: the
# spelling with "couldnt", "hasnt" and "noone" (none of the three is in their vocabularies).
ENGLISH_STOP_WORDS = frozenset("""
a about above across after afterwards again against all almost alone along already also
although always am among amongst amoungst amount an and another any anyhow anyone anything
anyway anywhere are around as at back be became because become becomes becoming been before
beforehand behind being below beside besides between beyond bill both bottom but by call can
cannot cant co con could couldnt cry de describe detail do done down due during each eg eight
either eleven else elsewhere empty enough etc even ever every everyone everything everywhere
except few fifteen fifty fill find fire first five for former formerly forty found four from
front full further get give go had has hasnt have he hence her here hereafter hereby herein
hereupon hers herself him himself his how however hundred i ie if in inc indeed interest into
is it its itself keep last latter latterly least less ltd made many may me meanwhile might mill
mine more moreover most mostly move much must my myself name namely neither never nevertheless
next nine no nobody none noone nor not nothing now nowhere of off often on once one only onto
or other others otherwise our ours ourselves out over own part per perhaps please put rather re
same see seem seemed seeming seems serious several she should show side since sincere six sixty
so some somehow someone something sometime sometimes somewhere still such system take ten than
that the their them themselves then thence there thereafter thereby therefore therein thereupon
these they thick thin third this those though three through throughout thru thus to together
too top toward towards twelve twenty two un under until up upon us very via was we well were
what whatever when whence whenever where whereafter whereas whereby wherein whereupon wherever
whether which while whither who whoever whole whom whose why will with within without would yet
you your yours yourself yourselves
""".split())


def tokenize(text: str) -> list[str]:
    """The words of `text` after ASCII folding, lowercasing, length and stop-word filtering."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return [word for word in _WORD.findall(folded.lower()) if word not in ENGLISH_STOP_WORDS]


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
