#!/usr/bin/env bash
# Do GPU runs of one seed that each compile afresh (--nocache: no compilation or autotuning
# cache) give one model?  Trains the same run RUNS times (3 by default) with no XLA_FLAGS,
# prints each model.npz MD5 and exits 1 when they differ.
#   OUT=LOG_DIR bash tools/gpu_nocache_variants.sh   (device: from the repository root)
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
unset XLA_FLAGS
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
python3 launch/synth.py --preset=nytimes --num_docs=10000 --num_words=20000 --seed=1 \
    --output=$W/corpus > $W/synth.log 2>&1
T=(--corpus=$W/corpus --num_topics=256 --iterations=30 --optimize_alpha_every=10 --seed=0
   --test_fraction=0 --nocache)
sums=()
for run in $(seq "${RUNS:-3}"); do
    timeout 90 python3 launch/train.py "${T[@]}" --output=$W/run$run > "$OUT/run$run.log" 2>&1
    sums+=("$(md5sum < $W/run$run/model.npz | cut -c1-12)")
    echo "run$run model.npz md5 ${sums[-1]}"
done
[ "$(printf '%s\n' "${sums[@]}" | sort -u | wc -l)" = 1 ] && echo "one model" && exit 0
echo "DIFFERENT MODELS"; exit 1
