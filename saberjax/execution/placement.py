"""A corpus laid out on a mesh (Placement) and the building of it from a plan (place).

    corpus documents   [ device 0's share | device 1's share | ... ]   equal token shares
    slot j             chunk j of every device: one Chunk whose arrays carry a leading device
                       axis sharded over "data" (equal shapes on every device, padded)

Chunk `device * num_slots + slot` of the layout is device `device`'s chunk in slot `slot`.
Slots are resident on the devices, in pinned host memory (streaming.HostChunks) or in a chunk
store on local disk (chunk_store.StoredChunks), as the plan says (execution.plan).  Each
process builds only its own devices' chunks.  The host views of a state (its counts, alpha,
chunk states and topics, for checkpoints, models and tests) go through the Placement too; those
of the model's rows are execution.model_placement's, of the topics execution.topic_placement's.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from saberjax import chunk_store, compilation, layout_device, processes, streaming, timing
from saberjax.background import on_threads
from saberjax.config import Hyperparams
from saberjax.corpus import Corpus
from saberjax.execution import (compiled, link_speed, memory, model_placement,
                                topic_placement)
from saberjax.execution.mesh import (GPUS, HOSTS, by_device, by_device_array, model_rows,
                                     own_devices)
from saberjax.execution.plan import Plan, hosts_exchange, plan
from saberjax.execution.programs import FLOAT16_EXACT, PeerShares, Programs, WordShares
from saberjax.execution.streamed_programs import StreamedPrograms
from saberjax.layout import (Chunk, LayoutPlan, bucket_size, largest_word_share, plan_layout,
                             share_order, word_share_slots_at_once, word_shares)
from saberjax.layout_cache import cached_layout
from saberjax.sparse_word_topic import SparseWordTopic
from saberjax.state import ChunkState, Model, TrainState


@dataclasses.dataclass(frozen=True, eq=False)
class Placement:
    """A corpus laid out on a mesh: the chunks of every device, by slot, resident or streamed.

    Chunk `device * num_slots + slot` of the layout (documents chunk_docs[i]) is device
    `device`'s chunk in slot `slot`.  Built by `place`; `init`, `compile` and the host views
    of a state (checkpoints, tests) go through it.
    """

    mesh: Mesh
    slots: tuple[Chunk, ...] | streaming.HostChunks | chunk_store.StoredChunks
    chunk_docs: tuple[tuple[int, int], ...]
    chunking: tuple[tuple[int, int], ...]  # [first token id, tokens] of every chunk
    num_words: int
    hyper: Hyperparams
    # partition by word: each device's share of its group's vocabulary tokens
    # (layout.word_shares, by device; streamed, each slot's in pinned host memory) and the
    # words in share order (layout.share_order: position r is the row r // W of share r % W,
    # W the devices of the words axis); else None
    word_shares: Chunk | streaming.HostChunks | None = None
    word_order: np.ndarray | None = None
    int32_rows: int = 0  # the two-axis mesh: Programs.int32_rows
    # the two-axis mesh: the plan's hosts_exchange setting, decided for this K by
    # plan.hosts_exchange (the property hosts_exchange)
    hosts_exchange_setting: str = "auto"

    @property
    def partition(self) -> str:
        """"documents", "words" or, on the two-axis mesh, "hybrid"."""
        if HOSTS in self.mesh.axis_names:
            return "hybrid"
        return "documents" if self.word_shares is None else "words"

    @functools.cached_property
    def programs(self) -> Programs:
        """The jitted programs of an iteration on this mesh and partition (the seed words'
        prior on the rows of the model's arrays that hold its words)."""
        if self.hyper.seeds is None:
            return self._unseeded_programs
        seeds = self.hyper.seeds.on_rows(model_placement.row_of_word(self))
        return dataclasses.replace(self._unseeded_programs,
                                   hyper=dataclasses.replace(self.hyper, seeds=seeds))

    @functools.cached_property
    def _unseeded_programs(self) -> Programs:
        """The programs without the seed words' prior: the same rows and word shares, which
        the model's layout reads."""
        streamed = dict(streamed_tokens=self.streamed_tokens) if self.streamed else {}
        return (StreamedPrograms if self.streamed else Programs)(
            self.mesh, dataclasses.replace(self.hyper, seeds=None), self.num_words,
            self.partition, self.int32_rows, self.hosts_exchange, **streamed)

    @property
    def hosts_exchange(self) -> str:
        """What crosses between the hosts of the two-axis mesh ("counts" on one axis):
        plan.hosts_exchange for this placement's word shares and K."""
        if self.partition != "hybrid":
            return "counts"
        return hosts_exchange(self.hosts_exchange_setting, self.mesh.shape[HOSTS],
                              self.word_shares.word.shape[1],
                              model_rows(self.num_words, self.num_devices, "hybrid",
                                         self.mesh.shape[HOSTS]),
                              self.int32_rows, self.hyper,
                              self._hosts_bytes_per_second
                              if self.hosts_exchange_setting == "auto" else None)

    @functools.cached_property
    def _hosts_bytes_per_second(self) -> float:
        """The hosts axis's bandwidth, measured on this placement's mesh (link_speed), which
        the "auto" hosts exchange weighs bytes with."""
        platform = self.mesh.devices.flat[0].platform
        return link_speed.axis_bytes_per_second(
            self.mesh, HOSTS, link_speed.PROBE_BYTES.get(platform, link_speed.PROBE_BYTES["cpu"]))

    @functools.cached_property
    def program_shares(self) -> WordShares | None:
        """The programs' shares argument of resident slots: by word the WordShares (each
        device's word share, the owners of its chunk's doc-major positions, its PeerShares
        where the hosts exchange topics), None by document."""
        if self.word_shares is None:
            return None
        programs = self._unseeded_programs
        return WordShares(self.word_shares,
                          programs.doc_major_owners(self.slots, self.word_shares),
                          self._peer_shares if programs.exchanges_topics else None)

    @functools.cached_property
    def _peer_shares(self) -> PeerShares:
        """Each device's PeerShares: the word rows and real tokens of its word share on the
        other hosts, gathered once over the hosts axis."""
        hosts = self.mesh.shape[HOSTS]

        def body(word, num_tokens):
            host = jax.lax.axis_index(HOSTS)
            every = [jax.lax.all_gather(array[0], HOSTS) for array in (word, num_tokens)]
            others = (host + 1 + jnp.arange(hosts - 1)) % hosts
            return PeerShares(*(array[others][None] for array in every))

        spec = by_device(self.mesh)
        gather = compilation.jit(jax.shard_map(body, mesh=self.mesh, in_specs=(spec, spec),
                                               out_specs=spec, check_vma=False))
        return gather(self.word_shares.word, self.word_shares.num_tokens)

    @property
    def model_rows(self) -> int:
        """Rows of B-hat on each device (mesh.model_rows)."""
        return self._unseeded_programs.model_rows

    @property
    def sparse_copies(self) -> int:
        """The sparse model's parts: one a device by word, one whole model by document."""
        return 1 if self._unseeded_programs.whole_sparse_model else self.num_devices

    @property
    def first_float16_row(self) -> int:
        """The first row of a device's counts that crosses the documents axis as float16
        (Programs.first_float16_row)."""
        return self._unseeded_programs.first_float16_row

    @property
    def row_parts(self) -> int:
        """The parts a word share's rows of B are split into over the hosts
        (Programs.row_parts)."""
        return self._unseeded_programs.row_parts

    @property
    def word_parts(self) -> int:
        """Devices of the words axis (the shares of the vocabulary; 1 by document)."""
        return self._unseeded_programs.size(self._unseeded_programs.axes.words)

    @property
    def num_devices(self) -> int:
        return self.mesh.size

    @property
    def num_hosts(self) -> int:
        """Devices of the hosts axis of the two-axis mesh (1 on a one-axis mesh)."""
        return self.mesh.shape.get(HOSTS, 1)

    @property
    def num_slots(self) -> int:
        return len(self.slots)

    @property
    def num_chunks(self) -> int:
        return len(self.chunk_docs)

    @property
    def padded_words(self) -> int:
        """V padded to equal shares of the mesh: the rows of the model's global arrays."""
        return self.programs.padded_words

    @property
    def streamed(self) -> bool:
        return isinstance(self.slots, (streaming.HostChunks, chunk_store.StoredChunks))

    @property
    def streamed_tokens(self) -> int:
        """Streamed: the padded tokens of a device's slots, by word of its word shares
        (Programs' streamed_tokens); else 0."""
        if not self.streamed:
            return 0
        return (self.slots if self.word_shares is None
                else self.word_shares).padded_tokens * self.num_slots

    @property
    def sparse_capacity(self) -> int:
        """Entries of a device's sparse rows of B: the tokens it counts them from (by word,
        its share's, over its slots when streamed; streamed by document, every device's)."""
        if self.streamed:
            return self.streamed_tokens * (self.num_devices if self.sparse_copies == 1 else 1)
        return self.word_shares.word.shape[1]

    @functools.cached_property
    def stream_source(self) -> streaming.HostChunks | chunk_store.StoredChunks:
        """What streams through the devices: the slots, or by word each slot's chunks with
        its word shares, (chunk, share) (the same pinned arrays and counters)."""
        if self.word_shares is None:
            return self.slots
        return streaming.HostChunks(tuple(zip(self.slots, self.word_shares)),
                                    self.slots.sharding, self.slots.prefetch,
                                    self.slots.counters)

    @property
    def stored(self) -> bool:
        """Whether the chunks stream from a chunk store on disk."""
        return isinstance(self.slots, chunk_store.StoredChunks)

    def with_hyper(self, hyper: Hyperparams) -> "Placement":
        """The same chunks for other settings (another K or backend)."""
        return dataclasses.replace(self, hyper=hyper)

    def sharding(self, spec: P | None = None, memory_kind: str | None = None) -> NamedSharding:
        """The sharding of spec on the mesh (None: by device)."""
        return NamedSharding(self.mesh, by_device(self.mesh) if spec is None else spec,
                             memory_kind=memory_kind)

    def replicated(self, value) -> jax.Array:
        """A host value (the same on every process) as an array on every device."""
        value = np.asarray(value)
        return jax.make_array_from_callback(value.shape, self.sharding(P()), lambda _: value)

    # -- running (execution.compiled) --

    def init(self, seed: int) -> TrainState:
        """The state after random initialisation (esca.init over the mesh)."""
        return compiled.init(self, seed)

    def compile(self, state: TrainState) -> compiled.CompiledStep:
        """The iteration for states like `state`, compiled ahead of time."""
        return compiled.CompiledStep(self, state)

    def compile_alpha_update(self, state: TrainState,
                             doc_lengths) -> compiled.CompiledAlphaUpdate:
        """The update of alpha for states like `state` from a corpus of these document
        lengths, compiled ahead of time."""
        return compiled.CompiledAlphaUpdate(self, state, doc_lengths)

    # -- host views of a state --

    def chunk_states(self, state: TrainState) -> dict[int, ChunkState]:
        """This process's chunks' states on the host, by layout chunk index."""
        return self.by_chunk(state.chunks)

    def own_chunks(self) -> list[int]:
        """Layout chunk indices of this process's devices' chunks."""
        return [device * self.num_slots + slot for device in own_devices(self.mesh)
                for slot in range(self.num_slots)]

    def host_chunks(self) -> dict[int, Chunk]:
        """This process's chunks on the host, by layout chunk index."""
        return self.by_chunk(tuple(self.slots))

    def by_chunk(self, slot_trees) -> dict:
        """This process's parts of by-device pytrees by slot, on the host by layout chunk."""
        found = {}
        for slot, tree in enumerate(slot_trees):
            leaves, treedef = jax.tree.flatten(tree)
            by_device = {}
            for leaf_index, leaf in enumerate(leaves):
                if isinstance(leaf, np.ndarray):  # [devices, ...] in a chunk store
                    for device in own_devices(self.mesh):
                        by_device.setdefault(device, [None] * len(leaves))[leaf_index] = \
                            leaf[device]
                    continue
                for shard in leaf.addressable_shards:
                    device = shard.index[0].start or 0
                    by_device.setdefault(device, [None] * len(leaves))[leaf_index] = \
                        np.asarray(shard.data)[0]
            for device, device_leaves in by_device.items():
                found[device * self.num_slots + slot] = jax.tree.unflatten(treedef,
                                                                           device_leaves)
        return found

    def place_chunk_states(self, chunk_states: dict[int, ChunkState]) -> tuple:
        """Slot states on the mesh (or in the chunk store) from host states by layout chunk
        index (this process's)."""
        if self.stored:
            devices = range(self.num_devices)
            return self.slots.write_states(
                jax.tree.map(lambda *parts: np.stack(parts),
                             *(chunk_states[device * self.num_slots + slot] for device in devices))
                for slot in range(self.num_slots))
        kind = "pinned_host" if self.streamed else None
        return tuple(by_device_array(
            {device: chunk_states[device * self.num_slots + slot]
             for device in own_devices(self.mesh)}, self.sharding(memory_kind=kind))
            for slot in range(self.num_slots))

    def word_topic(self, state: TrainState) -> np.ndarray:
        """B [V, K_pad] on the host, rows by word id (every process takes part; a sparse
        model made dense)."""
        return model_placement.word_topic(self, state)

    def sparse_word_topic(self, state: TrainState) -> SparseWordTopic:
        """B's nonzeros of the real topics on the host, rows by word id (every process takes
        part): of a sparse model's rows, or of dense B."""
        return model_placement.sparse_word_topic(self, state)

    def alpha(self, state: TrainState) -> np.ndarray:
        """The state's alpha of the real topics on the host (float32 [K])."""
        return np.asarray(state.model.alpha.addressable_data(0))[:self.hyper.num_topics]

    def model_from_word_topic(self, word_topic, alpha: np.ndarray) -> Model:
        """The model of host counts B (dense [V, K_pad], or a SparseWordTopic) and prior
        alpha [K_pad]: B's rows spread over the mesh."""
        return model_placement.model_from_word_topic(self, word_topic, alpha)

    def topic_word(self, state: TrainState) -> jax.Array:
        """float32 B-hat [K, V] of the state's counts, whole on every device (for scoring)."""
        return model_placement.topic_word(self, state)

    def chunk_topics(self, state: TrainState) -> dict[int, np.ndarray]:
        """This process's chunks' topics in corpus order on the host, by layout chunk index
        (topic_placement.chunk_topics)."""
        return topic_placement.chunk_topics(self, state)

    def corpus_order_topics(self, state: TrainState) -> np.ndarray:
        """Every token's topic in corpus order (one process: all of them)."""
        topics = self.chunk_topics(state)
        return np.concatenate([topics[index] for index in sorted(topics)])

    def place_topics(self, corpus_topics) -> tuple:
        """Slot states of the topics in corpus order that corpus_topics(first token, tokens)
        gives (topic_placement.place_topics)."""
        return topic_placement.place_topics(self, corpus_topics)

    def state_shapes(self) -> ChunkState:
        """Shapes of a device's chunk state: z (word-major: of its chunk, or by word of its
        share), A's pairs and nonzeros of its chunk (by word of every chunk of its words
        group)."""
        chunk = self.slots[0]
        if self.word_shares is None:
            tokens = chunk.word.shape[1]
        else:
            tokens = (self.word_shares[0] if self.streamed else self.word_shares).word.shape[1]
        parts = 1 if self.streamed else self.word_parts  # streamed: its own chunk's A
        return ChunkState((tokens,), (parts * chunk.word.shape[1],),
                          (parts * (chunk.doc_start.shape[1] - 1),))


def place(corpus: Corpus, hyper: Hyperparams, *args, **settings) -> Placement:
    """The corpus laid out on a mesh as execution.plan.plan(corpus, hyper, *args, **settings)
    plans it (placed)."""
    return placed(corpus, hyper, plan(corpus, hyper, *args, **settings))


def placed(corpus: Corpus, hyper: Hyperparams, run_plan: Plan) -> Placement:
    """The corpus laid out on the plan's mesh: the layout built (this process's chunks) and
    put on the devices, in pinned host memory or in a chunk store, as the plan says (the
    model's format and A's pairs too)."""
    hyper = dataclasses.replace(hyper, model_format=run_plan.model_format,
                                wide_pairs=run_plan.wide_pairs)
    if not run_plan.stored:
        return _in_memory(corpus, hyper, run_plan)
    mesh = run_plan.mesh
    layout_plan = plan_layout(corpus, run_plan.chunk_tokens, mesh.size)
    room = run_plan.host_budget - memory.anonymous_host_memory()
    workers = max(1, min(os.cpu_count() or 1, room // (layout_plan.padded_tokens
                                                       * chunk_store.BUILD_BYTES_PER_TOKEN)))
    slots = chunk_store.StoredChunks(corpus, layout_plan, hyper, run_plan.store_directory,
                                     NamedSharding(mesh, by_device(mesh)), run_plan.prefetch,
                                     workers, run_plan.layout_on_devices)
    return Placement(mesh, slots, layout_plan.chunk_docs,
                     _chunking(corpus, layout_plan.chunk_docs), corpus.num_words, hyper)


def _chunking(corpus: Corpus, chunk_docs) -> tuple[tuple[int, int], ...]:
    """Placement.chunking: [first token id, tokens] of the chunks of documents chunk_docs."""
    offsets = np.asarray(corpus.doc_offsets, np.int64)
    return tuple((int(offsets[first]), int(offsets[last] - offsets[first]))
                 for first, last in chunk_docs)


def _in_memory(corpus: Corpus, hyper: Hyperparams, run_plan: Plan) -> Placement:
    """The layout built (this process's chunks) and put on the mesh, resident or in pinned
    host memory: by the devices (_built_on_devices) where the plan says so, else by the host
    (layout_cache.cached_layout) and copied to them."""
    mesh, streamed = run_plan.mesh, run_plan.streamed
    size = mesh.size
    own = own_devices(mesh)
    chunk_tokens = run_plan.chunk_tokens or -(-corpus.num_tokens // size)
    sharding = NamedSharding(mesh, by_device(mesh),
                             memory_kind="pinned_host" if streamed else None)
    slots = None
    if run_plan.layout_on_devices:
        layout = plan_layout(corpus, chunk_tokens, size)
        slots = _built_on_devices(corpus, layout, mesh, streamed)
    if slots is None:
        layout = cached_layout(corpus, chunk_tokens, size, parts=own)
        num_slots = len(layout.chunks) // size
        with timing.phase("transfer"):
            slots = tuple(by_device_array({device: layout.chunks[device * num_slots + slot]
                                           for device in own}, sharding)
                          for slot in range(num_slots))
    if streamed:
        slots = streaming.HostChunks(slots, NamedSharding(mesh, by_device(mesh)),
                                     run_plan.prefetch)
    chunking = _chunking(corpus, layout.chunk_docs)
    if run_plan.partition == "documents":
        return Placement(mesh, slots, layout.chunk_docs, chunking, corpus.num_words, hyper)
    parts = mesh.shape.get(GPUS, size)  # devices of the words axis: a group's shares
    counts = corpus.word_counts()
    order = share_order(counts, layout.word_order, parts)
    num_slots = len(layout.chunk_docs) // size
    largest = largest_word_share(corpus, layout, parts, {device // parts for device in own},
                                 order, num_slots)
    share_tokens = bucket_size(processes.largest(largest))

    def slot_shares(slot: int) -> Chunk:
        return by_device_array(word_shares(corpus, layout, parts, own, share_tokens, order,
                                           slot, num_slots), sharding)

    with timing.phase("transfer"):
        shares = tuple(on_threads(slot_shares, range(num_slots),
                                  word_share_slots_at_once(num_slots, len(own))))
    shares = (streaming.HostChunks(shares, NamedSharding(mesh, by_device(mesh)),
                                   run_plan.prefetch) if streamed else shares[0])
    return Placement(mesh, slots, layout.chunk_docs, chunking, corpus.num_words, hyper,
                     shares, order, _int32_rows(counts, order, mesh),
                     hosts_exchange_setting=run_plan.hosts_exchange)


def _int32_rows(word_counts: np.ndarray, order: np.ndarray, mesh) -> int:
    """Programs.int32_rows of the two-axis mesh (0 on one axis): the most rows of one word
    share holding words of more than FLOAT16_EXACT tokens (a share's rows fall in frequency:
    they are its first), rounded up to a multiple of the hosts; order: the words in share
    order (layout.share_order)."""
    if HOSTS not in mesh.axis_names:
        return 0
    hosts, gpus = mesh.shape[HOSTS], mesh.shape[GPUS]
    frequent = np.flatnonzero(word_counts[order] > FLOAT16_EXACT)
    most = int(np.bincount(frequent % gpus, minlength=gpus).max(initial=0))
    rows = model_rows(len(order), hosts * gpus, "hybrid", hosts)
    return min(-(-most // hosts) * hosts, rows)


@timing.in_phase("layout")
def _built_on_devices(corpus: Corpus, layout: LayoutPlan, mesh: Mesh,
                      streamed: bool) -> tuple[Chunk, ...] | None:
    """The slots of a layout plan, each device building its chunks from their word ids
    (layout_device.slot_builder; the same arrays as the host's builder), then moved to
    pinned host memory when `streamed`.  The host copies only the word ids and document
    lengths (4 bytes a token) and holds no chunk.  Two slots are built at a time, so a
    device holds at most two builds' inputs and temporaries beside the slots it keeps.
    None, with a warning, when a device runs out of memory (the host builds them then)."""
    num_slots = len(layout.chunk_docs) // mesh.size
    sharding = NamedSharding(mesh, by_device(mesh))
    build = layout_device.slot_builder(sharding)
    word_rank = jax.device_put(layout.word_rank, NamedSharding(mesh, P()))
    own = own_devices(mesh)
    slots: list[Chunk] = []

    def inputs(slot: int, device: int) -> layout_device.ChunkInputs:
        return layout_device.chunk_inputs(corpus, *layout.chunk_docs[device * num_slots + slot],
                                          layout.padded_tokens, layout.padded_docs)

    try:
        for slot in range(num_slots):
            # each device's word ids copied on a thread of its own (np.copyto releases the GIL)
            chunk = build(by_device_array(dict(zip(own, on_threads(
                functools.partial(inputs, slot), own, len(own)))), sharding), word_rank)
            if streamed:
                chunk = jax.device_put(chunk, sharding.with_memory_kind("pinned_host"))
            if slot >= 1:
                jax.block_until_ready(slots[-1])
            slots.append(chunk)
        return tuple(jax.block_until_ready(slots))
    except jax.errors.JaxRuntimeError as error:
        if "RESOURCE_EXHAUSTED" not in str(error):
            raise
        warnings.warn(f"building the layout on the host: the devices ran out of memory "
                      f"({str(error).splitlines()[0]})", stacklevel=3)
        return None
