"""Plain text's rules: how raw documents become tokens (TextRules) and which words make the
vocabulary (VocabularyRules).  saberjax.corpus.plain_text reads text under them, with
saberjax.corpus.tokenizing and text_corpus doing the work.

The default rules are those the shared corpora were built with (shared/data/README.md), so a
model trained on your own text is comparable to the benchmarks:

1. Unicode NFKD, non-ASCII characters dropped ("café" -> "cafe"), lowercased.
2. Tokens are maximal runs of ``[a-z]``, so digits and punctuation split words ("don't" ->
   "don", "t"); tokens shorter than 3 letters and English stop words are dropped.
3. Vocabulary: words in at least `min_df` documents and at most a `max_df` fraction of them;
   if more than `max_features` remain, the most frequent (ties alphabetical).  Sorted
   alphabetically, so word id i is the i-th word in alphabetical order.
4. Documents left without a vocabulary word are dropped (counted in dropped_empty_docs).

The options are named as scikit-learn's CountVectorizer names them.  Documents are strings
or bytes; saberjax.corpus.text_sources reads them from files.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import unicodedata
from pathlib import Path

from saberjax.errors import CorpusFormatError

DEFAULT_MIN_DF = 5
DEFAULT_MAX_DF = 0.5
DEFAULT_MAX_FEATURES = 50_000


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


DEFAULT_TOKEN_PATTERN = r"[a-z]{3,}"
STRIP_ACCENTS = ("ascii", "unicode", None)


@dataclasses.dataclass(frozen=True)
class TextRules:
    """How a document becomes tokens, named as scikit-learn's CountVectorizer names them.

    strip_accents: "ascii" (NFKD, then every non-ASCII character dropped: "café" -> "cafe",
    "Москва" -> ""), "unicode" (NFKD, then combining marks dropped: "Москва" stays) or None;
    lowercase: lowercase after that; token_pattern: the tokens are the regular expression's
    matches (Python's re) in the result.  pretokenized: the tokens are the whitespace-separated
    pieces instead (text split by a segmenter first), token_pattern unused.  The defaults are
    the rules the shared corpora were built with and take the fast path (saberjax.corpus.
    tokenizing); any other rules tokenise a document at a time with `tokenize`.
    """

    token_pattern: str = DEFAULT_TOKEN_PATTERN
    lowercase: bool = True
    strip_accents: str | None = "ascii"
    pretokenized: bool = False

    def __post_init__(self):
        if self.strip_accents not in STRIP_ACCENTS:
            raise ValueError(f"strip_accents must be one of {STRIP_ACCENTS}, got "
                             f"{self.strip_accents!r}")
        try:
            re.compile(self.token_pattern)
        except (re.error, TypeError) as error:
            raise ValueError(f"token_pattern {self.token_pattern!r} is not a regular "
                             f"expression ({error})") from None

    def is_default(self) -> bool:
        return self == DEFAULT_RULES

    def tokenize(self, document: str) -> list[str]:
        """The tokens of one document string under these rules."""
        if self.strip_accents == "ascii":
            document = unicodedata.normalize("NFKD", document).encode("ascii", "ignore").decode()
        elif self.strip_accents == "unicode":
            document = "".join(char for char in unicodedata.normalize("NFKD", document)
                               if not unicodedata.combining(char))
        if self.lowercase:
            document = document.lower()
        if self.pretokenized:
            return document.split()
        return _compiled(self.token_pattern).findall(document)


DEFAULT_RULES = TextRules()


@functools.cache
def _compiled(pattern: str) -> re.Pattern:
    return re.compile(pattern)


@functools.cache
def ascii_folding(code_point: int) -> bytes:
    """The ASCII characters character `code_point` keeps under strip_accents="ascii" (NFKD,
    non-ASCII dropped): b"e" for "é", b"" for "ж", b"fi" for "ﬁ"."""
    return unicodedata.normalize("NFKD", chr(code_point)).encode("ascii", "ignore")


def tokenize(text: str, rules: TextRules = DEFAULT_RULES,
             stop_words=ENGLISH_STOP_WORDS) -> list[str]:
    """The words of `text` under `rules`, stop words left out (by default: ASCII folding,
    lowercasing, letter runs of three or more, English stop words dropped)."""
    return [word for word in rules.tokenize(text) if word not in stop_words]


@dataclasses.dataclass(frozen=True)
class VocabularyRules:
    """Which words make the vocabulary: those in at least min_df documents and at most a
    max_df fraction of them, not stop words; when more than max_features remain, the most
    frequent (ties alphabetical).  stop_words: "english" (ENGLISH_STOP_WORDS), None, the path
    of a file of one word a line, or a collection of words."""

    min_df: int = DEFAULT_MIN_DF
    max_df: float = DEFAULT_MAX_DF
    max_features: int = DEFAULT_MAX_FEATURES
    stop_words: object = "english"

    def __post_init__(self):
        if self.min_df < 1 or not 0 < self.max_df <= 1 or self.max_features < 1:
            raise ValueError(f"need min_df >= 1, 0 < max_df <= 1 and max_features >= 1, got "
                             f"min_df={self.min_df}, max_df={self.max_df}, "
                             f"max_features={self.max_features}")
        object.__setattr__(self, "stop_words", stop_word_set(self.stop_words))


def stop_word_set(stop_words) -> frozenset[str]:
    """The stop words an option names (see VocabularyRules)."""
    if stop_words is None or stop_words == "none":
        return frozenset()
    if stop_words == "english":
        return ENGLISH_STOP_WORDS
    if isinstance(stop_words, (str, Path)):
        try:
            return frozenset(Path(stop_words).read_text(encoding="utf-8").split())
        except (OSError, UnicodeDecodeError) as error:
            raise CorpusFormatError(f"{stop_words}: cannot read the stop words file "
                                    f"({error})") from None
    return frozenset(stop_words)

