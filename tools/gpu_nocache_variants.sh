#!/usr/bin/env bash
# Do two GPU runs of one seed that each compile afresh (--nocache) give one model, and does
# an XLA flag (autotuning off, deterministic ops) change that?  Prints each model.npz MD5.
#   OUT=LOG_DIR bash tools/gpu_nocache_variants.sh   (device: from the repository root)
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD CUDA_VISIBLE_DEVICES=0
W=/tmp/detx; rm -rf $W; mkdir -p $W
python3 launch/synth.py --preset=nytimes --num_docs=10000 --num_words=20000 --seed=1 --output=$W/corpus > $W/synth.log 2>&1
T=(--corpus=$W/corpus --num_topics=256 --iterations=30 --optimize_alpha_every=10 --seed=0 --test_fraction=0)
one() { # NAME XLA_FLAGS EXTRA...
  local name=$1 xf=$2; shift 2
  XLA_FLAGS="$xf" timeout 40 python3 launch/train.py "${T[@]}" "$@" --output=$W/$name > $OUT/$name.log 2>&1
  echo "$name $(md5sum < $W/$name/model.npz | cut -c1-12) xla='$xf' $*"
}
one nocache1 "" --nocache
one nocache2 "" --nocache
one at0_1 "--xla_gpu_autotune_level=0" --nocache
one at0_2 "--xla_gpu_autotune_level=0" --nocache
one det_1 "--xla_gpu_deterministic_ops=true" --nocache
one det_2 "--xla_gpu_deterministic_ops=true" --nocache
one nocache3 "" --nocache
