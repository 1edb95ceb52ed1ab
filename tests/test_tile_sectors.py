"""tools/tile_sectors.py: distinct sectors a tile against a hand-built chunk."""

import sys
import types
from pathlib import Path

import numpy as np

from saberjax.state import pair_topic_bits

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from tile_sectors import tile_sectors  # noqa: E402


def _record(doc_topics, words):
    """tile_sectors of one chunk: token i of word words[i] in document i with doc_topics[i],
    word-major tiles of each word's run."""
    padded_topics = 128
    bits = pair_topic_bits(padded_topics)
    lengths = [len(t) for t in doc_topics]
    pairs = np.concatenate([np.asarray(t, np.uint32) | np.uint32(1 << bits)
                            for t in doc_topics])
    starts = np.flatnonzero(np.diff(words, prepend=-1) != 0)
    chunk = types.SimpleNamespace(
        word=np.asarray(words, np.int32), doc=np.arange(len(words), dtype=np.int32),
        tile_start=np.append(starts, len(words)).astype(np.int32),
        num_tokens=np.int32(len(words)),
        doc_start=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    state = types.SimpleNamespace(a_pairs=pairs, a_nnz=np.asarray(lengths, np.int32))
    return tile_sectors(chunk, state, 1, padded_topics)


def test_tokens_sharing_topics_share_sectors():
    shared = _record([[0, 16, 32], [0, 17, 33]], [0, 0])  # sectors 0, 1, 2 for both
    apart = _record([[0, 16, 32], [48, 64, 80]], [0, 0])  # sectors 0..5
    assert shared["distinct_sectors_per_token"] == 1.5
    assert apart["distinct_sectors_per_token"] == 3.0
    assert shared["model_sectors_per_token"] == apart["model_sectors_per_token"]
    assert shared["distinct_over_model"] == 0.5 * apart["distinct_over_model"]


def test_sparse_row_tiles_are_left_out():
    record = _record([[0, 16], [0, 16], [48]], [0, 0, 1])  # word 1 has no dense row
    assert (record["tiles"], record["tokens"]) == (1, 2)
    assert record["distinct_sectors_per_token"] == 1.0
