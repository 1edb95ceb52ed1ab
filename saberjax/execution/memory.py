"""The memory plan: what a run needs of device and host memory, from the model's shape and the
corpus, before anything is allocated.

Device: the model and its update (model_bytes) plus, for every token on the device, the bytes
a chunk step needs per token (device_bytes_per_token: measured from two compiled probe
steps, or the bound BYTES_PER_TOKEN_BOUND no step exceeds).  Host: the budget
(host_memory_budget), what the process holds already (anonymous_host_memory) and the model
once fetched (host_model_bytes).  inference imports this module for its own checks; the
placement's decisions are in execution.plan.
"""

from __future__ import annotations

import os

import jax
import numpy as np

from saberjax import esca, sparse_rows
from saberjax.background import in_background
from saberjax.config import HOST_MEMORY_FRACTION, Hyperparams
from saberjax.corpus import Corpus
from saberjax.execution.mesh import model_rows
from saberjax.layout import build_layout
from saberjax.pallas import segmented_count as pallas_segmented_count
from saberjax.state import BHAT_DTYPE

# Device memory left free for XLA and the allocator when the budget comes from the device.
HEADROOM_FRACTION = 0.1
# Tokens of the two probe chunks whose compiled steps measure device bytes per token.
PROBE_TOKENS = (1 << 15, 1 << 16)
# Device bytes per token no chunk step exceeds (docs/measurements/memory.md).
BYTES_PER_TOKEN_BOUND = 512
# Device bytes per corpus token that partition by word adds on every device: every
# document's A (4) and the doc-major topics of the E-step (2).
WORD_PARTITION_BYTES_PER_TOKEN = 6
# Device bytes per token of a device's own chunk that partition by word adds: the owner of
# each doc-major position (programs.WordShares.owner: int8, int16 past 126 devices).
DOC_MAJOR_OWNER_BYTES_PER_TOKEN = 2
# Device bytes per token that A's wide pairs (state.pack_pairs: 8 bytes a pair, not 4) add
# to a chunk's state, and by word to every document's A gathered.
WIDE_PAIR_EXTRA_BYTES = 4
# Device bytes per token of the other hosts' word share that the two-axis mesh exchanging
# topics adds: its word rows (4) and its gathered topics (up to 4).
PEER_SHARE_BYTES_PER_TOKEN = 8
# On CPU devices (device memory is host memory): the runtime's growth beyond what the process
# holds when the run is planned (its libraries' pages, compiled programs, pools and threads),
# and what scoring held-out documents adds on every device per cell of the model (the topics
# replicated, transposed for the scorer, and the gather that makes them) and per topic (a
# batch of at least one row of word slots times K, and its temporaries); fitted to measured
# peaks: docs/measurements/memory.md.
CPU_RUNTIME_BYTES = 400_000_000
CPU_SCORING_BYTES_PER_CELL = 4.7
CPU_SCORING_BYTES_PER_TOPIC = 170


# Device bytes per token of a sparse iteration beyond its model: the chunk, the word share,
# the states and the E-step's outputs, and the sort of the rows' count; above the peak the
# whole process measured (docs/measurements/sparse_model.md).  The probes of
# device_bytes_per_token compile the dense step, so the sparse model's plan takes this.
SPARSE_BYTES_PER_TOKEN = 128
# Device bytes per entry of the sparse model (saberjax.sparse_rows) during an iteration: B's
# rows (topic and count, 4 bytes each), term 2's prefix sums (4) and the bucket directory (4),
# the same again for the rows being counted, and the (row, topic) sort keys and positions of
# the count (16).
SPARSE_BYTES_PER_ENTRY = 48
# Device bytes per entry of the row tables' build (sparse_rows.row_tables: the rows' entries it
# reads, their homes, displacements and slot values, held beside the model and the new rows)
# over the entries it reads (sparse_rows.row_table_entries), fitted to the build's compiled
# temporaries and the peaks measured (docs/measurements/sparse_model.md).
ROW_TABLE_BUILD_BYTES_PER_ENTRY = 32
# Device bytes per token key that the reduction of the streamed sparse model counts beyond
# the rows they become (streamed_rows.counted: the two stable sorts' outputs and temporaries,
# the runs' positions), with the model of the iteration before still held; fitted to the
# peaks of the model streamed by words (docs/measurements/sparse_model.md), which covers those
# streamed by documents too.
STREAMED_COUNT_BYTES_PER_KEY = 40


def sparse_model_bytes(entries: int, num_rows: int, padded_topics: int) -> int:
    """Device bytes of the sparse model during an iteration: `entries` slots of B's rows (a
    device's share of tokens: no row holds more nonzeros than tokens), per row its start,
    term 2's total, its buckets' base, shift, steps and directory slots and its table's base,
    shift and window (and their rebuild), the row tables' slots (sparse_rows.row_table_slots,
    int32), their rebuild and its arrays (ROW_TABLE_BUILD_BYTES_PER_ENTRY over
    sparse_rows.row_table_entries), per topic the
    totals, prior, denominators and term 3's tree, the dense rows of the most frequent
    words (sparse_rows.dense_rows_bytes) and their rebuild, and the scratch rows of A's
    rebuild (pallas.segmented_count.scratch_bytes_of: K_pad ints a program, its programs
    bounded by the device's tokens, no fewer than its documents)."""
    return int(entries * SPARSE_BYTES_PER_ENTRY
               + pallas_segmented_count.scratch_bytes_of(padded_topics, entries)
               + ROW_TABLE_BUILD_BYTES_PER_ENTRY * sparse_rows.row_table_entries(entries,
                                                                                 num_rows)
               + num_rows * 80
               + 2 * 4 * sparse_rows.row_table_slots(entries, num_rows)
               + padded_topics * (6 * 4 + 4 / 31)
               + 2 * sparse_rows.dense_rows_bytes(num_rows, padded_topics))


def streamed_sparse_model_bytes(num_tokens: int, num_rows: int, padded_topics: int,
                                num_devices: int) -> int:
    """Device bytes of the sparse model streamed by document: whole on every device, its
    entries as many as the corpus's tokens (sparse_model_bytes), beside a device's tokens'
    keys and every device's gathered for the count (streamed_rows, 8 bytes a token each) and
    the count's (STREAMED_COUNT_BYTES_PER_KEY)."""
    return (sparse_model_bytes(num_tokens, num_rows, padded_topics)
            + (8 + STREAMED_COUNT_BYTES_PER_KEY) * num_tokens + 8 * -(-num_tokens // num_devices))


def streamed_by_word_model_bytes(share_tokens: int, num_rows: int, padded_topics: int,
                                 sparse: bool) -> int:
    """Device bytes of a device's rows of the model streamed by word: the sparse model of
    its word shares' tokens (sparse_model_bytes) beside their keys (streamed_rows, 8 bytes a
    token) and their count's (STREAMED_COUNT_BYTES_PER_KEY), or the dense model of its rows
    (model_bytes)."""
    if sparse:
        return (sparse_model_bytes(share_tokens, num_rows, padded_topics)
                + (8 + STREAMED_COUNT_BYTES_PER_KEY) * share_tokens)
    return model_bytes(num_rows, padded_topics)


def model_bytes(num_words: int, padded_topics: int) -> int:
    """Device bytes of the model during an iteration: B and the new counts (V x K_pad int32
    each), B-hat and its rebuild (state.BHAT_DTYPE), the trees (float32, about 1/31 of B-hat's
    cells)."""
    bhat_bytes = np.dtype(BHAT_DTYPE).itemsize
    return int(num_words * padded_topics * (2 * 4 + 2 * bhat_bytes + 4 / 31))


def free_device_memory(device=None) -> int | None:
    """Bytes the device can still allocate, less headroom; None when it does not say (CPU)."""
    stats = (device or jax.local_devices()[0]).memory_stats()
    if not stats or "bytes_limit" not in stats:
        return None
    free = stats["bytes_limit"] - stats.get("bytes_in_use", 0)
    return int(free * (1 - HEADROOM_FRACTION))


def plan_chunk_tokens(num_tokens: int, num_words: int, num_topics: int, padded_topics: int,
                      budget: int, device_bytes_per_token: float, prefetch: int,
                      model: int | None = None) -> int | None:
    """Tokens per chunk for one device's share of num_tokens tokens and a device budget: None
    when every chunk can stay on the device.

    Everything resident needs the model plus device_bytes_per_token for every token; otherwise
    the fewest chunks such that the model, `prefetch` chunks in flight and the one being
    worked on fit (the paper's rule: as few chunks as memory allows, for locality).
    model: the model's device bytes (None: the dense model's, model_bytes).
    MemoryError, naming the settings num_topics and device_memory_gb, when the model or a
    chunk of 1,024 tokens beside it does not fit.
    """
    model = model_bytes(num_words, padded_topics) if model is None else model
    room = budget - model
    if room <= 0:
        raise MemoryError(
            f"the model does not fit the device: num_topics={num_topics} x V={num_words} words "
            f"need {model / 1e9:.2f} GB for B, B-hat, the trees and their update, but the "
            f"device budget is {budget / 1e9:.2f} GB; use fewer topics, a smaller vocabulary "
            f"or a larger device_memory_gb")
    if num_tokens * device_bytes_per_token <= room:
        return None
    chunk_tokens = int(room / (device_bytes_per_token * (prefetch + 1)))
    if chunk_tokens < 1024:
        raise MemoryError(f"a device budget of {budget / 1e9:.2f} GB leaves room for only "
                          f"{chunk_tokens} tokens per chunk next to the model; raise "
                          f"device_memory_gb or lower num_topics")
    return chunk_tokens


def _chunk_step_bytes(corpus: Corpus, hyper: Hyperparams, tokens: int) -> tuple[int, int]:
    """(padded tokens, device bytes of one chunk step beyond the model) for a probe chunk of
    the corpus's first documents: the chunk, its state in and out, XLA's temporaries."""
    reach = np.searchsorted(np.asarray(corpus.doc_offsets), tokens)
    probe = build_layout(corpus.subset(np.arange(max(1, min(reach, corpus.num_docs))))).chunks[0]
    state = jax.eval_shape(lambda chunk: esca.init((chunk,), corpus.num_words, hyper, 0), probe)
    compiled = esca.chunk_step.lower(probe, state.chunks[0], state.model,
                                     jax.ShapeDtypeStruct((), np.uint32), state.model.word_topic,
                                     hyper=hyper).compile()
    state_bytes = sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(state.chunks))
    chunk_bytes = sum(leaf.nbytes for leaf in jax.tree.leaves(probe))
    return (probe.padded_tokens,
            chunk_bytes + 2 * state_bytes + compiled.memory_analysis().temp_size_in_bytes)


def device_bytes_per_token(corpus: Corpus, hyper: Hyperparams) -> float:
    """Device bytes per token while a chunk is worked on (its arrays, state in and out, and
    temporaries): the slope between two probe chunks' compiled steps, so that temporaries
    the size of the model do not count as per-token.  The larger probe is built and compiled
    in a thread beside the smaller one (XLA compiles without the GIL)."""
    large_probe = in_background(_chunk_step_bytes, corpus, hyper, PROBE_TOKENS[1],
                                name="saberjax-probe")
    small_tokens, small = _chunk_step_bytes(corpus, hyper, PROBE_TOKENS[0])
    large_tokens, large = large_probe.result()
    if large_tokens == small_tokens:  # a corpus smaller than the probes
        return large / large_tokens
    return max(large - small, 0) / (large_tokens - small_tokens)


def resident_bytes(corpus: Corpus, hyper: Hyperparams, num_devices: int, partition: str,
                   per_token: float, hosts: int = 1) -> int:
    """Planned device bytes a device needs with every chunk resident: the model and its update
    (model_bytes), per_token bytes for each token of its share (device_bytes_per_token), and
    by words every document's A and the E-step's doc-major topics (on the two-axis mesh of
    `hosts`, those of its host's documents, and the word rows and topics of its word share
    on the other hosts, which it holds where the hosts exchange topics) and the owners of its
    chunk's doc-major positions, and A's wide pairs' bytes (hyper.wide_pairs).  The sparse
    model (hyper.sparse) counts sparse_model_bytes for the device's share of tokens; the
    dense model by word a third copy of its rows' counts, the zeros an iteration makes for
    the next (Programs.carries_zero_counts; on the two-axis mesh whichever the hosts
    exchange)."""
    share = -(-corpus.num_tokens // num_devices)
    wide = WIDE_PAIR_EXTRA_BYTES if hyper.wide_pairs else 0
    extra = ((WORD_PARTITION_BYTES_PER_TOKEN + wide) * -(-corpus.num_tokens // hosts)
             + DOC_MAJOR_OWNER_BYTES_PER_TOKEN * share
             if partition in ("words", "hybrid") else 0) + wide * share
    if partition == "hybrid":
        extra += PEER_SHARE_BYTES_PER_TOKEN * (hosts - 1) * share
    rows = model_rows(corpus.num_words, num_devices, partition, hosts)
    if hyper.sparse:
        model = sparse_model_bytes(share, rows, hyper.padded_topics)
    else:
        carried = partition in ("words", "hybrid")
        model = model_bytes(rows, hyper.padded_topics) + carried * 4 * rows * hyper.padded_topics
    return int(model + share * per_token + extra)


def _proc_bytes(path: str, field: str) -> int | None:
    """A "Field: N kB" line of a /proc file in bytes (None where the system has none)."""
    try:
        with open(path, encoding="ascii") as lines:
            for line in lines:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def available_host_memory() -> int:
    """Bytes of host memory available now (MemAvailable: free memory and reclaimable cache)."""
    available = _proc_bytes("/proc/meminfo", "MemAvailable")
    if available is None:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return available


def host_memory_budget(host_memory_gb: float | None) -> int:
    """The host memory budget in bytes: host_memory_gb, else HOST_MEMORY_FRACTION of what is
    available."""
    if host_memory_gb:
        return int(host_memory_gb * 1e9)
    return int(HOST_MEMORY_FRACTION * available_host_memory())


def host_model_bytes(num_words: int, padded_topics: int, sparse_entries: int | None = None
                     ) -> int:
    """Host bytes of the trained model: the counts fetched from the devices and the model's
    topic-word matrix made from them (V x K_pad, 4 bytes each; sparse: sparse_entries
    nonzeros at most, 8 bytes each in the engine's rows and in the model's, and the rows'
    starts)."""
    if sparse_entries is not None:
        return 2 * (8 * sparse_entries + 8 * (num_words + 1))
    return 2 * 4 * num_words * padded_topics


def host_bytes(num_words: int, padded_topics: int, num_devices: int, on_cpu: bool,
               scoring: bool, num_tokens: int = 0, bytes_per_token: float = 0,
               sparse: bool = False) -> int:
    """Host bytes a run needs beyond what its process holds when it is planned: the model
    fetched from the devices (host_model_bytes) everywhere; where the devices are the host's
    CPU cores, whose memory is the host's, also the runtime's growth (CPU_RUNTIME_BYTES), the
    model and its update (model_bytes), bytes_per_token for each of num_tokens tokens, and,
    when held-out documents are scored, each device's copy of the topics with the scorer's
    temporaries (CPU_SCORING_BYTES_PER_CELL a cell of V x K_pad, CPU_SCORING_BYTES_PER_TOPIC
    a topic).  sparse: the model is sparse (sparse_model_bytes; at most num_tokens
    nonzeros)."""
    needed = host_model_bytes(num_words, padded_topics, num_tokens if sparse else None)
    if on_cpu:
        scored = (num_devices * padded_topics * (num_words * CPU_SCORING_BYTES_PER_CELL
                                                 + CPU_SCORING_BYTES_PER_TOPIC)
                  if scoring else 0)
        device_model = (sparse_model_bytes(num_tokens, num_words, padded_topics) if sparse
                        else model_bytes(num_words, padded_topics))
        needed += (CPU_RUNTIME_BYTES + device_model + scored + num_tokens * bytes_per_token)
    return int(needed)


def check_host_room(needed: int, num_topics: int, num_words: int) -> None:
    """MemoryError, with the GB needed and naming num_topics, when a run needing `needed`
    more bytes of host memory (host_bytes) would exceed the memory available: refused before
    anything is allocated, not killed by the system halfway."""
    available = available_host_memory()
    if needed > available:
        raise MemoryError(
            f"num_topics={num_topics} over V={num_words:,} words needs {needed / 1e9:.1f} GB "
            f"of host memory for the model (and, on CPU devices, its update and scoring), "
            f"{available / 1e9:.1f} GB are available; use fewer topics or a smaller "
            f"vocabulary")


def anonymous_host_memory() -> int:
    """Bytes of this process's resident memory that are not file pages (RssAnon): what the
    run holds already (the runtime, the corpus when it is not memory-mapped)."""
    return _proc_bytes("/proc/self/status", "RssAnon") or 0
