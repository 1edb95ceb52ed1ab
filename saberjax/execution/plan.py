"""The plan of a run on the devices, decided once from the settings before anything is built:
the mesh, the partition, the chunking and where the chunks live.

    resident   every device's share of the documents' tokens stays on it (one chunk, or
               chunks of chunk_tokens)
    streamed   a share does not fit its device's memory budget: the fewest chunks that fit
               stay in pinned host memory and flow through the devices every iteration
    stored     the chunks and their states do not fit the host memory budget where the
               host holds them (streamed from its memory, or laid out by the host: on CPU
               devices, whose memory is the host's): they stream from a chunk store on
               local disk, in chunks small enough for both budgets

Partition by word (each device samples its words' tokens against every document's A, no B
moves) is chosen on several devices when every share stays resident and the model outweighs
the corpus (WORD_PARTITION_CELLS_PER_TOKEN), or fits no other way.  The two-axis mesh
(partition "hybrid", mesh HOSTSxGPUS) is chosen when several processes each drive several
devices and every share stays resident: by word within a process, by document across
processes, so that between hosts only each device's word share of B moves, or, where fewer
bytes, the topics of its word share's tokens (hosts_exchange).

Partition by word streams (from pinned host memory) where asked to, or where the shares do
not fit: each device keeps its words' rows of the model while every device's slots of
documents pass by with their word shares (execution.programs).

The model's format: dense, or sparse (B's nonzeros by word, saberjax.sparse_rows), which
runs on the one-axis mesh partitioned by word, every share resident or (where the shares do
not fit, on several devices) streamed, or (asked to stream by documents, or on one device
where the shares do not fit) by document, streamed from host memory or a chunk store, the
whole sparse model on every device (saberjax.streamed_rows).  "auto" takes dense
wherever the dense model fits the device budget (its kernels are the tuned ones) and sparse
where it does not.  A's pairs are wide (state.pack_pairs) where the longest document has
more tokens than a packed pair counts at K, or where the settings ask for them (tests).
Errors name the settings (num_topics, device_memory_gb, host_memory_gb,
partition, mesh, chunk_tokens, model_format).
"""

from __future__ import annotations

import dataclasses
import functools
import os

import jax
import jax.numpy as jnp
from jax.sharding import Mesh

from saberjax import chunk_store
from saberjax.config import (DEFAULT_PREFETCH, MODEL_FORMATS, PARTITIONS, Hyperparams,
                             parse_mesh_shape)
from saberjax.corpus import Corpus
from saberjax.execution import host_memory, memory
from saberjax.execution.mesh import GPUS, make_grid, make_mesh, model_rows, own_devices
from saberjax.execution.programs import HOSTS_EXCHANGES
from saberjax.layout import chunk_spans
from saberjax.state import BHAT_DTYPE, needs_wide_pairs

# Partition by word when B has more cells than this per corpus token: an iteration moves
# 6 bytes per cell of B by document (reduce-scatter of int32 B, all-gather of bfloat16 B-hat)
# and about 6 bytes per token by word, whose E-step reads A rows of every document (measured:
# docs/measurements/multi_gpu.md).
WORD_PARTITION_CELLS_PER_TOKEN = 1.5
# What exchanging topics between hosts costs a device beyond exchanging counts (hosts_exchange),
# seconds on a GPU of today (the one-GPU phases of docs/measurements/single_gpu_throughput.md):
# each other host's token of its word share counted into B, and each cell of B-hat and the
# trees it computes for the rows the hosts no longer split.
RECOUNT_SECONDS_PER_TOKEN = 2.6e-11
BHAT_SECONDS_PER_CELL = 3e-12


@dataclasses.dataclass(frozen=True)
class Plan:
    """How a corpus runs on a mesh (plan): what execution.placement.place builds."""

    mesh: Mesh  # one axis "data", or ("hosts", "gpus") for "hybrid"
    partition: str  # "documents", "words" or "hybrid"
    chunk_tokens: int | None  # tokens per chunk (None: one chunk a device's share)
    streamed: bool  # the chunks stream through the devices every iteration
    prefetch: int  # chunks in flight to each device when streaming
    # streamed from a chunk store in this folder (None: from pinned host memory), and the
    # host memory budget its builders share
    store_directory: str | os.PathLike | None = None
    host_budget: int = 0
    # the devices build the chunks they hold from the corpus's word ids
    # (layout_device.build_chunk); False: the host builds them (layout.build_layout)
    layout_on_devices: bool = False
    model_format: str = "dense"  # "dense" or "sparse"
    # A's pairs are wide (state.needs_wide_pairs: a document longer than a packed pair counts)
    wide_pairs: bool = False
    # the two-axis mesh: what crosses between hosts, "counts", "topics" or "auto" (for each
    # K, hosts_exchange)
    hosts_exchange: str = "auto"

    @property
    def stored(self) -> bool:
        return self.store_directory is not None

    def own_tokens(self, corpus: Corpus) -> tuple[int, int]:
        """The tokens [first, last) of this process's documents: those of its devices' chunks
        (on the two-axis mesh its hosts' rows', whose word shares it builds; a process's
        devices hold consecutive mesh positions), from the document offsets alone, as
        placement.placed cuts the chunks.  By documents and on the two-axis mesh the only
        tokens it reads; by words on one axis it reads every document for its words' tokens,
        but counts and hashes only its own towards the corpus's (Corpus.part)."""
        size = self.mesh.size
        spans = chunk_spans(corpus, self.chunk_tokens or -(-corpus.num_tokens // size), size)
        devices = own_devices(self.mesh)
        if self.partition == "hybrid":
            gpus = self.mesh.shape[GPUS]
            devices = [device for device in range(size) if device // gpus in
                       {own // gpus for own in devices}]
        per_device = len(spans) // size
        first, last = (spans[min(devices) * per_device][0],
                       spans[(max(devices) + 1) * per_device - 1][1])
        return int(corpus.doc_offsets[first]), int(corpus.doc_offsets[last])

    @property
    def mesh_shape(self) -> dict[str, int]:
        """Devices along each axis of the mesh, by name ({"data": N}, or {"hosts": H,
        "gpus": G} for "hybrid")."""
        return dict(self.mesh.shape)


def plan(corpus: Corpus, hyper: Hyperparams, num_devices: int = 0,
         chunk_tokens: int | None = None, device_memory_gb: float | None = None,
         prefetch: int = DEFAULT_PREFETCH, stream: bool | None = None,
         partition: str = "auto", host_memory_gb: float | None = None,
         chunk_store_dir=None, scoring: bool = False, mesh: str | None = None,
         layout_on_devices: bool | None = None, model_format: str | None = None,
         hosts_exchange: str = "auto") -> Plan:
    """The plan of the corpus on a mesh of num_devices devices (0: all).

    Each device gets an equal share of the documents' tokens: one chunk (chunk_tokens: chunks
    of about that many tokens) when its share fits device_memory_gb (None: what the device
    has free, less headroom; on a CPU everything stays resident), else the fewest chunks that
    fit, streamed from pinned host memory (stream: True or False overrides that).  Chunks the
    host holds (streamed, or a resident layout it builds: on CPU devices) whose states do not
    fit host_memory_gb (None: HOST_MEMORY_FRACTION of the memory available) stream from a
    chunk store in chunk_store_dir (None: chunk_store.default_directory()), by documents, in
    chunks small enough for both budgets; stream=False keeps them resident.
    partition: "documents" (each device samples its documents' tokens against the whole
    B-hat, reduced and gathered every iteration), "words" (each device samples its words'
    tokens against every document's A, gathered every iteration: no B moves, each device
    holds only its words' rows of the model, and the documents stream past them too),
    "hybrid" (the two-axis mesh `mesh`, "HOSTSxGPUS", None: the processes x the devices of
    each: by word within a host, by document across hosts; mesh given, "hybrid" or "auto")
    or "auto".  scoring: held-out documents are scored during the run (their memory counts
    on CPU devices).  layout_on_devices: the devices build the chunks that live in their
    memory or in pinned host memory (None: where they are accelerators; on CPU devices the
    host's builder is the faster one and its layouts are cached).  model_format: "dense",
    "sparse" or "auto" (None: hyper's).  hosts_exchange: what crosses between the hosts of the
    two-axis mesh, "counts", "topics" or "auto" (hosts_exchange).  Errors: MemoryError when
    the model does not fit the devices or the host (memory.host_bytes), ValueError for a
    partition or mesh that cannot hold the settings."""
    hosts, gpus, num_devices = _grid(partition, mesh, num_devices, hosts_exchange)
    one_axis = make_mesh(num_devices)
    if layout_on_devices is None:
        layout_on_devices = one_axis.devices.flat[0].platform != "cpu"
    budget = (int(device_memory_gb * 1e9) if device_memory_gb
              else memory.free_device_memory(jax.local_devices()[0]))
    hyper = dataclasses.replace(hyper, model_format=_model_format(
        model_format or hyper.model_format, corpus, hyper, one_axis.size, budget),
        wide_pairs=hyper.wide_pairs or needs_wide_pairs(corpus.doc_lengths().max(initial=0),
                                                        hyper.num_topics))
    fits = _ResidentFit(corpus, hyper, one_axis.size, budget, hosts)
    host_budget = memory.host_memory_budget(host_memory_gb)
    by_words = functools.partial(_by_words_streamed, corpus, hyper, one_axis, fits, budget,
                                 chunk_tokens, prefetch, host_budget, layout_on_devices)
    if hyper.sparse:
        partition = _sparse_partition(hyper, partition, mesh, stream, chunk_tokens, fits,
                                      one_axis.size, lambda: by_words(refuse=False) is not None)
    host_layout_stored = (not layout_on_devices and stream is not False and mesh is None
                          and partition in ("auto", "documents")
                          and _host_layout_stored(corpus, hyper, one_axis, chunk_tokens,
                                                  host_budget))
    _check_host_room(corpus, hyper, one_axis, scoring, fits,
                     0 if host_layout_stored else corpus.num_tokens)
    if partition == "auto":
        partition = ("hybrid" if mesh is not None
                     or _hybrid_by_default(hosts, gpus, fits, stream, chunk_tokens)
                     else "documents" if host_layout_stored
                     else _auto_partition(corpus, hyper, one_axis.size, fits, stream,
                                          chunk_tokens))
    if partition == "words" and stream is not False and (
            stream or chunk_tokens is not None or not fits("words")):
        return by_words()
    if partition == "hybrid":
        if stream or chunk_tokens is not None:
            raise ValueError("partition 'hybrid' keeps each device's share resident in one "
                             "chunk: leave out chunk_tokens and streaming, or partition by "
                             "documents or words")
        fits.check(partition)
        return Plan(make_grid(hosts, gpus), partition, None, False, prefetch,
                    wide_pairs=hyper.wide_pairs, hosts_exchange=hosts_exchange)
    if stream is False or partition == "words":
        fits.check(partition)
        return Plan(one_axis, partition, chunk_tokens, False, prefetch,
                    layout_on_devices=layout_on_devices, model_format=hyper.model_format,
                    wide_pairs=hyper.wide_pairs)
    return _by_documents(corpus, hyper, one_axis, fits, budget, chunk_tokens, stream,
                         prefetch, host_budget, host_layout_stored, chunk_store_dir,
                         layout_on_devices)


def _grid(partition: str, mesh: str | None, num_devices: int,
          hosts_exchange: str) -> tuple[int, int, int]:
    """(hosts, gpus, num_devices) of the settings: the two-axis mesh `mesh` ("HOSTSxGPUS";
    None: the processes x the devices of each) and the devices of the one-axis mesh (all of
    the grid's where the run is "hybrid"); ValueError naming partition, mesh, num_devices or
    hosts_exchange where they disagree or are unknown."""
    if hosts_exchange not in HOSTS_EXCHANGES + ("auto",):
        raise ValueError(f"hosts_exchange must be 'auto', "
                         f"{' or '.join(map(repr, HOSTS_EXCHANGES))}, got {hosts_exchange!r}")
    if partition not in PARTITIONS + ("auto",):
        raise ValueError(f"partition must be 'auto', {' or '.join(map(repr, PARTITIONS))}, "
                         f"got {partition!r}")
    if mesh is not None and partition not in ("auto", "hybrid"):
        raise ValueError(f"mesh={mesh!r} lays out partition 'hybrid', not "
                         f"partition={partition!r}")
    hosts, gpus = (parse_mesh_shape(mesh) if mesh is not None
                   else (jax.process_count(), jax.local_device_count()))
    if mesh is not None or partition == "hybrid":
        if num_devices not in (0, hosts * gpus):
            raise ValueError(f"num_devices={num_devices} with mesh={hosts}x{gpus}: the mesh "
                             f"takes {hosts * gpus} devices; leave num_devices out")
        num_devices = make_grid(hosts, gpus).size  # a mesh the devices cannot hold: its error
    return hosts, gpus, num_devices


def _sparse_partition(hyper: Hyperparams, partition: str, mesh: str | None,
                      stream: bool | None, chunk_tokens: int | None,
                      fits: "_ResidentFit", num_devices: int, host_holds_chunks) -> str:
    """The sparse model's partition: by words (asked, or "auto" where no streaming is asked
    and every share fits resident, or, on several devices, where the host holds the chunks
    (host_holds_chunks()) to stream them by word), else by documents, streamed, the whole
    model on every device.  ValueError naming the settings it cannot run with: seed words,
    the two-axis mesh, by documents resident."""
    if hyper.seeds is not None:
        raise ValueError("seed_words train on the dense model: use model_format 'dense' (with "
                         "model_format 'auto' the dense model does not fit these devices)")
    if mesh is not None or partition == "hybrid":
        raise ValueError("model_format 'sparse' runs on one mesh axis (resident by words, or "
                         "streamed by documents): leave out mesh, or use model_format 'dense'")
    if partition == "documents" and stream is False:
        raise ValueError("model_format 'sparse' by documents streams its chunks: leave out "
                         "stream=False, or partition by words")
    by_word = partition == "words" or stream is False or (
        partition == "auto" and not stream and chunk_tokens is None
        and (fits("words") or (num_devices > 1 and host_holds_chunks())))
    return "words" if by_word else "documents"


def _by_words_streamed(corpus: Corpus, hyper: Hyperparams, mesh: Mesh, fits: _ResidentFit,
                       budget: int | None, chunk_tokens: int | None, prefetch: int,
                       host_budget: int, layout_on_devices: bool,
                       refuse: bool = True) -> Plan | None:
    """The plan by word, streamed from pinned host memory in chunks of
    _by_words_chunk_tokens.  Where the chunks, word shares and states the host holds
    (held_host_bytes) do not fit its budget beside the model (a chunk store streams by
    document only): ValueError naming host_memory_gb, or None where not `refuse`."""
    chunk_tokens = _by_words_chunk_tokens(corpus, hyper, mesh, fits, budget, chunk_tokens,
                                          prefetch)
    held = held_host_bytes(corpus, hyper, mesh, chunk_tokens, "words", layout_on_devices)
    if host_memory.plan_store_chunk_tokens(corpus, hyper, host_budget, prefetch,
                                           held) is not None:
        if not refuse:
            return None
        raise ValueError(f"partition 'words' streams from host memory, and the corpus's chunks, "
                         f"word shares and states ({held / 1e9:.3g} GB) do not fit "
                         f"host_memory_gb={host_budget / 1e9:.3g} beside the model: raise "
                         f"host_memory_gb, or partition by documents (a chunk store)")
    return Plan(mesh, "words", chunk_tokens, True, prefetch,
                layout_on_devices=layout_on_devices, model_format=hyper.model_format,
                wide_pairs=hyper.wide_pairs)


def _host_layout_stored(corpus: Corpus, hyper: Hyperparams, mesh: Mesh,
                        chunk_tokens: int | None, host_budget: int) -> bool:
    """Whether a resident layout the host builds (CPU devices; one process's) goes to a chunk
    store: its chunks and states (held_host_bytes) do not fit the host budget beside the
    model."""
    return jax.process_count() == 1 and host_memory.only_a_store_fits(
        corpus, hyper, host_budget,
        held_host_bytes(corpus, hyper, mesh, chunk_tokens, "documents", False))


def _by_words_chunk_tokens(corpus: Corpus, hyper: Hyperparams, mesh: Mesh,
                           fits: _ResidentFit, budget: int | None, chunk_tokens: int | None,
                           prefetch: int) -> int | None:
    """Tokens per chunk streamed by word: chunk_tokens where given, else (under a device
    budget) the fewest slots that fit beside each device's rows of the model
    (memory.streamed_by_word_model_bytes), a slot's tokens costing the step's bytes a token
    and, for every device's chunk of the slot, its A gathered and its doc-major topics."""
    if budget is None or chunk_tokens is not None:
        return chunk_tokens
    share = -(-corpus.num_tokens // mesh.size)
    rows = model_rows(corpus.num_words, mesh.size, "words")
    per_slot_token = fits.measured() + mesh.size * (
        memory.WORD_PARTITION_BYTES_PER_TOKEN
        + (memory.WIDE_PAIR_EXTRA_BYTES if hyper.wide_pairs else 0))
    return memory.plan_chunk_tokens(
        share, rows, hyper.num_topics, hyper.padded_topics, budget, per_slot_token, prefetch,
        memory.streamed_by_word_model_bytes(share, rows, hyper.padded_topics, hyper.sparse))


def held_host_bytes(corpus: Corpus, hyper: Hyperparams, mesh: Mesh, chunk_tokens: int | None,
                    partition: str, layout_on_devices: bool) -> int:
    """Peak host bytes of the chunks, word shares (partition "words") and states that the
    host holds for this process's devices of the mesh in chunks of about chunk_tokens tokens
    (None: one a device), as placement.placed creates them (host_memory.held_bytes)."""
    shape = host_memory.held_shape(corpus, mesh.size, len(own_devices(mesh)), chunk_tokens,
                                   partition == "words")
    return host_memory.held_bytes(shape, hyper, corpus.num_words, not layout_on_devices,
                                  mesh.devices.flat[0].platform != "cpu")


def _by_documents(corpus: Corpus, hyper: Hyperparams, mesh: Mesh, fits: _ResidentFit,
                  budget: int | None, chunk_tokens: int | None, stream: bool | None,
                  prefetch: int, host_budget: int, host_layout_stored: bool, chunk_store_dir,
                  layout_on_devices: bool) -> Plan:
    """The plan by document where the chunks may stream: resident where every share fits
    the device budget, else streamed in the fewest chunks that fit (stream: True or False
    overrides that; the sparse model always streams); from a chunk store where the streamed
    chunks, or a layout the host builds (host_layout_stored), do not fit the host budget
    beside the model."""
    planned = None
    rows = model_rows(corpus.num_words, mesh.size, "documents")
    if budget is not None and (hyper.sparse or not fits("documents")):
        planned = memory.plan_chunk_tokens(
            -(-corpus.num_tokens // mesh.size), rows, hyper.num_topics, hyper.padded_topics,
            budget, fits.measured(), prefetch,
            memory.streamed_sparse_model_bytes(corpus.num_tokens, rows, hyper.padded_topics,
                                               mesh.size) if hyper.sparse else None)
    # the sparse model by document streams (the tokens' keys are counted at the end)
    streamed = hyper.sparse or (planned is not None if stream is None else stream)
    chunk_tokens = chunk_tokens or (planned if streamed else None)
    store_tokens = (streamed or host_layout_stored) and host_memory.plan_store_chunk_tokens(
        corpus, hyper, host_budget, prefetch,
        held_host_bytes(corpus, hyper, mesh, chunk_tokens, "documents", layout_on_devices))
    if not store_tokens:
        return Plan(mesh, "documents", chunk_tokens, streamed, prefetch,
                    layout_on_devices=layout_on_devices, model_format=hyper.model_format,
                    wide_pairs=hyper.wide_pairs)
    return Plan(mesh, "documents", min(chunk_tokens or store_tokens, store_tokens), True,
                prefetch, chunk_store_dir or chunk_store.default_directory(), host_budget,
                layout_on_devices, hyper.model_format, hyper.wide_pairs)


def _model_format(requested: str, corpus: Corpus, hyper: Hyperparams, num_devices: int,
                  budget: int | None) -> str:
    """The model's format for the setting `requested`: "auto" is sparse where the dense
    model of a device's rows (partitioned by word, its smallest) exceeds the device budget,
    so that the dense model cannot run at all: resident by words where its shares fit, else
    streamed by documents (whose plan then says what does not fit); else dense."""
    if requested not in MODEL_FORMATS + ("auto",):
        raise ValueError(f"model_format must be 'auto', {' or '.join(map(repr, MODEL_FORMATS))}"
                         f", got {requested!r}")
    if requested != "auto":
        return requested
    rows = model_rows(corpus.num_words, num_devices, "words")
    if budget is None or memory.model_bytes(rows, hyper.padded_topics) <= budget:
        return "dense"
    return "sparse"


class _ResidentFit:
    """Whether a resident placement fits a device budget (None: no limit): the cheap bound
    first, else the measured bytes per token (probe chunks compiled only then, once)."""

    def __init__(self, corpus: Corpus, hyper: Hyperparams, num_devices: int,
                 budget: int | None, hosts: int = 1):
        self.corpus, self.hyper, self.num_devices, self.budget = (corpus, hyper, num_devices,
                                                                  budget)
        self.hosts = hosts  # of the two-axis mesh
        # the probes compile the dense step: the sparse model takes its measured bound
        self.measured = functools.cache(
            lambda: memory.SPARSE_BYTES_PER_TOKEN if hyper.sparse
            else memory.device_bytes_per_token(corpus, hyper))

    def needed(self, partition: str, per_token: float) -> int:
        return memory.resident_bytes(self.corpus, self.hyper, self.num_devices, partition,
                                     per_token, self.hosts if partition == "hybrid" else 1)

    def __call__(self, partition: str) -> bool:
        return self.budget is None or any(
            self.needed(partition, per_token()) <= self.budget
            for per_token in (lambda: memory.BYTES_PER_TOKEN_BOUND, self.measured))

    def check(self, partition: str) -> None:
        """MemoryError, with the GB needed, when a resident placement does not fit."""
        if self(partition):
            return
        rows = model_rows(self.corpus.num_words, self.num_devices, partition,
                          self.hosts if partition == "hybrid" else 1)
        share = -(-self.corpus.num_tokens // self.num_devices)
        model = (memory.sparse_model_bytes(share, rows, self.hyper.padded_topics)
                 if self.hyper.sparse else memory.model_bytes(rows, self.hyper.padded_topics))
        raise MemoryError(
            f"resident by {partition}, num_topics={self.hyper.num_topics} over "
            f"{self.num_devices} device(s) needs "
            f"{self.needed(partition, self.measured()) / 1e9:.1f} GB a device (model "
            f"{model / 1e9:.1f} GB), the budget is {self.budget / 1e9:.1f} GB; use more "
            f"devices, fewer topics, or let the corpus stream (partition by documents)")


def _check_host_room(corpus: Corpus, hyper: Hyperparams, mesh: Mesh, scoring: bool,
                     fits: _ResidentFit, tokens: int) -> None:
    """MemoryError naming the GB needed when the run's host memory (memory.host_bytes, with
    `tokens` of the corpus in the host's memory on CPU devices: none when they go to a chunk
    store) does not fit what the host has available: the cheap per-token bound first, else
    the measured bytes per token."""
    on_cpu = mesh.devices.flat[0].platform == "cpu"

    def needed(per_token: float) -> int:
        return memory.host_bytes(corpus.num_words, hyper.padded_topics, mesh.size, on_cpu,
                                 scoring, tokens, per_token, hyper.sparse)

    if needed(memory.BYTES_PER_TOKEN_BOUND) <= memory.available_host_memory():
        return
    cells_alone = needed(0) > memory.available_host_memory()  # refused without the probes
    memory.check_host_room(needed(fits.measured() if on_cpu and not cells_alone else 0),
                           hyper.num_topics, corpus.num_words)


def _auto_partition(corpus: Corpus, hyper: Hyperparams, num_devices: int, fits: _ResidentFit,
                    stream: bool | None, chunk_tokens: int | None) -> str:
    """By word on several devices when every share stays resident in one chunk and the model
    outweighs the corpus (or fits only by word), else by document."""
    by_word = (num_devices > 1 and not stream and chunk_tokens is None and fits("words") and (
        corpus.num_words * hyper.padded_topics
        > WORD_PARTITION_CELLS_PER_TOKEN * corpus.num_tokens or not fits("documents")))
    return "words" if by_word else "documents"


def _hybrid_by_default(hosts: int, gpus: int, fits: _ResidentFit, stream: bool | None,
                       chunk_tokens: int | None) -> bool:
    """The two-axis mesh when several processes drive several devices each and every share
    stays resident in one chunk."""
    return (hosts > 1 and gpus > 1 and not stream and chunk_tokens is None
            and fits("hybrid"))


def counts_exchange_bytes(model_rows: int, int32_rows: int, padded_topics: int,
                          hosts: int) -> int:
    """Bytes a device receives over the hosts axis an iteration exchanging counts: the
    reduce-scatter of its share's rows (int32 rows, the rest float16) and the all-gather of
    their bfloat16 B-hat."""
    row_bytes = (int32_rows * 4 + (model_rows - int32_rows) * 2
                 + model_rows * jnp.dtype(BHAT_DTYPE).itemsize)
    return int(row_bytes * padded_topics * (hosts - 1) / hosts)


def topics_exchange_bytes(share_tokens: int, topic_bytes: int, hosts: int) -> int:
    """Bytes a device receives over the hosts axis an iteration exchanging topics: the
    other hosts' topics of its word share's tokens."""
    return (hosts - 1) * share_tokens * topic_bytes


def hosts_exchange(setting: str, hosts: int, share_tokens: int, rows: int, int32_rows: int,
                   hyper: Hyperparams, hosts_bytes_per_second: float | None = None) -> str:
    """What crosses between the hosts of the two-axis mesh each iteration (Programs): the
    setting, or for "auto" whichever costs a device less time: the counts of its word
    share's `rows` (int32_rows of them as int32) and their B-hat, or the other hosts' topics
    of the share's tokens (share_tokens a host), each's bytes at the hosts axis's measured
    bandwidth (hosts_bytes_per_second; execution.link_speed), the topics' plus their extra
    work: the count of the other hosts' tokens of the share and B-hat and the trees of the
    rows the hosts no longer split (RECOUNT_SECONDS_PER_TOKEN, BHAT_SECONDS_PER_CELL;
    DESIGN.md, the two-axis mesh)."""
    if setting != "auto":
        return setting
    topics = topics_exchange_bytes(share_tokens, jnp.dtype(hyper.topic_dtype).itemsize, hosts)
    counts = counts_exchange_bytes(rows, int32_rows, hyper.padded_topics, hosts)
    extra_work = ((hosts - 1) * share_tokens * RECOUNT_SECONDS_PER_TOKEN
                  + rows * (hosts - 1) / hosts * hyper.padded_topics * BHAT_SECONDS_PER_CELL)
    seconds_topics = topics / hosts_bytes_per_second + extra_work
    return "topics" if seconds_topics < counts / hosts_bytes_per_second else "counts"
