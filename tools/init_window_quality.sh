#!/bin/bash
# Held-out quality and throughput of windowed initial topics (--init_window_topics) against
# uniform ones (0) over seeds and corpora of long and short documents
# (docs/measurements/roofline.md): one GPU (GPU 0), bench, 100 iterations from the start,
# 10% of the documents held out (the split is the seed's).  Logs to $OUT/logs.tgz (one
# file: the device returns only a few from $OUT).
# Run from the worktree root on the device machine: bash tools/init_window_quality.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD CUDA_VISIBLE_DEVICES=0
RESULTS=${OUT:-/tmp/init_window_quality}
OUT=$(mktemp -d)
trap 'tar czf "$RESULTS/logs.tgz" -C "$OUT" . && rm -r "$OUT"' EXIT
mkdir -p "$RESULTS"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit --format=csv \
    > "$OUT/gpu.csv" 2>&1
bench() {  # name, seconds, then bench flags
    local name=$1 seconds=$2; shift 2
    echo "== $name $*" >> "$OUT/commands.txt"
    timeout "$seconds" python3 launch/bench.py --backends=pallas --num_devices=1 --warmup=0 \
        --iterations=100 --test_fraction=0.1 --phases=false "$@" \
        > "$OUT/$name.jsonl" 2> "$OUT/$name.err"
    echo "$name rc=$?"
}
for seed in 0 1; do
    bench "wiki25k_seed$seed" 45 --corpus=.corpora/wiki25k --num_topics=1024 --seed=$seed \
        --init_window_topics="${WIKI_WINDOWS:-0,32,64,128}"
done
for corpus in kos nyt8k; do
    for seed in 0 1; do
        bench "${corpus}_seed$seed" 30 --corpus=.corpora/$corpus --num_topics="${SHORT_TOPICS:-1024}" \
            --seed=$seed --init_window_topics="${SHORT_WINDOWS:-0,64}"
    done
done
