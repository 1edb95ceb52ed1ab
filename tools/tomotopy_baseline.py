"""tomotopy (collapsed Gibbs LDA) baseline on a saberjax native corpus folder.

usage: python tomotopy_baseline.py --corpus DIR --k K --iterations N --alpha A --beta B
                                --seed S --threads T --out OUT.npz [--parallel default|copy_merge|partition|none]
                                [--optim_interval I]

DIR holds doc_offsets.npy (int64, D+1), word_ids.npy (int32, T; a large corpus's file is cut into
word_ids.npy, word_ids.npy.1, ... whose bytes joined in order are the one file), vocab.txt (one
word per line).
alpha is the per-topic (symmetric) Dirichlet parameter, beta (tomotopy's eta) the topic-word one.
Term weighting and vocabulary pruning are off; hyperparameter optimisation too unless
--optim_interval is set (tomotopy's own default is 10: alpha re-estimated every 10 iterations).

OUT.npz: topic_word (K x V float32, columns = vocab.txt ids, rows sum to 1) with
topic_word[k, v] = (n_kv + B) / (n_k + V * B), V = full corpus vocabulary size;
seconds (wall time of train(N)), init_seconds (add_doc + train(0)), tokens, iterations,
ll_per_word (tomotopy's log-likelihood per word after training), k, alpha (the K-vector tomotopy
ends with: the initial value everywhere unless optimised), beta, seed, threads, optim_interval.
"""
import argparse
import glob
import io
import os
import time

import numpy as np
import tomotopy as tp


def load_native(folder):
    offsets = np.load(os.path.join(folder, "doc_offsets.npy")).astype(np.int64)
    first = os.path.join(folder, "word_ids.npy")
    parts = sorted(glob.glob(glob.escape(first) + ".*"), key=lambda path: int(path.rpartition(".")[2]))
    joined = b"".join(open(path, "rb").read() for path in [first] + parts)
    word_ids = np.load(io.BytesIO(joined)).astype(np.int64)
    with open(os.path.join(folder, "vocab.txt"), encoding="utf-8") as f:
        vocab = f.read().split("\n")
    if vocab and vocab[-1] == "":
        vocab.pop()
    assert offsets[0] == 0 and offsets[-1] == len(word_ids) and np.all(np.diff(offsets) >= 0)
    assert len(word_ids) == 0 or (word_ids.min() >= 0 and word_ids.max() < len(vocab)), "word id out of vocab"
    return offsets, word_ids, vocab


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--k", type=int, required=True)
    ap.add_argument("--iterations", type=int, required=True)
    ap.add_argument("--alpha", type=float, required=True, help="per-topic alpha (not a total)")
    ap.add_argument("--beta", type=float, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--parallel", default="default", choices=["default", "copy_merge", "partition", "none"])
    ap.add_argument("--optim_interval", type=int, default=0,
                    help="re-estimate alpha every this many iterations (0: alpha stays fixed)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    offsets, word_ids, vocab = load_native(a.corpus)
    V, D, K = len(vocab), len(offsets) - 1, a.k
    # Tokens handed to tomotopy: the vocab strings, unless they are not unique/usable, in which
    # case a unique string per id (the model is identical; only the strings differ).
    tokens = vocab if len(set(vocab)) == V and all(w and not any(c.isspace() for c in w) for w in vocab) \
        else [f"w{i}" for i in range(V)]
    tok_to_id = {w: i for i, w in enumerate(tokens)}

    t0 = time.perf_counter()
    model = tp.LDAModel(tw=tp.TermWeight.ONE, min_cf=0, min_df=0, rm_top=0,
                        k=K, alpha=a.alpha, eta=a.beta, seed=a.seed)
    model.optim_interval = a.optim_interval
    model.burn_in = 0
    n_docs = 0
    for d in range(D):
        s, e = offsets[d], offsets[d + 1]
        if e > s:  # tomotopy rejects empty documents; they carry no tokens anyway
            model.add_doc([tokens[w] for w in word_ids[s:e]])
            n_docs += 1
    parallel = {"default": tp.ParallelScheme.DEFAULT, "copy_merge": tp.ParallelScheme.COPY_MERGE,
                "partition": tp.ParallelScheme.PARTITION, "none": tp.ParallelScheme.NONE}[a.parallel]
    model.train(0, workers=a.threads, parallel=parallel)
    init_seconds = time.perf_counter() - t0
    assert (a.optim_interval or np.allclose(model.alpha, a.alpha)) and np.isclose(model.eta, a.beta), (model.alpha, model.eta)
    assert model.num_words == len(word_ids), (model.num_words, len(word_ids))

    t1 = time.perf_counter()
    model.train(a.iterations, workers=a.threads, parallel=parallel)
    seconds = time.perf_counter() - t1

    # n_kv from the final assignments (doc.words are ids into model.used_vocabs).
    used = np.array([tok_to_id[w] for w in model.used_vocabs], np.int64)
    n_kv = np.zeros((K, V), np.int64)
    for doc in model.docs:
        w = used[np.asarray(doc.words, np.int64)]
        z = np.asarray(doc.topics, np.int64)
        np.add.at(n_kv, (z, w), 1)
    n_k = n_kv.sum(1)
    assert n_kv.sum() == len(word_ids)
    assert np.array_equal(n_k, np.asarray(model.get_count_by_topics(), np.int64)), "topic counts disagree"
    topic_word = ((n_kv + a.beta) / (n_k[:, None] + V * a.beta)).astype(np.float32)

    np.savez(a.out, topic_word=topic_word, seconds=seconds, init_seconds=init_seconds,
             tokens=len(word_ids), iterations=a.iterations, ll_per_word=model.ll_per_word,
             k=K, alpha=np.asarray(model.alpha, np.float64), beta=a.beta, seed=a.seed,
             threads=a.threads, docs=n_docs, optim_interval=a.optim_interval)
    print(f"tomotopy {tp.__version__} ({tp.isa}): D={D} V={V} T={len(word_ids)} K={K} "
          f"iters={a.iterations} threads={a.threads} init={init_seconds:.2f}s train={seconds:.2f}s "
          f"({len(word_ids) * a.iterations / max(seconds, 1e-9) / 1e6:.2f} Mtok/s) "
          f"ll_per_word={model.ll_per_word:.4f} -> {a.out}")


if __name__ == "__main__":
    main()
