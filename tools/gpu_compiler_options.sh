#!/usr/bin/env bash
# Do saberjax's GPU compilations give one model, and at what cost?  From this tree's root on a
# host of 2 or 4 GPUs, BASE a tree to compare with (main before the change):
#   OUT=LOG_DIR BASE=../.. [DUMP=1] [ROUNDS=2] [BENCHES='base this at0'] \
#       bash tools/gpu_compiler_options.sh
# Variants: base (BASE as it is), this tree, this tree with compilation.COMPILER_OPTIONS
# emptied (noopts: the code alone) and with xla_gpu_autotune_level=0 instead (at0).  GPU 0
# times launch/bench.py (NYTimes shape, K = 1,000) for BENCHES, ROUNDS times in turn.
# Meanwhile the other GPUs train one seed with --nocache (every program compiled afresh, no
# cache folder): this tree and noopts three times each (on 4 GPUs also base three times and at0
# twice), and print each
# model.npz MD5.  DUMP=1: the first base run also dumps its optimised HLO and XLA's
# autotuning results (hlo.tgz; summary.txt lists the autotuned fusions).  Each result is
# appended to LOG_DIR/summary.txt as it comes (a run cut short keeps what ended).
set -u
export PYTHONUNBUFFERED=1
ROOT=$PWD
BASE=$(cd "${BASE:?a tree to compare with}" && pwd)
S=$OUT/summary.txt
W=/tmp/compiler_options; rm -rf $W; mkdir -p $W/logs
variant() { # NAME OPTIONS: a copy of this tree with COMPILER_OPTIONS = OPTIONS
    mkdir $W/$1 && (cd "$ROOT" && tar cf - --exclude=.git --exclude=.corpora --exclude=runs .) \
        | tar xf - -C $W/$1
    sed -i "s/^COMPILER_OPTIONS = .*/COMPILER_OPTIONS = $2/" $W/$1/saberjax/compilation.py
}
variant at0 '{"xla_gpu_autotune_level": 0}'
variant noopts '{}'
grep -H '^COMPILER_OPTIONS' "$ROOT/saberjax/compilation.py" $W/*/saberjax/compilation.py > $S
python3 launch/synth.py --preset=nytimes --num_docs=10000 --num_words=20000 --seed=1 \
    --output=$W/corpus > $W/logs/synth.log 2>&1
T=(--corpus=$W/corpus --num_topics=256 --iterations=30 --optimize_alpha_every=10 --seed=0
   --test_fraction=0 --nocache)
train() { # GPU TREE NAME [XLA_FLAGS]
    local start=$SECONDS
    (cd "$2" && CUDA_VISIBLE_DEVICES=$1 XLA_FLAGS="${4:-}" PYTHONPATH=$2 timeout 90 \
        python3 launch/train.py "${T[@]}" --output=$W/$3 > $W/logs/$3.log 2>&1)
    echo "train $3 gpu $1 md5 $(md5sum < $W/$3/model.npz | cut -c1-12) $((SECONDS - start)) s" >> $S
}
bench() { # TREE NAME
    local start=$SECONDS
    (cd "$1" && CUDA_VISIBLE_DEVICES=0 PYTHONPATH=$1 timeout 90 python3 launch/bench.py \
        --synth_preset=nytimes --synth_scale=0.09 --num_topics=1000 --backends=pallas \
        --iterations=30 --warmup=2 --nophases > $W/logs/bench_$2.log 2>&1)
    grep '"type": "result"' $W/logs/bench_$2.log > $W/b.json
    python3 -c "import json,sys; b=json.load(open(sys.argv[1])); print('bench $2', \
{k: b.get(k) for k in ('Mtoken_per_s_mean', 'Mtoken_per_s_steady', 'Mtoken_per_s_best', \
'compile_seconds')}, 'iteration_ms', [round(1e3 * t, 2) for t in b['iteration_seconds']], \
'$((SECONDS - start)) s')" $W/b.json >> $S 2>&1
}
dumped() {
    { echo "== autotuned (xla_gpu_dump_autotune_results_to)"; cat $W/autotune.txt
      echo "== custom calls, fusion kinds, dots, scans in the optimised HLO"
      for f in $W/dump/*after_optimizations.txt; do
          hits=$(grep -o 'custom_call_target="[^"]*"\|"kind":"__[a-z_]*"\|kind=kCustom\| dot(\| scan(' "$f" \
                 | sort | uniq -c | tr -s ' \n' ' ;')
          [ -n "$hits" ] && echo "$(basename "$f"): $hits"
      done; } >> $S 2>&1
    (cd $W/dump && tar czf "$OUT"/hlo.tgz *after_optimizations.txt ../autotune.txt)
}
FLAGS=""
[ "${DUMP:-0}" = 1 ] && FLAGS="--xla_dump_to=$W/dump --xla_dump_hlo_as_text --xla_gpu_dump_autotune_results_to=$W/autotune.txt"
declare -A TREE=([base]="$BASE" [this]="$ROOT" [at0]=$W/at0)
benches() { for round in $(seq ${ROUNDS:-2}); do
                for name in ${BENCHES:-base this at0}; do bench "${TREE[$name]}" $name$round; done
            done; }
if [ "$(nvidia-smi -L | wc -l)" -ge 4 ]; then
    benches &
    (train 1 "$ROOT" this1; train 1 "$ROOT" this2; train 1 "$ROOT" this3) &
    (train 2 $W/noopts noopts1; train 2 $W/noopts noopts2; train 2 $W/noopts noopts3) &
    (train 3 "$BASE" base1 "$FLAGS"; [ -n "$FLAGS" ] && dumped; train 3 "$BASE" base2
     train 3 "$BASE" base3; train 3 $W/at0 at0_1; train 3 $W/at0 at0_2) &
else  # two GPUs: GPU 0 trains one run once its benches end
    (benches; train 0 $W/noopts noopts3) &
    (train 1 "$ROOT" this1; train 1 $W/noopts noopts1; train 1 "$ROOT" this2
     train 1 $W/noopts noopts2; train 1 "$ROOT" this3) &
fi
wait
(cd $W && tar czf "$OUT"/logs.tgz logs)
cut -c1-700 $S
