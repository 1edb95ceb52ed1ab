#!/usr/bin/env bash
# The sparse E-step kernel's settings on one GPU in one process (docs/measurements/
# sparse_model.md): tools/sparse_bench.py --phases on the NYTimes shape generated here,
# K = 1,000,000 then 100,000 (1 warm-up + 3 timed iterations with the kernel's defaults),
# then on each trained state the E-step kernel at each of ESTEP_VARIANTS (its keyword
# arguments and tile_tokens: tools/sparse_bench.py --estep_variants).  Stops after SECONDS_LIMIT.  Logs to $OUT.  From the worktree root:
#     OUT=$OUT bash tools/sparse_estep_one_gpu.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
out=${OUT:-runs/sparse_estep}
mkdir -p "$out"
{
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv
    echo "this $(git log -1 --format=%h 2>/dev/null) $(git status --short -uno 2>/dev/null \
        | wc -l) changed files"
} > "$out/gpu.txt" 2>&1
timeout "${SECONDS_LIMIT:-270}" python3 tools/sparse_bench.py --preset=nytimes --scale=1 \
    --split_documents_at_topics=1000000 --warmup=1 --phases \
    --runs=1000000:auto:pallas:3,100000:auto:pallas:3 \
    --estep_variants="${ESTEP_VARIANTS:-num_warps=2;tile_tokens=4}" \
    --output="$out/sparse.jsonl" > "$out/sparse.log" 2>&1
echo "exit $?" >> "$out/sparse.log"
tail -n 3 "$out/sparse.log"
