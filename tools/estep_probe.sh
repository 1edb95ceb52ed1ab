#!/bin/bash
# The E-step's probe kernels (tools/estep_probe.py) beside the baseline kernel on the NYTimes
# shape (docs/measurements/roofline.md, run 14), four GPUs at once, one process each:
#   GPU 0, 1: tools/sampler_sweep.py at K = 1,000 / 10,000 (the state after 3 iterations):
#             the roofline floor, and the sample phase of the baseline and of each probe
#   GPU 2, 3: Nsight Compute over one launch of each (PROFILE_VARIANTS; the full set: the
#             baseline and abt) at K = 1,000 on the NYTimes shape scaled to 0.02 (the
#             full-size state crashed ncu):
#             duration, instructions executed, issue rate, pipes, warp stalls, memory (the
#             raw page: every metric the sections collected)
# BASELINE: a sampler.py (main's in the device copy by default).  Logs in $OUT/probe.tgz.
# Run from the worktree root on the device machine: bash tools/estep_probe.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
OUT=${OUT:-/tmp/estep_probe_out}
LOGS=$(mktemp -d)
BASELINE=${BASELINE:-../../saberjax/pallas/sampler.py}
PROBE=tools/estep_probe.py
PROFILED="a:file=$PROBE,probe=a;ab:file=$PROBE,probe=ab;abt:file=$PROBE,probe=abt"
# the same accesses with more in flight: two blocks ahead, or 16 and 32 tokens a tile on 2 and
# 4 warps (the kernel too)
WIDER="a2:file=$PROBE,probe=a2;a_t16w2:file=$PROBE,probe=a,tile_tokens=16,num_warps=2"
WIDER="$WIDER;a_t32w4:file=$PROBE,probe=a,tile_tokens=32,num_warps=4"
WIDER="$WIDER;abt_t16w2:file=$PROBE,probe=abt,tile_tokens=16,num_warps=2"
WIDER="$WIDER;kernel_t16w2:tile_tokens=16,num_warps=2"
# a with the next tile's prologue in flight during this tile's loop (persistent programs)
WIDER="$WIDER;ap:file=$PROBE,probe=ap;ap_half:file=$PROBE,probe=ap,programs=2112"
VARIANTS=${VARIANTS:-"$PROFILED;$WIDER"}
PROFILE_VARIANTS=${PROFILE_VARIANTS:-$PROFILED}
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm,power.limit --format=csv \
    > "$LOGS/gpu.csv" 2>&1
git log -1 --format=%H > "$LOGS/commit.txt" 2>&1

sweep() {  # gpu, K
    CUDA_VISIBLE_DEVICES=$1 timeout "${SWEEP_SECONDS:-170}" python3 tools/sampler_sweep.py \
        --baseline="$BASELINE" --variants="$VARIANTS" --repeats=5 --synth_preset=nytimes \
        --num_topics="$2" --iterations=3 --full_run=false --output="$LOGS/sweep_$2.jsonl" \
        > /dev/null 2> "$LOGS/sweep_$2.err"
    echo "sweep $2 rc=$?" >> "$LOGS/rc.txt"
}
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats
    --section SchedulerStats --section WarpStateStats --section Occupancy --section LaunchStats
    --section MemoryWorkloadAnalysis"
profile() {  # gpu, K, scale of the corpus, ncu's sections, variants
    CUDA_VISIBLE_DEVICES=$1 timeout "${NCU_SECONDS:-170}" "$NCU" --profile-from-start off \
        --clock-control none --kernel-name 'regex:saber_sample|estep_probe' $4 \
        -o "/tmp/probe_ncu_$2_$3" -f \
        python3 tools/sampler_sweep.py --baseline="$BASELINE" --variants="$5" \
        --synth_preset=nytimes --scale="$3" --num_topics="$2" --iterations=3 \
        --full_run=false --profile > "$LOGS/ncu_run_$2_$3.log" 2>&1
    echo "ncu $2 $3 rc=$?" >> "$LOGS/rc.txt"
    "$NCU" -i "/tmp/probe_ncu_$2_$3.ncu-rep" --page details --csv > "$LOGS/ncu_$2_$3.csv" 2>&1
    "$NCU" -i "/tmp/probe_ncu_$2_$3.ncu-rep" --page raw --csv 2>&1 \
        | gzip > "$LOGS/ncu_raw_$2_$3.csv.gz"
}
sweep 0 1000 & sweep 1 10000 &
profile 2 1000 0.02 "$SECTIONS" "$PROFILE_VARIANTS" &
profile 3 1000 0.021 "--set full" "abt:file=$PROBE,probe=abt" &
wait
tar -czf "$OUT/probe.tgz" -C "$LOGS" .
cat "$LOGS/rc.txt"
