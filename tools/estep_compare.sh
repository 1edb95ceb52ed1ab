#!/bin/bash
# E-step kernel variants (VARIANTS, tools/sampler_sweep.py's: 'new:' is this tree's kernel,
# file=PATH another sampler.py's) against a baseline kernel (BASELINE, a sampler.py; main's
# in the device copy by default) in one process per corpus (docs/measurements/roofline.md),
# one GPU: the NYTimes shape (K in NYT_TOPICS, the sample phase on the state after 3
# iterations) and wiki25k (K = 1,024, 100 iterations, then 100 more with the fastest exact
# variant when FULL_RUN_GAIN (default 0.02) faster); tools/estep_diagnose.sh profiles them.
# Logs to $OUT.
# Run from the worktree root on the device machine: bash tools/estep_compare.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD CUDA_VISIBLE_DEVICES=0
OUT=${OUT:-/tmp/estep_compare_out}
BASELINE=${BASELINE:-../../saberjax/pallas/sampler.py}
VARIANTS=${VARIANTS:-new:}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit --format=csv \
    > "$OUT/gpu.csv" 2>&1
sweep() {  # name, seconds, then sampler_sweep flags
    local name=$1 seconds=$2; shift 2
    timeout "$seconds" python3 tools/sampler_sweep.py --baseline="$BASELINE" \
        --variants="$VARIANTS" --repeats=5 "$@" --output="$OUT/$name.jsonl" \
        > /dev/null 2> "$OUT/$name.err"
    echo "$name rc=$?"
}
sweep nytimes "${NYT_SECONDS:-80}" --synth_preset=nytimes \
    --num_topics="${NYT_TOPICS:-1000,10000}" --iterations=3 --full_run=false
sweep wiki25k "${WIKI_SECONDS:-80}" --corpus=.corpora/wiki25k --test_fraction=0.1 \
    --num_topics=1024 --iterations=100 --full_run_gain="${FULL_RUN_GAIN:-0.02}"
