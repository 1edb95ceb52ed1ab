"""How the text reader's CPU a token grows with the processes reading at once on a many-core
host: the same pieces of a file (the reader's pieces: LineRanges of `--piece_bytes`, read
from the page cache, parsed where JSON Lines, tokenised and counted, as a worker process
does for each piece) handled by N forked processes at once, each pinned to one CPU of a
placement, `--rounds` times after a round that warms it.  Placements: "1" (one process),
"Nc" (N processes on N distinct physical cores), "Ns" (N processes on N/2 cores, both
hardware threads of each), "all" (one per logical CPU), "allu" (as many, unpinned); a
placement may end in "@BYTES" for pieces of that size.  Prints one JSON line a placement:
per step, the CPU nanoseconds a token (thread CPU time, summed over the processes, over
the tokens they handled), the processes' user and system seconds, minor page faults and
context switches, and the wall seconds from the common start to the last process's end.

    PYTHONPATH=CHECKOUT python tools/text_core_scaling.py shard.jsonl --format=jsonl \
        --placements=1,16c,32c,32s,all
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("--format", default="jsonl")
    parser.add_argument("--placements", default="1,16c,32c,32s,all")
    parser.add_argument("--piece_bytes", type=int, default=1 << 20)
    parser.add_argument("--pieces", type=int, default=8,
                        help="MB pieces each process handles a round (more of smaller pieces)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cores = physical_cores()
    print(json.dumps(dict(logical_cpus=sum(map(len, cores)), physical_cores=len(cores),
                          threads_per_core=sorted({len(core) for core in cores}))), flush=True)
    for placement in args.placements.split(","):
        name, _, size = placement.partition("@")
        piece_bytes = int(size) if size else args.piece_bytes
        cpus = placement_cpus(name, cores)
        if cpus is None:
            print(json.dumps(dict(placement=placement, skipped="not on this host")), flush=True)
            continue
        result = run_placement(args, cpus, piece_bytes)
        print(json.dumps(dict(placement=placement, piece_bytes=piece_bytes, **result)),
              flush=True)


def physical_cores() -> list[list[int]]:
    """The logical CPUs of each physical core (this process's allowed CPUs), cores in the
    order of their first CPU."""
    by_core: dict[tuple[str, str], list[int]] = {}
    for cpu in sorted(os.sched_getaffinity(0)):
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        key = ((topology / "physical_package_id").read_text().strip(),
               (topology / "core_id").read_text().strip())
        by_core.setdefault(key, []).append(cpu)
    return sorted(by_core.values())


def placement_cpus(name: str, cores: list[list[int]]) -> list[int | None] | None:
    """The CPU of each process of the placement (None: unpinned), or None where the host
    cannot give it."""
    every = [cpu for core in cores for cpu in core]
    if name == "all":
        return every
    if name == "allu":
        return [None] * len(every)
    if name.endswith("c"):
        count = int(name[:-1])
        return [core[0] for core in cores[:count]] if count <= len(cores) else None
    if name.endswith("s"):
        pairs = [core[:2] for core in cores if len(core) >= 2][:int(name[:-1]) // 2]
        return [cpu for pair in pairs for cpu in pair] if 2 * len(pairs) == int(name[:-1]) \
            else None
    return every[:int(name)]


def run_at_once(target, arguments: list[tuple]) -> tuple[list, float]:
    """target(*each of arguments, ready, results) in a forked process each, released together
    at a barrier: (what each put on `results`, in the order they came; seconds from the
    release to the last)."""
    context = multiprocessing.get_context("fork")
    ready, results = context.Barrier(len(arguments) + 1), context.Queue()
    processes = [context.Process(target=target, args=(*own, ready, results))
                 for own in arguments]
    for process in processes:
        process.start()
    ready.wait()
    start = time.perf_counter()
    done = [results.get() for _ in processes]
    wall = time.perf_counter() - start
    for process in processes:
        process.join()
    return done, wall


def run_placement(args, cpus: list[int | None], piece_bytes: int) -> dict:
    done, wall = run_at_once(_handle, [(args, cpu, piece_bytes, index)
                                       for index, cpu in enumerate(cpus)])
    tokens = sum(result["tokens"] for result in done)
    steps = {step: round(sum(result["steps"][step] for result in done) / tokens * 1e9, 1)
             for step in done[0]["steps"]}
    totals = {key: round(sum(result[key] for result in done), 2)
              for key in ("user_s", "system_s", "minor_faults", "voluntary_switches",
                          "involuntary_switches")}
    return dict(processes=len(cpus), tokens=tokens, wall_s=round(wall, 2),
                most_wall_s=round(max(result["wall_s"] for result in done), 2),
                ns_per_token=steps, ns_per_token_all=round(sum(steps.values()), 1),
                user_system_ns_per_token=round((totals["user_s"] + totals["system_s"])
                                               / tokens * 1e9, 1), **totals)


def _handle(args, cpu, piece_bytes, index, ready, results) -> None:
    """One process: its pieces (a different stretch of the file each process, the same
    pieces every round) parsed, tokenised and counted, after a warming round."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    from saberjax.platform import reuse_freed_memory

    reuse_freed_memory()
    from saberjax.corpus.plain_text import reading_options, text_rules
    from saberjax.corpus.text_pieces import block_pieces
    from saberjax.corpus.text_sources import document_blocks
    from saberjax.corpus.text_workers import frequencies
    from saberjax.corpus.tokenizing import block_words

    rules, _ = text_rules()
    blocks = document_blocks(Path(args.path), format=args.format, parsed=False,
                             **reading_options({}))
    pieces = [piece for block in blocks for piece in block_pieces(block, piece_bytes)]
    wanted = args.pieces * max(1, (1 << 20) // piece_bytes)  # the same bytes at any size
    first = index * wanted % max(len(pieces) - wanted, 1)
    pieces = pieces[first:first + wanted]
    steps = dict(parsing=0.0, tokenising=0.0, counting=0.0)
    tokens = 0
    for round_ in range(args.rounds + 1):
        if round_ == 1:
            ready.wait()
            usage, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        for piece in pieces:
            begin = time.thread_time()
            block = piece.parsed()
            parsed = time.thread_time()
            words = block_words(block, rules)
            tokenised = time.thread_time()
            frequencies(words)
            counted = time.thread_time()
            if round_:
                steps["parsing"] += parsed - begin
                steps["tokenising"] += tokenised - parsed
                steps["counting"] += counted - tokenised
                tokens += words.token_ids.size
    wall = time.perf_counter() - start
    end = resource.getrusage(resource.RUSAGE_SELF)
    results.put(dict(
        tokens=tokens, steps=steps, wall_s=wall, user_s=end.ru_utime - usage.ru_utime,
        system_s=end.ru_stime - usage.ru_stime, minor_faults=end.ru_minflt - usage.ru_minflt,
        voluntary_switches=end.ru_nvcsw - usage.ru_nvcsw,
        involuntary_switches=end.ru_nivcsw - usage.ru_nivcsw))


if __name__ == "__main__":
    main()
