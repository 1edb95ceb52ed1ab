"""Bench's speed over windows of iterations, and the speed-up over one device in each window.

A bench record lists every iteration's seconds (warmup_seconds, then iteration_seconds); this
reads the records of one or more bench outputs (JSON lines) and prints, for each run and each
window of iterations (counted from 1, warm-up included: "4-8" are the 5 steady ones of
`--warmup=2 --iterations=6`), its Mtoken/s and its ratio to the one-device run of the same K
and initial topics (init_window_topics) in the files.  Early iterations run faster or slower
as A's rows shorten from their initial topics, so a speed-up over a late window is the one a
long run sees (docs/measurements/multi_gpu.md):

    python tools/bench_windows.py --windows=4-8,11-20,21-40,41-60 OUT/*/*.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys


def parse_windows(text: str) -> list[tuple[int, int]]:
    """"A-B,C-D" -> [(A, B), (C, D)]: inclusive iteration numbers, counted from 1."""
    windows = []
    for part in text.split(","):
        first, last = (int(n) for n in part.split("-"))
        if not 1 <= first <= last:
            raise ValueError(f"window {part!r}: needs 1 <= first <= last")
        windows.append((first, last))
    return windows


def run_key(record: dict) -> tuple:
    """What tells one run of the files from another: devices, partition, the hosts'
    exchange, K, initial topics."""
    return (record.get("num_devices", record.get("devices")), record.get("partition"),
            record.get("hosts_exchange"), record["K"], record.get("init_window_topics"))


def window_rate(record: dict, window: tuple[int, int]) -> float | None:
    """Mtoken/s over the window's iterations, None where the run has fewer."""
    seconds = list(record.get("warmup_seconds", [])) + list(record["iteration_seconds"])
    first, last = window
    if last > len(seconds):
        return None
    return record["T"] * (last - first + 1) / sum(seconds[first - 1:last]) / 1e6


def read_results(paths: list[str]) -> list[tuple[str, dict]]:
    """(file, record) of every result line in the files, the first of equal runs of a file
    kept (every process of a run may write its line)."""
    results, seen = [], set()
    for path in paths:
        with open(path) as lines:
            for line in lines:
                record = json.loads(line)
                key = (path, run_key(record)) if record.get("type") == "result" else None
                if key is not None and key not in seen:
                    seen.add(key)
                    results.append((path, record))
    return results


def table(results: list[tuple[str, dict]], windows: list[tuple[int, int]]) -> list[str]:
    """Markdown rows: each run's Mtoken/s and speed-up over one device in each window."""
    one = {(r["K"], r.get("init_window_topics")): r for _, r in results
           if run_key(r)[0] == 1}
    names = [f"{a}-{b}" for a, b in windows]
    rows = ["| file | devices | partition | exchange | K | init | "
            + " | ".join(f"iterations {n}" for n in names) + " |",
            "|---" * (6 + len(windows)) + "|"]
    for path, record in results:
        devices, partition, exchange, k, init = run_key(record)
        base = one.get((k, init))
        cells = []
        for window in windows:
            rate = window_rate(record, window)
            base_rate = None if base is None else window_rate(base, window)
            cells.append("" if rate is None else f"{rate:,.1f}" + (
                "" if devices == 1 or not base_rate else f" ({rate / base_rate:.3f}x)"))
        rows.append(f"| {path} | {devices} | {partition} | {exchange or ''} | {k} | {init} | "
                    + " | ".join(cells) + " |")
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--windows", default="4-8,11-20,21-40,41-60")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    print("\n".join(table(read_results(args.files), parse_windows(args.windows))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
