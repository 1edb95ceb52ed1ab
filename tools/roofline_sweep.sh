#!/bin/bash
# The E-step roofline's device run (docs/measurements/roofline.md): one H100 (GPU 0), bench
# with the roofline floor beside the sample phase, over PDOW chunk sizes; logs to $OUT.
# Run from the worktree root on the device machine: bash tools/roofline_sweep.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD CUDA_VISIBLE_DEVICES=0
OUT=${OUT:-/tmp/roofline_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv \
    > "$OUT/gpu.csv" 2>&1
git log -1 --format=%H > "$OUT/commit.txt" 2>/dev/null
bench() {  # name, then bench flags
    local name=$1; shift
    echo "== $name $*" >> "$OUT/commands.txt"
    python3 launch/bench.py --backends=pallas --num_devices=1 "$@" \
        > "$OUT/$name.jsonl" 2> "$OUT/$name.err"
    echo "$name rc=$?"
}
bench wiki25k --corpus=.corpora/wiki25k --num_topics=1024 --warmup=0 --iterations=100 \
    --test_fraction=0.1 --chunk_tokens=${WIKI_CHUNKS:-28200000,14100000,9400000,4700000}
bench nytimes --synth_preset=nytimes --num_topics=1000,10000 --warmup=2 --iterations=5 \
    --chunk_tokens=${NYT_CHUNKS:-100000000,25000000,12500000,6250000}
python3 tools/roofline_table.py "$OUT"/wiki25k.jsonl "$OUT"/nytimes.jsonl
