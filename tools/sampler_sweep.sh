#!/bin/bash
# The E-step and M-step kernel variants' device run (docs/measurements/roofline.md): one H100
# (GPU 0), tools/sampler_sweep.py on wiki25k (K = 1,024, 100 iterations, a full run with the
# fastest exact variants) and the NYTimes shape (K = 1,000 and 10,000, the sweep on the state
# after 3 iterations), main's E-step kernel (BASELINE, a sampler.py) the baseline; logs to
# $OUT.  Run from the worktree root on the device machine: bash tools/sampler_sweep.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD CUDA_VISIBLE_DEVICES=0
OUT=${OUT:-/tmp/sampler_sweep_out}
BASELINE=${BASELINE:-saberjax/pallas/sampler.py}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv \
    > "$OUT/gpu.csv" 2>&1
# each variant: name:knob=value,... of this tree's kernels (tools/sampler_sweep.py)
SAMPLER='w2:num_warps=2;t16w2:tile_tokens=16,num_warps=2;t4:tile_tokens=4'
ABLATE='ablate_hash:ablate=hash;ablate_dense:ablate=dense'  # not exact: what each costs
NYT_SAMPLER='w2:num_warps=2'
REBUILD='b64w2:block_tokens=64,num_warps=2;p4096:num_programs=4096'
COUNT='b64:block_tokens=64;b16:block_tokens=16'
sweep() {  # name, seconds, then sampler_sweep flags
    local name=$1 seconds=$2; shift 2
    echo "== $name $*" >> "$OUT/commands.txt"
    timeout "$seconds" python3 tools/sampler_sweep.py --baseline="$BASELINE" --repeats=3 \
        --output="$OUT/$name.jsonl" "$@" 2> "$OUT/$name.err"
    echo "$name rc=$?"
}
sweep wiki25k "${WIKI_SECONDS:-120}" --corpus=.corpora/wiki25k --test_fraction=0.1 \
    --num_topics=1024 --iterations=100 --variants="$SAMPLER;$ABLATE" \
    --rebuild_variants="$REBUILD" --count_variants="$COUNT"
sweep nytimes "${NYT_SECONDS:-100}" --synth_preset=nytimes --num_topics=1000,10000 \
    --iterations=3 --full_run=false --variants="$NYT_SAMPLER;$ABLATE" \
    --rebuild_variants="$REBUILD"

