#!/bin/bash
# The E-step kernel's diagnosis run (docs/measurements/roofline.md, "The profile"): one GPU.
# 1. tools/sampler_sweep.py on the NYTimes shape (K = 1,000 and 10,000, 3 iterations): the
#    phases' times, the roofline floor, and the sample phase under ptxas register caps and
#    with the tree walk ablated (VARIANTS);
# 2. Nsight Compute over one launch of the baseline kernel (BASELINE, a sampler.py; this
#    tree's by default) and of each PROFILE_VARIANTS on a small NYTimes-shaped state (details page: launch, occupancy, warp states, memory; source page:
#    executions and stalls per SASS instruction).
# Logs to $OUT.  Run from the worktree root on the device machine: bash tools/estep_diagnose.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD CUDA_VISIBLE_DEVICES=0
OUT=${OUT:-/tmp/estep_diagnose_out}
VARIANTS=${VARIANTS:-'r64:max_registers=64;r56:max_registers=56;ablate_dense:ablate=dense'}
PROFILE_VARIANTS=${PROFILE_VARIANTS:-'ablate_dense:ablate=dense'}
BASELINE=${BASELINE:-saberjax/pallas/sampler.py}
mkdir -p "$OUT"
{
    nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv
    command -v ncu nsys ptxas cuobjdump nvdisasm
} > "$OUT/env.txt" 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)

timeout "${SWEEP_SECONDS:-170}" python3 tools/sampler_sweep.py --baseline="$BASELINE" \
    --synth_preset=nytimes \
    --num_topics=1000,10000 --iterations=3 --full_run=false --repeats=3 \
    --variants="$VARIANTS" --output="$OUT/sweep.jsonl" > /dev/null 2> "$OUT/sweep.err"
echo "sweep rc=$?"

timeout "${NCU_SECONDS:-110}" "$NCU" --profile-from-start off --clock-control none \
    --kernel-name regex:saber_sample --set full --import-source no -o /tmp/estep_ncu -f \
    python3 tools/sampler_sweep.py --baseline="$BASELINE" --synth_preset=nytimes \
    --scale=0.02 --num_topics=1000 \
    --iterations=1 --full_run=false --profile --variants="$PROFILE_VARIANTS" \
    > "$OUT/ncu_run.log" 2>&1
echo "ncu rc=$?"
"$NCU" -i /tmp/estep_ncu.ncu-rep --page details --csv > "$OUT/ncu_details.csv" 2>&1
"$NCU" -i /tmp/estep_ncu.ncu-rep --page source --csv --print-source sass 2>&1 \
    | gzip > "$OUT/ncu_source.csv.gz"
echo "done"
