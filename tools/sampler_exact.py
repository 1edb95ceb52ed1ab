"""Whether another sampler.py's E-step kernel draws the same topics as this tree's, bit for bit,
in interpret mode on a CPU (docs/measurements/roofline.md): the check a kernel variant passes
before it is timed on a GPU.

    python tools/sampler_exact.py scratch/variant.py

Random states of tests/test_pallas.py (K = 2, 37, 48, 100, 1,000 and 65,536; tiles of 4, 8 and
16 tokens) and a word share (token ids through a table of blocks).  At K = 48 half the tokens
have topic 0, so many tokens whose own topic is 0 sit in tiles with rows a block longer than
theirs: a kernel that lets the lanes past a row (topic 0 or any other filler) stand for the
own topic differs there.  Exits 1 at the first state whose topics differ.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))

import numpy as np
from absl import app

STATES = ((2, 8, 1, 0.0), (37, 8, 2, 0.0), (1000, 8, 3, 0.0), (1000, 4, 4, 0.0),
          (65_536, 8, 5, 0.0), (100, 16, 6, 0.0), (48, 8, 7, 0.5))  # K, tile, seed, zero share


def same_topics(kernel, other, *args) -> bool:
    """Both kernels' (word-major, doc-major) topics are equal."""
    return all(np.array_equal(np.asarray(a), np.asarray(b))
               for a, b in zip(kernel(*args), other(*args)))


def main(argv):
    import test_pallas  # noqa: PLC0415  (its random states)

    from saberjax.layout import with_tile_tokens  # noqa: PLC0415
    from saberjax.pallas import sampler  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location("sampler_under_test", argv[1])
    other = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(other)
    for num_topics, tile_tokens, seed, zero_share in STATES:
        chunk, state, model, key, _ = test_pallas.random_state(
            test_pallas.ragged_corpus(seed=seed), num_topics, seed, zero_share)
        chunk = with_tile_tokens(chunk, model.bhat.shape[0], tile_tokens)
        same = same_topics(sampler.sample_and_shuffle, other.sample_and_shuffle, chunk, state,
                           model, key)
        print(f"K = {num_topics}, {tile_tokens}-token tiles: {'same' if same else 'DIFFER'}")
        if not same:
            sys.exit(1)
    same = same_topics(sampler.sample_and_shuffle, other.sample_and_shuffle,
                       *test_pallas.word_share_state(1000)[:4])
    print(f"word share: {'same' if same else 'DIFFER'}")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    app.run(main)
