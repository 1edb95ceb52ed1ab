"""The words of a text input, numbered: a piece's dictionary of distinct words (Dictionary),
the words a worker numbers as it adds its pieces' dictionaries (Words: a key_tables.KeyTable
of word keys, long words numbered by a StringTable of their bytes), what it keeps of each
piece (PieceWords) and the workers' words numbered in the corpus's as the workers report them
(CorpusWords), their counts added once every piece is read (merged_words)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from saberjax.corpus.key_tables import KeyTable, Strings, StringTable, number_keys
from saberjax.corpus.tokenizing import LONG_KEY, is_long_key, word_strings

SMALL_COUNT = 255  # a word's tokens in a piece kept in a byte below this


class Dictionary(NamedTuple):
    """Distinct words with their tokens and documents: keys as block_words keys them, a key
    LONG_KEY + n standing for strings[n]."""

    keys: np.ndarray
    strings: Strings
    counts: np.ndarray
    doc_freq: np.ndarray


class PieceWords(NamedTuple):
    """For each word of a piece's dictionary, its number among its worker's words (int32)
    and its tokens, in a byte each until the collecting process needs them: `counts` (uint8,
    SMALL_COUNT for that many or more) and the exact counts of the words (by their place)
    seen SMALL_COUNT times or more."""

    entries: np.ndarray
    counts: np.ndarray
    frequent: np.ndarray
    frequent_counts: np.ndarray

    @staticmethod
    def of(entries: np.ndarray, counts: np.ndarray) -> PieceWords:
        frequent = np.flatnonzero(counts >= SMALL_COUNT)
        return PieceWords(entries, np.minimum(counts, SMALL_COUNT).astype(np.uint8),
                          frequent, counts[frequent])

    def tokens(self, words: np.ndarray) -> int:
        """The tokens of the words where `words` (bool, a word's place) is true."""
        return int((self.counts * words).sum(dtype=np.int64)  # no boolean index: no gather
                   + (self.frequent_counts[words[self.frequent]] - SMALL_COUNT).sum())


class Words:
    """Distinct words numbered as groups of dictionaries are added, with their tokens and
    documents summed: word keys (tokenizing's; a long word keyed LONG_KEY + its number
    among the long words, by its bytes)."""

    def __init__(self):
        self.keys = KeyTable()
        self.long_words = StringTable()
        self.counts = np.zeros(0, np.int64)
        self.doc_freq = np.zeros(0, np.int64)
        self._unreported: list[np.ndarray] = []  # keys numbered since new_words, in order
        self._reported = 0  # words new_words has handed over

    def add(self, dictionaries: list[Dictionary]) -> list[np.ndarray]:
        """The numbers (int32) of each dictionary's words, their counts added: the group's
        words numbered among themselves first (key_tables.number_keys; one dictionary's
        are distinct already), so that the table sees each distinct word once; every
        word's counts added at its number by one unbuffered add (np.add.at) per count."""
        keys = np.concatenate([part.keys for part in dictionaries])
        long = np.flatnonzero(is_long_key(keys))
        if long.size:
            keys[long] = LONG_KEY + self._long_numbers(dictionaries, keys, long)
        if len(dictionaries) == 1:  # a dictionary's words are distinct
            distinct, index = keys, None
        else:
            distinct, index = number_keys(keys)
        known = self.keys.size
        numbers = self.keys.numbers(distinct).astype(np.int32)
        self._unreported.append(distinct.take(np.flatnonzero(numbers >= known)))
        if self.keys.size > self.counts.size:
            size = max(2 * self.counts.size, self.keys.size)
            self.counts = np.concatenate([self.counts, np.zeros(size - self.counts.size,
                                                                np.int64)])
            self.doc_freq = np.concatenate([self.doc_freq,
                                            np.zeros(size - self.doc_freq.size, np.int64)])
        entries = numbers if index is None else numbers.take(index)  # each word's number
        for name in ("counts", "doc_freq"):
            added_at(getattr(self, name), entries,
                     np.concatenate([getattr(part, name) for part in dictionaries]))
        if index is None:
            return [entries]
        return np.split(entries, np.cumsum([part.keys.size for part in dictionaries])[:-1])

    def _long_numbers(self, dictionaries: list[Dictionary], keys: np.ndarray,
                      long: np.ndarray) -> np.ndarray:
        """The long words' numbers (uint64) of keys[long], the long keys of the dictionaries'
        keys concatenated: every dictionary's strings numbered in the corpus's long words at
        once (the StringTable tells repeated strings of the group apart by their bytes)."""
        numbers = self.long_words.numbers(Strings.concatenate([part.strings
                                                               for part in dictionaries]))
        sizes = [part.keys.size for part in dictionaries]
        string_bases = np.cumsum([0] + [len(part.strings) for part in dictionaries[:-1]])
        base = np.repeat(string_bases, sizes).take(long)  # the strings before the key's part
        return numbers.take((keys.take(long) - LONG_KEY).view(np.int64) + base).astype(np.uint64)

    def add_counts(self, numbers: np.ndarray, counts: np.ndarray, doc_freq: np.ndarray) -> None:
        """Adds tokens and documents to the words of those numbers."""
        added_at(self.counts, numbers, counts)
        added_at(self.doc_freq, numbers, doc_freq)

    def new_words(self) -> tuple[int, Dictionary]:
        """(the number of the first; a Dictionary of, their counts left at 0) the words
        numbered since the last call, in the order of their numbers."""
        keys = (np.concatenate(self._unreported) if self._unreported
                else np.zeros(0, np.uint64))
        self._unreported = []
        first, self._reported = self._reported, self._reported + keys.size
        long = np.flatnonzero(is_long_key(keys))
        strings = self.long_words.strings().take((keys.take(long) - LONG_KEY).view(np.int64))
        keys[long] = LONG_KEY + np.arange(long.size, dtype=np.uint64)
        nothing = np.zeros(keys.size, np.int64)
        return first, Dictionary(keys, strings, nothing, nothing)

    def dictionary(self) -> Dictionary:
        """Every word, in the order of their numbers, as a dictionary."""
        return Dictionary(self.keys.keys(), self.long_words.strings(),
                          self.counts[:self.keys.size], self.doc_freq[:self.keys.size])

    def strings(self) -> list[str]:
        """Every word, in the order of their numbers."""
        keys = self.keys.keys()
        long = is_long_key(keys)
        words = np.empty(keys.size, object)
        words[~long] = word_strings(keys[~long])
        long_words = self.long_words.strings().tolist()
        words[long] = [long_words[number].decode("utf-8", "surrogateescape")
                       for number in (keys[long] - LONG_KEY).tolist()]
        return words.tolist()


class WordsReport(NamedTuple):
    """A worker's words numbered since its last report (Words.new_words): the worker's index,
    the number of the first, and the words (no counts)."""

    worker: int
    first: int
    words: Dictionary


def added_at(target: np.ndarray, numbers: np.ndarray, values: np.ndarray) -> None:
    """np.add.at(target, numbers, values) of int64 values, viewed as numpy's own int64 first
    (np.asarray given the dtype): an array unpickled from a worker process carries a dtype
    object of its own, equal to int64 but not numpy's, for which add.at leaves its fast loop
    (an order of magnitude slower)."""
    np.add.at(target, numbers, np.asarray(values, np.int64))


class CorpusWords:
    """The corpus's words as the workers report them while they read (add, on one thread:
    the workers' words numbered in the corpus's as they come, so that no merge of every
    worker's words waits for the last piece), then their counts (counted)."""

    def __init__(self):
        self.words = Words()
        self._numbers: dict[int, dict[int, np.ndarray]] = {}  # worker: first: corpus numbers

    def add(self, report: WordsReport) -> None:
        """Numbers the report's words among the corpus's (reports of a worker in any
        order)."""
        numbers = self.words.add([report.words])[0]
        self._numbers.setdefault(report.worker, {})[report.first] = numbers

    def counted(self, worker: int, counts: np.ndarray, doc_freq: np.ndarray) -> np.ndarray:
        """The numbers among the corpus's words (int32) of a worker's words, every one of them
        reported, whose tokens and documents (by the worker's numbers) are added."""
        parts = self._numbers.pop(worker, {})
        numbers = (np.concatenate([parts[first] for first in sorted(parts)]) if parts
                   else np.zeros(0, np.int32))
        self.words.add_counts(numbers, counts, doc_freq)
        return numbers


def merged_words(corpus_words: CorpusWords,
                 workers: list[tuple[int, WordsReport | None, np.ndarray, np.ndarray]]
                 ) -> tuple[Words, list[np.ndarray]]:
    """(the corpus's words, their counts summed; each worker's words' numbers among them) once
    the workers hand over (text_workers.worker_words) their last reports and their counts."""
    numbers = []
    for worker, report, counts, doc_freq in workers:
        if report is not None:
            corpus_words.add(report)
        numbers.append(corpus_words.counted(worker, counts, doc_freq))
    return corpus_words.words, numbers
