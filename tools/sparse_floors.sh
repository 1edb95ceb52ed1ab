#!/usr/bin/env bash
# The sparse model's floors on one GPU in one process (docs/measurements/sparse_model.md):
# NYTimes shape (99.7M tokens, V = 102,660) generated here; K = 100,000 and 1,000,000 with
# model_format auto (sparse: the dense model does not fit), K = 1,000 and 10,000 dense and
# auto, then quality at K = 10,000: dense and sparse, 100 iterations from the same seed, 10% of
# the documents held out.  Documents longer than A's packed pairs hold at K = 1,000,000 (4,095
# tokens; two of the corpus's) are cut.  Logs and JSON lines go to $OUT (default runs/).
set -u
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
out=${OUT:-runs}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/gpu.txt" 2>&1
git log -1 --format=%H > "$out/commit.txt" 2>/dev/null
timeout "${FLOORS_SECONDS:-280}" python3 tools/sparse_bench.py --preset=nytimes --scale="${SCALE:-1}" \
  --runs=1000000:auto:pallas:5,100000:auto:pallas:5,1000:dense:pallas:10,1000:auto:pallas:10,10000:dense:pallas:10,10000:auto:pallas:10 \
  --quality_runs=10000:dense:pallas:100,10000:sparse:pallas:100 \
  --split_documents_at_topics=1000000 --phases \
  --warmup=1 --output="$out/sparse.jsonl" > "$out/sparse.log" 2>&1
echo "exit $?" >> "$out/sparse.log"
