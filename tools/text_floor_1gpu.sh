#!/usr/bin/env bash
# The one-GPU-host floor of raw text (issue 25): wiki25k written as text three times over
# (93.5M tokens, one document a line), read by saberjax on every core (and on fewer, with the
# time of each phase), then the whole train.py run on it, then scikit-learn's CountVectorizer
# on one copy beside saberjax (tools/text_bench.py).  Needs wiki25k and uci_to_text.py in
# $CORPORA (default .corpora).
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
head -n 24737 "$WORK/wiki_text.txt" > "$WORK/wiki_one_copy.txt"
ls -l "$WORK"/*.txt
# the reader alone, as the launchers run it (reuse_freed_memory), with its phases' times
"$PY" - "$WORK" <<'PYEOF'
import resource, sys, time
sys.path.insert(0, "tools")
from text_read_rate import timed
from saberjax.platform import reuse_freed_memory
reuse_freed_memory()
from saberjax.corpus import plain_text, text_corpus
work = sys.argv[1]
phases = {}
for name in ("_read_pieces", "choose_vocabulary", "in_memory_corpus", "written_corpus"):
    timed(text_corpus, name, phases, name, clock=time.perf_counter)
runs = [("wiki_text", None, None), ("wiki_text", f"{work}/native", None)] + [
    ("wiki_one_copy", None, workers) for workers in (1, 4, 16)]
for file, directory, workers in runs:
    phases.clear()
    start, cpu = time.perf_counter(), time.process_time()
    corpus = plain_text.load_text(f"{work}/{file}.txt", directory=directory, workers=workers)
    seconds = time.perf_counter() - start
    print(f"load_text {file} {'into a native folder' if directory else 'in memory'}, "
          f"workers {workers or 'all'}: {corpus.num_tokens:,} tokens, {seconds:.2f} s "
          f"(cpu {time.process_time() - cpu:.1f} s), {corpus.num_tokens / seconds / 1e6:.1f} "
          f"Mtoken/s, peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GB;"
          f" phases " + ", ".join(f"{k.strip('_')} {v:.2f} s" for k, v in phases.items()))
PYEOF
rm -rf "$WORK/cache" "$WORK/run"
for run in first cached; do
  echo "train.py, $run run:"
  /usr/bin/time -f "train.py wall %e s, peak RSS %M kB" "$PY" launch/train.py \
      --corpus="$WORK/wiki_text.txt" --format=text --num_topics=1024 --iterations=100 \
      --output="$WORK/run" --overwrite 2>&1 | grep -v "^topic \|progress.py" | tail -6
done
"$PY" tools/text_bench.py --text="$WORK/wiki_one_copy.txt" --readers=saberjax,sklearn
