"""Seconds to build the word shares of every slot of a corpus streamed by words (what placing
spends on the host before training), one slot at a time against layout.word_share_slots_at_once
slots at once, in one process: a synthetic corpus of a preset's shape, cut into slots of
--chunk_tokens a device as tools/sparse_streamed_floor.sh runs it.  Host work only (no device).

    python3 tools/word_share_build.py --preset=clueweb --num_docs=560000 --devices=4
"""

from __future__ import annotations

import argparse
import json
import os
import time

from saberjax import benchmark, synth
from saberjax.background import on_threads
from saberjax.layout import (bucket_size, largest_word_share, plan_layout, share_order,
                             word_share_slots_at_once, word_shares)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="clueweb")
    parser.add_argument("--num_docs", type=int, default=560_000)
    parser.add_argument("--devices", type=int, default=4)
    parser.add_argument("--chunk_tokens", type=int, default=16_000_000)
    args = parser.parse_args()
    scale = args.num_docs / synth.PRESETS[args.preset].num_docs
    start = time.perf_counter()
    corpus = benchmark.synthetic_corpus(args.preset, scale, 0)
    generated = time.perf_counter() - start
    layout = plan_layout(corpus, args.chunk_tokens, args.devices)
    parts = range(args.devices)
    order = share_order(corpus.word_counts(), layout.word_order, args.devices)
    num_slots = len(layout.chunk_docs) // args.devices
    share_tokens = bucket_size(largest_word_share(corpus, layout, args.devices, {0}, order,
                                                  num_slots))

    def build(slot: int):
        return word_shares(corpus, layout, args.devices, parts, share_tokens, order, slot,
                           num_slots)

    record = dict(preset=args.preset, tokens=corpus.num_tokens, devices=args.devices,
                  slots=num_slots, cores=os.cpu_count(), generate_seconds=round(generated, 2))
    for label, threads in (("one_at_a_time", 1),
                           ("at_once", word_share_slots_at_once(num_slots, args.devices))):
        start = time.perf_counter()
        on_threads(build, range(num_slots), threads)
        record[f"{label}_seconds"] = round(time.perf_counter() - start, 2)
        record[f"{label}_slots"] = threads
    print(json.dumps(record))


if __name__ == "__main__":
    main()
