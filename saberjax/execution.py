"""Where and how ESCA runs: the mesh, the chunks' placement, the compiled iteration, streaming
dispatch and the device-memory plan.  Every sharding decision of saberjax lives in this file.

Data parallel by document over one mesh axis, "data", spanning every device of every process::

    corpus documents   [ device 0's share | device 1's share | ... ]   equal token shares
    slot j             chunk j of every device: one Chunk whose arrays carry a leading device
                       axis sharded over "data" (equal shapes on every device, padded)

One iteration is one jitted `shard_map` program.  Every device runs esca.chunk_step over its
own chunks, adding their tokens into its partial counts B_d [V_pad, K_pad], then::

    rows   = psum_scatter(B_d)          each device gets the summed rows of V_pad / N words
    totals = psum(column sums of rows)  K_pad integers
    B-hat and trees of its rows         esca.model_from_totals (the backend's kernels)
    all_gather(B-hat, trees, totals)    every device samples with the whole B-hat

so B (Model.word_topic) stays sharded by word rows and B-hat and the trees are replicated:
the reduction moves B once (reduce-scatter, 4 bytes a cell) and B-hat once (all-gather,
2 bytes a cell), and the B-hat pass runs on 1/N of the rows on each device.  V is padded to a
multiple of N (rows of no word).  Counts are integers and B-hat is computed row by row from
exact totals, and every random draw is keyed by (seed, iteration, global token id), so the
model is bit-identical on any number of devices or processes.  With one device the program
has no collectives and is esca.step's computation.

Streaming: when a device's share does not fit its memory, slots stay in pinned host memory
(streaming.HostChunks) and flow through the devices one slot program at a time, each device
streaming its own chunks; the reduction then runs as a program of its own.  When the chunks
and their states do not fit the host memory budget either, they stream from a chunk store on
local disk (chunk_store.StoredChunks), built without the whole layout in memory.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from saberjax import chunk_store, esca, prior, streaming, timing
from saberjax.background import in_background
from saberjax.mstep import float32_bhat
from saberjax.backend import backend_ops
from saberjax.config import DEFAULT_PREFETCH, HOST_MEMORY_FRACTION, PARTITIONS, Hyperparams
from saberjax.corpus import Corpus
from saberjax.layout import Chunk, build_layout, plan_layout, word_shares
from saberjax.layout_cache import cached_layout
from saberjax.state import BHAT_DTYPE, ChunkState, Model, TrainState

AXIS = "data"
# Device memory left free for XLA and the allocator when the budget comes from the device.
HEADROOM_FRACTION = 0.1
# Tokens of the two probe chunks whose compiled steps measure device bytes per token.
PROBE_TOKENS = (1 << 15, 1 << 16)
# Device bytes per token no chunk step exceeds (measured: 87 for the XLA path on a CPU,
# 61 for the Pallas path on an H200).
BYTES_PER_TOKEN_BOUND = 512
# Device bytes per corpus token that partition by word adds on every device: every
# document's A (4) and the doc-major topics of the E-step (2).
WORD_PARTITION_BYTES_PER_TOKEN = 6
# Partition by word when B has more cells than this per corpus token.  An iteration moves
# 6 bytes per cell of B by document (reduce-scatter of int32 B, all-gather of bfloat16
# B-hat) and about 6 bytes per token by word, whose E-step reads A rows of every document
# (a few % slower); measured on two H200s (BUILD_NOTES.md): NYTimes shape at K = 1,000
# (1.05 cells a token) faster by document, wiki25k at K = 1,024 (1.8) and NYTimes at
# K = 10,000 (10.3) faster by word.
WORD_PARTITION_CELLS_PER_TOKEN = 1.5
# Shard specs: a slot's arrays and states by device; the model's B by word rows, the rest whole.
BY_DEVICE = P(AXIS)
MODEL_SPEC = Model(word_topic=P(AXIS), topic_totals=P(), bhat=P(), tree=P(), tree_total=P(),
                   alpha=P(), bhat_denominator=P())
# Partition by word: every row-wise array of the model stays with its device's words.
WORD_MODEL_SPEC = Model(word_topic=P(AXIS), topic_totals=P(), bhat=P(AXIS), tree=P(AXIS),
                        tree_total=P(AXIS), alpha=P(), bhat_denominator=P())
# Host bytes per token of streaming from host memory: the chunks and states pinned, and the
# layout they are copied from while they are placed (measured peak; BUILD_NOTES.md, streaming).
IN_MEMORY_HOST_BYTES_PER_TOKEN = 42


def start_devices() -> concurrent.futures.Future:
    """Start the devices in a thread of their own, while the caller reads its corpus: the
    runtime's initialisation and its first allocation on a GPU (where XLA reserves its memory
    pool) take about as long as loading a cached corpus, and need nothing from it.  The
    future's result is the local devices.  Call it after processes.initialize (jax.distributed
    must come first)."""
    def start():
        devices = jax.local_devices()
        jax.device_put(np.zeros((), np.int32), devices[0]).block_until_ready()
        return devices

    return in_background(start, name="saberjax-start-devices")


def make_mesh(num_devices: int = 0) -> Mesh:
    """A one-axis mesh of the first num_devices devices of every process (0: all of them)."""
    devices = jax.devices()
    if num_devices < 0 or num_devices > len(devices):
        raise ValueError(f"num_devices={num_devices}, but there are {len(devices)} "
                         f"{jax.default_backend()} device(s) in {jax.process_count()} "
                         f"process(es); use 0 for all of them")
    if jax.process_count() > 1 and num_devices not in (0, len(devices)):
        raise ValueError(f"num_devices={num_devices}: with {jax.process_count()} processes the "
                         f"mesh takes every device ({len(devices)}); use 0")
    return Mesh(np.array(devices[: num_devices or None]), (AXIS,))


def _local(tree):
    """A device's part of by-device arrays inside shard_map: the leading axis (size 1) dropped."""
    return jax.tree.map(lambda x: x[0], tree)


def _stacked(tree):
    """A device's arrays as its part of by-device arrays (a leading axis of size 1)."""
    return jax.tree.map(lambda x: x[None], tree)


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
    # partition by word: each device's share of the vocabulary's tokens (layout.word_shares,
    # by device) and the words by rank (rank r is device r % N's row r // N); else None
    word_shares: Chunk | None = None
    word_order: np.ndarray | None = None

    @property
    def partition(self) -> str:
        return "documents" if self.word_shares is None else "words"

    @property
    def model_spec(self) -> Model:
        return MODEL_SPEC if self.word_shares is None else WORD_MODEL_SPEC

    @property
    def model_rows(self) -> int:
        """Rows of the model on each device (model_rows)."""
        return model_rows(self.num_words, self.num_devices, self.partition)

    @property
    def num_devices(self) -> int:
        return self.mesh.size

    @property
    def num_slots(self) -> int:
        return len(self.slots)

    @property
    def num_chunks(self) -> int:
        return len(self.chunk_docs)

    @property
    def padded_words(self) -> int:
        """V rounded up to a multiple of the device count: the rows of the model's global
        arrays, N equal shares."""
        return model_rows(self.num_words, self.num_devices, "documents")

    @property
    def streamed(self) -> bool:
        return isinstance(self.slots, (streaming.HostChunks, chunk_store.StoredChunks))

    @property
    def stored(self) -> bool:
        """Whether the chunks stream from a chunk store on disk."""
        return isinstance(self.slots, chunk_store.StoredChunks)

    def with_hyper(self, hyper: Hyperparams) -> "Placement":
        """The same chunks for other settings (another K or backend)."""
        return dataclasses.replace(self, hyper=hyper)

    def sharding(self, spec: P = BY_DEVICE, memory_kind: str | None = None) -> NamedSharding:
        return NamedSharding(self.mesh, spec, memory_kind=memory_kind)

    # -- the per-device programs (inside shard_map) --

    def _shard_map(self, body, in_specs, out_specs):
        """body on every device of the mesh (check_vma off: Pallas calls declare no vma)."""
        return jax.shard_map(body, mesh=self.mesh, in_specs=in_specs, out_specs=out_specs,
                             check_vma=False)

    def _zero_counts(self):
        return jnp.zeros((self.model_rows, self.hyper.padded_topics), jnp.int32)

    def _summed_totals(self, rows):
        """The topic totals of every device's rows of B, summed over the mesh."""
        totals = backend_ops(self.hyper.backend).topic_totals(rows)
        return lax.psum(totals, AXIS) if self.num_devices > 1 else totals

    def _model_of_rows(self, rows, alpha, totals=None) -> Model:
        """The model of this device's rows of B and prior alpha: totals summed over the mesh
        (None: _summed_totals), B-hat and trees of the rows, then B-hat and the trees gathered
        whole on every device."""
        totals = self._summed_totals(rows) if totals is None else totals
        local = esca.model_from_totals(rows, totals, alpha, self.hyper, self.num_words)
        if self.num_devices == 1:
            return local
        gather = functools.partial(lax.all_gather, axis_name=AXIS, axis=0, tiled=True)
        return local._replace(bhat=gather(local.bhat), tree=tuple(map(gather, local.tree)),
                              tree_total=gather(local.tree_total))

    def _model_of_partial_counts(self, counts, alpha) -> Model:
        """The model of every device's partial counts B_d (reduce-scattered by word rows) and
        prior alpha."""
        if self.num_devices > 1:
            counts = lax.psum_scatter(counts, AXIS, scatter_dimension=0, tiled=True)
        return self._model_of_rows(counts, alpha)

    def _over_slots(self, run_chunk, slots, slot_states, counts):
        """run_chunk(chunk, state, counts) over this device's chunks, slot by slot."""
        new_states = []
        for index, chunk in enumerate(slots):
            state = None if slot_states is None else _local(slot_states[index])
            new_state, counts = run_chunk(_local(chunk), state, counts)
            new_states.append(_stacked(new_state))
        return tuple(new_states), counts

    def _init_chunk(self, seed):
        return lambda chunk, _, counts: esca.init_chunk(chunk, seed, counts, self.hyper)

    def _chunk_step(self, model, key):
        def run(chunk, state, counts):
            new_state, counts = esca.chunk_step(chunk, esca.whole_state(chunk, state, self.hyper),
                                                model, key, counts, self.hyper)
            if state.a_pairs is None:  # z alone (a chunk store's state) gets z alone back
                new_state = ChunkState(new_state.topics, None, None)
            return new_state, counts
        return run

    @functools.cached_property
    def _init_program(self):
        """(slots, word shares, seed) -> (states, model)."""
        def by_document(slots, _, seed):
            states, counts = self._over_slots(self._init_chunk(seed), slots, None,
                                              self._zero_counts())
            return states, self._model_of_partial_counts(counts, self.hyper.initial_alpha())

        def by_word(slots, shares, seed):
            share = _local(shares)
            return self._word_finish(slots, share, self.hyper.initial_alpha(),
                                     *esca.initial_topics(share, seed, self.hyper,
                                                          self.num_devices
                                                          * slots[0].word.shape[1]))

        body = by_document if self.word_shares is None else by_word
        return jax.jit(self._shard_map(body, (BY_DEVICE, BY_DEVICE, P()),
                                       (BY_DEVICE, self.model_spec)))

    @functools.cached_property
    def _iteration_program(self):
        """(slots, word shares, states, model, key) -> (states, model)."""
        def by_document(slots, _, slot_states, model, key):
            states, counts = self._over_slots(self._chunk_step(model, key), slots, slot_states,
                                              self._zero_counts())
            return states, self._model_of_partial_counts(counts, model.alpha)

        def by_word(slots, shares, slot_states, model, key):
            share, state = _local(shares), _local(slot_states[0])
            if self.num_devices > 1:  # every document's A, for the tokens of this share
                gather = functools.partial(lax.all_gather, axis_name=AXIS, axis=0, tiled=True)
                state = state._replace(a_pairs=gather(state.a_pairs), a_nnz=gather(state.a_nnz))
            return self._word_finish(slots, share, model.alpha,
                                     *esca.sample(share, state, model, key, self.hyper))

        body = by_document if self.word_shares is None else by_word
        return jax.jit(self._shard_map(body, (BY_DEVICE,) * 3 + (self.model_spec, P()),
                                       (BY_DEVICE, self.model_spec)))

    def _word_finish(self, slots, share, alpha, topics, doc_major):
        """Partition by word, after the E-step of this device's share: its chunk's A rebuilt
        from the topics every device drew for the chunk's tokens, its words' B counted, and
        the model of its rows and prior alpha (totals summed over the mesh; B-hat is never
        gathered)."""
        if self.num_devices > 1:  # the segments of the other devices' chunks go to them
            parts = doc_major.reshape(self.num_devices, -1)
            doc_major = lax.all_to_all(parts, AXIS, 0, 0, tiled=True).sum(
                axis=0, dtype=doc_major.dtype)
        state = esca.chunk_state_from_topics(_local(slots[0]), topics, doc_major, self.hyper)
        counts = esca.count_word_topic(share, topics, self._zero_counts(), self.hyper)
        return (_stacked(state),), self._model_of_own_rows(counts, alpha)

    def _model_of_own_rows(self, rows, alpha, totals=None) -> Model:
        """Partition by word: the model of this device's rows of B and prior alpha, with the
        topic totals summed over the mesh (None: _summed_totals); B-hat and the trees stay
        with their rows."""
        totals = self._summed_totals(rows) if totals is None else totals
        return esca.model_from_totals(rows, totals, alpha, self.hyper, self.num_words)

    def _iteration_args(self, state: TrainState, key) -> tuple:
        return self.slots, self.word_shares, state.chunks, state.model, key

    @functools.cached_property
    def _slot_init_program(self):
        def body(chunk, seed, counts):
            states, counts = self._over_slots(self._init_chunk(seed), (chunk,), None, counts[0])
            return states[0], counts[None]
        return jax.jit(self._shard_map(body, (BY_DEVICE, P(), BY_DEVICE),
                                       (BY_DEVICE, BY_DEVICE)), donate_argnums=2)

    @functools.cached_property
    def _slot_step_program(self):
        def body(chunk, state, model, key, counts):
            states, counts = self._over_slots(self._chunk_step(model, key), (chunk,), (state,),
                                              counts[0])
            return states[0], counts[None]
        return jax.jit(self._shard_map(body, (BY_DEVICE, BY_DEVICE, MODEL_SPEC, P(), BY_DEVICE),
                                       (BY_DEVICE, BY_DEVICE)), donate_argnums=4)

    @functools.cached_property
    def reduce(self):
        """(partial counts [N, V_pad, K_pad] (donated), alpha) -> the model of their sum."""
        return jax.jit(self._shard_map(
            lambda counts, alpha: self._model_of_partial_counts(counts[0], alpha),
            (BY_DEVICE, P()), MODEL_SPEC), donate_argnums=0)

    @functools.cached_property
    def _model_program(self):
        """(rows of B, alpha) -> the model (by word, each device keeps its rows' B-hat)."""
        body = self._model_of_rows if self.word_shares is None else self._model_of_own_rows
        return jax.jit(self._shard_map(body, (P(AXIS), P()), self.model_spec))

    @functools.cached_property
    def _zero_histograms(self):
        """width -> zero count histograms [N, K_pad, width], one per device (prior)."""
        return jax.jit(lambda width: jnp.zeros((self.num_devices, self.hyper.padded_topics,
                                                width), jnp.int32),
                       static_argnums=0, out_shardings=self.sharding())

    @functools.cached_property
    def _count_histogram_program(self):
        """(slot's chunk, its state, histograms) -> each device's histogram plus its chunk's
        (topic, count) pairs (prior.count_histogram; histograms donated).  The chunk is used
        (and may be None otherwise) only for a state of z alone, whose A it rebuilds."""
        def body(chunk, chunk_state, histogram):
            chunk_state = esca.whole_state(_local(chunk), _local(chunk_state), self.hyper)
            return prior.count_histogram(chunk_state.a_pairs, histogram[0])[None]
        return jax.jit(self._shard_map(body, (BY_DEVICE, BY_DEVICE, BY_DEVICE), BY_DEVICE),
                       donate_argnums=2)

    @functools.cached_property
    def _learned_alpha_program(self):
        """(histograms by device, model, length histogram) -> the model with alpha learned
        from the histograms' sum (prior.fixed_point) and B-hat's trees rebuilt for it (B and
        its totals as they are)."""
        rebuild = self._model_of_rows if self.word_shares is None else self._model_of_own_rows

        def body(histogram, model, lengths):
            histogram = histogram[0]
            if self.num_devices > 1:
                histogram = lax.psum(histogram, AXIS)
            alpha = prior.fixed_point(model.alpha, histogram, lengths, self.hyper.num_topics)
            return rebuild(model.word_topic, alpha, model.topic_totals)
        return jax.jit(self._shard_map(body, (BY_DEVICE, self.model_spec, P()),
                                       self.model_spec))

    @functools.cached_property
    def zero_partial_counts(self):
        """Zero partial counts for streaming: [N, V_pad, K_pad], one B_d per device."""
        return jax.jit(lambda: jnp.zeros((self.num_devices, self.padded_words,
                                          self.hyper.padded_topics), jnp.int32),
                       out_shardings=self.sharding())

    # -- running --

    def stream(self, run_slot, chunk_states, alpha, zero_counts=None, reduce=None):
        """(states, model) of run_slot(chunk, state, counts) over the streamed slots, the
        partial counts made by zero_counts() and reduced with prior alpha by
        reduce(counts, alpha) (None: the jitted zero_partial_counts and reduce; CompiledStep
        passes their compiled executables)."""
        states, counts = streaming.stream_over_chunks(
            self.slots, chunk_states, (zero_counts or self.zero_partial_counts)(), run_slot)
        return states, (reduce or self.reduce)(counts, alpha)

    def replicated(self, value) -> jax.Array:
        """A host value (the same on every process) as an array on every device."""
        value = np.asarray(value)
        return jax.make_array_from_callback(value.shape, self.sharding(P()), lambda _: value)

    def init(self, seed: int) -> TrainState:
        """The state after random initialisation (esca.init over the mesh)."""
        seed = self.replicated(np.uint32(seed))
        if self.streamed:
            states, model = self.stream(
                lambda chunk, _, counts: self._slot_init_program(chunk, seed, counts), None,
                self.replicated(self.hyper.initial_alpha()))
        else:
            states, model = self._init_program(self.slots, self.word_shares, seed)
        return TrainState(states, model, self.replicated(np.int32(0)), seed)

    def compile(self, state: TrainState) -> "CompiledStep":
        """The iteration for states like `state`, compiled ahead of time."""
        return CompiledStep(self, state)

    def compile_alpha_update(self, state: TrainState, doc_lengths) -> "CompiledAlphaUpdate":
        """The update of alpha for states like `state` from a corpus of these document
        lengths, compiled ahead of time."""
        return CompiledAlphaUpdate(self, state, doc_lengths)

    # -- host views of a state --

    def chunk_states(self, state: TrainState) -> dict[int, ChunkState]:
        """This process's chunks' states on the host, by layout chunk index."""
        return self._by_chunk(state.chunks)

    def own_chunks(self) -> list[int]:
        """Layout chunk indices of this process's devices' chunks."""
        return [device * self.num_slots + slot for device in _own_devices(self.mesh)
                for slot in range(self.num_slots)]

    def host_chunks(self) -> dict[int, Chunk]:
        """This process's chunks on the host, by layout chunk index."""
        return self._by_chunk(tuple(self.slots))

    def _by_chunk(self, slot_trees) -> dict:
        found = {}
        for slot, tree in enumerate(slot_trees):
            leaves, treedef = jax.tree.flatten(tree)
            by_device = {}
            for leaf_index, leaf in enumerate(leaves):
                if isinstance(leaf, np.ndarray):  # [devices, ...] in a chunk store
                    for device in _own_devices(self.mesh):
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
        return tuple(_by_device_array(
            {device: chunk_states[device * self.num_slots + slot]
             for device in _own_devices(self.mesh)}, self.sharding(memory_kind=kind))
            for slot in range(self.num_slots))

    def _row_of_word(self) -> np.ndarray:
        """Row of the model's global arrays holding each word (by id): the word itself by
        document; by word, device r % N's row r // N for the word of rank r."""
        if self.word_shares is None:
            return np.arange(self.num_words)
        rank = np.empty(self.num_words, np.int64)
        rank[self.word_order] = np.arange(self.num_words)
        return rank % self.num_devices * self.model_rows + rank // self.num_devices

    def word_topic(self, state: TrainState) -> np.ndarray:
        """B [V, K_pad] on the host, rows by word id (every process takes part)."""
        return _to_host(state.model.word_topic)[self._row_of_word()]

    def alpha(self, state: TrainState) -> np.ndarray:
        """The state's alpha of the real topics on the host (float32 [K])."""
        return np.asarray(state.model.alpha.addressable_data(0))[:self.hyper.num_topics]

    def model_from_word_topic(self, word_topic: np.ndarray, alpha: np.ndarray) -> Model:
        """The model of host counts B [V, K_pad] and prior alpha [K_pad]: B's rows spread over
        the mesh."""
        rows = np.zeros((self.padded_words, word_topic.shape[1]), word_topic.dtype)
        rows[self._row_of_word()] = word_topic
        placed = jax.make_array_from_callback(rows.shape, self.sharding(P(AXIS)),
                                              lambda index: rows[index])
        return self._model_program(placed, self.replicated(np.asarray(alpha, np.float32)))

    def topic_word(self, state: TrainState) -> jax.Array:
        """float32 B-hat [K, V] of the state's counts, whole on every device (for scoring)."""
        return _topic_word(state.model.word_topic, state.model.topic_totals,
                           self.replicated(self._row_of_word()), self.hyper.num_topics,
                           self.hyper.beta, self.num_words, self.sharding(P()))

    def corpus_order_topics(self, state: TrainState) -> np.ndarray:
        """Every token's topic in corpus order (one process: all of them)."""
        chunks, states = self.host_chunks(), self.chunk_states(state)
        if self.word_shares is None:
            return esca.corpus_order_topics([chunks[i] for i in sorted(chunks)],
                                            [states[i] for i in sorted(chunks)])
        shares = self._by_chunk((self.word_shares,))
        padded_tokens = chunks[0].padded_tokens
        doc_major = np.zeros(self.num_chunks * padded_tokens + 1, np.int32)
        for device, share in shares.items():  # padding tokens land in the spare last slot
            positions = np.minimum(share.doc_major_pos, len(doc_major) - 1)
            doc_major[positions] = states[device].topics
        return np.concatenate([doc_major[index * padded_tokens:][:tokens]
                               for index, (_, tokens) in enumerate(self.chunking)])

    def state_shapes(self) -> ChunkState:
        """Shapes of a device's chunk state: z (word-major: of its chunk, or by word of its
        share), A's pairs and nonzeros of its chunk."""
        chunk = self.slots[0]
        tokens = (chunk.word if self.word_shares is None else self.word_shares.word).shape[1]
        return ChunkState((tokens,), (chunk.word.shape[1],), (chunk.doc_start.shape[1] - 1,))


@functools.partial(jax.jit, static_argnames=("num_topics", "beta", "num_words", "sharding"))
def _topic_word(word_topic, totals, row_of_word, num_topics: int, beta: float,
                num_words: int, sharding):
    """float32 B-hat [K, V] of B's rows row_of_word (by word id), laid out by `sharding`."""
    bhat = float32_bhat(word_topic[row_of_word], totals, num_topics, beta, num_words)
    return jax.lax.with_sharding_constraint(bhat[:, :num_topics].T, sharding)


def _own_devices(mesh: Mesh) -> list[int]:
    """Mesh positions of this process's devices."""
    return [index for index, device in enumerate(mesh.devices.flat)
            if device.process_index == jax.process_index()]


def _to_host(array: jax.Array) -> np.ndarray:
    """A global array's whole value on the host of every process."""
    if array.is_fully_addressable:
        return np.asarray(array)
    from jax.experimental import multihost_utils  # noqa: PLC0415

    return np.asarray(multihost_utils.process_allgather(array, tiled=True))


def _by_device_array(parts: dict[int, object], sharding: NamedSharding):
    """One pytree of by-device arrays from host pytrees by mesh position (this process's)."""
    example = next(iter(parts.values()))
    leaves, treedef = jax.tree.flatten(example)
    flat = {device: jax.tree.leaves(part) for device, part in parts.items()}
    size = sharding.mesh.size

    def leaf(index: int):
        shape = (size, *np.shape(leaves[index]))
        return jax.make_array_from_callback(
            shape, sharding, lambda slices: np.asarray(flat[slices[0].start or 0][index])[None])

    return jax.tree.unflatten(treedef, [leaf(index) for index in range(len(leaves))])


class CompiledStep:
    """The iteration of a Placement through executables compiled ahead of time.

    Calling it never compiles, so training and benchmark loops time iterations apart from
    compilation (`compile_seconds`).  Resident chunks: one executable per iteration.
    Streamed: one for a slot and one for the reduction.
    """

    def __init__(self, placement: Placement, state: TrainState):
        start = time.perf_counter()
        self.placement = placement
        # the key's shape and sharding (next_iteration's, as the state's iteration is laid
        # out): the programs compile without waiting for the state (still being computed)
        key = jax.eval_shape(esca.next_iteration, state.seed, state.iteration)[1]
        key = jax.ShapeDtypeStruct(key.shape, key.dtype, sharding=state.iteration.sharding)
        if placement.streamed:
            on_device = placement.sharding(memory_kind="device")
            chunk, chunk_state = jax.tree.map(
                lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=on_device),
                (placement.slots[0], state.chunks[0]))
            self._counts = placement.zero_partial_counts.lower().compile()
            counts = jax.eval_shape(self._counts)
            self._slot = placement._slot_step_program.lower(
                chunk, chunk_state, state.model, key, counts).compile()
            self._reduce = placement.reduce.lower(counts, state.model.alpha).compile()
            self.num_executables = 3
        else:
            self._iteration = placement._iteration_program.lower(
                *placement._iteration_args(state, key)).compile()
            self.num_executables = 1
        # next_iteration compiles on its first call: here, so that calling never compiles
        jax.block_until_ready(esca.next_iteration(state.seed, state.iteration))
        self.compile_seconds = time.perf_counter() - start

    def __call__(self, state: TrainState) -> TrainState:
        placement = self.placement
        iteration, key = esca.next_iteration(state.seed, state.iteration)
        if placement.streamed:
            states, model = placement.stream(
                lambda chunk, chunk_state, counts: self._slot(chunk, chunk_state, state.model,
                                                              key, counts),
                state.chunks, state.model.alpha, self._counts, self._reduce)
        else:
            states, model = self._iteration(*placement._iteration_args(state, key))
        return TrainState(states, model, iteration, state.seed)


class CompiledAlphaUpdate:
    """The learned prior's update (saberjax.prior) of a Placement's state through executables
    compiled ahead of time: each device counts the (topic, count) pairs of its chunks' A into
    a histogram (streamed chunks' A copied to it one slot at a time; a chunk store's slots put
    with their z, A rebuilt on the devices), then one program sums the histograms over the
    mesh, runs the fixed point and rebuilds B-hat and its trees for the new alpha.  Calling it
    never compiles (`compile_seconds`)."""

    def __init__(self, placement: Placement, state: TrainState, doc_lengths):
        start = time.perf_counter()
        self.placement = placement
        self._lengths = placement.replicated(prior.length_histogram(doc_lengths))
        width = prior.histogram_width(self._lengths.shape[0] - 1, placement.hyper.padded_topics)
        self._zeros = placement._zero_histograms.lower(width).compile()
        histogram = jax.eval_shape(self._zeros)
        self._on_devices = placement.sharding(memory_kind="device")
        chunk = placement.slots[0] if placement.stored else None
        chunk, chunk_state = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=self._on_devices),
            (chunk, _counted_part(state.chunks[0])))
        self._count = placement._count_histogram_program.lower(chunk, chunk_state,
                                                               histogram).compile()
        self._learn = placement._learned_alpha_program.lower(histogram, state.model,
                                                             self._lengths).compile()
        self.compile_seconds = time.perf_counter() - start

    def __call__(self, state: TrainState) -> TrainState:
        histogram, placement = self._zeros(), self.placement
        for slot, chunk_state in enumerate(state.chunks):
            chunk, counted = None, _counted_part(chunk_state)
            if placement.stored:
                chunk, counted = placement.slots.put(slot, state.chunks)
            elif placement.streamed:  # from pinned host memory
                counted = jax.device_put(counted, self._on_devices)
            histogram = self._count(chunk, counted, histogram)
        return state._replace(model=self._learn(histogram, state.model, self._lengths))


def _counted_part(chunk_state: ChunkState) -> ChunkState:
    """What the prior's histogram needs of a chunk's state: A's pairs, or z where the state
    is z alone."""
    if chunk_state.a_pairs is None:
        return chunk_state
    return ChunkState(None, chunk_state.a_pairs, None)


# -- the device-memory plan --

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
                      budget: int, device_bytes_per_token: float,
                      prefetch: int = DEFAULT_PREFETCH) -> int | None:
    """Tokens per chunk for one device's share of num_tokens tokens and a device budget: None
    when every chunk can stay on the device.

    Everything resident needs the model plus device_bytes_per_token for every token; otherwise
    the fewest chunks such that the model, `prefetch` chunks in flight and the one being
    worked on fit (the paper's rule: as few chunks as memory allows, for locality).
    """
    room = budget - model_bytes(num_words, padded_topics)
    if room <= 0:
        raise MemoryError(
            f"the model does not fit the device: K={num_topics} topics x V={num_words} words "
            f"need {model_bytes(num_words, padded_topics) / 1e9:.2f} GB for B, B-hat, the trees "
            f"and their update, but the device budget is {budget / 1e9:.2f} GB; use fewer "
            f"topics, a smaller vocabulary or a larger --device_memory_gb")
    if num_tokens * device_bytes_per_token <= room:
        return None
    chunk_tokens = int(room / (device_bytes_per_token * (prefetch + 1)))
    if chunk_tokens < 1024:
        raise MemoryError(f"a device budget of {budget / 1e9:.2f} GB leaves room for only "
                          f"{chunk_tokens} tokens per chunk next to the model; raise "
                          f"--device_memory_gb or lower K")
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


def host_model_bytes(num_words: int, padded_topics: int) -> int:
    """Host bytes of the trained model: the counts fetched from the devices and the model's
    topic-word matrix made from them (V x K_pad, 4 bytes each)."""
    return 2 * 4 * num_words * padded_topics


def anonymous_host_memory() -> int:
    """Bytes of this process's resident memory that are not file pages (RssAnon): what the
    run holds already (the runtime, the corpus when it is not memory-mapped)."""
    return _proc_bytes("/proc/self/status", "RssAnon") or 0


def _coarse(tokens: int) -> int:
    """tokens rounded down to four significant bits (less than 12.5% less), so that the few MB
    a process holds more or less from run to run give the same chunking, and the next run
    finds its chunk store instead of building it again."""
    drop = max(tokens.bit_length() - 4, 0)
    return tokens >> drop << drop


def plan_store_chunk_tokens(corpus: Corpus, hyper: Hyperparams, host_budget: int,
                            prefetch: int) -> int | None:
    """Tokens per chunk for streaming from a chunk store on disk under a host memory budget
    (bytes, of which the process holds anonymous_host_memory already): None when the corpus
    and its states fit the budget beside the model (streaming from host memory).  Chunks are
    small enough for chunk_store.BUILD_WORKERS builders (or as many as the cores) where the
    room allows, else for one.  The chunks of a store are gone when the model is fetched, so
    either fits the room on its own.
    ValueError, naming --host_memory_gb, when the room cannot hold the model or one chunk."""
    room = host_budget - anonymous_host_memory()
    model = host_model_bytes(corpus.num_words, hyper.padded_topics)
    if corpus.num_tokens * IN_MEMORY_HOST_BYTES_PER_TOKEN + model <= room:
        return None
    needed = max(int(corpus.doc_lengths().max(initial=0)), 1024)
    workers = min(os.cpu_count() or 1, chunk_store.BUILD_WORKERS)
    tokens = _coarse(chunk_store.host_chunk_tokens(max(room, 0), prefetch, workers))
    if tokens < needed:  # fewer builders, larger chunks
        tokens = _coarse(chunk_store.host_chunk_tokens(max(room, 0), prefetch))
    if tokens < needed or model > room:
        raise ValueError(
            f"--host_memory_gb={host_budget / 1e9:.3g} cannot hold one chunk and the model: "
            f"beside the {(host_budget - room) / 1e9:.2f} GB this process holds it leaves room "
            f"for chunks of {tokens:,} tokens (a chunk needs {needed:,}: 1,024 or the longest "
            f"document) and the model needs {model / 1e9:.2f} GB; raise --host_memory_gb")
    return tokens


def place(corpus: Corpus, hyper: Hyperparams, num_devices: int = 0,
          chunk_tokens: int | None = None, device_memory_gb: float | None = None,
          prefetch: int = DEFAULT_PREFETCH, stream: bool | None = None,
          partition: str = "auto", host_memory_gb: float | None = None,
          chunk_store_dir=None) -> Placement:
    """The corpus laid out on a mesh of num_devices devices (0: all), resident or streamed.

    Each device gets an equal share of the documents' tokens: one chunk (chunk_tokens: chunks
    of about that many tokens) when its share fits device_memory_gb (None: what the device
    has free, less headroom; on a CPU everything stays resident), else the fewest chunks that
    fit, streamed from pinned host memory.  stream: True or False overrides the plan's choice.
    Streamed chunks whose states do not fit host_memory_gb (None: HOST_MEMORY_FRACTION of
    the memory available) stream from a chunk store in chunk_store_dir (None:
    chunk_store.default_directory()), in chunks small enough for both budgets.
    partition: "documents" (each device samples its documents' tokens against the whole
    B-hat, which is reduced and gathered every iteration), "words" (each device samples its
    words' tokens against every document's A, which is gathered every iteration: no B moves,
    and each device holds only its words' rows of the model) or "auto": by word on several
    devices when every share stays resident in one chunk, else by document.  Each process
    builds only its own devices' chunks.  Errors: MemoryError when the model does not fit,
    ValueError for a partition that cannot hold the settings.
    """
    if partition not in PARTITIONS + ("auto",):
        raise ValueError(f"partition must be 'auto', {' or '.join(map(repr, PARTITIONS))}, "
                         f"got {partition!r}")
    mesh = make_mesh(num_devices)
    size = mesh.size
    budget = (int(device_memory_gb * 1e9) if device_memory_gb
              else free_device_memory(jax.local_devices()[0]))
    measured = functools.cache(lambda: device_bytes_per_token(corpus, hyper))

    def fits(by: str) -> bool:
        """Whether a resident placement by `by` fits the budget: the cheap bound, else the
        measured bytes per token (probe chunks compiled only then)."""
        return budget is None or any(
            resident_bytes(corpus, hyper, size, by, per_token()) <= budget
            for per_token in (lambda: BYTES_PER_TOKEN_BOUND, measured))

    if partition == "auto":
        by_word = (size > 1 and not stream and chunk_tokens is None and fits("words") and (
            corpus.num_words * hyper.padded_topics
            > WORD_PARTITION_CELLS_PER_TOKEN * corpus.num_tokens or not fits("documents")))
        partition = "words" if by_word else "documents"
    if partition == "words":
        if stream or chunk_tokens is not None:
            raise ValueError("partition 'words' keeps each device's share resident in one "
                             "chunk: leave out chunk_tokens and streaming, or partition by "
                             "documents")
    if stream is False or partition == "words":
        if not fits(partition):
            needed = resident_bytes(corpus, hyper, size, partition, measured())
            rows = model_rows(corpus.num_words, size, partition)
            model = model_bytes(rows, hyper.padded_topics)
            raise MemoryError(
                f"resident by {partition}, K={hyper.num_topics} over {size} device(s) needs "
                f"{needed / 1e9:.1f} GB a device (model {model / 1e9:.1f} GB), the budget is "
                f"{budget / 1e9:.1f} GB; use more devices, fewer topics, or let the corpus "
                f"stream (partition by documents)")
        return _placed(corpus, hyper, mesh, chunk_tokens, False, prefetch,
                       by_word=partition == "words")
    share = -(-corpus.num_tokens // size)
    padded_words = model_rows(corpus.num_words, size, "documents")
    planned = None
    if budget is not None and not fits("documents"):
        planned = plan_chunk_tokens(share, padded_words, hyper.num_topics, hyper.padded_topics,
                                    budget, measured(), prefetch)
    streamed = planned is not None if stream is None else stream
    chunk_tokens = chunk_tokens or (planned if streamed else None)
    host_budget = host_memory_budget(host_memory_gb)
    stored = streamed and plan_store_chunk_tokens(corpus, hyper, host_budget, prefetch)
    if not stored:
        return _placed(corpus, hyper, mesh, chunk_tokens, streamed, prefetch, by_word=False)
    plan = plan_layout(corpus, min(chunk_tokens or stored, stored), size)
    room = host_budget - anonymous_host_memory()
    workers = max(1, min(os.cpu_count() or 1,
                         room // (plan.padded_tokens * chunk_store.BUILD_BYTES_PER_TOKEN)))
    slots = chunk_store.StoredChunks(corpus, plan, hyper, chunk_store_dir
                                     or chunk_store.default_directory(),
                                     NamedSharding(mesh, BY_DEVICE), prefetch, workers)
    return Placement(mesh, slots, plan.chunk_docs, _chunking(corpus, plan.chunk_docs),
                     corpus.num_words, hyper)


def model_rows(num_words: int, num_devices: int, partition: str) -> int:
    """Rows of the model on each device: V padded to a multiple of the device count by
    documents (B-hat is whole everywhere), a V / N share by words."""
    rows = -(-num_words // num_devices)
    return rows if partition == "words" else rows * num_devices


def resident_bytes(corpus: Corpus, hyper: Hyperparams, num_devices: int, partition: str,
                   per_token: float) -> int:
    """Planned device bytes a device needs with every chunk resident: the model and its update
    (model_bytes), per_token bytes for each token of its share (device_bytes_per_token), and
    by words every document's A and the E-step's doc-major topics."""
    share = -(-corpus.num_tokens // num_devices)
    extra = WORD_PARTITION_BYTES_PER_TOKEN * corpus.num_tokens if partition == "words" else 0
    rows = model_rows(corpus.num_words, num_devices, partition)
    return int(model_bytes(rows, hyper.padded_topics)
               + share * per_token + extra)


def _chunking(corpus: Corpus, chunk_docs) -> tuple[tuple[int, int], ...]:
    """Placement.chunking: [first token id, tokens] of the chunks of documents chunk_docs."""
    offsets = np.asarray(corpus.doc_offsets, np.int64)
    return tuple((int(offsets[first]), int(offsets[last] - offsets[first]))
                 for first, last in chunk_docs)


def _placed(corpus: Corpus, hyper: Hyperparams, mesh: Mesh, chunk_tokens: int | None,
            streamed: bool, prefetch: int, by_word: bool) -> Placement:
    """The layout built (this process's chunks; layout_cache.cached_layout) and put on the
    mesh."""
    size = mesh.size
    own = _own_devices(mesh)
    layout = cached_layout(corpus, chunk_tokens or -(-corpus.num_tokens // size), size,
                           parts=own)
    num_slots = len(layout.chunks) // size
    chunking = _chunking(corpus, layout.chunk_docs)
    sharding = NamedSharding(mesh, BY_DEVICE, memory_kind="pinned_host" if streamed else None)
    with timing.phase("transfer"):
        slots = tuple(_by_device_array({device: layout.chunks[device * num_slots + slot]
                                        for device in own}, sharding)
                      for slot in range(num_slots))
        if streamed:
            slots = streaming.HostChunks(slots, NamedSharding(mesh, BY_DEVICE), prefetch)
    if not by_word:
        return Placement(mesh, slots, layout.chunk_docs, chunking, corpus.num_words, hyper)
    shares = word_shares(corpus, layout, size, own)
    with timing.phase("transfer"):
        shares = _by_device_array(shares, sharding)
    return Placement(mesh, slots, layout.chunk_docs, chunking, corpus.num_words, hyper,
                     shares, layout.word_order)
