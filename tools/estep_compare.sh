#!/bin/bash
# This tree's E-step kernel against a baseline kernel (BASELINE, a sampler.py; main's in the
# device copy by default) in one process per corpus (docs/measurements/roofline.md), one GPU:
# the NYTimes shape (K = 1,000 and 10,000, the sample phase on the state after 3 iterations,
# also under ptxas register caps) and wiki25k (K = 1,024, 100 iterations, then 100 more with
# this tree's kernel when it is 2% faster), then Nsight Compute over one launch of each on a
# small NYTimes-shaped state.  Logs to $OUT.
# Run from the worktree root on the device machine: bash tools/estep_compare.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD CUDA_VISIBLE_DEVICES=0
OUT=${OUT:-/tmp/estep_compare_out}
BASELINE=${BASELINE:-../../saberjax/pallas/sampler.py}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit --format=csv \
    > "$OUT/gpu.csv" 2>&1
sweep() {  # name, seconds, then sampler_sweep flags
    local name=$1 seconds=$2; shift 2
    timeout "$seconds" python3 tools/sampler_sweep.py --baseline="$BASELINE" "$@" \
        --output="$OUT/$name.jsonl" > /dev/null 2> "$OUT/$name.err"
    echo "$name rc=$?"
}
sweep nytimes "${NYT_SECONDS:-80}" --synth_preset=nytimes --num_topics=1000,10000 \
    --iterations=3 --full_run=false --repeats=5 \
    --variants="${NYT_VARIANTS:-new:;new_r64:regs=64;new_r56:regs=56}"
sweep wiki25k "${WIKI_SECONDS:-80}" --corpus=.corpora/wiki25k --test_fraction=0.1 \
    --num_topics=1024 --iterations=100 --repeats=5 --variants="new:"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout "${NCU_SECONDS:-50}" "$NCU" --profile-from-start off --clock-control none \
    --kernel-name regex:saber_sample --section SpeedOfLight --section LaunchStats \
    --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis \
    --section InstructionStats --section SourceCounters --import-source no \
    -o /tmp/estep_ncu2 -f python3 tools/sampler_sweep.py --baseline="$BASELINE" \
    --synth_preset=nytimes --scale=0.02 --num_topics=1000 --iterations=1 --full_run=false \
    --profile --variants="new:" > "$OUT/ncu_run.log" 2>&1
echo "ncu rc=$?"
"$NCU" -i /tmp/estep_ncu2.ncu-rep --page details --csv > "$OUT/ncu_details.csv" 2>&1
"$NCU" -i /tmp/estep_ncu2.ncu-rep --page source --csv --print-source sass 2>&1 \
    | gzip > "$OUT/ncu_source.csv.gz"
echo "done"
