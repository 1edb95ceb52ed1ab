#!/usr/bin/env bash
# The 4-GPU-host floor of raw text (issue 25): 2B tokens of JSON Lines shards generated on the
# machine (saberjax synth --text=jsonl: letter-only words, nytimes-shaped documents), then one
# train run on every GPU, K = 1,000, 100 iterations, --host_memory_gb=48, from a fresh cache.
# The floor: text read at >= 150 Mtoken/s (the "load" of train's time line, and the progress
# lines on stderr) and the model written within 5 minutes of the train command.
#   bash tools/text_floor_4gpu.sh [PYTHON]
# Environment: WORK (default /tmp/text_floor_4gpu), TOKENS (2e9), SHARDS (64).  Reading JSON
# Lines shards (a folder of .jsonl files, --format=jsonl) is saberjax.corpus.text_sources's.
set -euo pipefail
PY="${1:-python3}"
WORK="${WORK:-/tmp/text_floor_4gpu}"
TOKENS="${TOKENS:-2000000000}"
SHARDS="${SHARDS:-64}"
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1 SABERJAX_CACHE_DIR="$WORK/cache"
mkdir -p "$WORK/shards"
echo "cores $(nproc); $("$PY" -c 'import jax; print(jax.device_count(), jax.devices()[0].device_kind)')"
DOCS=$((TOKENS / 338 / SHARDS))  # the nytimes preset's documents average 338 tokens
start=$(date +%s)
for ((i = 0; i < SHARDS; i++)); do
  shard="$WORK/shards/part-$(printf %03d "$i").jsonl"
  [[ -f "$shard" ]] || "$PY" launch/synth.py --preset=nytimes --num_docs="$DOCS" --seed="$i" \
      --text=jsonl --threads=1 --output="$shard" >/dev/null &
  if (( (i + 1) % $(nproc) == 0 )); then wait; fi
done
wait
echo "generated $(du -sh "$WORK/shards" | cut -f1) of JSON Lines in $(( $(date +%s) - start )) s"
rm -rf "$WORK/cache" "$WORK/run"
start=$(date +%s%N)
/usr/bin/time -f "train wall %e s, peak RSS %M kB" "$PY" launch/train.py \
    --corpus="$WORK/shards" --format=jsonl --num_topics=1000 --iterations=100 \
    --host_memory_gb=48 --output="$WORK/run" 2>&1 | grep -v "^topic " | tail -25
echo "model written $(( ($(date +%s%N) - start) / 1000000 )) ms after the command"
ls -l "$WORK/run"
