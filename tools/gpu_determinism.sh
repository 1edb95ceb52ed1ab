#!/usr/bin/env bash
# Does one seed give one model on this machine's GPU, run to run and chunk to chunk?
#
#   bash tools/gpu_determinism.sh [LOG_DIR]        (device: LOG_DIR=$OUT)
#
# Generates a synthetic corpus (launch/synth.py, NYTimes shape, DOCS documents of about 330
# tokens: 3.3M tokens by default) and trains it (K = 256, alpha learned every 10 iterations,
# 30 iterations, seed 0, no held-out split) four times, each in a process of its own on one
# GPU (CUDA_VISIBLE_DEVICES, default 0):
#   fresh    compiles every program and fills a compilation and layout cache
#   cached   the same flags, its programs and layout loaded from that cache
#   chunked  the corpus in chunks of CHUNK_TOKENS tokens (3 chunks by default)
#   nocache  the same flags as fresh, everything compiled again (--nocache: as `saberjax
#            bench` runs)
# Each run goes through tools/determinism_trace.py, which records digests of B and alpha and
# checks A against B after every iteration.  As each run ends it prints its model.npz's MD5,
# whether that matches the fresh run's, and the first iteration whose B or alpha differs from
# the fresh run's (tools/determinism_trace.py compare; so a run cut short keeps what ended);
# exits 1 when any run differs or breaks an invariant.  The logs and traces stay in LOG_DIR
# when given (the models, 20 MB each, are removed with the corpus).  TRACE=0 runs
# launch/train.py itself instead, untraced (the trace fetches the state to the host after every
# iteration, which changes the run's timing), and compares the MD5s alone.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
PYTHON=${PYTHON:-python3}
DOCS=${DOCS:-10000}
CHUNK_TOKENS=${CHUNK_TOKENS:-1200000}
TRACE=${TRACE:-1}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
LOGS=${1:-$WORK}
mkdir -p "$LOGS"
started=$(date +%s)

"$PYTHON" launch/synth.py --preset=nytimes --num_docs="$DOCS" --num_words=20000 --seed=1 \
    --output="$WORK/corpus" > "$LOGS/synth.log" 2>&1
echo "corpus: $(tail -1 "$LOGS/synth.log")"

TRAIN=(--corpus="$WORK/corpus" --num_topics=256 --iterations=30 --optimize_alpha_every=10
       --seed=0 --test_fraction=0 --cache_dir="$WORK/cache")
runs=(fresh cached chunked nocache)  # each compared as soon as it ends: a cut run keeps the rest
extra_fresh=() extra_cached=() extra_nocache=(--nocache)
extra_chunked=(--chunk_tokens="$CHUNK_TOKENS")
status=0
for run in "${runs[@]}"; do
    declare -n extra="extra_$run"
    begin=$(date +%s)
    trainer=(tools/determinism_trace.py run "$LOGS/$run.jsonl" --)
    [ "$TRACE" = 1 ] || trainer=(launch/train.py)
    "$PYTHON" "${trainer[@]}" "${TRAIN[@]}" "${extra[@]}" --output="$WORK/$run" \
        > "$LOGS/$run.log" 2>&1 \
        || { echo "$run: training failed, the end of $LOGS/$run.log:"
             tail -20 "$LOGS/$run.log"; exit 2; }
    unset -n extra
    sum=$(md5sum < "$WORK/$run/model.npz" | cut -d' ' -f1)
    shape=$([ "$TRACE" = 1 ] && head -1 "$LOGS/$run.jsonl" \
            | grep -o '"chunks": [0-9]*, "devices": [0-9]*' || echo untraced)
    echo "$run: $(( $(date +%s) - begin )) s, $shape, model.npz md5 $sum"
    if [ "$run" = fresh ]; then
        reference=$sum
        [ "$TRACE" = 1 ] && { "$PYTHON" tools/determinism_trace.py compare "$LOGS/fresh.jsonl" \
                                || status=1; }
        continue
    fi
    verdict=$([ "$sum" = "$reference" ] && echo matches || echo DIFFERS FROM)
    echo "$run: model.npz $verdict the fresh run's"
    [ "$sum" = "$reference" ] || status=1
    [ "$TRACE" = 1 ] || continue
    "$PYTHON" tools/determinism_trace.py compare "$LOGS/fresh.jsonl" "$LOGS/$run.jsonl" || status=1
done
verdict=$([ $status = 0 ] && echo deterministic || echo NOT deterministic)
echo "total $(( $(date +%s) - started )) s: $verdict"
exit $status
