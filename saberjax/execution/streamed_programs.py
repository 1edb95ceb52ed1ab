"""The programs of slots that stream through the devices: execution.programs.Programs, whose
iteration runs one program a slot and then the reduction (execution.compiled.stream).

Each slot's program adds its tokens into the device's partial counts: dense, B_d [V_pad, K_pad]
(by word [rows, K_pad], the device's rows); sparse, its tokens' (row, topic) keys
(streamed_rows), counted once by the reduction, since a sparse row cannot be added into in
place.  By document every device holds the whole sparse model: the reduction gathers every
device's keys and counts them on each device.  A chunk store's states hold z alone: a slot's
A is rebuilt from it, and its new state is z alone again.

By word, the slots of documents pass by while each device's rows of the model stay: slot j is
chunk j of every device with each device's word share of those chunks (layout.word_shares of
the slot), put together as (chunk, share).  A device's state of the slot holds its share's z
and its own chunk's A (not its group's: N times fewer bytes to keep and move), so the slot's
program gathers the A of the slot's chunks, samples the share, sends the topics back to the
chunks' devices and rebuilds its own chunk's A, adding the share's tokens into the device's
rows or keys; the reduction counts each device's rows of its own keys alone, and only the
topic totals are summed.  Draws are keyed by global token id and counts are integers, so the
model is the resident one bit for bit.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from saberjax import compilation, esca, streamed_rows
from saberjax.execution.mesh import local, stacked
from saberjax.execution.programs import Programs
from saberjax.state import ChunkState


@dataclasses.dataclass(frozen=True, eq=False)
class StreamedPrograms(Programs):
    """The programs of streamed slots (the module docstring): slot_init and slot_step, one
    program a slot, into zero_partial_counts, then Programs.reduce."""

    # the sparse model: the padded tokens of a device's slots (by word, of its word shares),
    # the room of its tokens' keys (streamed_rows)
    streamed_tokens: int = 0

    @property
    def streamed(self) -> bool:
        return True

    def _streamed_counts(self, chunk, topics, counts):
        """Partial counts with a chunk's (by word, a share's) tokens of word-major topics
        added: into B_d, or the sparse model's token keys."""
        if self.hyper.sparse:
            return streamed_rows.appended(counts, chunk, topics)
        return esca.count_word_topic(chunk, topics, counts, self.hyper)

    def _init_chunk(self, seed):
        if not self.hyper.sparse:
            return super()._init_chunk(seed)

        def run(chunk, _, keys):
            state = esca.chunk_state_from_topics(
                chunk, *esca.initial_topics(chunk, seed, self.hyper), self.hyper)
            return state, self._streamed_counts(chunk, state.topics, keys)
        return run

    def _chunk_step(self, model, key):
        dense_step = super()._chunk_step(model, key)

        def run(chunk, state, counts):
            whole = esca.whole_state(chunk, state, self.hyper)
            if self.hyper.sparse:
                new_state = esca.chunk_state_from_topics(
                    chunk, *esca.sample(chunk, whole, model, key, self.hyper), self.hyper)
                counts = self._streamed_counts(chunk, new_state.topics, counts)
            else:
                new_state, counts = dense_step(chunk, whole, counts)
            if state.a_pairs is None:  # z alone (a chunk store's state) gets z alone back
                new_state = ChunkState(new_state.topics, None, None)
            return new_state, counts
        return run

    def _word_slot(self, chunk, share, drawn, counts):
        """By word: (the device's state of the slot: its share's topics and its own chunk's
        A, rebuilt from the topics every device drew for the chunk's tokens; its partial
        counts with the share's tokens added) after the E-step (or initial draw) of its
        share, drawn = (word-major topics, doc-major in the slot's group space)."""
        topics, doc_major = drawn
        state = esca.chunk_state_from_topics(chunk, topics, self._own_chunk_topics(doc_major),
                                             self.hyper)
        return stacked(state), stacked(self._streamed_counts(share, topics, counts))

    @functools.cached_property
    def slot_init(self):
        """(slot's chunk, seed, partial counts (donated)) -> (its states, the counts); by
        word the slot is (chunk, word share)."""
        def by_document(chunk, seed, counts):
            states, counts = self._over_slots(self._init_chunk(seed), (chunk,), None,
                                              local(counts))
            return states[0], stacked(counts)

        def by_word(slot, seed, counts):
            chunk, share = local(slot)
            return self._word_slot(chunk, share, esca.initial_topics(
                share, seed, self.hyper, self.size(self.axes.words) * chunk.padded_tokens),
                local(counts))

        device = self.by_device
        return compilation.jit(self._shard_map(by_word if self.by_word else by_document,
                                               (device, P(), device), (device, device)),
                               donate_argnums=2)

    @functools.cached_property
    def slot_step(self):
        """(slot's chunk, its states, model, key, partial counts (donated)) -> (new states,
        the counts); by word the slot is (chunk, word share)."""
        def by_document(chunk, state, model, key, counts):
            states, counts = self._over_slots(self._chunk_step(model, key), (chunk,), (state,),
                                              local(counts))
            return states[0], stacked(counts)

        def by_word(slot, state, model, key, counts):
            chunk, share = local(slot)
            return self._word_slot(chunk, share, esca.sample(
                share, self._group_state(local(state)), model, key, self.hyper), local(counts))

        device = self.by_device
        return compilation.jit(self._shard_map(by_word if self.by_word else by_document,
                                               (device, device, self.model_spec, P(), device),
                                               (device, device)), donate_argnums=4)

    @functools.cached_property
    def zero_partial_counts(self):
        """Zero partial counts: [N, V_pad, K_pad], one B_d per device (by word [N, rows,
        K_pad], each device's rows); for the sparse model each device's empty token keys
        (streamed_rows, [N, streamed_tokens])."""
        if not self.hyper.sparse:
            return super().zero_partial_counts
        return compilation.jit(
            lambda: jax.tree.map(lambda x: jnp.broadcast_to(x, (self.num_devices, *x.shape)),
                                 streamed_rows.empty(self.streamed_tokens)),
            out_shardings=NamedSharding(self.mesh, self.by_device))

    def _reduced(self, counts, alpha):
        """The model of a device's partial counts; for the sparse model of token keys, every
        device's gathered by document (the whole model on each), its own by word."""
        if not self.hyper.sparse:
            return super()._reduced(counts, alpha)
        if self.whole_sparse_model and self.num_devices > 1:
            counts = streamed_rows.gathered(counts, self.mesh.axis_names)
        return self._model_of_rows(streamed_rows.counted(counts, self.model_rows,
                                                         self.hyper.padded_topics), alpha)
