"""Seed words (guided topics): a topic-word prior beta_kv in place of the one beta.

A user names words for some topics ("topic 3: space nasa orbit"); each seeded (word, topic)
pair gets `weight` extra pseudo-counts in the prior, every other pair keeps beta:

    beta_kv = beta + weight [v seeds k],     B-hat_vk = (B_vk + beta_kv) / (n_k + sum_v beta_kv)

as tomotopy's set_word_prior and gensim's eta matrix do.  The seeds are few, so the prior is
held sparse: the seeded rows and their topics (`SeedPrior`, hashable, so jit specialises on
it as on the other hyperparameters).  Each topic's denominator adds its seeds' weight
(`topic_weights`); mstep.seeded_rows recomputes B-hat and the trees of the seeded rows after
the backend's pass over all of them, which is why a seeded run costs no more than a pass over
those rows.

Seed words come as a file or as text (`read_seed_words`): lines `topic word word ...` (topics
from 0, blank lines and `#` comments skipped), or JSON, an object {"topic": [words]} or a list
whose i-th entry lists topic i's words.  The saved model records the words found in the
vocabulary as JSON (`seed_json`) with the weight (config seed_words and seed_weight).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import warnings
from collections.abc import Mapping, Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class SeedPrior:
    """The seeded cells of the topic-word prior: rows[i] (a word id, or the row of the
    model's arrays holding it: on_rows) has `weight` extra prior in each of topics[i]."""

    rows: tuple[int, ...]  # distinct, increasing
    topics: tuple[tuple[int, ...], ...]  # the topics each row seeds
    weight: float

    def topic_weights(self, padded_topics: int) -> np.ndarray:
        """float32 [K_pad]: each topic's seeded prior summed over the words, weight times its
        seed words (what sum_v beta_kv adds to V beta)."""
        weights = np.zeros(padded_topics, np.float64)
        for topics in self.topics:
            weights[list(topics)] += self.weight
        return weights.astype(np.float32)

    def row_weights(self, padded_topics: int) -> np.ndarray:
        """float32 [len(rows), K_pad]: the extra prior of every seeded row (beta_kv - beta)."""
        weights = np.zeros((len(self.rows), padded_topics), np.float32)
        for index, topics in enumerate(self.topics):
            weights[index, list(topics)] = self.weight
        return weights

    def on_rows(self, row_of_word: np.ndarray) -> "SeedPrior":
        """The same prior with each word id replaced by its row row_of_word[word] (the row
        of the model's arrays that holds the word when a partition reorders them)."""
        pairs = sorted((int(row_of_word[word]), topics)
                       for word, topics in zip(self.rows, self.topics))
        return SeedPrior(tuple(row for row, _ in pairs), tuple(t for _, t in pairs), self.weight)

    def cell_weights(self, rows, topics, num_topics: int) -> np.ndarray:
        """float32, shaped like the broadcast of rows and topics: beta_kv - beta of each cell
        (rows[i], topics[i]) (0 where unseeded)."""
        rows, topics = np.broadcast_arrays(np.asarray(rows), np.asarray(topics))
        seeded = np.asarray(self.rows, np.int64)
        index = np.minimum(np.searchsorted(seeded, rows), len(seeded) - 1)
        return np.where(seeded[index] == rows,
                        self.row_weights(num_topics)[index, topics], 0.0).astype(np.float32)


def read_seed_words(source) -> dict[int, list[str]]:
    """Topic -> seed words of `source`: a mapping (topic -> words), JSON text, or the path of
    a file of lines `topic word word ...` or of JSON.  ValueError naming the file and line (or
    the entry) at fault."""
    if isinstance(source, Mapping):
        return _checked(source.items(), "seed_words")
    text, name = str(source), "seed_words"
    if not text.lstrip().startswith(("{", "[")):
        path = pathlib.Path(text)
        try:
            text, name = path.read_text(encoding="utf-8"), str(path)
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"--seed_words={source}: cannot read ({error})") from None
    if text.lstrip().startswith(("{", "[")):
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"{name}: not valid JSON ({error})") from None
        entries = loaded.items() if isinstance(loaded, dict) else enumerate(loaded)
        return _checked(entries, name)
    seeds: dict[int, list[str]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) < 2:
            raise ValueError(f"{name}:{number}: expected a topic index and its words, got "
                             f"{line.strip()!r}")
        topic = _topic_index(fields[0], f"{name}:{number}")
        seeds.setdefault(topic, []).extend(fields[1:])
    if not seeds:
        raise ValueError(f"{name}: no seed words (lines `topic_index word word ...`)")
    return seeds


def _topic_index(value, where: str) -> int:
    """A topic index (a non-negative integer, or its digits) or a ValueError naming where."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0:
        return int(value)
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise ValueError(f"{where}: topic index must be a non-negative integer, got {value!r}")


def _checked(entries, name: str) -> dict[int, list[str]]:
    """Topic -> words of (topic, words) entries, each checked."""
    seeds: dict[int, list[str]] = {}
    for topic, words in entries:
        topic = _topic_index(topic, name)
        if isinstance(words, str) or not isinstance(words, Sequence) or not all(
                isinstance(word, str) and word for word in words):
            raise ValueError(f"{name}: topic {topic}'s seed words must be a list of words, got "
                             f"{words!r}")
        seeds.setdefault(topic, []).extend(words)
    if not seeds:
        raise ValueError(f"{name}: no seed words")
    return seeds


def seed_prior(seed_words, weight: float, vocab: Sequence[str], num_topics: int,
               warn: bool = True) -> SeedPrior | None:
    """The prior of seed words (read_seed_words's sources; None: no seeding) over `vocab`.

    ValueError when a topic index is not below num_topics or no seed word is in the
    vocabulary; a warning names the seed words the vocabulary lacks (warn)."""
    if seed_words is None:
        return None
    seeds = read_seed_words(seed_words)
    too_high = [topic for topic in seeds if topic >= num_topics]
    if too_high:
        raise ValueError(f"seed_words: topic {too_high[0]} is not below num_topics={num_topics}")
    index = {}
    for word_id, word in enumerate(vocab):
        index.setdefault(word, word_id)
    topics_of_word: dict[int, set[int]] = {}
    missing = []
    for topic, words in seeds.items():
        for word in words:
            if word in index:
                topics_of_word.setdefault(index[word], set()).add(topic)
            else:
                missing.append(word)
    if not topics_of_word:
        raise ValueError(f"seed_words: none of the {len(missing)} seed words is in the "
                         f"vocabulary (e.g. {missing[0]!r})")
    if missing and warn:
        warnings.warn(f"seed_words: {len(missing)} seed word(s) not in the vocabulary, left "
                      f"out: {' '.join(sorted(set(missing))[:10])}", stacklevel=2)
    rows = sorted(topics_of_word)
    return SeedPrior(tuple(rows), tuple(tuple(sorted(topics_of_word[row])) for row in rows),
                     float(weight))


def seed_json(prior: SeedPrior, vocab: Sequence[str]) -> str:
    """The seed words of a prior over word ids as JSON {"topic": [words]}, topics and words in
    order: what the saved model records (read_seed_words reads it back)."""
    seeds: dict[int, list[str]] = {}
    for word, topics in zip(prior.rows, prior.topics):
        for topic in topics:
            seeds.setdefault(topic, []).append(vocab[word])
    return json.dumps({str(topic): seeds[topic] for topic in sorted(seeds)})
