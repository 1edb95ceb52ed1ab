#!/usr/bin/env bash
# Reading rates of raw text on a many-core host (issue 25's 150 Mtoken/s floor), this
# checkout against another (the device's copy of main, by default the repository root two
# folders up): JSON Lines shards generated here (saberjax synth --text=jsonl, nytimes-shaped
# documents), the same documents as one plain text file (--text=txt shards concatenated), and
# the JSON Lines shards REPEAT times over (symbolic links: REPEAT x TOKENS tokens of shards),
# each read by tools/text_read_rate.py (JSON: rate, CPU seconds, per-phase breakdown) at every
# core and at 16 (taskset), in order of priority, while less than BUDGET seconds have passed.
#   bash tools/text_read_floor_4gpu.sh [PYTHON]
# Environment: WORK (/tmp/text_read_floor), TOKENS (2e8), SHARDS (64), REPEAT (5), BASE (../..),
# OUT (logs: runs.jsonl, a JSON line a run with its name; runs.err, the runs' stderr),
# BUDGET (80 s from the start: later runs are skipped).
set -uo pipefail
PY="${1:-python3}"
WORK="${WORK:-/tmp/text_read_floor}"
TOKENS="${TOKENS:-200000000}"
SHARDS="${SHARDS:-64}"
REPEAT="${REPEAT:-5}"
BASE="$(cd "${BASE:-../..}" && pwd)"
OUT="${OUT:-$WORK}"
BUDGET="${BUDGET:-80}"
export PYTHONUNBUFFERED=1
begin=$(date +%s)
mkdir -p "$WORK/shards" "$WORK/text" "$WORK/repeated" "$OUT"
cores=$(nproc)
echo "cores $cores; base $(git -C "$BASE" log --oneline -1 2>/dev/null | cut -c1-60); this $(git log --oneline -1 2>/dev/null | cut -c1-60)"
DOCS=$((TOKENS / 338 / SHARDS))  # the nytimes preset's documents average 338 tokens
for ((i = 0; i < SHARDS; i++)); do  # each shard as JSON Lines and as text, the same documents
  for layout in jsonl txt; do
    folder=$([[ $layout == jsonl ]] && echo shards || echo text)
    PYTHONPATH="$PWD" "$PY" launch/synth.py --preset=nytimes --num_docs="$DOCS" --seed="$i" \
        --text=$layout --threads=1 --output="$WORK/$folder/part-$(printf %03d "$i").$layout" \
        >/dev/null &
  done
  if (( (i + 1) % (cores / 2) == 0 )); then wait; fi
done
wait
cat "$WORK"/text/*.txt > "$WORK/all.txt"
for ((r = 0; r < REPEAT; r++)); do
  for shard in "$WORK"/shards/*.jsonl; do
    ln -sf "$shard" "$WORK/repeated/r$r-$(basename "$shard")"
  done
done
echo "generated $(du -sh "$WORK/shards" | cut -f1) of JSON Lines and $(du -sh "$WORK/all.txt" | cut -f1) of text in $(( $(date +%s) - begin )) s"
run() {  # NAME CHECKOUT CORES ARGS...
  local name=$1 checkout=$2 cpus=$3; shift 3
  if (( $(date +%s) - begin > BUDGET )); then echo "$name: skipped (budget)"; return; fi
  echo -n "$name: "
  echo "== $name" >>"$OUT/runs.err"
  local line
  line=$(cd "$WORK" && PYTHONPATH="$checkout" taskset -c "$cpus" timeout 120 "$PY" \
      "$OLDPWD/tools/text_read_rate.py" "$@" 2>>"$OUT/runs.err" | tail -1)
  if [[ $line == "{"* ]]; then
    echo "{\"run\": \"$name\", ${line:1}" | tee -a "$OUT/runs.jsonl"
  else
    echo "failed"; tail -3 "$OUT/runs.err"
  fi
}
all="0-$((cores - 1))"
run "this-jsonl-$cores" "$PWD" "$all" "$WORK/shards" --format=jsonl --workers="$cores"
run "base-jsonl-$cores" "$BASE" "$all" "$WORK/shards" --format=jsonl --workers="$cores"
run "this-jsonl-$cores-repeated" "$PWD" "$all" "$WORK/repeated" --format=jsonl --workers="$cores"
run "this-text-$cores" "$PWD" "$all" "$WORK/all.txt" --format=text --workers="$cores"
run "base-text-$cores" "$BASE" "$all" "$WORK/all.txt" --format=text --workers="$cores"
run this-jsonl-16 "$PWD" 0-15 "$WORK/shards" --format=jsonl --workers=16
run base-jsonl-16 "$BASE" 0-15 "$WORK/shards" --format=jsonl --workers=16
run this-text-16 "$PWD" 0-15 "$WORK/all.txt" --format=text --workers=16
run base-text-16 "$BASE" 0-15 "$WORK/all.txt" --format=text --workers=16
echo "done in $(( $(date +%s) - begin )) s"
