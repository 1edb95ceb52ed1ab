"""Synthetic LDA corpora drawn from the LDA generative model, for benchmarks.

Model (all draws from numpy PCG64 streams derived from one integer seed):

* Word base measure: Zipf weights ``w_r = (r + 1) ** -zipf_exponent`` over
  frequency ranks ``r``; ranks map to word ids through a seeded random
  permutation (``shuffle_vocab``), so ids are uncorrelated with frequency, as
  in real (alphabetical) vocabularies.
* Topics: ``phi_k ∝ w * g_k`` with ``g_kv ~ Gamma(word_shape, 1/word_shape)``
  i.i.d. (mean 1), i.e. a Dirichlet(word_shape) draw re-weighted by the Zipf
  base ("scaled Dirichlet").  Each topic emphasises its own random subset of
  words (``word_shape`` small -> distinct, peaky topics) while the average
  over topics stays ~ ``w``, so corpus frequencies come out Zipfian.
  Each ``phi_k`` is quantised to integer masses over ``2**32`` with every
  word >= 1 unit (so every word is reachable from every topic, p >= 2.3e-10),
  and that quantised distribution is sampled exactly.
* Documents: length ``n_d = max(1, Poisson(LogNormal))`` with the requested
  mean (``length_sigma`` = 0 gives plain Poisson); ``theta_d ~
  Dirichlet(alpha_true * 1_K)`` integrated out exactly by a Polya urn, so
  topics per token follow the Dirichlet-multinomial; each token's word ~
  ``phi_z``.

Speed: O(T) vectorised numpy, no Python loop per document or token and no
O(D*K) work: topics by pointer jumping over the urn's copy pointers, words by
one gather per token from a packed, exact alias table (4 bytes per
topic-word).  Blocks run on a thread pool (numpy releases the GIL).

Determinism: documents are generated in fixed blocks of ``docs_per_block``
documents (default: a power of two giving ~1-2M tokens), block ``b`` from
``SeedSequence(seed, spawn_key=(1, b))``; the vocabulary permutation uses
``spawn_key=(0,)`` and topic ``k`` ``spawn_key=(2, k)``.  The corpus therefore
depends only on the ``SynthConfig`` fields (seed and block size included), not
on ``batch_tokens`` or the number of threads.
"""

from __future__ import annotations

import concurrent.futures as _futures
import dataclasses
import math
import os
import time
from collections import deque
from typing import Iterator

import numpy as np

from saberjax.platform import cpu_cores

__all__ = [
    "PRESETS",
    "Preset",
    "SynthConfig",
    "TopicWordTables",
    "make_config",
    "build_topic_word",
    "num_blocks",
    "generate_block",
    "iter_blocks",
    "iter_batches",
    "generate",
    "vocab_words",
    "write_corpus",
]


@dataclasses.dataclass(frozen=True)
class Preset:
    """Corpus shape of a paper data set (Table: D, mean doc length, V)."""

    num_docs: int
    mean_doc_length: float
    num_words: int


# Shapes from the paper's data-set table.  ClueWeb is "any D": its 19.4M docs
# (7.1B tokens) are usually scaled down via --scale / --num_docs.
PRESETS: dict[str, Preset] = {
    "nytimes": Preset(300_000, 332.0, 102_660),
    "pubmed": Preset(8_200_000, 90.0, 141_043),
    "clueweb": Preset(19_400_000, 365.0, 100_000),
}


@dataclasses.dataclass(frozen=True)
class SynthConfig:
    """Everything that determines a synthetic corpus (same config -> same corpus)."""

    num_docs: int
    mean_doc_length: float
    num_words: int
    num_true_topics: int = 100
    alpha_true: float = 0.1  # symmetric Dirichlet on theta_d; small -> few topics/doc
    zipf_exponent: float = 1.0  # base word frequency ~ rank ** -zipf_exponent
    word_shape: float = 0.1  # Gamma shape of per-topic word emphasis; small -> distinct topics
    length_sigma: float = 0.6  # lognormal sigma of doc-length rate; 0 -> Poisson(mean)
    shuffle_vocab: bool = True  # word id order uncorrelated with frequency
    seed: int = 0
    block_docs: int = 0  # docs per RNG block (0: auto from mean length); part of the identity

    def __post_init__(self):
        if self.num_docs < 1:
            raise ValueError(f"num_docs must be >= 1, got {self.num_docs}")
        if self.mean_doc_length < 1:
            raise ValueError(f"mean_doc_length must be >= 1, got {self.mean_doc_length}")
        if not 2 <= self.num_words <= 2**31 - 1:
            raise ValueError(f"num_words must be in [2, 2**31), got {self.num_words}")
        if self.num_true_topics < 1:
            raise ValueError(f"num_true_topics must be >= 1, got {self.num_true_topics}")
        if self.alpha_true <= 0 or self.word_shape <= 0:
            raise ValueError("alpha_true and word_shape must be > 0")
        if self.length_sigma < 0 or self.block_docs < 0:
            raise ValueError("length_sigma and block_docs must be >= 0")

    @property
    def docs_per_block(self) -> int:
        """``block_docs``, or (auto) the power of two nearest below 2**21 / mean length."""
        if self.block_docs:
            return self.block_docs
        return 1 << max(4, int(math.floor(math.log2(2**21 / self.mean_doc_length))))


def make_config(
    preset: str = "nytimes",
    *,
    scale: float = 1.0,
    num_docs: int | None = None,
    mean_doc_length: float | None = None,
    num_words: int | None = None,
    **kwargs,
) -> SynthConfig:
    """Config from a preset shape; ``scale`` multiplies D, explicit values override."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose from {sorted(PRESETS)}")
    p = PRESETS[preset]
    if num_docs is None:
        num_docs = max(1, int(round(p.num_docs * scale)))
    return SynthConfig(
        num_docs=int(num_docs),
        mean_doc_length=float(p.mean_doc_length if mean_doc_length is None else mean_doc_length),
        num_words=int(p.num_words if num_words is None else num_words),
        **kwargs,
    )


def _rng(cfg: SynthConfig, *key: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(cfg.seed, spawn_key=key)))


_ONE = 1 << 32  # total integer mass of each quantised topic


@dataclasses.dataclass(frozen=True)
class TopicWordTables:
    """Quantised topics as exact alias tables, one packed uint32 per column.

    Topic k has ``N = 2**bits >= V`` columns of capacity ``U = 2**(32-bits)``
    integer mass units (columns >= V are zero-mass padding).  Entry
    ``table[k * N + c] = (thr << bits) | alias``: a 32-bit uniform ``u``
    picks column ``c = u >> (32-bits)`` and returns ``c`` if
    ``u & (U-1) < thr`` else ``alias``.  Word ``v`` therefore has probability
    ``m_kv / 2**32`` exactly, with ``m_kv >= 1`` for every real word.
    """

    num_topics: int
    num_words: int
    bits: int
    table: np.ndarray  # uint32 (K * N,)

    def masses(self) -> np.ndarray:
        """Integer masses (K, V) int64 reconstructed from the tables (rows sum to 2**32)."""
        K, V, b = self.num_topics, self.num_words, self.bits
        N, U = 1 << b, 1 << (32 - b)
        e = self.table.reshape(K, N).astype(np.int64)
        thr, alias = e >> b, e & (N - 1)
        rows = np.arange(K)[:, None] * N
        own = np.bincount((rows + np.arange(N)).ravel(), weights=thr.ravel(), minlength=K * N)
        other = np.bincount((rows + alias).ravel(), weights=(U - thr).ravel(), minlength=K * N)
        m = np.rint(own + other).astype(np.int64).reshape(K, N)
        return m[:, :V]

    def probs(self) -> np.ndarray:
        """Exact (quantised) phi as float64 (K, V); for tests and diagnostics."""
        return self.masses() / float(_ONE)


def _quantise(p: np.ndarray, n: int) -> np.ndarray:
    """Integer masses (n,) int64 for weights ``p`` (len <= n): real words >= 1, sum 2**32."""
    V = p.size
    p = p / p.sum()
    m = np.zeros(n, dtype=np.int64)
    m[:V] = np.floor(p * float(_ONE - 2 * V)).astype(np.int64) + 1
    m[np.argmax(p)] += _ONE - m.sum()  # deficit in [V, 2V]
    return m


def _alias_row(m: np.ndarray, bits: int) -> np.ndarray:
    """Packed alias table (uint32, len(m)) for integer masses summing to len(m) * U.

    Vectorised "sweep" construction: light columns (m < U) are topped up by
    heavy ones in index order; matching uses prefix sums of light deficits D
    and heavy excesses E, so it is exact integer arithmetic with no Python
    loop.  A heavy column's own remainder is aliased to the next heavy.
    """
    N = m.size
    U = 1 << (32 - bits)
    light = np.flatnonzero(m < U)
    heavy = np.flatnonzero(m >= U)
    thr = np.zeros(N, dtype=np.int64)
    alias = np.arange(N, dtype=np.int64)
    deficit = U - m[light]
    D = np.cumsum(deficit)
    E = np.cumsum(m[heavy] - U)
    # Light i is served by the first heavy whose cumulative excess exceeds the
    # deficit consumed before i.
    alias[light] = heavy[np.searchsorted(E, D - deficit, side="right")]
    thr[light] = m[light]
    # Heavy j keeps U + E_j - D* where D* = first consumed-deficit level >= E_j.
    Dfull = np.concatenate([[0], D])
    keep = U + E - Dfull[np.searchsorted(Dfull, E, side="left")]
    full = keep >= U
    nxt = np.append(heavy[1:], heavy[-1])
    alias[heavy] = np.where(full, heavy, nxt)
    thr[heavy] = np.where(full, 0, keep)
    return ((thr << bits) | alias).astype(np.uint32)


def build_topic_word(cfg: SynthConfig, *, num_threads: int | None = None) -> TopicWordTables:
    """Draw the true topics phi from the seed and build their alias tables.

    Memory: K * 2**ceil(log2 V) * 4 bytes (K=100, V=100k: 52 MB; V=141k:
    105 MB); built once (topics in parallel, one RNG stream each), then
    shared read-only by all blocks/threads.
    """
    K, V = cfg.num_true_topics, cfg.num_words
    base_rank = np.arange(1, V + 1, dtype=np.float64) ** -cfg.zipf_exponent
    base_rank /= base_rank.sum()
    rank_to_word = _rng(cfg, 0).permutation(V) if cfg.shuffle_vocab else np.arange(V)

    bits = max(1, int(math.ceil(math.log2(V))))
    N = 1 << bits
    table = np.empty(K * N, dtype=np.uint32)

    def build(k: int) -> None:  # one topic at a time: no dense K x V float array
        row = np.empty(V)
        row[rank_to_word] = base_rank * _rng(cfg, 2, k).standard_gamma(cfg.word_shape, size=V)
        table[k * N:(k + 1) * N] = _alias_row(_quantise(row, N), bits)

    nt = min(K, _threads(num_threads))
    if nt == 1:
        for k in range(K):
            build(k)
    else:
        with _futures.ThreadPoolExecutor(nt) as ex:
            list(ex.map(build, range(K)))
    return TopicWordTables(K, V, bits, table)


def _sample_words(tables: TopicWordTables, zoff: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Word ids (int32) for tokens with table-row offsets ``zoff = k * N`` and uint32 uniforms ``u``."""
    b = tables.bits
    col = (u >> np.uint32(32 - b)).view(np.int32)  # < 2**31
    e = tables.table[zoff + col]
    thr = e >> np.uint32(b)
    e &= np.uint32((1 << b) - 1)  # alias
    u &= np.uint32((1 << (32 - b)) - 1)  # in-column uniform (u is consumed)
    return np.where(u < thr, col, e.view(np.int32))


def num_blocks(cfg: SynthConfig) -> int:
    """Number of RNG blocks (``ceil(num_docs / docs_per_block)``)."""
    return -(-cfg.num_docs // cfg.docs_per_block)


def _doc_lengths(cfg: SynthConfig, rng: np.random.Generator, B: int) -> np.ndarray:
    if cfg.length_sigma > 0:
        mu = math.log(cfg.mean_doc_length) - 0.5 * cfg.length_sigma**2
        lam = rng.lognormal(mu, cfg.length_sigma, size=B)
    else:
        lam = np.full(B, float(cfg.mean_doc_length))
    n = rng.poisson(lam)
    np.maximum(n, 1, out=n)
    return n


def _urn_topics(n: np.ndarray, K: int, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """Per-token topics (int32, doc order) with theta_d ~ Dirichlet(alpha) integrated out.

    Polya urn: token i of a doc draws a fresh uniform topic with probability
    K*alpha / (K*alpha + i), else copies the topic of a uniform earlier token
    of the doc; this is the Dirichlet-multinomial (exact up to the 2**-32
    resolution of the uniforms).  The copy pointers
    form a forest of depth O(log n), resolved by pointer jumping (~5 rounds),
    so the cost is O(T) whatever K and alpha are.
    """
    T = int(n.sum())
    idt = np.int32 if T < 2**31 else np.int64
    starts = np.zeros(n.size, dtype=idt)
    np.cumsum(n[:-1], out=starts[1:])
    s = np.repeat(starts, n)
    t = np.arange(T, dtype=idt)
    i = t - s  # position within doc
    r = rng.bit_generator.random_raw(T)
    hi = r >> np.uint64(32)
    r &= np.uint64(0xFFFFFFFF)
    c = K * alpha
    root = r.astype(np.float64)
    root *= i + c
    root = root < c * 4294967296.0  # P = c / (c + i); always true at i = 0
    del r
    ptr = (hi * i.astype(np.uint64)) >> np.uint64(32)  # uniform earlier position
    ptr = ptr.astype(idt)
    ptr += s
    del s, i
    ptr = np.where(root, t, ptr)
    del root, t
    while True:
        nxt = ptr[ptr]
        if np.array_equal(nxt, ptr):
            break
        ptr = nxt
    topic = ((hi * np.uint64(K)) >> np.uint64(32)).astype(np.int32)  # used at roots only
    return topic[ptr]


def generate_block(
    cfg: SynthConfig, tables: TopicWordTables, block: int, *, return_topics: bool = False
):
    """Documents of block ``block``: ``(doc_lengths int64 (B,), word_ids int32 (T,))``.

    With ``return_topics`` also the true topic of each token (int32 (T,)).
    Working memory ~ 50 bytes/token (NYTimes shape: ~70 MB per 4096-doc block).
    """
    nb = num_blocks(cfg)
    if not 0 <= block < nb:
        raise IndexError(f"block {block} out of range [0, {nb})")
    B = min(cfg.docs_per_block, cfg.num_docs - block * cfg.docs_per_block)
    K, N = cfg.num_true_topics, 1 << tables.bits
    rng = _rng(cfg, 1, block)

    n = _doc_lengths(cfg, rng, B)
    T = int(n.sum())
    z = _urn_topics(n, K, cfg.alpha_true, rng)
    zoff = z * (np.int32(N) if K * N < 2**31 else np.int64(N))
    if not return_topics:
        del z
    u = rng.bit_generator.random_raw((T + 1) // 2).view(np.uint32)[:T]
    words = _sample_words(tables, zoff, u)
    if return_topics:
        return n, words, z
    return n, words


def _threads(num_threads: int | None) -> int:
    """num_threads, or every usable core when None (at least 1)."""
    return cpu_cores() if num_threads is None else max(1, int(num_threads))


def iter_blocks(
    cfg: SynthConfig,
    tables: TopicWordTables | None = None,
    *,
    num_threads: int | None = None,
    return_topics: bool = False,
) -> Iterator[tuple]:
    """All blocks in order, generated by a thread pool (numpy drops the GIL).

    At most ``2 * num_threads`` blocks are in flight, so memory is bounded.
    """
    if tables is None:
        tables = build_topic_word(cfg, num_threads=num_threads)
    nb = num_blocks(cfg)
    nt = _threads(num_threads)
    if nt == 1:
        for b in range(nb):
            yield generate_block(cfg, tables, b, return_topics=return_topics)
        return
    with _futures.ThreadPoolExecutor(nt) as ex:
        pending: deque = deque()
        nxt = 0
        while nxt < nb or pending:
            while nxt < nb and len(pending) < 2 * nt:
                pending.append(ex.submit(generate_block, cfg, tables, nxt, return_topics=return_topics))
                nxt += 1
            yield pending.popleft().result()


def iter_batches(
    cfg: SynthConfig,
    tables: TopicWordTables | None = None,
    *,
    batch_tokens: int = 1 << 25,
    num_threads: int | None = None,
    return_topics: bool = False,
) -> Iterator[tuple]:
    """Whole-block batches of >= ``batch_tokens`` tokens (last one smaller), in order.

    Yields ``(doc_lengths, word_ids)`` (plus ``topics`` with ``return_topics``);
    the concatenation over batches does not depend on ``batch_tokens``.
    """
    buf: list[tuple] = []
    have = 0
    for blk in iter_blocks(cfg, tables, num_threads=num_threads, return_topics=return_topics):
        buf.append(blk)
        have += blk[1].size
        if have >= batch_tokens:
            yield _concat(buf)
            buf, have = [], 0
    if buf:
        yield _concat(buf)


def _concat(parts: list[tuple]) -> tuple:
    if len(parts) == 1:
        return parts[0]
    return tuple(np.concatenate(col) for col in zip(*parts))


def generate(cfg: SynthConfig, *, return_topics: bool = False, num_threads: int | None = 1):
    """Whole corpus in memory (small corpora / tests): ``(doc_lengths, word_ids[, topics])``."""
    tables = build_topic_word(cfg, num_threads=num_threads)
    return _concat(list(iter_blocks(cfg, tables, num_threads=num_threads, return_topics=return_topics)))


def vocab_words(num_words: int) -> list[str]:
    """Synthetic vocabulary ``w000000, w000001, ...`` (width grows past 10**6 words)."""
    width = max(6, len(str(num_words - 1)))
    return [f"w{v:0{width}d}" for v in range(num_words)]


def write_corpus(
    cfg: SynthConfig,
    output: str,
    *,
    name: str = "",
    batch_tokens: int = 1 << 25,
    num_threads: int | None = None,
) -> dict:
    """Generate ``cfg`` into a native corpus folder at ``output``; returns stats.

    Streams batches through ``saberjax.corpus.NativeCorpusWriter`` so memory is
    bounded by the topic tables + in-flight blocks + one batch.
    """
    from saberjax.corpus import NativeCorpusWriter

    t0 = time.perf_counter()
    tables = build_topic_word(cfg, num_threads=num_threads)
    t_tables = time.perf_counter() - t0
    with NativeCorpusWriter(output, vocab_words(cfg.num_words), name=name) as w:
        for lengths, words in iter_batches(cfg, tables, batch_tokens=batch_tokens, num_threads=num_threads):
            w.append(lengths, words)
    secs = time.perf_counter() - t0
    T = w.num_tokens
    return {
        "D": w.num_docs,
        "T": T,
        "V": cfg.num_words,
        "K_true": cfg.num_true_topics,
        "seconds": round(secs, 3),
        "table_seconds": round(t_tables, 3),
        "Mtoken_per_s": round(T / secs / 1e6, 3) if secs > 0 else None,
        "output": os.path.abspath(output),
    }
