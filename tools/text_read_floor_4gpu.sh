#!/usr/bin/env bash
# Reading rates of raw text on a many-core host (issue 25's 150 Mtoken/s floor), this
# checkout against another (the device's copy of main, by default the repository root two
# folders up): JSON Lines shards generated here (saberjax synth --text=jsonl, nytimes-shaped
# documents), the same documents as one plain text file (--text=txt shards concatenated, made
# only when a text run is asked for), and the JSON Lines shards REPEAT times over (symbolic
# links: REPEAT x TOKENS tokens of shards), each read by tools/text_read_rate.py (JSON: rate,
# CPU seconds, per-phase breakdown, this checkout's runs with its workers' steps) at every
# core, at 32 and at 16 (taskset), in the order RUNS names them, while less than BUDGET
# seconds have passed.  Everything it prints goes to OUT/log.txt too, the runs' JSON lines to
# OUT/runs.jsonl: two files, so that a device call brings all of it back.
#   bash tools/text_read_floor_4gpu.sh [PYTHON]
# Environment: WORK (/tmp/text_read_floor), TOKENS (2e8), SHARDS (64), REPEAT (5), BASE (../..),
# OUT (WORK), BUDGET (80 s from the start: later runs are skipped), RUNS (names of runs, from
# this-jsonl-all this-jsonl-all-repeated this-jsonl-32 this-jsonl-16 this-text-all
# this-text-16 and the same of base-, each optionally with +OPTION+OPTION... of
# text_read_rate.py appended; default all of them, this's first), EXTRA (more options
# of text_read_rate.py for this checkout's runs, e.g. --piece_bytes=16777216), STEPS (yes: this
# checkout's runs time the workers' steps, --worker_steps; no: untimed, as base's).  Shards already
# in WORK are kept, so that a second run with other RUNS or EXTRA reads the same.
set -uo pipefail
PY="${1:-python3}"
WORK="${WORK:-/tmp/text_read_floor}"
TOKENS="${TOKENS:-200000000}"
SHARDS="${SHARDS:-64}"
REPEAT="${REPEAT:-5}"
BASE="$(cd "${BASE:-../..}" && pwd)"
OUT="${OUT:-$WORK}"
BUDGET="${BUDGET:-80}"
EXTRA="${EXTRA:-}"
STEPS="${STEPS:-yes}"
RUNS="${RUNS:-this-jsonl-all this-jsonl-all-repeated this-text-all this-jsonl-32 this-jsonl-16 this-text-16 base-jsonl-all base-text-all base-jsonl-16 base-text-16}"
export PYTHONUNBUFFERED=1
begin=$(date +%s)
mkdir -p "$WORK/shards" "$WORK/text" "$WORK/repeated" "$OUT"
main() {
cores=$(nproc)
echo "cores $cores ($(lscpu | grep -E '^(Model name|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\))' | sed 's/  */ /g' | paste -sd';'));" \
     "memory $(free -g | awk '/Mem:/ {print $2}') GB; base $(git -C "$BASE" log --oneline -1 2>/dev/null | cut -c1-60); this $(git log --oneline -1 2>/dev/null | cut -c1-60)"
echo "work folder on $(findmnt -no FSTYPE,SOURCE --target "$WORK" 2>/dev/null | head -1)"
lscpu -e=CPU,CORE,NODE | awk 'NR == 1 || NR % 16 == 2' | paste -sd' '
layouts=jsonl
[[ $RUNS == *text* ]] && layouts="jsonl txt"
DOCS=$((TOKENS / 338 / SHARDS))  # the nytimes preset's documents average 338 tokens
for ((i = 0; i < SHARDS; i++)); do  # each shard as JSON Lines (and as text), the same documents
  for layout in $layouts; do
    folder=$([[ $layout == jsonl ]] && echo shards || echo text)
    shard="$WORK/$folder/part-$(printf %03d "$i").$layout"
    [[ -f $shard ]] || PYTHONPATH="$PWD" "$PY" launch/synth.py --preset=nytimes --num_docs="$DOCS" --seed="$i" \
        --text=$layout --threads=1 --output="$shard" \
        >/dev/null &
  done
  if (( (i + 1) % (cores / 2) == 0 )); then wait; fi
done
wait
[[ $layouts == *txt* ]] && cat "$WORK"/text/*.txt > "$WORK/all.txt"
for ((r = 0; r < REPEAT; r++)); do
  for shard in "$WORK"/shards/*.jsonl; do
    ln -sf "$shard" "$WORK/repeated/r$r-$(basename "$shard")"
  done
done
echo "generated $(du -sh "$WORK/shards" | cut -f1) of JSON Lines${layouts#jsonl} in $(( $(date +%s) - begin )) s"
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
for name in $RUNS; do  # NAME or NAME+OPTION+OPTION...: options of text_read_rate.py
  options=""
  [[ $name == *+* ]] && options="${name#*+}" && options="${options//+/ }"
  checkout=$([[ $name == this-* ]] && echo "$PWD" || echo "$BASE")
  steps=$([[ $name == this-* ]] && echo $([[ $STEPS == yes ]] && echo --worker_steps) $EXTRA)
  case ${name%%+*} in
    *-jsonl-all) run "$name" "$checkout" "$all" "$WORK/shards" --format=jsonl --workers="$cores" $steps $options ;;
    *-jsonl-all-repeated) run "$name" "$checkout" "$all" "$WORK/repeated" --format=jsonl --workers="$cores" $steps $options ;;
    *-text-all) run "$name" "$checkout" "$all" "$WORK/all.txt" --format=text --workers="$cores" $steps $options ;;
    *-jsonl-32) run "$name" "$checkout" 0-31 "$WORK/shards" --format=jsonl --workers=32 $steps $options ;;
    *-jsonl-16) run "$name" "$checkout" 0-15 "$WORK/shards" --format=jsonl --workers=16 $steps $options ;;
    *-text-16) run "$name" "$checkout" 0-15 "$WORK/all.txt" --format=text --workers=16 $steps $options ;;
    *) echo "$name: no such run" ;;
  esac
done
echo "done in $(( $(date +%s) - begin )) s"
}
main 2>&1 | tee -a "$OUT/log.txt"
