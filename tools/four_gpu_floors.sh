#!/bin/bash
# Issue 28's 4-GPU floors in one device call (docs/measurements/multi_gpu.md): one GPU at
# K = 1,000 and 10,000, one process of 4 GPUs by words at K = 10,000 with this tree's code
# and with MAIN's (a checkout of main; skipped when unset), one process of 4 GPUs at
# K = 1,000 as auto places it ("documents": by documents), 2 processes x 2 GPUs on the
# two-axis mesh (hosts_exchange auto) at both K, and the GPU timeline of the 4-GPU iteration
# by words (tools/iteration_profile.py) in $W/profile.txt; STEPS picks (of "one four
# documents two profile", all by default); FLAGGED: XLA_FLAGS of a second 4-GPU run; BENCH:
# the bench flags of every run (by default 20 timed iterations after 40 of warm-up, where the
# speed-ups from either initial topics have met); WINDOWS: windows of iterations
# (tools/bench_windows.py, e.g. 4-8,41-60) to print every run's speed-up over.
# Run from this tree's root with OUT set; logs and records under W, packed into
# $OUT/runs.tgz, the steady rates printed.
set -u
W=${W:-/tmp/four_gpu_floors}; rm -rf "$W"; mkdir -p "$W"
TOOL=$PWD/tools/two_axis_bench.sh
STEPS=${STEPS:-one four documents two profile}
export BENCH=${BENCH:---backends=pallas --optimize_alpha_every=0 --iterations=20 --warmup=40 \
    --phases=false --phase_repeats=3}
[[ $STEPS == *one* ]] && OUT=$W/one STEP=${ONE_STEP:-80} STEPS=one TOPICS=${ONE_TOPICS:-1000,10000} \
    bash "$TOOL"
[[ $STEPS == *four* ]] && OUT=$W/new4 STEP=${FOUR_STEP:-45} STEPS=four PARTITIONS=words \
    TOPICS=10000 bash "$TOOL"
if [[ -n "${FLAGGED:-}" && $STEPS == *four* ]]; then  # the same with these XLA_FLAGS
  XLA_FLAGS="$FLAGGED" OUT=$W/flagged4 STEP=${FOUR_STEP:-45} STEPS=four PARTITIONS=words \
      TOPICS=10000 bash "$TOOL"
fi
if [[ -n "${MAIN:-}" && $STEPS == *four* ]]; then
  (cd "$MAIN" && OUT=$W/main4 STEP=${FOUR_STEP:-45} STEPS=four PARTITIONS=words \
      TOPICS=10000 bash "$TOOL")
fi
[[ $STEPS == *documents* ]] && OUT=$W/auto4 STEP=${FOUR_STEP:-45} STEPS=four \
    PARTITIONS=auto MESH= TOPICS=1000 bash "$TOOL"
[[ $STEPS == *two* ]] && OUT=$W/two STEP=${TWO_STEP:-90} STEPS=two TOPICS=1000,10000 \
    EXCHANGES=auto bash "$TOOL"
if [[ $STEPS == *profile* ]]; then
  PYTHONPATH=$PWD timeout "${PROFILE_STEP:-60}" python3 tools/iteration_profile.py \
      --corpus="${CORPUS:-/tmp/two_axis_nytimes}" --num_topics=10000 --partition=words \
      --trace_dir="$W/trace" > "$W/profile.txt" 2>&1
fi
tar czf "$OUT/runs.tgz" -C "$W" --exclude=trace .
cat "$W/profile.txt" 2>/dev/null | grep -v "^I1\|^W1" | cut -c1-110 | head -${PROFILE_LINES:-120}
[[ -n "${WINDOWS:-}" ]] && python3 tools/bench_windows.py --windows="$WINDOWS" "$W"/*/*.jsonl
python3 - "$W" <<'PY'
import glob, json, sys
for path in sorted(glob.glob(f"{sys.argv[1]}/*/*.jsonl")):
    for line in open(path):
        r = json.loads(line)
        if r.get("type") == "result":
            print(path.split("/")[-2], r.get("num_devices", r.get("devices")), r.get("partition"),
                  r["K"], r["Mtoken_per_s_steady"], r["steady_iteration_seconds"],
                  r.get("collective_seconds"), r.get("collective_bytes_by_axis"),
                  r.get("hosts_exchange"), r.get("cross_host_share_of_by_documents"),
                  r.get("a_nonzero_share"), r.get("peak_device_GB"))
PY
