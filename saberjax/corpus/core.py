"""The Corpus type, its builders from entries, align_vocabulary and the shared limits.

A :class:`Corpus` is a CSR-like token stream: ``doc_offsets`` (int64, D+1) delimits each
document's slice of ``word_ids`` (int32, T). :func:`from_entries` and :func:`from_doc_runs`
build one from (document, word, count) entries or from runs of a document's tokens, dropping
documents without tokens (with a warning and ``Corpus.dropped_empty_docs``) unless asked to
keep them; every loader of a text format, count matrices and plain text build through them.
Its word ids are checked and counted by ``word_ids``, its fingerprint taken by ``fingerprint``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import warnings
from collections.abc import Sequence

import numpy as np

import saberjax.corpus.fingerprint as fingerprints
from saberjax.corpus.fingerprint import CorpusPart
from saberjax.corpus.word_ids import check_word_ids, count_words
from saberjax.errors import CorpusFormatError

MAX_COUNT = 2**31 - 1  # largest accepted count of one word in one document

# saberjax's folder: warnings skip its frames, naming the caller
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass(frozen=True, eq=False)
class Corpus:
    """Documents as one token stream: doc d is ``word_ids[doc_offsets[d]:doc_offsets[d + 1]]``.

    doc_offsets: int64 [D+1]; word_ids: int32 [T], each document's tokens in file order;
    vocab: word id i is vocab[i]; dropped_empty_docs: documents a loader dropped for having no
    tokens; unknown_tokens: tokens skipped for a word outside the vocabulary the documents
    were matched to (corpus_in_vocabulary, align_vocabulary); doc_names: the documents' ids,
    strings [D] read from the source's id field (None when it names none), carried to outputs
    such as doc_topics and left out of the fingerprint. Arrays are validated, converted to
    int64 / int32 (memory maps are not copied) and exposed read-only, so a corpus cannot change
    after its fingerprint is taken.  checked=False leaves the word ids to be validated by
    whoever counts them (word_counts, part): a memory-mapped corpus of which each process of a
    run reads only its own documents (native.load_native).  held_tokens: the tokens [first,
    last) this process holds of a corpus whose processes each read a share of its text
    (saberjax.shared_text); its other word ids are zeros until they are received from the
    processes holding them (receive_tokens), and its fingerprint is known only once combined
    from every process's part (combine_parts).
    """

    doc_offsets: np.ndarray
    word_ids: np.ndarray
    vocab: tuple[str, ...]
    name: str = ""
    dropped_empty_docs: int = 0
    unknown_tokens: int = 0
    doc_names: np.ndarray | None = None
    checked: bool = True
    held_tokens: tuple[int, int] | None = None

    def __post_init__(self):
        offsets = int_vector(self.doc_offsets, "doc_offsets")
        word_ids = int_vector(self.word_ids, "word_ids")
        vocab = tuple(self.vocab)
        if offsets.size == 0:
            raise CorpusFormatError("doc_offsets is empty; it needs num_docs + 1 entries")
        if offsets[0] != 0:
            raise CorpusFormatError(f"doc_offsets[0] is {offsets[0]}, expected 0")
        if offsets[-1] != word_ids.size:
            raise CorpusFormatError(
                f"doc_offsets[-1] is {offsets[-1]}, expected num_tokens = {word_ids.size}")
        steps = np.diff(offsets)
        if np.any(steps < 0):
            i = int(np.argmax(steps < 0))
            raise CorpusFormatError(
                f"doc_offsets decrease at index {i + 1} ({offsets[i]} -> {offsets[i + 1]})")
        if self.checked:
            check_word_ids(word_ids, len(vocab))
        if self.doc_names is not None:
            names = np.array(self.doc_names, dtype=object)
            if names.shape != (offsets.size - 1,):
                raise CorpusFormatError(f"doc_names holds {names.size} names for "
                                        f"{offsets.size - 1} documents")
            object.__setattr__(self, "doc_names", _read_only(names))
        object.__setattr__(self, "doc_offsets", _read_only(offsets.astype(np.int64, copy=False)))
        object.__setattr__(self, "word_ids", _read_only(word_ids.astype(np.int32, copy=False)))
        object.__setattr__(self, "vocab", vocab)

    def __repr__(self) -> str:
        return (f"Corpus(name={self.name!r}, num_docs={self.num_docs}, "
                f"num_tokens={self.num_tokens}, num_words={self.num_words})")

    @property
    def num_docs(self) -> int:
        return self.doc_offsets.size - 1

    @property
    def num_tokens(self) -> int:
        return self.word_ids.size

    @property
    def num_words(self) -> int:
        return len(self.vocab)

    def doc_lengths(self) -> np.ndarray:
        """Tokens per document, int64 [D]."""
        return np.diff(self.doc_offsets)

    def word_counts(self, workers: int | None = None,
                    tokens: tuple[int, int] | None = None) -> np.ndarray:
        """Tokens per word id, int64 [V], of the tokens [first, last) (None: every token),
        counted on `workers` threads (default: one per core; word_ids.count_words).

        A corpus whose processes' parts were combined (combine_parts) answers for every token
        from them, reading none.  An unchecked corpus's tokens are validated first (check).
        """
        if tokens is None and "_combined_word_counts" in self.__dict__:
            return self.__dict__["_combined_word_counts"].copy()
        first, last = (0, self.num_tokens) if tokens is None else tokens
        self.check(first, last, workers)
        return count_words(self.word_ids[first:last], self.num_words, workers)

    def check(self, first: int = 0, last: int | None = None,
              workers: int | None = None) -> None:
        """Validate the word ids of tokens [first, last) (None: to the end) of an unchecked
        corpus (check_word_ids; nothing for a checked one): what a reader of tokens counts
        first."""
        if not self.checked:
            check_word_ids(self.word_ids[first:last], self.num_words, workers, first)

    def fingerprint(self) -> str:
        """SHA-256 hex of the token layout and vocabulary (not the name), stable across processes
        and the same on any number of cores or processes (its definition: the fingerprint
        module).

        Identifies a corpus in caches and run records; computed once per object, or combined
        from the parts of the processes of a run (combine_parts).  Records written with an
        earlier definition hold earlier_fingerprint() or legacy_fingerprint();
        has_fingerprint accepts them.
        """
        return self._fingerprint

    @functools.cached_property
    def _fingerprint(self) -> str:
        if self.held_tokens is not None:
            raise ValueError(f"corpus {self.name!r} is held in part by this process (tokens "
                             f"{list(self.held_tokens)}); its fingerprint is combined from "
                             f"every process's part (combine_parts)")
        return fingerprints.fingerprint(self)

    def receive_tokens(self, first: int, word_ids: np.ndarray) -> None:
        """Write the word ids of tokens [first, first + len(word_ids)), which lie outside
        held_tokens, into a corpus held in part: tokens another process read
        (processes.share_tokens).  They are validated when counted (check), as those of an
        unchecked corpus."""
        held_first, held_last = self.held_tokens
        last = first + len(word_ids)
        if not (0 <= first <= last <= self.num_tokens) or (first < held_last
                                                          and held_first < last):
            raise ValueError(f"tokens [{first}, {last}) are not outside the held tokens "
                             f"[{held_first}, {held_last}) of the {self.num_tokens}")
        buffer = self.word_ids.base  # the writable array __post_init__ made read-only
        buffer[first:last] = word_ids

    def outline(self) -> str:
        """fingerprint()'s definition without the word ids: what every process of a run can
        compare before any reads its tokens (fingerprint.outline)."""
        return fingerprints.outline(self)

    def part(self, first: int, last: int, workers: int | None = None) -> CorpusPart:
        """What the tokens [first, last) give towards the whole corpus's fingerprint and word
        counts (combine_parts), reading only those tokens (fingerprint.corpus_part)."""
        return fingerprints.corpus_part(self, first, last, workers)

    def combine_parts(self, parts: Sequence[CorpusPart]) -> None:
        """Take the corpus's fingerprint and word counts from parts (part) covering its tokens,
        one after another, instead of reading the tokens: the processes of a run each read
        their own documents and combine every process's part (processes.combine_corpus_parts).
        The values are those of the corpus read whole.  ValueError when the parts do not cover
        the tokens exactly once (fingerprint.combined_fingerprint)."""
        self.__dict__["_fingerprint"] = fingerprints.combined_fingerprint(self, parts)
        self.__dict__["_combined_word_counts"] = _read_only(functools.reduce(
            np.add, (part.word_counts for part in parts), np.zeros(self.num_words, np.int64)))

    def legacy_fingerprint(self) -> str:
        """The fingerprint of format saberjax-corpus-v1 (fingerprint.legacy_fingerprint).
        Only for records written then (has_fingerprint); computed on each call."""
        return fingerprints.legacy_fingerprint(self)

    def earlier_fingerprint(self) -> str:
        """The fingerprint of format saberjax-corpus-v2 (fingerprint.earlier_fingerprint),
        reading every token.  Only for records written then (has_fingerprint); computed on
        each call."""
        return fingerprints.earlier_fingerprint(self)

    def has_fingerprint(self, recorded) -> bool:
        """Whether a fingerprint a record holds (a checkpoint's manifest, a model's config) is
        this corpus's: fingerprint(), or earlier_fingerprint() or legacy_fingerprint() for a
        record written before (each computed only when the ones before do not match)."""
        return isinstance(recorded, str) and any(
            recorded == fingerprint() for fingerprint in (
                self.fingerprint, self.earlier_fingerprint, self.legacy_fingerprint))

    def subset(self, doc_indices) -> Corpus:
        """The given documents, in the given order, with the same vocabulary and name.

        Each run of consecutive documents is copied as one slice, so the tokens cost no
        memory beyond the result (a train/test split of the corpus is a few thousand runs).
        """
        docs = int_vector(doc_indices, "doc_indices")
        if docs.size and (docs.min() < 0 or docs.max() >= self.num_docs):
            raise IndexError(f"doc_indices must lie in [0, {self.num_docs}), "
                             f"got values from {docs.min()} to {docs.max()}")
        heads = docs[np.diff(docs, prepend=-2) != 1]  # first and last document of each run
        tails = docs[np.diff(docs, append=-2) != 1]
        starts, ends = self.doc_offsets[heads].tolist(), self.doc_offsets[tails + 1].tolist()
        word_ids = np.concatenate([self.word_ids[:0]] + [
            self.word_ids[start:end] for start, end in zip(starts, ends)])
        return Corpus(offsets_from_lengths(self.doc_lengths()[docs]), word_ids, self.vocab,
                      name=self.name,
                      doc_names=None if self.doc_names is None else self.doc_names[docs])

    def doc_word_counts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(doc int64, word int32, count int32) per distinct (doc, word) pair, by doc then word.

        The sparse document-word count matrix, for count-based initialisation and evaluation.
        """
        docs = np.repeat(np.arange(self.num_docs, dtype=np.int64), self.doc_lengths())
        keys, counts = np.unique(docs * self.num_words + self.word_ids, return_counts=True)
        doc, word = np.divmod(keys, max(self.num_words, 1))
        return doc, word.astype(np.int32), counts.astype(np.int32)



def align_vocabulary(corpus: Corpus, vocab: Sequence[str]) -> Corpus:
    """The corpus re-expressed in another vocabulary, matching words by their strings.

    Tokens of words missing from `vocab` are dropped (with a warning saying how many), and
    documents keep their order, so that test documents with their own vocabulary file can be
    scored against a trained model.  A corpus none of whose tokens is left is an error
    (CorpusFormatError naming both vocabularies' sizes), since scoring nothing would look like
    a perfect score.  Returns the corpus itself when the vocabularies are equal.
    """
    vocab = tuple(vocab)
    if corpus.vocab == vocab:
        return corpus
    index = {word: i for i, word in enumerate(vocab)}
    mapping = np.array([index.get(word, -1) for word in corpus.vocab], dtype=np.int64)
    mapped = mapping[corpus.word_ids]
    known = mapped >= 0
    shared = (f"{int((mapping >= 0).sum())} of its {len(corpus.vocab)} words are in the model "
              f"vocabulary of {len(vocab)} words")
    if corpus.num_tokens and not known.any():
        raise CorpusFormatError(f"{corpus.name or 'corpus'}: shares no word with the model's "
                                f"vocabulary: {shared}, so none of its {corpus.num_tokens} "
                                f"tokens can be scored; is it in the model's language?")
    if not known.all():
        warnings.warn(f"{corpus.name or 'corpus'}: {shared}; dropped {int((~known).sum())} of "
                      f"{corpus.num_tokens} tokens whose words are not in the model vocabulary",
                      stacklevel=2)
    docs = np.repeat(np.arange(corpus.num_docs), corpus.doc_lengths())[known]
    lengths = np.bincount(docs, minlength=corpus.num_docs)
    return Corpus(offsets_from_lengths(lengths), mapped[known].astype(np.int32), vocab,
                  name=corpus.name, dropped_empty_docs=corpus.dropped_empty_docs,
                  unknown_tokens=corpus.unknown_tokens + int((~known).sum()),
                  doc_names=corpus.doc_names)


def from_entries(doc, word, count, num_docs: int, vocab: tuple[str, ...], name: str,
                 source: str, keep_empty: bool = False) -> Corpus:
    """The corpus of validated entries: count[i] >= 1 tokens of word word[i] in document doc[i]
    (0-based, doc in [0, num_docs), word in [0, len(vocab))), expanded into a token stream.

    Entries are grouped by document stably, so each document keeps its entries' order;
    documents without entries are dropped (and counted, with a warning naming `source`), so
    the cost never depends on num_docs, unless keep_empty (one document per id, empty ones
    included). The corpus is named `name`.
    """
    if np.any(doc[1:] < doc[:-1]):
        order = np.argsort(doc, kind="stable")
        doc, word, count = doc[order], word[order], count[order]
    return from_doc_runs(doc, count, np.repeat(word.astype(np.int32), count), num_docs,
                         vocab, name, source, keep_empty)


def from_doc_runs(doc, tokens, word_ids, num_docs: int, vocab: tuple[str, ...],
                  name: str, source: str, keep_empty: bool = False) -> Corpus:
    """The corpus of word_ids, made of runs of tokens[i] >= 1 tokens of document doc[i]
    (non-decreasing in [0, num_docs)); documents without tokens are dropped (with a warning)
    unless keep_empty."""
    if keep_empty:  # document d starts where the runs of documents >= d start
        first_run = np.searchsorted(doc, np.arange(num_docs + 1))
        return Corpus(offsets_from_lengths(tokens)[first_run], word_ids, vocab, name=name)
    doc_starts = np.flatnonzero(np.diff(doc, prepend=-1))  # tokens >= 1: no empty docs here
    doc_offsets = offsets_from_lengths(tokens)[np.append(doc_starts, doc.size)]
    dropped = num_docs - doc_starts.size
    if dropped:
        warnings.warn(f"{source}: dropped {dropped} empty document(s)", stacklevel=2,
                      skip_file_prefixes=(PACKAGE_DIR,))
    return Corpus(doc_offsets, word_ids, vocab, name=name, dropped_empty_docs=dropped)


def int_vector(values, what: str) -> np.ndarray:
    """values as a 1-D integer array (an empty sequence counts as integer); CorpusFormatError
    naming `what` otherwise."""
    array = np.asarray(values)
    if array.size == 0 and not np.issubdtype(array.dtype, np.integer):
        array = array.astype(np.int64)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise CorpusFormatError(
            f"{what} must be a 1-D integer array, got dtype {array.dtype} and shape {array.shape}")
    return array


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


def offsets_from_lengths(lengths: np.ndarray) -> np.ndarray:
    """Document offsets (int64, D+1) of documents of the given lengths."""
    return np.concatenate((np.zeros(1, np.int64), np.cumsum(lengths, dtype=np.int64)))
