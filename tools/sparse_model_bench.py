"""Time a large-K model held sparse on the host: save, load, top words, word_topics, inference,
and the bytes of model.npz beside what dense B and topic_word would take.

B is synthetic: `--nonzeros` (word, topic) cells, words drawn by a Zipf law over the
vocabulary (as a corpus's tokens are), topics uniform, counts 1 to 20. Nothing of K x V is
formed, so any K fits in host memory that holds the nonzeros.

  python tools/sparse_model_bench.py --words=102660 --topics=100000 --nonzeros=10000000

Prints one JSON line; each *_s is [wall seconds, CPU seconds].
"""

from __future__ import annotations

import argparse
import json
import pathlib
import resource
import sys
import tempfile
import time

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from saberjax import sparse_word_topic as swt  # noqa: E402
from saberjax.model import TopicModel  # noqa: E402


def synthetic_model(num_words: int, num_topics: int, nonzeros: int, seed: int) -> TopicModel:
    """A TopicModel of sparse B with about `nonzeros` cells (repeats merge)."""
    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, num_words + 1)
    words = rng.choice(num_words, nonzeros, p=popularity / popularity.sum())
    b = swt.from_entries(words, rng.integers(0, num_topics, nonzeros),
                         rng.integers(1, 21, nonzeros), num_words, num_topics)
    return TopicModel(b, 50.0 / num_topics, 0.01, tuple(f"w{v}" for v in range(num_words)))


def timed(function, *args, **kwargs):
    """(function's result, [wall seconds, this process's CPU seconds]): on a shared host the
    CPU seconds are the steadier figure."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = function(*args, **kwargs)
    return result, [round(time.perf_counter() - wall, 3), round(time.process_time() - cpu, 3)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--words", type=int, default=102_660)
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--nonzeros", type=int, default=10_000_000)
    parser.add_argument("--documents", type=int, default=8, help="documents inferred")
    parser.add_argument("--em_iterations", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    model, build_s = timed(synthetic_model, args.words, args.topics, args.nonzeros, args.seed)
    b = model.word_topic_counts
    rng = np.random.default_rng(args.seed + 1)
    documents = [rng.integers(0, args.words, 200) for _ in range(args.documents)]
    matrix = np.zeros((args.documents, args.words), np.float32)
    for row, words in zip(matrix, documents):
        np.add.at(row, words, 1)
    with tempfile.TemporaryDirectory() as directory:
        _, save_s = timed(model.save, pathlib.Path(directory) / "m")
        file_bytes = (pathlib.Path(directory) / "m" / "model.npz").stat().st_size
        loaded, load_s = timed(TopicModel.load, pathlib.Path(directory) / "m")
    _, top_word_ids_s = timed(loaded.top_word_ids, 10)
    _, top_words_s = timed(loaded.top_words, 10, with_weights=True)
    _, word_topics_s = timed(loaded.word_topics, "w0")
    _, infer_s = timed(loaded.transform, matrix, iterations=args.em_iterations)
    print(json.dumps(dict(
        words=args.words, topics=args.topics, nonzeros=b.nnz, stored_sparse=loaded.is_sparse,
        model_npz_bytes=file_bytes, csr_bytes=b.nbytes,
        dense_b_bytes=swt.dense_nbytes(args.words, args.topics),
        dense_model_npz_bytes=2 * swt.dense_nbytes(args.words, args.topics),
        build_s=build_s, save_s=save_s, load_s=load_s, top_word_ids_s=top_word_ids_s,
        top_words_with_weights_s=top_words_s, word_topics_s=word_topics_s,
        infer_documents=args.documents, em_iterations=args.em_iterations, infer_s=infer_s,
        peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)))


if __name__ == "__main__":
    main()
