#!/bin/bash
# Initial topics drawn per window of the corpus (--init_window_topics) against uniform ones
# (0; docs/measurements/roofline.md, runs 9 to 11): one GPU (GPU 0), bench,
# 100 iterations from the start with 10% of the documents held out (the seed's split).
#   STEPS=speed: wiki25k K = 1,024 with bench's phases and the sample phase's roofline floor,
#     the NYTimes shape (K = 1,000 and 10,000, 2 warm-up and 5 timed iterations), and the
#     M-step kernels' knobs on wiki25k's state after 100 iterations (tools/sampler_sweep.py);
#   STEPS=quality (default): held-out quality and throughput over seeds 0 and 1 on wiki25k
#     and on kos and nyt8k (short documents).
# Logs to $OUT/logs.tgz (one file: the device returns only a few from $OUT).
# Run from the worktree root on the device machine, the corpora in .corpora/:
#   STEPS=quality bash tools/init_window_runs.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD CUDA_VISIBLE_DEVICES=0
RESULTS=${OUT:-/tmp/init_window_runs}
OUT=$(mktemp -d)
trap 'tar czf "$RESULTS/logs.tgz" -C "$OUT" . && rm -r "$OUT"' EXIT
mkdir -p "$RESULTS"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit --format=csv \
    > "$OUT/gpu.csv" 2>&1
bench() {  # name, seconds, then bench flags
    local name=$1 seconds=$2; shift 2
    echo "== $name $*" >> "$OUT/commands.txt"
    timeout "$seconds" python3 launch/bench.py --backends=pallas --num_devices=1 "$@" \
        > "$OUT/$name.jsonl" 2> "$OUT/$name.err"
    echo "$name rc=$?"
}
from_start="--warmup=0 --iterations=100 --test_fraction=0.1"
if [[ ${STEPS:-quality} == speed ]]; then
    bench wiki25k "${WIKI_SECONDS:-120}" --corpus=.corpora/wiki25k --num_topics=1024 \
        $from_start --init_window_topics="${WIKI_WINDOWS:-0,64,256}"
    bench nytimes "${NYT_SECONDS:-110}" --synth_preset=nytimes --num_topics=1000,10000 \
        --warmup=2 --iterations=5 --init_window_topics="${NYT_WINDOWS:-0,16}"
    timeout "${SWEEP_SECONDS:-70}" python3 tools/sampler_sweep.py --corpus=.corpora/wiki25k \
        --test_fraction=0.1 --num_topics=1024 --iterations=100 --repeats=5 \
        --rebuild_variants='p4096:num_programs=4096;p1024:num_programs=1024;b64:block_tokens=64;b256:block_tokens=256;w2:num_warps=2;w8:num_warps=8' \
        --count_variants='s128:spread=128;s2048:spread=2048;w2:num_warps=2' \
        --output="$OUT/mstep_knobs.jsonl" > /dev/null 2> "$OUT/mstep_knobs.err"
    echo "mstep_knobs rc=$?"
    exit
fi
for seed in 0 1; do
    bench "wiki25k_seed$seed" 45 --corpus=.corpora/wiki25k --num_topics=1024 --seed=$seed \
        $from_start --phases=false --init_window_topics="${WIKI_WINDOWS:-0,32,64,128}"
done
for corpus in kos nyt8k; do
    for seed in 0 1; do
        bench "${corpus}_seed$seed" 30 --corpus=.corpora/$corpus \
            --num_topics="${SHORT_TOPICS:-1024}" --seed=$seed $from_start --phases=false \
            --init_window_topics="${SHORT_WINDOWS:-0,64}"
    done
done
