"""The same raw text through saberjax, scikit-learn's CountVectorizer (the same rules) and
tomotopy's corpus reader (when installed), one run each in its own process: Mtoken/s and peak
RSS of each, saberjax's against the native corpus it writes.

    python tools/text_bench.py --text=wiki_text.txt [--workers=2] [--readers=saberjax,sklearn]
    python tools/text_bench.py --synth_docs=20000     # synthetic text (launch/synth.py's)

Mtoken/s is the tokens of saberjax's corpus (the vocabulary's tokens) over each reader's
wall time, so the rates compare the same work; CPU seconds (user + system, all threads) say
the same on a machine shared with other jobs.  Prints one JSON line per reader and a
summary.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("text", None, "Text file, one document a line (default: synthetic text).")
flags.DEFINE_integer("synth_docs", 20_000, "Documents of synthetic text when --text is not given.")
flags.DEFINE_list("readers", ["saberjax", "sklearn", "tomotopy"], "Readers to run.")
flags.DEFINE_integer("workers", None, "saberjax threads (default: one per core).")
flags.DEFINE_string("reader", None, "Internal: run one reader in this process.")
flags.DEFINE_string("native", None, "Internal: where saberjax writes its corpus.")

ROOT = Path(__file__).resolve().parent.parent
RULES = dict(min_df=5, max_df=0.5, max_features=50_000)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _run_saberjax(path: str) -> dict:
    from saberjax.corpus.plain_text import load_text

    baseline = _peak_rss_mb()
    start = time.perf_counter()
    corpus = load_text(path, directory=FLAGS.native, workers=FLAGS.workers, **RULES)
    seconds = time.perf_counter() - start
    native = sum(f.stat().st_size for f in Path(FLAGS.native).iterdir())
    return dict(tokens=corpus.num_tokens, docs=corpus.num_docs, words=corpus.num_words,
                seconds=seconds, rss_before_mb=baseline, native_mb=native / 2**20)


def _run_sklearn(path: str) -> dict:
    from sklearn.feature_extraction.text import CountVectorizer

    from saberjax.text import DEFAULT_TOKEN_PATTERN, ENGLISH_STOP_WORDS

    baseline = _peak_rss_mb()
    start = time.perf_counter()
    with open(path, encoding="utf-8") as file:
        documents = file.read().split("\n")
    if documents and documents[-1] == "":
        documents.pop()
    vectorizer = CountVectorizer(token_pattern=DEFAULT_TOKEN_PATTERN, strip_accents="ascii",
                                 stop_words=sorted(ENGLISH_STOP_WORDS), **RULES)
    counts = vectorizer.fit_transform(documents)
    seconds = time.perf_counter() - start
    return dict(tokens=int(counts.sum()), docs=counts.shape[0], words=counts.shape[1],
                seconds=seconds, rss_before_mb=baseline)


def _run_tomotopy(path: str) -> dict:
    import tomotopy as tp

    from saberjax.text import ENGLISH_STOP_WORDS

    baseline = _peak_rss_mb()
    start = time.perf_counter()
    corpus = tp.utils.Corpus(tokenizer=tp.utils.SimpleTokenizer(),
                             stopwords=lambda word: word in ENGLISH_STOP_WORDS or len(word) < 3)
    with open(path, encoding="utf-8") as file:
        corpus.process(line for line in file)
    seconds = time.perf_counter() - start
    return dict(tokens=sum(len(doc.words) for doc in corpus), docs=len(corpus), seconds=seconds,
                rss_before_mb=baseline)


def _one(reader: str, path: str) -> None:
    from saberjax.platform import reuse_freed_memory

    reuse_freed_memory()  # as the launchers do, for every reader
    runner = dict(saberjax=_run_saberjax, sklearn=_run_sklearn, tomotopy=_run_tomotopy)[reader]
    start = resource.getrusage(resource.RUSAGE_SELF)
    result = runner(path)
    end = resource.getrusage(resource.RUSAGE_SELF)
    cpu = end.ru_utime + end.ru_stime - start.ru_utime - start.ru_stime
    result.update(reader=reader, peak_rss_mb=_peak_rss_mb(), cpu_seconds=cpu)
    print(json.dumps(result))


def _synthetic_text(folder: str) -> str:
    path = os.path.join(folder, "synth.txt")
    subprocess.run([sys.executable, str(ROOT / "launch" / "synth.py"), "--preset=nytimes",
                    f"--num_docs={FLAGS.synth_docs}", "--num_words=50000", "--text=txt",
                    f"--output={path}"], check=True, env=_env(), stdout=subprocess.DEVNULL)
    return path


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def main(argv):
    del argv
    if FLAGS.reader:
        _one(FLAGS.reader, FLAGS.text)
        return
    with tempfile.TemporaryDirectory() as folder:
        path = FLAGS.text or _synthetic_text(folder)
        results = {}
        for reader in FLAGS.readers:
            command = [sys.executable, __file__, f"--reader={reader}", f"--text={path}",
                       f"--native={os.path.join(folder, 'native')}"]
            if FLAGS.workers:
                command.append(f"--workers={FLAGS.workers}")
            done = subprocess.run(command, capture_output=True, text=True, env=_env())
            if done.returncode:
                last = (done.stderr.strip().splitlines() or ["?"])[-1]
                print(json.dumps(dict(reader=reader, skipped=last)))
                continue
            results[reader] = json.loads(done.stdout.strip().splitlines()[-1])
            print(json.dumps(results[reader]))
    if "saberjax" in results:
        ours = results["saberjax"]
        tokens = ours["tokens"]
        summary = {name: dict(mtoken_per_s=round(tokens / result["seconds"] / 1e6, 2),
                              seconds=round(result["seconds"], 2),
                              cpu_seconds=round(result["cpu_seconds"], 2),
                              peak_rss_mb=round(result["peak_rss_mb"]))
                   for name, result in results.items()}
        summary["saberjax"]["peak_rss_over_native"] = round(
            ours["peak_rss_mb"] / ours["native_mb"], 2)
        for name, result in results.items():
            if name != "saberjax":
                summary[f"speedup_over_{name}"] = round(result["seconds"] / ours["seconds"], 1)
                summary[f"cpu_ratio_to_{name}"] = round(
                    result["cpu_seconds"] / ours["cpu_seconds"], 1)
        summary.update(text=path, bytes=os.path.getsize(path), cores=os.cpu_count())
        print(json.dumps(summary))


if __name__ == "__main__":
    app.run(main)
