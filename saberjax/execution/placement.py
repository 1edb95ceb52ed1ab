"""A corpus laid out on a mesh (Placement) and the building of it from a plan (place).

    corpus documents   [ device 0's share | device 1's share | ... ]   equal token shares
    slot j             chunk j of every device: one Chunk whose arrays carry a leading device
                       axis sharded over "data" (equal shapes on every device, padded)

Chunk `device * num_slots + slot` of the layout is device `device`'s chunk in slot `slot`.
Slots are resident on the devices, in pinned host memory (streaming.HostChunks) or in a chunk
store on local disk (chunk_store.StoredChunks), as the plan says (execution.plan).  Each
process builds only its own devices' chunks.  The host views of a state (its counts, alpha,
chunk states and topics, for checkpoints, models and tests) go through the Placement too.
"""

from __future__ import annotations

import dataclasses
import functools
import os

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from saberjax import chunk_store, esca, streaming, timing
from saberjax.config import Hyperparams
from saberjax.corpus import Corpus
from saberjax.execution import compiled, memory
from saberjax.execution.mesh import (AXIS, BY_DEVICE, by_device_array, model_rows,
                                     own_devices, to_host)
from saberjax.execution.plan import Plan, plan
from saberjax.execution.programs import Programs
from saberjax.layout import Chunk, plan_layout, word_shares
from saberjax.layout_cache import cached_layout
from saberjax.mstep import float32_bhat
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
    # partition by word: each device's share of the vocabulary's tokens (layout.word_shares,
    # by device) and the words by rank (rank r is device r % N's row r // N); else None
    word_shares: Chunk | None = None
    word_order: np.ndarray | None = None

    @property
    def partition(self) -> str:
        return "documents" if self.word_shares is None else "words"

    @functools.cached_property
    def programs(self) -> Programs:
        """The jitted programs of an iteration on this mesh and partition (the seed words'
        prior on the rows that hold its words)."""
        hyper = self.hyper
        if hyper.seeds is not None:
            hyper = dataclasses.replace(hyper, seeds=hyper.seeds.on_rows(self._row_of_word()))
        return Programs(self.mesh, hyper, self.num_words, self.word_shares is not None)

    @property
    def model_rows(self) -> int:
        """Rows of the model on each device (mesh.model_rows)."""
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
        return self._by_chunk(state.chunks)

    def own_chunks(self) -> list[int]:
        """Layout chunk indices of this process's devices' chunks."""
        return [device * self.num_slots + slot for device in own_devices(self.mesh)
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
        return to_host(state.model.word_topic)[self._row_of_word()]

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
        return self.programs.model(placed, self.replicated(np.asarray(alpha, np.float32)))

    def topic_word(self, state: TrainState) -> jax.Array:
        """float32 B-hat [K, V] of the state's counts, whole on every device (for scoring)."""
        return _topic_word(state.model.word_topic, state.model.topic_totals,
                           self.replicated(self._row_of_word()), self.hyper.num_topics,
                           self.hyper.beta, self.num_words, self.hyper.seeds,
                           self.sharding(P()))

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


@functools.partial(jax.jit, static_argnames=("num_topics", "beta", "num_words", "seeds",
                                             "sharding"))
def _topic_word(word_topic, totals, row_of_word, num_topics: int, beta: float,
                num_words: int, seeds, sharding):
    """float32 B-hat [K, V] of B's rows row_of_word (by word id; seeds over word ids), laid
    out by `sharding`."""
    bhat = float32_bhat(word_topic[row_of_word], totals, num_topics, beta, num_words, seeds)
    return jax.lax.with_sharding_constraint(bhat[:, :num_topics].T, sharding)


def place(corpus: Corpus, hyper: Hyperparams, *args, **settings) -> Placement:
    """The corpus laid out on a mesh as execution.plan.plan(corpus, hyper, *args, **settings)
    plans it (placed)."""
    return placed(corpus, hyper, plan(corpus, hyper, *args, **settings))


def placed(corpus: Corpus, hyper: Hyperparams, run_plan: Plan) -> Placement:
    """The corpus laid out on the plan's mesh: the layout built (this process's chunks) and
    put on the devices, in pinned host memory or in a chunk store, as the plan says."""
    if not run_plan.stored:
        return _in_memory(corpus, hyper, run_plan)
    mesh = run_plan.mesh
    layout_plan = plan_layout(corpus, run_plan.chunk_tokens, mesh.size)
    room = run_plan.host_budget - memory.anonymous_host_memory()
    workers = max(1, min(os.cpu_count() or 1, room // (layout_plan.padded_tokens
                                                       * chunk_store.BUILD_BYTES_PER_TOKEN)))
    slots = chunk_store.StoredChunks(corpus, layout_plan, hyper, run_plan.store_directory,
                                     NamedSharding(mesh, BY_DEVICE), run_plan.prefetch, workers)
    return Placement(mesh, slots, layout_plan.chunk_docs,
                     _chunking(corpus, layout_plan.chunk_docs), corpus.num_words, hyper)


def _chunking(corpus: Corpus, chunk_docs) -> tuple[tuple[int, int], ...]:
    """Placement.chunking: [first token id, tokens] of the chunks of documents chunk_docs."""
    offsets = np.asarray(corpus.doc_offsets, np.int64)
    return tuple((int(offsets[first]), int(offsets[last] - offsets[first]))
                 for first, last in chunk_docs)


def _in_memory(corpus: Corpus, hyper: Hyperparams, run_plan: Plan) -> Placement:
    """The layout built (this process's chunks; layout_cache.cached_layout) and put on the
    mesh, resident or in pinned host memory."""
    mesh, streamed = run_plan.mesh, run_plan.streamed
    size = mesh.size
    own = own_devices(mesh)
    layout = cached_layout(corpus, run_plan.chunk_tokens or -(-corpus.num_tokens // size), size,
                           parts=own)
    num_slots = len(layout.chunks) // size
    chunking = _chunking(corpus, layout.chunk_docs)
    sharding = NamedSharding(mesh, BY_DEVICE, memory_kind="pinned_host" if streamed else None)
    with timing.phase("transfer"):
        slots = tuple(by_device_array({device: layout.chunks[device * num_slots + slot]
                                       for device in own}, sharding)
                      for slot in range(num_slots))
        if streamed:
            slots = streaming.HostChunks(slots, NamedSharding(mesh, BY_DEVICE),
                                         run_plan.prefetch)
    if run_plan.partition != "words":
        return Placement(mesh, slots, layout.chunk_docs, chunking, corpus.num_words, hyper)
    shares = word_shares(corpus, layout, size, own)
    with timing.phase("transfer"):
        shares = by_device_array(shares, sharding)
    return Placement(mesh, slots, layout.chunk_docs, chunking, corpus.num_words, hyper,
                     shares, layout.word_order)
