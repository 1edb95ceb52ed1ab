#!/usr/bin/env bash
# Which XLA option keeps GPU compilations deterministic at the least cost, and does it reach
# saberjax's programs (saberjax/compilation.py)?  One call on a 4-GPU host, from this tree's
# root, BASE a tree without compilation.COMPILER_OPTIONS (the plain compiler):
#   OUT=LOG_DIR BASE=../.. bash tools/gpu_compiler_options.sh
# GPU 0 times launch/bench.py (NYTimes shape, K = 1,000) plain, with this tree's
# xla_gpu_deterministic_ops, with xla_gpu_autotune_level=0 instead, and plain again.  GPUs
# 1-3 (1 on a 2-GPU host: the plain and this tree's runs alone) meanwhile train one seed with --nocache (each run compiles everything afresh, no cache
# folder): three runs of each tree, and the first plain run dumps its optimised HLO and XLA's
# autotuning results (which fusions were autotuned).  Writes summary.txt (model MD5s, bench
# lines, the autotuned instructions), bench.jsonl, hlo.tgz and logs.tgz to LOG_DIR.
set -u
export PYTHONUNBUFFERED=1
ROOT=$PWD
BASE=$(cd "${BASE:?a tree without the options}" && pwd)
W=/tmp/compiler_options; rm -rf $W; mkdir -p $W/logs
cp -r "$ROOT" $W/at0; rm -rf $W/at0/.git
sed -i 's/^COMPILER_OPTIONS = .*/COMPILER_OPTIONS = {"xla_gpu_autotune_level": 0}/' \
    $W/at0/saberjax/compilation.py
grep -H '^COMPILER_OPTIONS' "$ROOT/saberjax/compilation.py" $W/at0/saberjax/compilation.py \
    > $W/summary.txt
python3 launch/synth.py --preset=nytimes --num_docs=10000 --num_words=20000 --seed=1 \
    --output=$W/corpus > $W/logs/synth.log 2>&1
T=(--corpus=$W/corpus --num_topics=256 --iterations=30 --optimize_alpha_every=10 --seed=0
   --test_fraction=0 --nocache)
train() { # GPU TREE NAME [XLA_FLAGS]
    local start=$SECONDS
    (cd "$2" && CUDA_VISIBLE_DEVICES=$1 XLA_FLAGS="${4:-}" PYTHONPATH=$2 timeout 90 \
        python3 launch/train.py "${T[@]}" --output=$W/$3 > $W/logs/$3.log 2>&1)
    echo "train $3 gpu $1 $(md5sum < $W/$3/model.npz | cut -c1-12) $((SECONDS - start)) s" \
        >> $W/summary.txt
}
bench() { # TREE NAME
    (cd "$1" && CUDA_VISIBLE_DEVICES=0 PYTHONPATH=$1 timeout 90 python3 launch/bench.py \
        --synth_preset=nytimes --synth_scale=0.09 --num_topics=1000 --backends=pallas \
        --iterations=10 --warmup=2 --nophases > $W/logs/bench_$2.log 2>&1)
    grep '"type": "result"' $W/logs/bench_$2.log | sed "s/^/{\"variant\": \"$2\", \"line\": /; s/$/}/" \
        >> $W/bench.jsonl
}
DUMP="--xla_dump_to=$W/dump --xla_dump_hlo_as_text --xla_gpu_dump_autotune_results_to=$W/autotune.txt"
(bench "$BASE" plain; bench "$ROOT" deterministic_ops; bench $W/at0 autotune_level_0
 bench "$BASE" plain_again) &
if [ "$(nvidia-smi -L | wc -l)" -ge 4 ]; then
    (train 1 "$BASE" plain1 "$DUMP"; train 1 "$ROOT" det3; train 1 $W/at0 at0_3) &
    (train 2 "$ROOT" det1; train 2 $W/at0 at0_1; train 2 "$BASE" plain2) &
    (train 3 "$ROOT" det2; train 3 $W/at0 at0_2; train 3 "$BASE" plain3) &
else  # two GPUs: this tree's three runs and the dumping plain run on GPU 1
    (train 1 "$BASE" plain1 "$DUMP"; train 1 "$ROOT" det1; train 1 "$ROOT" det2
     train 1 "$ROOT" det3) &
fi
wait
{
    echo "== autotuned (xla_gpu_dump_autotune_results_to)"; cat $W/autotune.txt
    echo "== custom calls, fusion kinds and dots in the optimised HLO"
    for f in $W/dump/*after_optimizations.txt; do
        hits=$(grep -o 'custom_call_target="[^"]*"\|"kind":"__[a-z_]*"\|kind=kCustom\| dot(\|cub[A-Za-z_]*' "$f" \
               | sort | uniq -c | tr '\n' ';')
        [ -n "$hits" ] && echo "$(basename "$f"): $hits"
    done
} >> $W/summary.txt 2>&1
python3 - $W/bench.jsonl >> $W/summary.txt <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line); b = r["line"]
    print(r["variant"], {k: b.get(k) for k in ("Mtoken_per_s_mean", "Mtoken_per_s_steady",
          "Mtoken_per_s_best", "compile_seconds", "iteration_seconds")})
EOF
cp $W/summary.txt $W/bench.jsonl "$OUT"/
(cd $W/dump && tar czf "$OUT"/hlo.tgz *after_optimizations.txt ../autotune.txt)
(cd $W && tar czf "$OUT"/logs.tgz logs)
cat $W/summary.txt | cut -c1-400
