#!/usr/bin/env bash
# The sparse model at K = 1,000,000 on a ClueWeb-shaped corpus over every GPU of the host,
# streamed (issue 27's 4-GPU floor, at the corpus size one device call allows):
#   A  partitioned by words (PARTITION_A; "documents": the whole model on every GPU), each
#      GPU's rows resident while the slots pass by; documents longer than a packed pair
#      counts (4,095 tokens) cut: the Pallas kernels run
#   B  by documents, a quarter of A's documents, uncut, with A's pairs wide (as a document
#      longer than 4,095 tokens takes them): the plain-JAX sampler and rebuild run
#      (SECONDS_B=0: not run)
# One JSON line a run in $OUT/floor.jsonl (Mtoken/s, peak device and host memory).
#
#   OUT=runs DOCS_A=280000 DOCS_B=70000 bash tools/sparse_streamed_floor.sh
set -u
OUT=${OUT:-runs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
common=(--preset=clueweb --chunk_tokens="${CHUNK_TOKENS:-16000000}" --warmup=1
        --output="$OUT/floor.jsonl")
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
    > "$OUT/gpus.txt" 2>&1
timeout "${SECONDS_A:-60}" python3 tools/sparse_bench.py "${common[@]}" \
    --runs="1000000:sparse:auto:${ITERATIONS_A:-2}" --partition="${PARTITION_A:-words}" \
    --num_docs="${DOCS_A:-280000}" --split_documents_at_topics=1000000 2>&1 | tail -c 4000 \
    > "$OUT/a.log"
echo "A exit ${PIPESTATUS[0]}" >> "$OUT/a.log"
if [ "${SECONDS_B:-35}" != 0 ]; then
    timeout "${SECONDS_B:-35}" python3 tools/sparse_bench.py "${common[@]}" \
        --runs=1000000:sparse:auto:2 --partition=documents --num_docs="${DOCS_B:-70000}" \
        --wide_pairs 2>&1 | tail -c 4000 > "$OUT/b.log"
    echo "B exit ${PIPESTATUS[0]}" >> "$OUT/b.log"
fi
for log in "$OUT/a.log" "$OUT/b.log"; do [ -f "$log" ] && cat "$log"; done; true
