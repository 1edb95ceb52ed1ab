"""CPU cost of the text engine's two per-piece steps on one core, free of other jobs' noise:
pieces of a text file as the engine cuts them, each tokenised (tokenizing.block_words) and
counted (text_corpus._frequencies) `--repeats` times in turn, the least thread CPU time of each
kept (another job on the machine only ever adds to it).  Prints one JSON line: microseconds
per piece of each step, averaged over the pieces.  Works with any saberjax checkout on
PYTHONPATH, so that two checkouts compare on one machine in one sitting.

    PYTHONPATH=CHECKOUT python tools/text_piece_cost.py wiki1.txt --pieces=8
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("--pieces", type=int, default=8, help="pieces timed, spread over the file")
    parser.add_argument("--piece_bytes", type=int, default=1 << 20)
    parser.add_argument("--repeats", type=int, default=12)
    args = parser.parse_args()
    from saberjax.platform import reuse_freed_memory

    reuse_freed_memory()
    from saberjax.corpus import text_corpus
    from saberjax.corpus.tokenizing import block_words

    data = np.fromfile(args.path, np.uint8, count=3 * args.pieces * args.piece_bytes)
    pieces = list(text_corpus._line_parts(data, args.piece_bytes, None))[::3][:args.pieces]
    text_corpus._frequencies(block_words(pieces[0]))  # imports and first-call costs
    tokenise = [float("inf")] * len(pieces)
    count = [float("inf")] * len(pieces)
    for _ in range(args.repeats):
        for i, piece in enumerate(pieces):
            start = time.thread_time_ns()
            words = block_words(piece)
            middle = time.thread_time_ns()
            text_corpus._frequencies(words)
            end = time.thread_time_ns()
            tokenise[i] = min(tokenise[i], middle - start)
            count[i] = min(count[i], end - middle)
    print(json.dumps(dict(pieces=len(pieces), piece_bytes=args.piece_bytes,
                          block_words_us=round(sum(tokenise) / len(pieces) / 1e3),
                          frequencies_us=round(sum(count) / len(pieces) / 1e3))))


if __name__ == "__main__":
    main()
