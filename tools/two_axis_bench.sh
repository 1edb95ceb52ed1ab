#!/bin/bash
# The two-axis mesh against one GPU and the one-axis partitions on one 4-GPU host, NYTimes
# shape (docs/measurements/multi_gpu.md): run from the repository root with OUT set.
#   SCALE (1: 99.7M tokens), TOPICS (1000,10000), BENCH (the bench flags shared by all runs),
#   STEPS (of "one two four": one GPU, 2 processes x 2 GPUs, one process of 4 GPUs),
#   PARTITIONS and MESH (the "four" step's --partition list and --mesh, 2x2; MESH= runs none),
#   EXCHANGES (--hosts_exchange of the two-axis runs: auto, counts, topics; a comma list),
#   PROCESS_GPUS (GPUs of each of the 2 processes, 2), TWO_PARTITION (their --partition, auto)
set -u
OUT=${OUT:-/tmp/two_axis}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
PYTHON=${PYTHON:-python3}
SCALE=${SCALE:-1}; TOPICS=${TOPICS:-1000,10000}
CORPUS=${CORPUS:-/tmp/two_axis_nytimes}
BENCH=${BENCH:---backends=pallas --optimize_alpha_every=0 --iterations=6 --warmup=2 \
    --phases=false --phase_repeats=3}
STEP=${STEP:-120}  # seconds each step may take
run() { echo "== $(date +%T) $*" >> "$OUT/steps.log"; }
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
STEPS=${STEPS:-one two four}
if [ ! -e "$CORPUS/corpus.json" ]; then
  run synth
  timeout "$STEP" $PYTHON -m saberjax synth --preset=nytimes --scale="$SCALE" \
      --output="$CORPUS" > "$OUT/synth.log" 2>&1
fi
bench=($PYTHON -m saberjax bench --corpus="$CORPUS" --num_topics="$TOPICS" $BENCH \
    --hosts_exchange="${EXCHANGES:-auto}")
if [[ $STEPS == *one* ]]; then
run one GPU
CUDA_VISIBLE_DEVICES=0 timeout "$STEP" "${bench[@]}" --output="$OUT/one_gpu.jsonl" \
    > "$OUT/one_gpu.log" 2>&1
fi
if [[ $STEPS == *two* ]]; then
run two processes of two GPUs
PORT=$((20000 + RANDOM % 20000))
n=${PROCESS_GPUS:-2}
for i in 0 1; do
  CUDA_VISIBLE_DEVICES=$(seq -s, $((n * i)) $((n * i + n - 1))) timeout "$STEP" "${bench[@]}" \
      --partition="${TWO_PARTITION:-auto}" \
      --coordinator_address=localhost:$PORT --num_processes=2 --process_id=$i \
      --output="$OUT/two_by_two.jsonl" > "$OUT/two_by_two.p$i.log" 2>&1 &
done
wait
fi
if [[ $STEPS == *four* ]]; then
run one process of four GPUs
mesh=${MESH-2x2}
timeout "$STEP" "${bench[@]}" --partition="${PARTITIONS:-documents,words,hybrid}" \
    ${mesh:+--mesh="$mesh"} \
    --output="$OUT/four_gpus.jsonl" > "$OUT/four_gpus.log" 2>&1
fi
run end
