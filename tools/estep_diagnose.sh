#!/bin/bash
# The E-step kernel's diagnosis run (docs/measurements/roofline.md): one GPU (GPU 0).
# 1. tools/sampler_sweep.py on the NYTimes shape (K = 1,000 and 10,000, 3 iterations): the
#    phases' times, the roofline floor, and the sample phase with ptxas register caps and with
#    the tree walk ablated, each variant's compiled module dumped;
# 2. ptxas -v over each dumped PTX (registers, spills of the E-step kernel) and the default's
#    and the ablation's SASS (cuobjdump);
# 3. Nsight Compute over one launch of each variant on a small NYTimes-shaped state (details
#    page: launch, occupancy, warp states, memory; source page: stalls per SASS instruction).
# Logs to $OUT.  Run from the worktree root on the device machine: bash tools/estep_diagnose.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD CUDA_VISIBLE_DEVICES=0
OUT=${OUT:-/tmp/estep_diagnose_out}
DUMP=${DUMP:-/tmp/estep_dump}
VARIANTS=${VARIANTS:-'r128:regs=128;r96:regs=96;r72:regs=72;ablate_dense:ablate=dense'}
PROFILE_VARIANTS=${PROFILE_VARIANTS:-'ablate_dense:ablate=dense;r96:regs=96'}
mkdir -p "$OUT" "$DUMP"
{
    nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv
    git log -1 --format=%H
    command -v ncu nsys ptxas cuobjdump nvdisasm
    ls /usr/local/cuda*/bin 2>/dev/null | tr '\n' ' '
} > "$OUT/env.txt" 2>&1
PTXAS=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | head -1)
CUOBJDUMP=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null \
      | head -1)

timeout "${SWEEP_SECONDS:-170}" python3 tools/sampler_sweep.py --synth_preset=nytimes \
    --num_topics=1000,10000 --iterations=3 --full_run=false --repeats=3 \
    --variants="$VARIANTS" --dump_dir="$DUMP" --output="$OUT/sweep.jsonl" \
    > /dev/null 2> "$OUT/sweep.err"
echo "sweep rc=$?"

for ptx in "$DUMP"/K*/*/*.ptx; do  # the E-step kernel's resources in each variant's module
    echo "== $ptx"
    "$PTXAS" -arch=sm_90a -v "$ptx" -o "${ptx%.ptx}.cubin" 2>&1 | grep -A2 "for 'saber_sample'\|properties for saber_sample"
done > "$OUT/ptxas.txt" 2>&1
for variant in default ablate_dense r96; do
    cubin=$(ls "$DUMP"/K1000/$variant/*.cubin 2>/dev/null | head -1)
    [ -n "$cubin" ] && "$CUOBJDUMP" -sass -fun saber_sample "$cubin" > "$DUMP/sass_$variant.txt" 2>&1
done
tar czf "$OUT/dump.tgz" -C "$DUMP" --exclude='*.o' --exclude='*.cubin' . 2>/dev/null
echo "ptxas/sass done"

timeout "${NCU_SECONDS:-110}" "$NCU" --profile-from-start off --clock-control none \
    --kernel-name regex:saber_sample --set full --import-source no -o /tmp/estep_ncu -f \
    python3 tools/sampler_sweep.py --synth_preset=nytimes --scale=0.02 --num_topics=1000 \
    --iterations=1 --full_run=false --profile --variants="$PROFILE_VARIANTS" \
    > "$OUT/ncu_run.log" 2>&1
echo "ncu rc=$?"
"$NCU" -i /tmp/estep_ncu.ncu-rep --page details --csv > "$OUT/ncu_details.csv" 2>&1
"$NCU" -i /tmp/estep_ncu.ncu-rep --page source --csv --print-source sass 2>&1 \
    | gzip > "$OUT/ncu_source.csv.gz"
echo "done"
