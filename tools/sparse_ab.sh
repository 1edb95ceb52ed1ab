#!/usr/bin/env bash
# The sparse model's training and phases (tools/sparse_bench.py --phases: NYTimes shape
# generated on the machine, K = 1,000,000 then 100,000, 1 warm-up + ITERATIONS timed) of
# this tree against a baseline tree (BASELINE_TREE: main's device copy, two levels up, by
# default; a folder holding a saberjax/ will do), both by this tree's tools/sparse_bench.py,
# at once on GPUs of one host, one GPU a process.  Default: GPU 0 the baseline, GPU 1 this tree (on
# a one-GPU machine the two one after the other), and beside them on GPUs 2 and 3 this tree's K =
# 10,000 quality (dense and sparse, 100 iterations from one seed, 10% of the documents held out)
# and its sparse kernel tests compiled.  SPLIT_K=1: no quality, no tests, and on 4 GPUs each K a
# process of its own (GPUs 0 and 1 the baseline and this tree at K = 1e6, GPUs 2 and 3 at 1e5).
# PROFILE=1: each run also prints its first GPU's kernels over two compiled iterations
# (sparse_bench --profile) and the iterations' optimized programs come back in programs.tar.  Each
# part stops after PART_SECONDS; THIS_FLAGS: more flags of this tree's runs (e.g.
# --phase_variants); ITERATIONS: the timed iterations of each run (3 by default); KS: on fewer than
# 4 GPUs, the topic counts run, comma-separated (1000000,100000 by default).
# Logs to $OUT (docs/measurements/sparse_model.md).
# Run from the worktree root on a 4-GPU device machine: OUT=$OUT bash tools/sparse_ab.sh
set -u
export PYTHONUNBUFFERED=1
out=${OUT:-runs/sparse_ab}
seconds=${PART_SECONDS:-130}
iterations=${ITERATIONS:-3}
baseline=$(cd "${BASELINE_TREE:-../..}" && pwd)
bench_tool=$PWD/tools/sparse_bench.py
profiles=/tmp/sparse_ab_profiles
mkdir -p "$out"
{
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv
    echo "baseline $(git -C "$baseline" log -1 --format=%h 2>/dev/null) this $(git log -1 \
        --format=%h 2>/dev/null) $(git status --short -uno 2>/dev/null | wc -l) changed files"
} > "$out/gpu.txt" 2>&1
bench="--preset=nytimes --scale=1 --split_documents_at_topics=1000000 --warmup=1 --phases"
part() {  # name, GPU, tree, then the command
    local name=$1 gpu=$2 tree=$3; shift 3
    local profile=()
    [ "${PROFILE:-0}" = 1 ] && profile=(--profile="$profiles/$name")
    (cd "$tree" && CUDA_VISIBLE_DEVICES=$gpu PYTHONPATH=$tree timeout "$seconds" "$@" \
        "${profile[@]}" > "$out/$name.log" 2>&1; echo "$name rc=$?" >> "$out/$name.log") &
}
gpus=$(nvidia-smi -L | wc -l)
if [ "${SPLIT_K:-0}" = 1 ] && [ "$gpus" -ge 4 ]; then
    # shellcheck disable=SC2086 # bench holds several flags
    part baseline_1e6 0 "$baseline" python3 "$bench_tool" $bench \
        --runs=1000000:auto:pallas:$iterations
    # shellcheck disable=SC2086
    part this_1e6 1 "$PWD" python3 "$bench_tool" $bench \
        --runs=1000000:auto:pallas:$iterations ${THIS_FLAGS:-}
    # shellcheck disable=SC2086
    part baseline_1e5 2 "$baseline" python3 "$bench_tool" $bench \
        --runs=100000:auto:pallas:$iterations
    # shellcheck disable=SC2086
    part this_1e5 3 "$PWD" python3 "$bench_tool" $bench \
        --runs=100000:auto:pallas:$iterations ${THIS_FLAGS:-}
else  # SPLIT_K on fewer than 4 GPUs: the two trees' parts alone
    runs=$(echo "${KS:-1000000,100000}" | sed "s/,/:auto:pallas:$iterations,/g")
    runs=--runs=$runs:auto:pallas:$iterations
    this_gpu=1
    if [ "$gpus" -lt 2 ]; then  # one GPU: the trees one after the other on it
        this_gpu=0
        wait_part=wait
    fi
    # shellcheck disable=SC2086
    part baseline 0 "$baseline" python3 "$bench_tool" $bench $runs
    ${wait_part:-true}
    # shellcheck disable=SC2086
    part this $this_gpu "$PWD" python3 "$bench_tool" $bench $runs ${THIS_FLAGS:-}
    if [ "${SPLIT_K:-0}" != 1 ]; then
        PROFILE=0 part quality 2 "$PWD" python3 "$bench_tool" --preset=nytimes --scale=1 \
            --quality_runs=10000:dense:pallas:100,10000:sparse:pallas:100
        PROFILE=0 part tests 3 "$PWD" python3 -m pytest -x -q -p no:cacheprovider \
            tests/test_sparse_kernel.py
    fi
fi
wait
if [ -d "$profiles" ]; then
    (cd "$profiles" && tar -cf "$out/programs.tar" $(find . -name program.txt.gz))
fi
tail -n 3 "$out"/*.log
