"""The tokens of each device's word share, partitioned by word over N devices: dealt round
robin by frequency rank (the layout before layout.share_order) against share_order, with the
largest share against the mean and the size every share is padded to (layout.bucket_size).
No device: the word counts of a synthetic corpus generated in memory, or of a corpus on disk.

    python tools/word_share_balance.py --synth_preset=nytimes --parts=2,4,8
    python tools/word_share_balance.py --corpus=.corpora/wiki25k --parts=4
"""

import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from saberjax.benchmark import synthetic_corpus  # noqa: E402
from saberjax.corpus.formats import load_corpus  # noqa: E402
from saberjax.layout import bucket_size, share_order  # noqa: E402


def shares(counts: np.ndarray, order: np.ndarray, parts: int) -> np.ndarray:
    """Tokens of each share when position r of `order` is share r % parts."""
    return np.bincount(np.arange(len(order)) % parts, counts[order],
                       minlength=parts).astype(np.int64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synth_preset", default="nytimes")
    parser.add_argument("--synth_scale", type=float, default=1.0)
    parser.add_argument("--corpus", help="a corpus on disk instead of the synthetic one")
    parser.add_argument("--parts", default="2,4,8")
    args = parser.parse_args()
    corpus = (load_corpus(args.corpus) if args.corpus
              else synthetic_corpus(args.synth_preset, args.synth_scale, 0))
    counts = corpus.word_counts()
    by_rank = np.argsort(-counts, kind="stable")
    print(f"{corpus.name}: {corpus.num_tokens:,} tokens, V = {corpus.num_words:,}")
    for parts in map(int, args.parts.split(",")):
        mean = corpus.num_tokens / parts
        for name, order in (("round robin", by_rank),
                            ("share_order", share_order(counts, by_rank, parts))):
            tokens = shares(counts, order, parts)
            print(f"{parts} shares, {name}: {', '.join(f'{t:,}' for t in tokens)}; largest "
                  f"{tokens.max() / mean:.4f} x the mean, padded to "
                  f"{bucket_size(tokens.max()):,} ({bucket_size(tokens.max()) / mean:.4f} x)")


if __name__ == "__main__":
    main()
