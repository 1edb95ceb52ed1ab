"""A placement's iteration run: initialisation, the streamed loop, and the iteration and the
learned prior's update compiled ahead of time.

Resident slots run one program an iteration (Programs.iteration).  Streamed slots flow
through the devices one slot program at a time (streaming.stream_over_chunks: from pinned
host memory, or from a chunk store on disk), each device streaming its own chunks, and the
reduction then runs as a program of its own.  The placement is execution.placement.Placement
(its slots, programs and shardings); this module does not import it.
"""

from __future__ import annotations

import time

import jax
import numpy as np

from saberjax import esca, prior, streaming
from saberjax.state import ChunkState, TrainState


def stream(placement, run_slot, chunk_states, alpha, zero_counts=None, reduce=None):
    """(states, model) of run_slot(chunk, state, counts) over the placement's streamed slots,
    the partial counts made by zero_counts() and reduced with prior alpha by
    reduce(counts, alpha) (None: the jitted Programs.zero_partial_counts and reduce;
    CompiledStep passes their compiled executables)."""
    programs = placement.programs
    states, counts = streaming.stream_over_chunks(
        placement.stream_source, chunk_states, (zero_counts or programs.zero_partial_counts)(),
        run_slot)
    return states, (reduce or programs.reduce)(counts, alpha)


def init(placement, seed: int) -> TrainState:
    """The state after random initialisation (esca.init over the placement's mesh)."""
    seed = placement.replicated(np.uint32(seed))
    programs = placement.programs
    if placement.streamed:
        states, model = stream(
            placement, lambda chunk, _, counts: programs.slot_init(chunk, seed, counts), None,
            placement.replicated(placement.hyper.initial_alpha()))
    else:
        states, model = programs.init(placement.slots, placement.program_shares, seed)
    return TrainState(states, model, placement.replicated(np.int32(0)), seed)


class CompiledStep:
    """The iteration of a Placement through executables compiled ahead of time.

    Calling it never compiles, so training and benchmark loops time iterations apart from
    compilation (`compile_seconds`).  Resident chunks: one executable per iteration, which by
    word hands the next call the zero counts it made (Programs.iteration).  Streamed: one for
    a slot and one for the reduction.
    """

    def __init__(self, placement, state: TrainState):
        start = time.perf_counter()
        self.placement = placement
        programs = placement.programs
        # the key's shape and sharding (next_iteration's, as the state's iteration is laid
        # out): the programs compile without waiting for the state (still being computed)
        key = jax.eval_shape(esca.next_iteration, state.seed, state.iteration)[1]
        key = jax.ShapeDtypeStruct(key.shape, key.dtype, sharding=state.iteration.sharding)
        if placement.streamed:
            on_device = placement.sharding(memory_kind="device")
            chunk, chunk_state = jax.tree.map(
                lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=on_device),
                (placement.stream_source[0], state.chunks[0]))
            self._counts = programs.zero_partial_counts.lower().compile()
            # laid out on the placement's mesh, as the counts the executable makes are (the
            # shapes eval_shape gives name an abstract mesh)
            counts = jax.tree.map(
                lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=on_device),
                jax.eval_shape(self._counts))
            self._slot = programs.slot_step.lower(
                chunk, chunk_state, state.model, key, counts).compile()
            self._reduce = programs.reduce.lower(counts, state.model.alpha).compile()
            self.num_executables = 3
        else:
            # the zero counts the next iteration counts B into, made by the one before
            # (Programs.carries_zero_counts); never part of the state, so never checkpointed
            self._zeros = (programs.zero_partial_counts() if programs.carries_zero_counts
                           else None)
            self._iteration = programs.iteration.lower(
                placement.slots, placement.program_shares, state.chunks, state.model, key,
                self._zeros).compile()
            self.num_executables = 1
        # next_iteration compiles on its first call: here, so that calling never compiles
        jax.block_until_ready(esca.next_iteration(state.seed, state.iteration))
        self.compile_seconds = time.perf_counter() - start

    def __call__(self, state: TrainState) -> TrainState:
        placement = self.placement
        iteration, key = esca.next_iteration(state.seed, state.iteration)
        if placement.streamed:
            states, model = stream(
                placement,
                lambda chunk, chunk_state, counts: self._slot(chunk, chunk_state, state.model,
                                                              key, counts),
                state.chunks, state.model.alpha, self._counts, self._reduce)
        else:
            states, model, self._zeros = self._iteration(
                placement.slots, placement.program_shares, state.chunks, state.model, key,
                self._zeros)
        return TrainState(states, model, iteration, state.seed)

    def program_texts(self) -> list[str]:
        """The optimized programs (XLA's HLO text) of the executables an iteration runs, to
        tell a profile's kernels by the operations they fuse."""
        executables = ((self._counts, self._slot, self._reduce) if self.placement.streamed
                       else (self._iteration,))
        return [executable.as_text() for executable in executables]


class CompiledAlphaUpdate:
    """The learned prior's update (saberjax.prior) of a Placement's state through executables
    compiled ahead of time: each device counts the (topic, count) pairs of its chunks' A into
    a histogram (streamed chunks' A copied to it one slot at a time; a chunk store's slots put
    with their z, A rebuilt on the devices), then one program sums the histograms over the
    mesh, runs the fixed point and rebuilds B-hat and its trees for the new alpha.  Calling it
    never compiles (`compile_seconds`)."""

    def __init__(self, placement, state: TrainState, doc_lengths):
        start = time.perf_counter()
        self.placement = placement
        programs = placement.programs
        self._lengths = placement.replicated(prior.length_histogram(doc_lengths))
        width = prior.histogram_width(self._lengths.shape[0] - 1, placement.hyper.padded_topics)
        self._zeros = programs.zero_histograms.lower(width).compile()
        histogram = jax.eval_shape(self._zeros)
        self._on_devices = placement.sharding(memory_kind="device")
        chunk = placement.slots[0] if placement.stored else None
        chunk, chunk_state = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=self._on_devices),
            (chunk, _counted_part(state.chunks[0])))
        self._count = programs.count_histogram.lower(chunk, chunk_state, histogram).compile()
        self._learn = programs.learned_alpha.lower(histogram, state.model,
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
