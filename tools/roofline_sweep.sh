#!/bin/bash
# The E-step roofline's device runs (docs/measurements/roofline.md): one H100 (GPU 0), the
# bench with the roofline floor beside the sample phase, over PDOW chunk sizes and the E-step
# kernel's prefetch_blocks (tools/estep_sweep.py); JSON lines to $OUT, a table last.
# From the worktree root on the device machine: bash tools/roofline_sweep.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD CUDA_VISIBLE_DEVICES=0
OUT=${OUT:-/tmp/roofline_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit --format=csv \
    > "$OUT/gpu.csv" 2>&1
sweep() {  # name, then tools/estep_sweep.py flags
    local name=$1; shift
    echo "== $name $*" >> "$OUT/commands.txt"
    python3 tools/estep_sweep.py --output="$OUT/$name.jsonl" "$@" > /dev/null 2> "$OUT/$name.err"
    echo "$name rc=$?"
}
sweep wiki25k --corpus=.corpora/wiki25k --num_topics=1024 --warmup=0 --iterations=100 \
    --test_fraction=0.1 --prefetch_blocks=${WIKI_PREFETCH:-1,2,3,4} \
    --chunk_tokens=${WIKI_CHUNKS:-28200000}
sweep nytimes --synth_preset=nytimes --num_topics=1000,10000 --warmup=2 --iterations=5 \
    --prefetch_blocks=${NYT_PREFETCH:-1,2,3} --chunk_tokens=${NYT_CHUNKS:-100000000,12500000}
python3 tools/roofline_table.py "$OUT"/wiki25k.jsonl "$OUT"/nytimes.jsonl
