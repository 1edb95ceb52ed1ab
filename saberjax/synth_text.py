"""Synthetic LDA corpora written as raw text (saberjax.synth's model, its words spelled as
letter-only strings), for benchmarking the text readers: one document a line, plain or as
JSON Lines records."""

from __future__ import annotations

import os
import pathlib
import time

import numpy as np

from saberjax import files
from saberjax.synth import SynthConfig, build_topic_word, iter_batches


def text_words(num_words: int) -> list[str]:
    """Letter-only words for synthetic text: "q" and the id in base 26 ("qaa", "qab", ...),
    at least three letters, so that the default text rules keep every one (no stop word
    begins with q)."""
    width = 2
    while 26**width < num_words:
        width += 1
    letters = np.zeros((num_words, width), np.uint8)
    ids = np.arange(num_words)
    for column in range(width - 1, -1, -1):
        letters[:, column] = ord("a") + ids % 26
        ids //= 26
    return ["q" + row.tobytes().decode("ascii") for row in letters]


TEXT_LAYOUTS = {"txt": (b"", b"\n"), "jsonl": (b'{"text": "', b'"}\n')}


def text_bytes(doc_lengths: np.ndarray, word_ids: np.ndarray, words: list[str],
               layout: str = "txt") -> bytes:
    """Documents as text, one a line: their words separated by spaces, each line wrapped as
    TEXT_LAYOUTS[layout] says (plain, or a JSON Lines record {"text": ...})."""
    prefix, suffix = TEXT_LAYOUTS[layout]
    table = prefix + suffix + "".join(word + " " for word in words).encode("ascii")
    word_lengths = np.array([len(word) + 1 for word in words], np.int64)
    word_starts = len(prefix) + len(suffix) + np.concatenate([[0], np.cumsum(word_lengths)[:-1]])
    offsets = np.concatenate([[0], np.cumsum(doc_lengths)])
    starts, lengths = word_starts[word_ids], word_lengths[word_ids]
    where = np.stack([offsets[:-1], offsets[1:]], axis=1).ravel()
    item_starts = np.insert(starts, where, np.tile([0, len(prefix)], doc_lengths.size))
    item_lengths = np.insert(lengths, where, np.tile([len(prefix), len(suffix)],
                                                     doc_lengths.size))
    ends = np.cumsum(item_lengths)
    index = np.repeat(item_starts - (ends - item_lengths), item_lengths) + np.arange(ends[-1])
    return np.frombuffer(table, np.uint8)[index].tobytes()


def write_text(cfg: SynthConfig, output: str, *, layout: str = "txt",
               batch_tokens: int = 1 << 25, num_threads: int | None = None) -> dict:
    """Generate ``cfg`` as text (text_bytes, words text_words) into the file ``output``,
    written whole or not at all; returns stats."""
    t0 = time.perf_counter()
    words = text_words(cfg.num_words)
    tables = build_topic_word(cfg, num_threads=num_threads)
    counts = [0, 0]  # documents, tokens

    def write(file) -> None:
        for lengths, ids in iter_batches(cfg, tables, batch_tokens=batch_tokens,
                                         num_threads=num_threads):
            file.write(text_bytes(lengths, ids, words, layout))
            counts[0] += lengths.size
            counts[1] += ids.size

    files.atomic_write(pathlib.Path(output), write)
    docs, tokens = counts
    secs = time.perf_counter() - t0
    return {"D": docs, "T": tokens, "V": cfg.num_words, "seconds": round(secs, 3),
            "bytes": os.path.getsize(output), "output": os.path.abspath(output)}
