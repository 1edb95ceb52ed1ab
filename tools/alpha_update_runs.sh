#!/bin/bash
# The learned prior's update and the initial topics' default against a baseline tree
# (docs/measurements/roofline.md, run 11), one call on a host of 4 GPUs, one process at a time
# on each GPU, every wiki25k run bench's 100 iterations from the start with 10% of the
# documents held out (the seed's split), K = 1,024; this tree's wiki25k runs take
# --init_window_topics=$THIS_WINDOWS (default 0,auto: uniform, then the setting's default):
#   GPU 0: wiki25k seed 0 with the baseline's defaults, then seed 1 with this tree's;
#   GPU 1: the same the other way round (this tree's seed 0, the baseline's seed 1), so each
#          card times both trees;
#   GPU 2: seed 2, the baseline's then this tree's; nyt8k seed 0's held-out quality at
#          K = $SHORT_TOPICS (default 512) for S = $QUALITY_WINDOWS (default 0,64); then
#          tools/alpha_update_bench.py (wiki25k, the update's pieces after 10 and 100
#          iterations, uniform start, this tree's prior beside the baseline's);
#   GPU 3: the same quality runs on kos, seeds 0 and 1, then nyt8k seed 1.
# Run from this tree's root on the device machine, the corpora in .corpora/, the baseline tree
# at $BASE (default ../alphabase, its corpora read from here):
#   bash tools/alpha_update_runs.sh
# Logs to $OUT/logs.tgz (one file: the device returns only a few from $OUT).
set -u
export PYTHONUNBUFFERED=1
HERE=$PWD BASE=${BASE:-$PWD/../alphabase}
RESULTS=${OUT:-/tmp/alpha_update_runs}
LOGS=$(mktemp -d)
trap 'tar czf "$RESULTS/logs.tgz" -C "$LOGS" . && rm -r "$LOGS"' EXIT
mkdir -p "$RESULTS"
nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm,power.limit --format=csv \
    > "$LOGS/gpu.csv" 2>&1
git -C "$HERE" log --oneline -1 > "$LOGS/commits.txt" 2>&1
git -C "$BASE" log --oneline -1 >> "$LOGS/commits.txt" 2>&1
from_start="--warmup=0 --iterations=100 --test_fraction=0.1 --phases=false"
run() {  # gpu, tree, name, seconds, then the command's arguments after python3
    local gpu=$1 tree=$2 name=$3 seconds=$4; shift 4
    echo "== GPU $gpu $tree $name: $*" >> "$LOGS/commands_$gpu.txt"
    (cd "$tree" && CUDA_VISIBLE_DEVICES=$gpu PYTHONPATH=$tree timeout "$seconds" python3 "$@" \
        > "$LOGS/$name.jsonl" 2> "$LOGS/$name.err")
    echo "$name rc=$? $(date -u +%T)" >> "$LOGS/commands_$gpu.txt"
}
wiki() {  # gpu, tree, name, seed, seconds, init_window_topics
    run "$1" "$2" "$3" "$5" launch/bench.py --backends=pallas --num_devices=1 \
        --corpus="$HERE/.corpora/wiki25k" --num_topics=1024 --seed="$4" $from_start \
        ${6:+--init_window_topics=$6}
}
quality() {  # gpu, corpus, seeds
    for seed in $3; do
        run "$1" "$HERE" "${2}_seed$seed" "${QUALITY_SECONDS:-60}" launch/bench.py \
            --backends=pallas --num_devices=1 --corpus="$HERE/.corpora/$2" \
            --num_topics="${SHORT_TOPICS:-512}" --seed=$seed $from_start \
            --init_window_topics="${QUALITY_WINDOWS:-0,64}"
    done
}
WIKI_SECONDS=${WIKI_SECONDS:-70} THIS_WINDOWS=${THIS_WINDOWS:-0,auto}
(wiki 0 "$BASE" base_seed0 0 "$WIKI_SECONDS"
 wiki 0 "$HERE" this_seed1 1 "$WIKI_SECONDS" "$THIS_WINDOWS") &
(wiki 1 "$HERE" this_seed0 0 "$WIKI_SECONDS" "$THIS_WINDOWS"
 wiki 1 "$BASE" base_seed1 1 "$WIKI_SECONDS") &
(wiki 2 "$BASE" base_seed2 2 "$WIKI_SECONDS"
 wiki 2 "$HERE" this_seed2 2 "$WIKI_SECONDS" "$THIS_WINDOWS"
 quality 2 nyt8k 0
 run 2 "$HERE" alpha_update "${BENCH_SECONDS:-60}" tools/alpha_update_bench.py \
    --corpus="$HERE/.corpora/wiki25k" --num_topics=1024 --test_fraction=0.1 \
    --init_window_topics=0 --at=10,100 --reference="$BASE/saberjax/prior.py") &
(quality 3 kos "0 1"; quality 3 nyt8k 1) &
wait
