#!/usr/bin/env bash
# Which XLA option keeps GPU compilations deterministic at the least cost, and does it reach
# saberjax's programs (saberjax/compilation.py)?  From this tree's root on a host of 2 or 4
# GPUs, BASE a tree without compilation.COMPILER_OPTIONS (the plain compiler):
#   OUT=LOG_DIR BASE=../.. bash tools/gpu_compiler_options.sh
# GPU 0 times launch/bench.py (NYTimes shape, K = 1,000): plain, this tree
# (xla_gpu_deterministic_ops), this tree with xla_gpu_autotune_level=0 instead, plain again.
# Meanwhile GPU 1 trains one seed with --nocache (every program compiled afresh, no cache
# folder): plain once, dumping its optimised HLO and XLA's autotuning results, then this tree
# three times; GPUs 2-3, where there are 4, train autotune level 0 three times and plain
# twice more.  Each result is appended to LOG_DIR/summary.txt as it comes (a run cut short
# keeps what ended); hlo.tgz holds the dump, logs.tgz the logs.
set -u
export PYTHONUNBUFFERED=1
ROOT=$PWD
BASE=$(cd "${BASE:?a tree without the options}" && pwd)
S=$OUT/summary.txt
W=/tmp/compiler_options; rm -rf $W; mkdir -p $W/logs
mkdir $W/at0 && (cd "$ROOT" && tar cf - --exclude=.git --exclude=.corpora --exclude=runs .) \
    | tar xf - -C $W/at0
sed -i 's/^COMPILER_OPTIONS = .*/COMPILER_OPTIONS = {"xla_gpu_autotune_level": 0}/' \
    $W/at0/saberjax/compilation.py
grep -H '^COMPILER_OPTIONS' "$ROOT/saberjax/compilation.py" $W/at0/saberjax/compilation.py > $S
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
        --iterations=10 --warmup=2 --nophases > $W/logs/bench_$2.log 2>&1)
    grep '"type": "result"' $W/logs/bench_$2.log > $W/b.json
    python3 -c "import json,sys; b=json.load(open(sys.argv[1])); print('bench $2', \
{k: b.get(k) for k in ('Mtoken_per_s_mean', 'Mtoken_per_s_steady', 'Mtoken_per_s_best', \
'compile_seconds', 'iteration_seconds')}, '$((SECONDS - start)) s')" $W/b.json >> $S 2>&1
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
DUMP="--xla_dump_to=$W/dump --xla_dump_hlo_as_text --xla_gpu_dump_autotune_results_to=$W/autotune.txt"
(bench "$BASE" plain; bench "$ROOT" deterministic_ops; bench $W/at0 autotune_level_0
 bench "$BASE" plain_again) &
(train 1 "$BASE" plain1 "$DUMP"; dumped; train 1 "$ROOT" det1; train 1 "$ROOT" det2
 train 1 "$ROOT" det3) &
if [ "$(nvidia-smi -L | wc -l)" -ge 4 ]; then
    (train 2 $W/at0 at0_1; train 2 $W/at0 at0_2; train 2 "$BASE" plain2) &
    (train 3 $W/at0 at0_3; train 3 "$BASE" plain3) &
fi
wait
(cd $W && tar czf "$OUT"/logs.tgz logs)
cut -c1-600 $S
