"""Tests of the synthetic LDA corpus generator (saberjax.synth, launch/synth.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
from helpers import ROOT

from saberjax import synth



def small_config(**kw) -> synth.SynthConfig:
    base = dict(num_docs=1000, mean_doc_length=200.0, num_words=5000, num_true_topics=20,
                seed=3, block_docs=256)
    base.update(kw)
    return synth.SynthConfig(**base)


def test_same_seed_identical_and_batching_independent():
    cfg = small_config()
    n1, w1 = synth.generate(cfg)
    n2, w2 = synth.generate(cfg)
    np.testing.assert_array_equal(n1, n2)
    np.testing.assert_array_equal(w1, w2)
    # Batch size and thread count do not change the corpus.
    parts = list(synth.iter_batches(cfg, batch_tokens=10_000, num_threads=2))
    assert len(parts) > 1
    np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), n1)
    np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), w1)


def test_different_seed_differs():
    n1, w1 = synth.generate(small_config(seed=1))
    n2, w2 = synth.generate(small_config(seed=2))
    assert not np.array_equal(n1, n2)
    m = min(w1.size, w2.size)
    assert np.mean(w1[:m] == w2[:m]) < 0.05


def test_sizes_match_request():
    cfg = small_config(num_docs=1000, mean_doc_length=200.0)  # ~200k tokens
    n, w = synth.generate(cfg)
    assert n.size == 1000 and n.dtype == np.int64 and n.min() >= 1
    assert w.dtype == np.int32 and w.size == n.sum()
    assert 0 <= w.min() and w.max() < cfg.num_words
    assert abs(n.mean() / 200.0 - 1) < 0.05
    # Presets, scale and overrides.
    c = synth.make_config("nytimes", scale=0.03)
    assert (c.num_docs, c.mean_doc_length, c.num_words) == (9000, 332.0, 102_660)
    c = synth.make_config("pubmed", num_docs=7, num_words=99)
    assert (c.num_docs, c.mean_doc_length, c.num_words) == (7, 90.0, 99)
    c = synth.make_config("clueweb", scale=0.001)
    assert (c.num_docs, c.num_words) == (19_400, 100_000)
    # Tiny corpus: D exact, min length 1 honoured.
    n, w = synth.generate(small_config(num_docs=5, mean_doc_length=1.0, block_docs=2))
    assert n.size == 5 and n.min() >= 1 and w.size == n.sum()


def test_word_frequencies_are_zipf_like():
    n, w = synth.generate(small_config())
    f = np.sort(np.bincount(w, minlength=5000))[::-1].astype(float)
    r = np.arange(1, f.size + 1)
    sel = slice(9, 500)  # ranks 10..500: well sampled at 200k tokens
    slope = np.polyfit(np.log(r[sel]), np.log(f[sel]), 1)[0]
    assert -1.3 < slope < -0.7, slope
    # Uniform words would give a flat profile; make sure the test can tell.
    u = np.sort(np.bincount(np.random.default_rng(0).integers(0, 5000, w.size)))[::-1].astype(float)
    assert np.polyfit(np.log(r[sel]), np.log(u[sel]), 1)[0] > -0.2


def test_documents_are_topically_concentrated():
    def top_share(alpha):
        cfg = small_config(num_docs=400, mean_doc_length=100.0, num_true_topics=50, alpha_true=alpha)
        n, w, z = synth.generate(cfg, return_topics=True)
        assert z.shape == w.shape and z.min() >= 0 and z.max() < 50
        d = np.repeat(np.arange(n.size), n)
        counts = np.bincount(d * 50 + z, minlength=n.size * 50).reshape(n.size, 50)
        # Dirichlet-multinomial second moment: E sum_k n_dk^2 = n + n(n-1)(a+1)/(Ka+1).
        expect = n + n * (n - 1) * (alpha + 1) / (50 * alpha + 1)
        assert abs((counts.astype(float) ** 2).sum() / expect.sum() - 1) < 0.08
        return np.mean(counts.max(axis=1) / n)

    assert top_share(0.02) > 0.5
    assert top_share(20.0) < 0.15


def test_words_follow_the_true_topics():
    from scipy import stats

    cfg = small_config()
    tables = synth.build_topic_word(cfg)
    m = tables.masses()
    assert m.shape == (20, 5000) and m.min() >= 1
    assert np.all(m.sum(axis=1) == 2**32)
    n, w, z = synth.generate(cfg, return_topics=True)
    phi = tables.probs()
    for k in range(3):  # chi-square of the words drawn under topic k against phi_k
        cnt = np.bincount(w[z == k], minlength=cfg.num_words)
        exp = phi[k] * cnt.sum()
        big = exp >= 20
        chi = ((cnt[big] - exp[big]) ** 2 / exp[big]).sum()
        chi += (cnt[~big].sum() - exp[~big].sum()) ** 2 / exp[~big].sum()
        assert stats.chi2.sf(chi, big.sum()) > 1e-4
    # Topics are distinct: mean pairwise total-variation distance is large.
    tv = 0.5 * np.abs(phi[:, None, :] - phi[None, :, :]).sum(-1)
    assert tv[np.triu_indices(20, 1)].mean() > 0.5


def test_alias_tables_are_exact():
    rng = np.random.default_rng(0)
    for V, bits in [(3, 2), (1000, 10), (700, 12)]:
        p = rng.standard_gamma(0.05, V) * (rng.random(V) < 0.7)
        p[0] += 1e-3
        m = synth._quantise(p, 1 << bits)
        assert m.sum() == 2**32 and m[:V].min() >= 1 and m[V:].sum() == 0
        t = synth.TopicWordTables(1, V, bits, synth._alias_row(m, bits))
        np.testing.assert_array_equal(t.masses()[0], m[:V])


def test_launcher_writes_loadable_native_corpus(tmp_path):
    from saberjax.corpus import load_native

    out = tmp_path / "nyt"
    env = dict(os.environ, PYTHONPATH="")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "launch" / "synth.py"), "--preset=nytimes", "--num_docs=300",
         "--num_words=2000", "--num_true_topics=10", "--seed=5", "--batch_tokens=20000",
         f"--output={out}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    assert stats["D"] == 300 and stats["V"] == 2000 and stats["T"] > 0
    corpus = load_native(out)
    cfg = synth.make_config("nytimes", num_docs=300, num_words=2000, num_true_topics=10, seed=5)
    n, w = synth.generate(cfg)
    np.testing.assert_array_equal(np.diff(np.asarray(corpus.doc_offsets)), n)
    np.testing.assert_array_equal(np.asarray(corpus.word_ids), w)
    assert len(corpus.vocab) == 2000 and corpus.vocab[123] == "w000123"
