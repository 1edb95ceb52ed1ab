#!/usr/bin/env bash
# The GPU-host floors of issue 15 (docs/measurements/startup.md), one line per figure:
#
#   bash tools/startup_floors.sh [CORPUS]    # CORPUS: wiki25k as a UCI folder (default
#                                            # .corpora/wiki25k, git-ignored: carry it)
#
#   train_first_run_s    launch/train.py CORPUS K=1,024, 100 iterations, --backend=pallas,
#                        empty cache folder (floor 12 s)
#   train_second_run_s   the same again: corpus, layout and programs from the cache (floor 6 s)
#   layout_100m_s        PDOW layout build of a synthetic NYTimes-shaped corpus (about 100M
#                        tokens, launch/synth.py --preset=nytimes), one chunk per GPU, best of 3
#                        (floor 4 s)
#   save_k1024_s         model write at K = 1,024 x the corpus's V (50,000), best of 3 (floor 1 s)
#   save_k10000_s        model write at K = 10,000 x V (floor 6 s)
#
# Needs no network.  PYTHON chooses the interpreter (default: .venv/bin/python when present,
# else python, else python3); it must import jax with CUDA.  BACKEND (default pallas),
# TRAIN_FLAGS (added to train.py's) and SYNTH_SCALE (default 1: 100M tokens) are for trying
# it out on a CPU.  Scratch files go to a temporary folder, removed at the end.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
CORPUS="${1:-.corpora/wiki25k}"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python
  elif command -v python >/dev/null; then PYTHON=python
  else PYTHON=python3; fi
fi
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
[[ -d "$CORPUS" ]] || { echo "startup_floors: no corpus folder $CORPUS" >&2; exit 2; }
SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/startup_floors.XXXXXX")"
trap 'rm -rf "$SCRATCH"' EXIT

# seconds of wall time of a command (its output in $SCRATCH/last.log, shown if it fails)
wall_seconds() {
  local start end
  start=$(date +%s.%N)
  if ! "$@" >"$SCRATCH/last.log" 2>&1; then
    tail -30 "$SCRATCH/last.log" >&2
    echo "startup_floors: failed: $*" >&2
    exit 1
  fi
  end=$(date +%s.%N)
  "$PYTHON" -c "print(f'{$end - $start:.2f}')"
}

# a field of the startup_bench JSON line of a phase
bench_field() {
  "$PYTHON" -c "import json, sys
for line in open(sys.argv[1]):
    if line.startswith('{') and json.loads(line).get('phase') == sys.argv[2]:
        print(json.loads(line)[sys.argv[3]])" "$SCRATCH/last.log" "$1" "$2"
}

"$PYTHON" -c "import jax; print('startup_floors: jax', jax.__version__, jax.devices())"
train=("$PYTHON" launch/train.py "--corpus=$CORPUS" --num_topics=1024 --iterations=100
       "--backend=${BACKEND:-pallas}" --top_words=0 "--cache_dir=$SCRATCH/cache"
       "--output=$SCRATCH/run" --overwrite ${TRAIN_FLAGS:-})
echo "train_first_run_s $(wall_seconds "${train[@]}")"
echo "train_second_run_s $(wall_seconds "${train[@]}")"
grep "time:" "$SCRATCH/last.log" | sed 's/^.*time:/train_second_run_time_line/'

wall_seconds "$PYTHON" launch/synth.py --preset=nytimes \
  "--scale=${SYNTH_SCALE:-1}" "--output=$SCRATCH/nytimes" >/dev/null
wall_seconds "$PYTHON" tools/startup_bench.py "--corpus=$SCRATCH/nytimes" --num_topics=2 \
  --test_fraction=0 "--scratch=$SCRATCH" >/dev/null
echo "layout_100m_s $(bench_field layout seconds) tokens $(bench_field layout tokens)"

for k in 1024 10000; do
  wall_seconds "$PYTHON" tools/startup_bench.py "--corpus=$CORPUS" "--num_topics=$k" \
    "--scratch=$SCRATCH" >/dev/null
  echo "save_k${k}_s $(bench_field save seconds) words $(bench_field save num_words)"
done
