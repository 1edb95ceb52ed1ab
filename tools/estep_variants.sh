#!/bin/bash
# E-step kernel variants (VARIANTS: tools/sampler_sweep.py's, e.g. file=scratch/x.py) against
# main's kernel (BASELINE) in one process per corpus, sample phase only: the NYTimes shape at
# K = 1,000 after 3 iterations and wiki25k at K = 1,024 after 100 (docs/measurements/roofline.md).
# Logs to $OUT.  Run from the worktree root on the device machine: bash tools/estep_variants.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD CUDA_VISIBLE_DEVICES=0
OUT=${OUT:-/tmp/estep_variants_out}
BASELINE=${BASELINE:-../../saberjax/pallas/sampler.py}
VARIANTS=${VARIANTS:-new:}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv > "$OUT/gpu.csv" 2>&1
timeout "${NYT_SECONDS:-60}" python3 tools/sampler_sweep.py --baseline="$BASELINE" \
    --synth_preset=nytimes --num_topics=1000 --iterations=3 --full_run=false --repeats=5 \
    --variants="$VARIANTS" --output="$OUT/nytimes.jsonl" > /dev/null 2> "$OUT/nytimes.err"
echo "nytimes rc=$?"
timeout "${WIKI_SECONDS:-60}" python3 tools/sampler_sweep.py --baseline="$BASELINE" \
    --corpus=.corpora/wiki25k --test_fraction=0.1 --num_topics=1024 --iterations=100 \
    --full_run=false --repeats=5 --variants="$VARIANTS" --output="$OUT/wiki25k.jsonl" \
    > /dev/null 2> "$OUT/wiki25k.err"
echo "wiki25k rc=$?"
