"""The reading rate of raw text: one load_text into a temporary native folder, as the
launchers read text into a cache entry.  Prints one JSON line: tokens read (every token the
rules keep, before the vocabulary), tokens of the corpus, seconds, Mtoken/s, CPU seconds and
peak RSS.  Works with any saberjax checkout on PYTHONPATH (it only calls load_text).

    PYTHONPATH=CHECKOUT python tools/text_read_rate.py PATH --format=jsonl --workers=16
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("--format", default="auto")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--piece_bytes", type=int, default=None,
                        help="pieces of this size (text_corpus.MIN_PIECE_BYTES and PIECE_BYTES)")
    args = parser.parse_args()
    from saberjax.platform import reuse_freed_memory

    reuse_freed_memory()
    from saberjax.corpus import text_corpus
    from saberjax.corpus.plain_text import load_text

    if args.piece_bytes:
        text_corpus.MIN_PIECE_BYTES = text_corpus.PIECE_BYTES = args.piece_bytes
    progress = []
    start_progress = text_corpus._Progress.__init__

    def kept(self, *args, **kwargs):
        start_progress(self, *args, **kwargs)
        progress.append(self)

    text_corpus._Progress.__init__ = kept
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with tempfile.TemporaryDirectory(dir=".") as folder:
        start = time.perf_counter()
        corpus = load_text(args.path, directory=f"{folder}/native", workers=args.workers,
                           format=args.format)
        seconds = time.perf_counter() - start
    end = resource.getrusage(resource.RUSAGE_SELF)
    read = progress[0].tokens
    print(json.dumps(dict(
        path=args.path, format=args.format, workers=args.workers, tokens_read=read,
        corpus_tokens=corpus.num_tokens, seconds=round(seconds, 2),
        mtoken_per_s=round(read / seconds / 1e6, 1),
        cpu_seconds=round(end.ru_utime + end.ru_stime - usage.ru_utime - usage.ru_stime, 2),
        peak_rss_mb=round(end.ru_maxrss / 1024))), flush=True)


if __name__ == "__main__":
    main()
