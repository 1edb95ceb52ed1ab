"""Corpora, files and expectations shared by the corpus tests (test_corpus_*.py)."""

import gzip
import mmap
import os
import re
from pathlib import Path

import numpy as np
import pytest

from saberjax.corpus import Corpus


VOCAB = ("apple", "banana", "cherry", "date")
# docs (0-based word ids): [1, 1, 3], [0, 0, 0], [1, 2]
UCI_LINES = ["1 2 2", "1 4 1", "2 1 3", "3 2 1", "3 3 1"]
UCI_TEXT = "3\n4\n5\n" + "".join(line + "\n" for line in UCI_LINES)
LDAC_TEXT = "2 1:2 3:1\n1 0:3\n2 1:1 2:1\n"
OFFSETS = [0, 3, 6, 8]
WORD_IDS = [1, 1, 3, 0, 0, 0, 1, 2]
COUNTS = np.array([[0, 2, 0, 1], [3, 0, 0, 0], [0, 1, 1, 0]])


def count_hashing(monkeypatch) -> list:
    """Calls of the corpus cache's source hashing, recorded in the returned list."""
    from saberjax.corpus import cache

    calls, hash_files = [], cache._content_key
    monkeypatch.setattr(cache, "_content_key",
                        lambda *args: calls.append(args) or hash_files(*args))
    return calls


def tiny_corpus(name="tiny") -> Corpus:
    return Corpus(np.array(OFFSETS), np.array(WORD_IDS), VOCAB, name=name)


def assert_same_corpus(actual: Corpus, expected: Corpus) -> None:
    assert actual.doc_offsets.dtype == np.int64 and actual.word_ids.dtype == np.int32
    np.testing.assert_array_equal(actual.doc_offsets, expected.doc_offsets)
    np.testing.assert_array_equal(actual.word_ids, expected.word_ids)
    assert actual.vocab == expected.vocab


def write_vocab(path: Path, words=VOCAB) -> Path:
    path.write_text("".join(word + "\n" for word in words), encoding="utf-8")
    return path


def write_text(path: Path, text: str) -> Path:
    data = text.encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def write_uci(folder: Path, text: str = UCI_TEXT, name: str = "docword.txt") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_vocab(folder / "vocab.txt")
    return write_text(folder / name, text)


def error_at(path: Path, line: int, message: str) -> str:
    """pytest.raises pattern for an error naming path and line."""
    return f"{re.escape(str(path))}, line {line}: {message}"


def is_memory_mapped(array: np.ndarray) -> bool:
    while array is not None:
        if isinstance(array, (np.memmap, mmap.mmap)):
            return True
        array = getattr(array, "base", None)
    return False


@pytest.fixture
def shared_data() -> Path:
    root = Path(os.environ.get("SABERJAX_SHARED_DATA")
                or Path(__file__).resolve().parents[2] / "shared" / "data")
    if not root.is_dir():
        pytest.skip(f"shared corpora not found at {root}")
    return root


UCI_ERRORS = [  # (docword text, line named, message)
    ("3\nfour\n5\n", 2, "expected the header integer W"),
    ("3\n4", 3, "header ended early"),
    ("3\n4\n\n", 3, "expected the header integer NNZ"),
    (UCI_TEXT.replace("1 4 1", "1 4"), 5, "expected 3 fields 'docID wordID count', found 2"),
    (UCI_TEXT.replace("1 4 1", "1 4 1 7"), 5, "expected 3 fields .* found 4"),
    (UCI_TEXT.replace("1 4 1", "1 x 1"), 5, "wordID 'x' is not a decimal integer"),
    (UCI_TEXT.replace("1 4 1", "1 4 1.5"), 5, "count '1.5' is not a decimal integer"),
    (UCI_TEXT.replace("1 4 1", "4 4 1"), 5, r"docID 4 is out of range 1\.\.3"),
    (UCI_TEXT.replace("1 4 1", "0 4 1"), 5, r"docID 0 is out of range 1\.\.3"),
    (UCI_TEXT.replace("1 4 1", "1 5 1"), 5, r"wordID 5 is out of range 1\.\.4"),
    (UCI_TEXT.replace("1 4 1", "1 4 0"), 5, "count 0 must be in 1..2147483647"),
    (UCI_TEXT.replace("1 4 1", "1 4 -2"), 5, "count -2 must be in 1.."),
    (UCI_TEXT.replace("1 4 1", "1 4 99999999999"), 5, "count 99999999999 must be in 1.."),
    (UCI_TEXT.replace("1 4 1", "1 4 1234567890123456789012"), 5, "count .* is not a decimal"),
    # two bad lines whose field counts compensate: still caught, the first one named
    (UCI_TEXT.replace("1 2 2\n1 4 1", "1 2\n2 1 4 1"), 4, "expected 3 fields"),
    # several kinds of fault: the earliest line wins whatever its kind
    (UCI_TEXT.replace("1 2 2", "1 2").replace("3 2 1", "3 x 1"), 4, "expected 3 fields"),
    (UCI_TEXT.replace("1 2 2", "1 x 2").replace("3 2 1", "3 2"), 4, "wordID 'x'"),
    (UCI_TEXT.replace("1 2 2", "1 2 0").replace("3 2 1", "3 2"), 4, "count 0"),
]


LDAC_ERRORS = [  # (LDA-C text, line named, message)
    (LDAC_TEXT.replace("1 0:3", "2 0:3"), 2, "N is 2 but the line has 1 id:count pairs"),
    (LDAC_TEXT.replace("1 0:3", "1 03"), 2, "malformed pair '03', expected id:count"),
    (LDAC_TEXT.replace("1 0:3", "1 0:3:4"), 2, "malformed pair '0:3:4'"),
    (LDAC_TEXT.replace("1 0:3", "1 0 :3"), 2, "malformed pair '0'"),
    (LDAC_TEXT.replace("1 0:3", "1 0: 3"), 2, "malformed pair '0:'"),
    (LDAC_TEXT.replace("1 0:3", "1 0:3:"), 2, "malformed pair '0:3:'"),
    (LDAC_TEXT.replace("1 0:3", "1 0:x"), 2, "malformed pair '0:x'"),
    (LDAC_TEXT.replace("1 0:3", "x 0:3"), 2, "pair count N 'x' is not a decimal integer"),
    (LDAC_TEXT.replace("1 0:3", "1 4:3"), 2, r"word id 4 is out of range 0\.\.3"),
    (LDAC_TEXT.replace("1 0:3", "1 0:0"), 2, "count 0 must be in 1.."),
    (LDAC_TEXT.replace("1 0:3", "1 0:-3"), 2, "count -3 must be in 1.."),
    (LDAC_TEXT.replace("1 0:3", "1 -1:3"), 2, r"word id -1 is out of range"),
    (LDAC_TEXT.replace("1 0:3", "1 0:3").replace("2 1:1 2:1", "2 1:1 2:0"), 3, "count 0"),
    (LDAC_TEXT.replace("2 1:2 3:1", "2 1:2 3:1 0:1").replace("1 0:3", "1 0:x"), 1, "N is 2"),
]
