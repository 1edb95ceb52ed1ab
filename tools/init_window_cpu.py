"""Held-out log-likelihood of windowed initial topics (TrainConfig.init_window_topics)
against uniform ones on one corpus, with the XLA path (docs/measurements/roofline.md, run 9):

    python tools/init_window_cpu.py /work/shared/data/kos 100 100 0,16,32,64 [seed]

(corpus, K, iterations, the windows' topic counts, the seed of the split and the initial
topics, default 0; 10% of the documents held out).
Prints each setting's held-out score every quarter of the run and its seconds.
"""

import pathlib
import sys
import time

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from saberjax import corpus as corpus_io  # noqa: E402
from saberjax import trainer  # noqa: E402


def main(path: str, num_topics: int, iterations: int, windows: list[int], seed: int) -> None:
    corpus = corpus_io.load_corpus(path)
    corpus, test = corpus_io.train_test_split(corpus, 0.1, seed)
    heldout = corpus_io.split_document_halves(test, seed)
    for window_topics in windows:
        config = trainer.TrainConfig(num_topics, iterations=iterations, seed=seed, backend="xla",
                                     init_window_topics=window_topics,
                                     eval_every=max(iterations // 4, 1))
        start = time.perf_counter()
        run = trainer.train(corpus, config, heldout)
        scores = [round(m["heldout_loglik_per_token"], 4) for m in run.metrics
                  if "heldout_loglik_per_token" in m]
        print(window_topics, scores, round(time.perf_counter() - start, 1), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
         [int(x) for x in sys.argv[4].split(",")], int(sys.argv[5]) if len(sys.argv) > 5 else 0)
