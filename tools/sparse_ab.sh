#!/usr/bin/env bash
# The sparse model's training and phases (tools/sparse_bench.py --phases: NYTimes shape
# generated on the machine, K = 1,000,000 then 100,000, 1 warm-up + 3 timed iterations) of
# this tree against a baseline tree (BASELINE_TREE: main's device copy, two levels up, by
# default), at once on two GPUs of one host (0: baseline, 1: this tree), and beside them on
# GPUs 2 and 3 this tree's K = 10,000 quality (dense and sparse, 100 iterations from one seed,
# 10% of the documents held out) and its sparse kernel tests compiled.  Each part stops after
# PART_SECONDS.  Logs to $OUT (docs/measurements/sparse_model.md).
# Run from the worktree root on a 4-GPU device machine: OUT=$OUT bash tools/sparse_ab.sh
set -u
export PYTHONUNBUFFERED=1
out=${OUT:-runs/sparse_ab}
seconds=${PART_SECONDS:-130}
baseline=$(cd "${BASELINE_TREE:-../..}" && pwd)
mkdir -p "$out"
{
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv
    echo "baseline $(git -C "$baseline" log -1 --format=%h 2>/dev/null) this $(git log -1 \
        --format=%h 2>/dev/null) $(git status --short -uno 2>/dev/null | wc -l) changed files"
} > "$out/gpu.txt" 2>&1
bench="--preset=nytimes --scale=1 --split_documents_at_topics=1000000 --warmup=1 --phases
       --runs=1000000:auto:pallas:3,100000:auto:pallas:3"
part() {  # name, GPU, tree, then the command
    local name=$1 gpu=$2 tree=$3; shift 3
    (cd "$tree" && CUDA_VISIBLE_DEVICES=$gpu PYTHONPATH=$tree timeout "$seconds" "$@" \
        > "$out/$name.log" 2>&1; echo "$name rc=$?" >> "$out/$name.log") &
}
# shellcheck disable=SC2086 # bench holds several flags
part baseline 0 "$baseline" python3 tools/sparse_bench.py $bench
# shellcheck disable=SC2086
part this 1 "$PWD" python3 tools/sparse_bench.py $bench
part quality 2 "$PWD" python3 tools/sparse_bench.py --preset=nytimes --scale=1 \
    --quality_runs=10000:dense:pallas:100,10000:sparse:pallas:100
part tests 3 "$PWD" python3 -m pytest -x -q -p no:cacheprovider tests/test_sparse_kernel.py
wait
tail -n 3 "$out"/*.log
