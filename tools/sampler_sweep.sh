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
SAMPLER='early:early_own=1;kept:own_in_kept=1;steps2:blocks_per_step=2'
SAMPLER+=';kept_steps2:own_in_kept=1,blocks_per_step=2;early_kept:early_own=1,own_in_kept=1'
SAMPLER+=';all:early_own=1,own_in_kept=1,blocks_per_step=2;w2:num_warps=2'
SAMPLER+=';t16w2:tile_tokens=16,num_warps=2;t4:tile_tokens=4'
ABLATE='ablate_hash:ablate=hash;ablate_dense:ablate=dense'  # not exact: what each costs
NYT_SAMPLER='early:early_own=1;kept:own_in_kept=1;steps2:blocks_per_step=2'
NYT_SAMPLER+=';all:early_own=1,own_in_kept=1,blocks_per_step=2'
REBUILD='aggregate:aggregate=1;swap:swap_pairs=1;both:aggregate=1,swap_pairs=1'
REBUILD+=';both_b64w2:aggregate=1,swap_pairs=1,block_tokens=64,num_warps=2'
REBUILD+=';both_b32w1:aggregate=1,swap_pairs=1,block_tokens=32,num_warps=1'
REBUILD+=';both_p4096:aggregate=1,swap_pairs=1,num_programs=4096'
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
    --rebuild_variants='swap:swap_pairs=1;both:aggregate=1,swap_pairs=1'

