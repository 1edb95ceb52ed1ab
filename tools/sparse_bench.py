"""Benchmark of the model formats (dense, sparse, auto) on one corpus: Mtoken/s per (K, format),
the model's device bytes, B's nonzeros and the bytes of model per nonzero beside the dense
model's, one JSON line per run (to stdout and --output).

    PYTHONPATH=$PWD python3 tools/sparse_bench.py --preset=nytimes --scale=1 \
        --runs=1000:dense,1000:auto,100000:sparse --iterations=3 --output=runs/sparse.jsonl

Each run places the corpus as training would (trainer.place: the memory plan resolves
"auto"), initialises, compiles, runs --warmup + --iterations iterations (trainer.train_placed)
and reports the timed ones.
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import numpy as np

from saberjax import benchmark, trainer
from saberjax.config import Hyperparams
from saberjax.execution import memory


def model_record(placement, state, corpus) -> dict:
    """Device bytes of the state's model, B's nonzeros, bytes per nonzero, and the dense
    model's bytes (B int32, B-hat, trees: memory.model_bytes less the update) per nonzero."""
    hyper = placement.hyper
    model_bytes = sum(leaf.nbytes for leaf in jax.tree.leaves(state.model))
    if hyper.sparse:
        row_start = np.asarray(state.model.word_topic.row_start).reshape(
            placement.num_devices, -1)
        nnz = int(row_start[:, -1].sum())
    else:
        nnz = int(np.count_nonzero(np.asarray(state.model.word_topic)))
    dense_bytes = corpus.num_words * hyper.padded_topics * (4 + 2 + 4 / 31)
    return dict(model_bytes=model_bytes, model_GB=round(model_bytes / 1e9, 3), nnz=nnz,
                nnz_per_token=round(nnz / corpus.num_tokens, 4),
                model_bytes_per_nnz=round(model_bytes / max(nnz, 1), 2),
                dense_model_bytes=int(dense_bytes),
                dense_model_bytes_per_nnz=round(dense_bytes / max(nnz, 1), 2))


def bench(corpus, num_topics: int, model_format: str, iterations: int, warmup: int,
          seed: int) -> dict:
    config = trainer.TrainConfig(num_topics=num_topics, iterations=warmup + iterations,
                                 seed=seed, model_format=model_format, optimize_alpha_every=0)
    start = time.perf_counter()
    placement = trainer.place(corpus, Hyperparams.from_config(config), config)
    place_seconds = time.perf_counter() - start
    run = trainer.train_placed(corpus, placement, config)
    times = [record["seconds"] for record in run.metrics[warmup:]]
    stats = jax.local_devices()[0].memory_stats() or {}
    return dict(
        K=num_topics, requested=model_format, model_format=placement.hyper.model_format,
        partition=placement.partition, backend=placement.hyper.backend,
        devices=placement.num_devices, T=corpus.num_tokens, V=corpus.num_words,
        D=corpus.num_docs, iterations=iterations, warmup=warmup,
        Mtoken_per_s_mean=round(corpus.num_tokens * len(times) / sum(times) / 1e6, 2),
        Mtoken_per_s_best=round(corpus.num_tokens / min(times) / 1e6, 2),
        iteration_seconds=[round(t, 4) for t in times],
        place_seconds=round(place_seconds, 2), init_seconds=round(run.init_seconds, 2),
        compile_seconds=round(run.compile_seconds, 2),
        peak_device_GB=round(stats.get("peak_bytes_in_use", 0) / 1e9, 2),
        planned_device_GB=round(memory.resident_bytes(
            corpus, placement.hyper, placement.num_devices, placement.partition,
            memory.BYTES_PER_TOKEN_BOUND) / 1e9, 2),
        **model_record(placement, run.state, corpus))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="nytimes")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", required=True, help="K:format,... (format dense, sparse or "
                        "auto), in the order run")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    start = time.perf_counter()
    corpus = benchmark.synthetic_corpus(args.preset, args.scale, args.seed)
    env = dict(benchmark.environment(), synth_seconds=round(time.perf_counter() - start, 1))
    print(json.dumps(dict(type="corpus", corpus=corpus.name, T=corpus.num_tokens,
                          V=corpus.num_words, D=corpus.num_docs, **env)), flush=True)
    for run in args.runs.split(","):
        num_topics, model_format = run.split(":")
        try:
            record = dict(type="result", **bench(corpus, int(num_topics), model_format,
                                                 args.iterations, args.warmup, args.seed))
        except (MemoryError, ValueError) as error:
            record = dict(type="refused", K=int(num_topics), requested=model_format,
                          reason=str(error))
        line = json.dumps(record)
        print(line, flush=True)
        if args.output:
            with open(args.output, "a", encoding="utf-8") as output:
                output.write(line + "\n")


if __name__ == "__main__":
    main()
