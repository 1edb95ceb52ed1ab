"""Where two training runs of one seed part: per-iteration digests of `saberjax train`.

    python tools/determinism_trace.py run TRACE.jsonl -- --corpus=C --num_topics=256 ... --output=M
    python tools/determinism_trace.py compare A.jsonl [B.jsonl ...]

`run` runs `saberjax train` with those flags in this process (the launcher's whole path: its
caches, layout, compiled programs and model.npz) with its trainer's callback chained to one
that writes a JSON line per iteration to TRACE: the run's chunks and devices, the MD5 of B (the
word-topic counts of the real topics, rows by word id: the same whatever the chunking,
streaming or device count) and of alpha's float32 bits, and two checks of integer invariants
that a lost or doubled atomic in the A rebuild or the B count would break: B's total is the
corpus's token count, and every topic's total over the documents' A equals its total in B
(`a_matches_b`; null for a chunk store's states, which hold z alone).

`compare` prints a JSON line for each trace with an iteration that breaks an invariant and,
for each later trace against the first, one with the first iteration whose B or alpha differs
(or that they agree throughout); it exits 1 when any does.  B differing first points at the
E-step or the M-step's kernels; alpha differing while B is equal at that iteration, at the
learned prior's update (a B that differs only from there on follows from alpha).
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import sys

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]


def digest(array) -> str:
    """MD5 of an array's bytes, C order."""
    return hashlib.md5(np.ascontiguousarray(array).tobytes()).hexdigest()


def a_topic_totals(a_pairs: np.ndarray, padded_topics: int) -> np.ndarray:
    """int64 [K_pad]: each topic's count summed over the documents' packed A pairs."""
    from saberjax.state import pair_topic_bits  # noqa: PLC0415 (after the path is set)

    pairs = np.asarray(a_pairs, np.uint32)
    bits = pair_topic_bits(padded_topics)
    topics = (pairs & np.uint32((1 << bits) - 1)).astype(np.int64)
    counts = (pairs >> np.uint32(bits)).astype(np.int64)
    return np.bincount(topics, weights=counts, minlength=padded_topics).astype(np.int64)


def iteration_record(iteration: int, placement, state, num_tokens: int) -> dict:
    """The trace line of one iteration's state (module docstring)."""
    hyper = placement.hyper
    word_topic = placement.word_topic(state)
    b_totals = word_topic.sum(axis=0, dtype=np.int64)
    chunk_states = placement.chunk_states(state).values()
    a_matches_b = None
    if all(chunk.a_pairs is not None for chunk in chunk_states):
        a_totals = sum(a_topic_totals(chunk.a_pairs, hyper.padded_topics)
                       for chunk in chunk_states)
        a_matches_b = bool(np.array_equal(a_totals, b_totals))
    return dict(iteration=iteration, chunks=placement.num_chunks, devices=placement.num_devices,
                b=digest(word_topic[:, :hyper.num_topics].astype(np.int32)),
                alpha=digest(placement.alpha(state).astype(np.float32)),
                b_total_is_tokens=int(b_totals.sum()) == num_tokens,
                a_matches_b=a_matches_b)


def run(trace_path: str, train_flags: list[str]) -> None:
    """`saberjax train` with train_flags, tracing every iteration into trace_path."""
    sys.path.insert(0, str(REPO))
    from saberjax import trainer  # noqa: PLC0415
    from saberjax.commands import run as run_command  # noqa: PLC0415
    from saberjax.progress import chain  # noqa: PLC0415

    trace = open(trace_path, "w", encoding="utf-8")  # noqa: SIM115 (closed at exit below)
    train_placed = trainer.train_placed

    def traced(corpus, placement, config, heldout=None, callback=None, *args, **kwargs):
        def record(iteration, _metrics, state):
            line = iteration_record(iteration, placement, state, corpus.num_tokens)
            trace.write(json.dumps(line) + "\n")
            trace.flush()
        return train_placed(corpus, placement, config, heldout, chain(callback, record),
                            *args, **kwargs)

    trainer.train_placed = traced
    try:
        run_command("train", [str(REPO / "launch" / "train.py"), *train_flags])
    finally:
        trace.close()


def first_difference(first: list[dict], other: list[dict]) -> dict:
    """Where trace `other` first differs from trace `first`: the iteration and what differs
    (b, alpha), or agreement over the iterations both hold."""
    for mine, theirs in zip(first, other):
        parts = [key for key in ("b", "alpha") if mine[key] != theirs[key]]
        if parts:
            return dict(same=False, iteration=mine["iteration"], differs=parts)
    if len(first) != len(other):
        return dict(same=False, iteration=min(len(first), len(other)) + 1,
                    differs=["iterations"])
    return dict(same=True, iterations=len(first))


def read_trace(path: str) -> list[dict]:
    return [json.loads(line) for line in pathlib.Path(path).read_text().splitlines() if line]


def compare(paths: list[str]) -> int:
    """Print each later trace's first difference from the first (and any broken invariant);
    1 when any run differs or breaks one, else 0."""
    traces = [read_trace(path) for path in paths]
    status = 0
    for path, trace in zip(paths, traces):
        broken = [line["iteration"] for line in trace
                  if not line["b_total_is_tokens"] or line["a_matches_b"] is False]
        if broken:
            print(json.dumps(dict(trace=path, invariants_broken_at=broken)))
            status = 1
    for path, trace in zip(paths[1:], traces[1:]):
        found = first_difference(traces[0], trace)
        print(json.dumps(dict(trace=path, against=paths[0], **found)))
        status |= not found["same"]
    return status


if __name__ == "__main__":
    verb, rest = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if verb == "run" and len(rest) >= 1:
        flags = rest[1:]
        run(rest[0], flags[1:] if flags[:1] == ["--"] else flags)
    elif verb == "compare" and rest:
        sys.exit(compare(rest))
    else:
        sys.exit(__doc__)
