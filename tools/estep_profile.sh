#!/bin/bash
# One H100 (GPU 0): bench on wiki25k (K = 1,024, 100 iterations, the defaults) with main's tree
# (MAIN, the device copy's root) and with this one, then Nsight Compute on the E-step kernel
# (registers, occupancy, warp stalls, L1 traffic) over a NYTimes-shaped corpus of 2M tokens,
# K = 1,000, after one iteration: four launches of the default kernel and one with the tree
# walk ablated (tools/sampler_sweep.py); logs to $OUT.  docs/measurements/roofline.md.
# Run from the worktree root on the device machine: bash tools/estep_profile.sh
set -u
export PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
OUT=${OUT:-/tmp/estep_profile_out}
MAIN=${MAIN:-../..}
HERE=$PWD
mkdir -p "$OUT"
bench() {  # name, tree
    (cd "$2" && PYTHONPATH=$PWD timeout "${BENCH_SECONDS:-60}" python3 launch/bench.py \
        --backends=pallas --num_devices=1 --corpus="$HERE/.corpora/wiki25k" --num_topics=1024 \
        --warmup=0 --iterations=100 --test_fraction=0.1 > "$OUT/$1.jsonl" 2> "$OUT/$1.err")
    echo "$1 rc=$?"
}
bench bench_main "$MAIN"
bench bench_branch "$HERE"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
PYTHONPATH=$PWD timeout "${NCU_SECONDS:-240}" "$NCU" --target-processes all \
    --kernel-name regex:saber_sample --launch-skip 1 --launch-count 5 \
    --section LaunchStats --section Occupancy --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis_Tables --csv --page details \
    python3 tools/sampler_sweep.py --synth_preset=nytimes --scale=0.02 --num_topics=1000 \
    --iterations=1 --full_run=false --repeats=3 --variants='ablate_dense:ablate=dense' \
    > "$OUT/ncu.csv" 2> "$OUT/ncu.err"
echo "ncu rc=$?"
