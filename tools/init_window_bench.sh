#!/bin/bash
# Initial topics drawn per window of the corpus (--init_window_topics) against uniform ones
# (0, the code path of every earlier run; docs/measurements/roofline.md): one GPU (GPU 0),
# bench with its phases and the sample phase's roofline floor on wiki25k (K = 1,024, 100
# iterations from the start, held-out scored) and on the NYTimes shape (K = 1,000 and 10,000,
# 2 warm-up and 5 timed iterations).  Logs to $OUT.
# Run from the worktree root on the device machine: bash tools/init_window_bench.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD CUDA_VISIBLE_DEVICES=0
OUT=${OUT:-/tmp/init_window_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit --format=csv \
    > "$OUT/gpu.csv" 2>&1
bench() {  # name, seconds, then bench flags
    local name=$1 seconds=$2; shift 2
    echo "== $name $*" >> "$OUT/commands.txt"
    timeout "$seconds" python3 launch/bench.py --backends=pallas --num_devices=1 "$@" \
        > "$OUT/$name.jsonl" 2> "$OUT/$name.err"
    echo "$name rc=$?"
}
bench wiki25k "${WIKI_SECONDS:-120}" --corpus=.corpora/wiki25k --num_topics=1024 --warmup=0 \
    --iterations=100 --test_fraction=0.1 --init_window_topics="${WIKI_WINDOWS:-0,64,256}"
bench nytimes "${NYT_SECONDS:-110}" --synth_preset=nytimes --num_topics=1000,10000 --warmup=2 \
    --iterations=5 --init_window_topics="${NYT_WINDOWS:-0,16}"
# the M-step kernels' knobs on wiki25k's state after 100 iterations (tools/sampler_sweep.py)
timeout "${SWEEP_SECONDS:-70}" python3 tools/sampler_sweep.py --corpus=.corpora/wiki25k \
    --test_fraction=0.1 --num_topics=1024 --iterations=100 --repeats=5 \
    --rebuild_variants='p4096:num_programs=4096;p1024:num_programs=1024;b64:block_tokens=64;b256:block_tokens=256;w2:num_warps=2;w8:num_warps=8' \
    --count_variants='s128:spread=128;s2048:spread=2048;w2:num_warps=2' \
    --output="$OUT/mstep_knobs.jsonl" > /dev/null 2> "$OUT/mstep_knobs.err"
echo "mstep_knobs rc=$?"
