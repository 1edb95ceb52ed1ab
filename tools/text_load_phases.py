"""Where `saberjax train --corpus=TEXT`'s "load" phase goes on a first run: the source's cache
key (hashing its bytes), the reading into the cache entry (load_text), the entry's corpus
fingerprint, the train/test split, the training corpus's fingerprint and the held-out halves,
each timed as train's load_data runs them (the same calls, the same order), from an empty
cache folder.  Prints one JSON line: tokens read, seconds per step, the whole, and Mtoken/s
of the reading alone and of the whole load.

    PYTHONPATH=. python tools/text_load_phases.py SHARDS --format=jsonl
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

from text_read_rate import kept_progress, timed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("--format", default="auto")
    parser.add_argument("--test_fraction", type=float, default=0.1)
    args = parser.parse_args()
    from saberjax.platform import reuse_freed_memory

    reuse_freed_memory()
    import saberjax.corpus.fingerprint as fingerprints
    from saberjax.corpus import cache, formats, splits, text_corpus

    seconds: dict[str, float] = {}
    wall = dict(clock=time.perf_counter)
    timed(cache, "_content_key", seconds, "source key (hashing the source)", **wall)
    timed(formats, "load_corpus", seconds, "reading into the entry (load_text)", **wall)
    timed(fingerprints, "fingerprint", seconds, "corpus fingerprints", **wall)
    progress = kept_progress(text_corpus)
    with tempfile.TemporaryDirectory(dir=".") as folder:
        start = time.perf_counter()
        documents = cache.load_corpus(args.path, args.format, folder,
                                      log=lambda line: print(line, flush=True))
        seconds["load_corpus (all of it)"] = time.perf_counter() - start
        step = time.perf_counter()
        corpus, test = splits.train_test_split(documents, args.test_fraction, 0)
        seconds["train/test split"] = time.perf_counter() - step
        step = time.perf_counter()
        corpus.fingerprint()
        seconds["training corpus's fingerprint"] = time.perf_counter() - step
        step = time.perf_counter()
        splits.split_document_halves(test, 0)
        seconds["held-out halves"] = time.perf_counter() - step
        whole = time.perf_counter() - start
    read = progress[0].tokens if progress else documents.num_tokens
    reading = seconds["reading into the entry (load_text)"]
    print(json.dumps(dict(
        path=args.path, tokens_read=read, corpus_tokens=documents.num_tokens,
        seconds={name: round(value, 2) for name, value in seconds.items()},
        load_seconds=round(whole, 2), reading_mtoken_per_s=round(read / reading / 1e6, 1),
        load_mtoken_per_s=round(read / whole / 1e6, 1))), flush=True)


if __name__ == "__main__":
    main()
