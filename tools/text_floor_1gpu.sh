#!/usr/bin/env bash
# The one-GPU-host floor of raw text (issue 25): wiki25k written as text three times over
# (93.5M tokens, one document a line), read by saberjax on every core, then the whole
# train.py run on it.  Needs wiki25k and uci_to_text.py in $CORPORA (default .corpora).
#   bash tools/text_floor_1gpu.sh [PYTHON]
set -euo pipefail
PY="${1:-python3}"
CORPORA="${CORPORA:-.corpora}"
WORK="${WORK:-/tmp/text_floor}"
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1 SABERJAX_CACHE_DIR="$WORK/cache"
mkdir -p "$WORK"
echo "cores $(nproc); $("$PY" -c 'import jax, numpy, pyarrow; print("jax", jax.__version__, jax.devices()[0].device_kind, "numpy", numpy.__version__, "pyarrow", pyarrow.__version__)')"
[[ -f "$WORK/wiki_text.txt" ]] || "$PY" "$CORPORA/uci_to_text.py" "$CORPORA/wiki25k" \
    "$CORPORA/wiki25k/vocab.txt" "$WORK/wiki_text.txt" 3
ls -l "$WORK/wiki_text.txt"
# the reader alone: in memory, then into a native folder (out of core), then the peer
"$PY" - "$WORK" <<'PYEOF'
import resource, sys, time, shutil
from saberjax.corpus.plain_text import load_text
work = sys.argv[1]
for label, directory in (("in memory", None), ("native folder", f"{work}/native")):
    start = time.perf_counter()
    corpus = load_text(f"{work}/wiki_text.txt", directory=directory)
    seconds = time.perf_counter() - start
    print(f"load_text {label}: {corpus}, {seconds:.2f} s, {corpus.num_tokens / seconds / 1e6:.1f} "
          f"Mtoken/s, peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GB")
PYEOF
rm -rf "$WORK/cache" "$WORK/run"
/usr/bin/time -f "train.py wall %e s, peak RSS %M kB" "$PY" launch/train.py \
    --corpus="$WORK/wiki_text.txt" --format=text --num_topics=1024 --iterations=100 \
    --output="$WORK/run" 2>&1 | grep -v "^topic " | tail -25
