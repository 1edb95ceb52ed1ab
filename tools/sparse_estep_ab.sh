#!/usr/bin/env bash
# The sparse E-step kernel's settings against main in one call on a 4-GPU host, one GPU a
# process (docs/measurements/sparse_model.md): GPUs 0 and 1 this tree at K = 1,000,000 and
# 100,000 (tools/sparse_bench.py --phases, NYTimes shape generated here, 1 warm-up + 3 timed
# iterations, then the E-step kernel at each of ESTEP_VARIANTS on the trained state, and
# with PROFILE=1 the first GPU's kernels over two compiled iterations), GPU 2 the baseline
# tree (BASELINE_TREE: main's device copy, two levels up, by default) at both K by this
# tree's tool, GPU 3 this tree's K = 10,000 quality (dense then sparse, 100 iterations from
# one seed, 10% of the documents held out); QUALITY=0: no quality, GPUs 2 and 3 the
# baseline at K = 1e6 and 1e5.  Each part stops after
# PART_SECONDS.  Logs to $OUT.  From the worktree root: OUT=$OUT bash tools/sparse_estep_ab.sh
set -u
export PYTHONUNBUFFERED=1
out=${OUT:-runs/sparse_estep_ab}
seconds=${PART_SECONDS:-180}
baseline=$(cd "${BASELINE_TREE:-../..}" && pwd)
variants=${ESTEP_VARIANTS:-split=0;sparse_programs=0;sparse_programs=2048;sparse_programs=16384;dense_programs=4224;own_count=bhat;tile_tokens=4}
tool=$PWD/tools/sparse_bench.py
mkdir -p "$out"
{
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv
    echo "baseline $(git -C "$baseline" log -1 --format=%h 2>/dev/null) this $(git log -1 \
        --format=%h 2>/dev/null) $(git status --short -uno 2>/dev/null | wc -l) changed files"
} > "$out/gpu.txt" 2>&1
bench="--preset=nytimes --scale=1 --split_documents_at_topics=1000000 --warmup=1 --phases"
part() {  # name, GPU, tree, then the command
    local name=$1 gpu=$2 tree=$3; shift 3
    (cd "$tree" && CUDA_VISIBLE_DEVICES=$gpu PYTHONPATH=$tree timeout "$seconds" "$@" \
        > "$out/$name.log" 2>&1; echo "$name rc=$?" >> "$out/$name.log") &
}
profile=()
[ "${PROFILE:-0}" = 1 ] && profile=(--profile=/tmp/sparse_estep_profiles)
# shellcheck disable=SC2086 # bench holds several flags
part this_1e6 0 "$PWD" python3 "$tool" $bench --runs=1000000:auto:pallas:3 \
    --estep_variants="$variants" "${profile[@]}"
# shellcheck disable=SC2086
part this_1e5 1 "$PWD" python3 "$tool" $bench --runs=100000:auto:pallas:3 \
    --estep_variants="$variants" "${profile[@]}"
if [ "${QUALITY:-1}" = 1 ]; then
    # shellcheck disable=SC2086
    part baseline 2 "$baseline" python3 "$tool" $bench \
        --runs=1000000:auto:pallas:3,100000:auto:pallas:3
    part quality 3 "$PWD" python3 "$tool" --preset=nytimes --scale=1 \
        --quality_runs=10000:dense:pallas:100,10000:sparse:pallas:100
else
    # shellcheck disable=SC2086
    part baseline_1e6 2 "$baseline" python3 "$tool" $bench --runs=1000000:auto:pallas:3
    # shellcheck disable=SC2086
    part baseline_1e5 3 "$baseline" python3 "$tool" $bench --runs=100000:auto:pallas:3
fi
wait
tail -n 3 "$out"/*.log
