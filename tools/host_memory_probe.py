"""Host memory of a corpus streamed from host memory, against the plan's figure: the bytes of
every pinned array of the placement (its slots' chunks, by word their word shares) and of
the slots' states (sum of nbytes), and the process's peak resident memory growth over
placing and over initialisation and a few iterations (the peak reset before each phase;
/proc/self/clear_refs).  One placement a process, on CPU devices (as many as --devices):

    XLA_FLAGS=--xla_force_host_platform_device_count=2 PYTHONPATH=$PWD \
        python tools/host_memory_probe.py --partition=words --num_docs=8000 --chunk_tokens=400000

Prints one JSON line.  On CPU devices the peaks also hold the devices' side (the model, the
slots in flight, compiled programs), which a GPU keeps in its own memory.

--share_build: instead, the host bytes of building each of the first slots' word shares
(tracemalloc's peak over layout.word_shares less the shares it returns), a line a slot.
--plan_tokens=T --plan_docs=D: instead, the plan's figure (host_memory.held_bytes, with an
accelerator's pinned pool unless --cpu_devices) for T tokens in D documents of equal length,
by word (--partition) over --devices devices of a host of --cores cores, built by the devices:
what a GPU run's corpus gets, without building it.
"""

import argparse
import dataclasses
import json
import os
import pathlib
import sys
import tracemalloc
import types

import jax
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from saberjax import layout, synth  # noqa: E402
from saberjax.config import Hyperparams  # noqa: E402
from saberjax.corpus import Corpus  # noqa: E402
from saberjax.execution.placement import placed  # noqa: E402
from saberjax.execution import host_memory  # noqa: E402
from saberjax.execution.plan import held_host_bytes, plan  # noqa: E402
from saberjax.platform import reuse_freed_memory  # noqa: E402


def status_bytes(field: str) -> int:
    """A field of /proc/self/status (VmRSS, VmHWM) in bytes."""
    with open("/proc/self/status", encoding="ascii") as lines:
        for line in lines:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def reset_peak() -> int:
    """Reset the peak resident memory to the current; the current resident bytes."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
        clear.write("5")
    return status_bytes("VmRSS")


def tree_bytes(tree) -> int:
    return sum(int(leaf.nbytes) for leaf in jax.tree.leaves(tree))


def share_build(corpus: Corpus, parts: int, chunk_tokens: int) -> None:
    """Print the host bytes of building the first three slots' word shares (all parts')."""
    built = layout.build_layout(corpus, chunk_tokens, parts)
    order = layout.share_order(corpus.word_counts(), built.word_order, parts)
    num_slots = len(built.chunk_docs) // parts
    offsets = np.asarray(corpus.doc_offsets)
    for slot in range(min(num_slots, 3)):
        group = sum(int(offsets[last] - offsets[first]) for first, last in
                    layout.group_spans(built, parts, 0, slot, num_slots))
        tracemalloc.start()
        shares = layout.word_shares(corpus, built, parts, range(parts), None, order, slot,
                                    num_slots)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        returned = tree_bytes(tuple(shares.values()))
        largest = max(int(share.num_tokens) for share in shares.values())
        print(json.dumps(dict(
            T=corpus.num_tokens, parts=parts, slots=num_slots, slot=slot, group_tokens=group,
            largest_share=largest, excess=round(largest * parts / group - 1, 5),
            share_tokens=int(shares[0].word.shape[0]), returned_bytes=returned,
            temporary_per_group_token=round((peak - returned) / group, 2))), flush=True)


def plan_only(args) -> None:
    """Print the plan's figure for a corpus of args.plan_tokens in args.plan_docs documents."""
    os.cpu_count = lambda: args.cores  # word_share_slots_at_once and the builders read it
    lengths = np.full(args.plan_docs, args.plan_tokens // args.plan_docs, np.int64)
    lengths[: args.plan_tokens - int(lengths.sum())] += 1
    corpus = types.SimpleNamespace(num_tokens=args.plan_tokens, name="equal documents",
                                   doc_offsets=np.concatenate([[0], np.cumsum(lengths)]))
    hyper = dataclasses.replace(Hyperparams.create(args.num_topics,
                                                   model_format=args.model_format),
                                wide_pairs=args.wide_pairs)
    shape = host_memory.held_shape(corpus, args.devices, args.devices, args.chunk_tokens,
                                   args.partition == "words")
    held = host_memory.held_bytes(shape, hyper, args.num_words, False, not args.cpu_devices)
    print(json.dumps(dict(T=args.plan_tokens, D=args.plan_docs, devices=args.devices,
                          cores=args.cores, partition=args.partition, **vars(shape),
                          planned_GB=round(held / 1e9, 2),
                          corpus_GB=round((4 * args.plan_tokens + 8 * args.plan_docs) / 1e9, 2),
                          planned_per_token=round(held / args.plan_tokens, 1))), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="clueweb")
    parser.add_argument("--num_docs", type=int, default=8000)
    parser.add_argument("--num_words", type=int, default=20_000)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--partition", choices=("words", "documents"), default="words")
    parser.add_argument("--chunk_tokens", type=int, default=400_000)
    parser.add_argument("--num_topics", type=int, default=1000)
    parser.add_argument("--model_format", default="dense")
    parser.add_argument("--wide_pairs", action="store_true")
    parser.add_argument("--layout_on_devices", action="store_true")
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--share_build", action="store_true")
    parser.add_argument("--plan_tokens", type=int, default=0)
    parser.add_argument("--plan_docs", type=int, default=0)
    parser.add_argument("--cores", type=int, default=64)
    parser.add_argument("--cpu_devices", action="store_true")
    args = parser.parse_args()
    if args.plan_tokens:
        plan_only(args)
        return
    config = synth.make_config(args.preset, num_docs=args.num_docs, num_words=args.num_words)
    lengths, words = synth.generate(config, num_threads=None)
    corpus = Corpus(np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]),
                    words.astype(np.int32), tuple(synth.vocab_words(config.num_words)))
    del words
    if args.share_build:
        share_build(corpus, args.devices, args.chunk_tokens)
        return
    hyper = dataclasses.replace(Hyperparams.create(args.num_topics,
                                                   model_format=args.model_format),
                                wide_pairs=args.wide_pairs)
    run_plan = plan(corpus, hyper, args.devices, args.chunk_tokens, stream=True,
                    partition=args.partition, layout_on_devices=args.layout_on_devices)
    hyper = dataclasses.replace(hyper, model_format=run_plan.model_format,
                                wide_pairs=run_plan.wide_pairs)
    planned = held_host_bytes(corpus, hyper, run_plan.mesh, run_plan.chunk_tokens,
                              run_plan.partition, run_plan.layout_on_devices)
    base = reset_peak()
    placement = placed(corpus, hyper, run_plan)
    place_peak = status_bytes("VmHWM") - base
    chunks = tree_bytes(tuple(placement.slots))
    shares = tree_bytes(tuple(placement.word_shares)) if placement.word_shares else 0
    after_place = reset_peak()
    state = placement.init(5)
    step = placement.compile(state)
    jax.block_until_ready(state)
    init_peak = status_bytes("VmHWM") - base
    after_init = reset_peak()
    for _ in range(args.iterations):
        state = step(state)
    jax.block_until_ready(state)
    run_peak = status_bytes("VmHWM") - base
    states = tree_bytes(state.chunks)
    tokens = corpus.num_tokens
    record = dict(
        partition=placement.partition, model_format=hyper.model_format,
        wide_pairs=hyper.wide_pairs, K=args.num_topics, devices=args.devices,
        layout_on_devices=run_plan.layout_on_devices, T=tokens, D=corpus.num_docs,
        V=corpus.num_words, slots=placement.num_slots,
        padded_tokens=placement.slots.padded_tokens,
        share_tokens=(placement.word_shares[0].word.shape[1] if placement.word_shares
                      else 0),
        chunks_bytes=chunks, shares_bytes=shares, states_bytes=states,
        pinned_per_token=round((chunks + shares + states) / tokens, 2),
        held_after_place=after_place - base, held_after_init=after_init - base,
        place_peak=place_peak, init_peak=init_peak, run_peak=run_peak,
        iterations_growth=run_peak - (after_init - base),
        place_peak_per_token=round(place_peak / tokens, 2),
        run_peak_per_token=round(run_peak / tokens, 2),
        planned=planned, planned_per_token=round(planned / tokens, 2),
        cpu_count=os.cpu_count())
    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    reuse_freed_memory()  # as the launchers' processes do
    main()
