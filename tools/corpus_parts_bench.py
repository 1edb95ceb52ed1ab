"""What each process of a run reads of a native corpus to agree on its fingerprint and word
counts (trainer.train before the chunks are built): its own documents' part, combined with the
others' (processes.combine_corpus_parts), against one process reading the whole corpus; one
JSON line per process.

    python launch/synth.py --preset=nytimes --num_docs=20000 --output=/tmp/synth
    python tools/corpus_parts_bench.py --corpus=/tmp/synth                     # one process
    for i in 0 1; do python tools/corpus_parts_bench.py --corpus=/tmp/synth \\
        --coordinator_address=localhost:12345 --num_processes=2 --process_id=$i & done; wait

A line: the process, its token range, the seconds of loading, of the agreement on the outline
and the plan, and of the fingerprint and word counts (one process: read whole; several: its
part, the all-gather and the combination), and the bytes of the word ids' files (word_ids.npy
and its parts) resident in the process afterwards (the pages it touched: the Rss of their
mappings in /proc/self/smaps) against the files' size.
"""

from __future__ import annotations

import json
import pathlib
import sys
import time

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax
from absl import app, flags

from saberjax import processes
from saberjax.config import Hyperparams
from saberjax.corpus import load_native
from saberjax.execution.plan import plan

flags.DEFINE_string("corpus", None, "A native corpus folder.", required=True)
flags.DEFINE_integer("num_topics", 1000, "K of the plan.")
processes.define_flags()
FLAGS = flags.FLAGS


def word_id_files(folder: pathlib.Path) -> list[pathlib.Path]:
    """The files holding the corpus's word ids: word_ids.npy and its parts (word_id_parts)."""
    return sorted(folder.glob("word_ids.npy*"))


def mapped_bytes(names: set[str]) -> int:
    """Resident bytes of this process's mappings of files named in `names`."""
    total, inside = 0, False
    for line in pathlib.Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5:  # a mapping's first line
            inside = fields[-1].rpartition("/")[2] in names
        elif inside and fields[0] == "Rss:":
            total += int(fields[1]) * 1024
    return total


def main(argv):
    del argv
    processes.initialize_from_flags()
    several = jax.process_count() > 1
    start = time.perf_counter()
    corpus = load_native(FLAGS.corpus, checked=not several)
    loaded = time.perf_counter()
    run_plan = plan(corpus, Hyperparams.create(FLAGS.num_topics), partition="documents")
    first, last = run_plan.own_tokens(corpus)
    if several:
        processes.check_agreement("the corpus", corpus.outline())
    planned = time.perf_counter()
    processes.combine_corpus_parts(corpus, first, last)
    fingerprint, counts = corpus.fingerprint(), corpus.word_counts()
    combined = time.perf_counter()
    id_files = word_id_files(pathlib.Path(FLAGS.corpus))
    print(json.dumps(dict(
        process=jax.process_index(), processes=jax.process_count(), tokens=[first, last],
        corpus_tokens=corpus.num_tokens, load_seconds=round(loaded - start, 3),
        plan_seconds=round(planned - loaded, 3),
        fingerprint_and_counts_seconds=round(combined - planned, 3),
        word_ids_resident_bytes=mapped_bytes({path.name for path in id_files}),
        word_ids_file_bytes=sum(path.stat().st_size for path in id_files),
        fingerprint=fingerprint[:16], counted=int(counts.sum()))), flush=True)


if __name__ == "__main__":
    app.run(main)
