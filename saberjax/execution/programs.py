"""The per-iteration programs of a mesh: jitted `shard_map` bodies over every device.

Partition by document: every device runs esca.chunk_step over its own chunks, adding their
tokens into its partial counts B_d [V_pad, K_pad], then::

    rows   = psum_scatter(B_d)          each device gets the summed rows of V_pad / N words
    totals = psum(column sums of rows)  K_pad integers
    B-hat and trees of its rows         esca.model_from_totals (the backend's kernels)
    all_gather(B-hat, trees, totals)    every device samples with the whole B-hat

so B (Model.word_topic) stays sharded by word rows and B-hat and the trees are replicated:
the reduction moves B once (reduce-scatter, 4 bytes a cell) and B-hat once (all-gather,
2 bytes a cell), and the B-hat pass runs on 1/N of the rows on each device.  V is padded to a
multiple of N (rows of no word).  With one device a program has no collectives and is
esca.step's computation.

Partition by word: each device samples its words' tokens (its word share) against every
document's A, gathered each iteration; the E-step's doc-major topics go back to the devices
holding their documents (all_to_all), and each device keeps its words' rows of B-hat.  The
E-step leaves the doc-major positions of other devices' tokens unset (not zeroed first):
each device takes every position of its chunk from the part of the device whose share holds
its token (WordShares.owner, placed once), so no part needs zeros.  A device's state holds
the A of every chunk of its words group, gathered at the end of the iteration that rebuilt
it; the count of B runs while the topics move, B-hat and the trees while A moves
(_word_finish's barriers).  The count's zeros of the next iteration are made at the end of
this one, once B-hat and the trees are, while A moves, and carried to it (donated): no zeros sit
between the E-step and the count (carries_zero_counts; where none are carried, they are made on
a GPU stream of their own).
Word shares hold near-equal tokens (layout.share_order): every device waits for the one of
most tokens at the all_to_all.  The sparse model (hyper.sparse) by word counts each device's
share's sparse rows of B whole (sparse_rows.count_rows) and only the topic totals are summed.
Streamed slots, by document or by word, run the programs of execution.streamed_programs.

The two-axis mesh (partition "hybrid", hosts x gpus): within each host its gpus partition
by word over the host's documents as above (A gathered and topics sent back over "gpus"
only).  Between hosts, whichever costs less time (hosts_exchange, chosen by
execution.plan.hosts_exchange):

    "counts"   each device's counts of its word share are reduce-scattered over "hosts", its
               rows' B-hat and trees computed and gathered over "hosts" again: the word
               share of B and B-hat cross, about 4 bytes a cell of the share
    "topics"   the topics the E-step drew for the share's tokens of every host are gathered
               over "hosts" (2 bytes a token as int16), and each device counts its share's B
               whole from every host's tokens, whose word rows it received once
               (PeerShares) and computes B-hat and the trees of the whole share: B never
               crosses, and the topic totals are summed over "gpus" alone

The learned prior's programs (execution.prior_programs.PriorPrograms, a base of Programs): each
device counts its chunks' (topic, count) pairs into a histogram, one program sums them over the
mesh and runs the fixed point of esca.update_alpha.

Counts are integers, B-hat is computed row by row from exact totals and every draw is keyed
by (seed, iteration, global token id), so the model is bit-identical on any mesh."""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental.compute_on import compute_on
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from saberjax import compilation, esca, segmented_count, sparse_rows
from saberjax.backend import backend_ops
from saberjax.config import Hyperparams
from saberjax.execution.mesh import (HOSTS, HYBRID_TOPICS_MODEL_SPEC, SPARSE_MODEL_SPEC,
                                     WHOLE_SPARSE_MODEL_SPEC, Axes, by_device, local,
                                     model_rows, stacked)
from saberjax.execution.prior_programs import PriorPrograms
from saberjax.state import ChunkState, Model

# Every integer up to this (2^11) is a float16: the counts of a word with no more tokens in
# the corpus travel as float16 between hosts, exactly (FLOAT16_COUNT_WORDS).
FLOAT16_EXACT = 2048
HOSTS_EXCHANGES = ("counts", "topics")


class PeerShares(NamedTuple):
    """The two-axis mesh exchanging topics: the word-major tokens of the same word share on
    the other hosts, host (own + 1 + j) % hosts at j: their rows of the share (word, int32
    [hosts - 1, share tokens]) and real tokens (num_tokens, int32 [hosts - 1])."""

    word: jax.Array
    num_tokens: jax.Array


class WordShares(NamedTuple):
    """The programs' shares argument by word (Placement.program_shares), by device: each
    device's word share (layout.word_shares), the owners of its own chunk's doc-major
    positions ([T_pad]: the index along the words axis of the device whose share holds the
    position's token, 0 where none; Programs.doc_major_owners) and, where the hosts exchange
    topics, its PeerShares (else None)."""

    share: object  # layout.Chunk
    owner: jax.Array
    peers: PeerShares | None = None


@dataclasses.dataclass(frozen=True, eq=False)
class Programs(PriorPrograms):
    """The jitted programs of an iteration on `mesh` for a model of num_words words, each
    compiled on its first call (or lowered ahead by execution.compiled).  partition:
    "documents", "words" (one-axis mesh) or "hybrid" (two-axis mesh: by word within the
    gpus axis, by document across the hosts axis); mesh.Axes says which axis does what."""

    mesh: Mesh
    hyper: Hyperparams
    num_words: int
    partition: str
    # the two-axis mesh: the first rows of every word share (a multiple of the hosts) whose
    # counts may exceed FLOAT16_EXACT; the rest cross between hosts as float16
    int32_rows: int = 0
    # the two-axis mesh: what crosses between hosts, "counts" or "topics" (HOSTS_EXCHANGES)
    hosts_exchange: str = "counts"

    @property
    def streamed(self) -> bool:
        """Whether the slots stream (streamed_programs.StreamedPrograms)."""
        return False

    @property
    def num_devices(self) -> int:
        return self.mesh.size

    @property
    def axes(self) -> Axes:
        return Axes.of(self.partition)

    @property
    def by_word(self) -> bool:
        return self.axes.words is not None

    def size(self, axis: str | None) -> int:
        """Devices along an axis of the mesh (1 for None)."""
        return 1 if axis is None else self.mesh.shape[axis]

    @property
    def by_device(self) -> P:
        return by_device(self.mesh)

    @property
    def whole_sparse_model(self) -> bool:
        """The sparse model by document: whole on every device."""
        return self.hyper.sparse and not self.by_word

    @property
    def exchanges_topics(self) -> bool:
        """Whether the hosts axis carries the share's tokens' topics instead of its counts."""
        return self.partition == "hybrid" and self.hosts_exchange == "topics"

    @property
    def row_parts(self) -> int:
        """The parts a device's rows of B are split into over the documents axis (1: each
        device counts its rows whole)."""
        return 1 if self.exchanges_topics else self.size(self.axes.documents)

    @property
    def model_spec(self) -> Model:
        if self.hyper.sparse:
            return WHOLE_SPARSE_MODEL_SPEC if self.whole_sparse_model else SPARSE_MODEL_SPEC
        return HYBRID_TOPICS_MODEL_SPEC if self.exchanges_topics else self.axes.model_spec()

    @property
    def model_rows(self) -> int:
        """Rows of B-hat on each device (mesh.model_rows)."""
        return model_rows(self.num_words, self.num_devices, self.partition,
                          self.mesh.shape.get(HOSTS, 1))

    @property
    def padded_words(self) -> int:
        """Rows of the model's global arrays: V padded to equal shares of the mesh."""
        return self.model_rows * self.size(self.axes.words)

    def _shard_map(self, body, in_specs, out_specs):
        """body on every device of the mesh (check_vma off: Pallas calls declare no vma)."""
        return jax.shard_map(body, mesh=self.mesh, in_specs=in_specs, out_specs=out_specs,
                             check_vma=False)

    def _zero_counts(self):
        return jnp.zeros((self.model_rows, self.hyper.padded_topics), jnp.int32)

    @property
    def carries_zero_counts(self) -> bool:
        """Whether the iteration takes the zero counts its count of B starts from (donated) and
        makes the next iteration's: by word with the dense model, where each device's counts
        become its rows of the model (row_parts 1)."""
        return (self.by_word and not self.hyper.sparse and not self.streamed
                and self.row_parts == 1)

    @functools.cached_property
    def zero_partial_counts(self):
        """Zero partial counts: [N, V_pad, K_pad], one B_d per device (by word [N, rows,
        K_pad], each device's rows)."""
        rows = self.model_rows if self.by_word else self.padded_words
        return compilation.jit(
            lambda: jnp.zeros((self.num_devices, rows, self.hyper.padded_topics), jnp.int32),
            out_shardings=NamedSharding(self.mesh, self.by_device))

    def _next_zero_counts(self, model: Model):
        """The next iteration's zero counts, made once this iteration's B-hat and trees are:
        the zero comes out of an optimization barrier over them, so XLA makes the zeros while
        A's gather, the iteration's last collective, runs rather than before the E-step."""
        zero = lax.optimization_barrier((model.bhat, model.tree, jnp.int32(0)))[-1]
        return jnp.full((self.model_rows, self.hyper.padded_topics), zero, jnp.int32)

    def _zero_counts_beside(self):
        """Zero counts made on a GPU stream of their own (XLA's stream annotation; other
        platforms ignore it), where by word none are carried (carries_zero_counts), so that
        they are not made between the E-step and the count of B, which waits for them."""
        return compute_on(compute_type="gpu_stream:1",
                          out_memory_spaces=jax.memory.Space.Device)(self._zero_counts)()

    def _row_totals(self, rows):
        """The topic totals of this device's rows of B."""
        if self.hyper.sparse:
            return sparse_rows.topic_totals(rows, self.hyper.padded_topics)
        return backend_ops(self.hyper.backend).topic_totals(rows)

    def _mesh_totals(self, totals):
        """Every device's row totals summed over the mesh (over the gpus alone where every
        host holds the same rows; a whole sparse model's on each device)."""
        if self.num_devices == 1 or self.whole_sparse_model:
            return totals
        return lax.psum(totals, (self.axes.words,) if self.exchanges_topics
                        else self.mesh.axis_names)

    def _first_row(self, rows):
        """The row of the model's global arrays where this device's `rows` of B start: its
        block of B's row sharding (the axes of model_spec.word_topic) times the rows a block
        holds; 0 where no seed prior reads it (the sparse model takes no seeds)."""
        if self.num_devices == 1 or self.hyper.seeds is None:
            return 0
        return lax.axis_index(self.model_spec.word_topic[0]) * rows.shape[0]

    def _model_of_rows(self, rows, alpha, totals=None) -> Model:
        """The model of this device's rows of B and prior alpha: totals summed over the mesh
        (None: summed here), B-hat and trees of the rows, then B-hat and the trees
        gathered over the documents axis (whole on every device by document, the device's
        word share on the two-axis mesh; by word, or where every host counts its share's
        rows whole, they stay with their rows)."""
        totals = self._mesh_totals(self._row_totals(rows)) if totals is None else totals
        own = esca.model_from_totals(rows, totals, alpha, self.hyper, self.num_words,
                                     self._first_row(rows))
        if self.row_parts == 1 or self.hyper.sparse:
            return own
        return own._replace(bhat=self._gathered(own.bhat), tree=tuple(map(self._gathered,
                                                                          own.tree)),
                            tree_total=self._gathered(own.tree_total))

    @property
    def first_float16_row(self) -> int:
        """The first row of a device's counts that crosses the documents axis as float16:
        int32_rows on the two-axis mesh, none (model_rows) by document."""
        return self.int32_rows if self.partition == "hybrid" else self.model_rows

    def _gathered(self, rows):
        """Every device's rows along the documents axis, in row order: the rows of the int32
        block and of the float16 block (_model_of_partial_counts) gathered apart."""
        first = self.first_float16_row // self.size(self.axes.documents)
        return jnp.concatenate([
            lax.all_gather(block, self.axes.documents, axis=0, tiled=True)
            for block in (rows[:first], rows[first:]) if block.shape[0]])

    def _model_of_partial_counts(self, counts, alpha) -> Model:
        """The model of every device's partial counts (reduce-scattered by word rows over the
        documents axis) and prior alpha.  On the two-axis mesh the rows from int32_rows on
        travel as float16, exactly: none of their words has more than FLOAT16_EXACT tokens,
        so no sum of their counts does either."""
        if self.row_parts > 1:
            first = self.first_float16_row
            counts = jnp.concatenate([
                lax.psum_scatter(block.astype(dtype), self.axes.documents,
                                 scatter_dimension=0, tiled=True).astype(jnp.int32)
                for block, dtype in ((counts[:first], jnp.int32),
                                     (counts[first:], jnp.float16)) if block.shape[0]])
        return self._model_of_rows(counts, alpha)

    @staticmethod
    def _over_slots(run_chunk, slots, slot_states, counts):
        """run_chunk(chunk, state, counts) over this device's chunks, slot by slot."""
        new_states = []
        for index, chunk in enumerate(slots):
            state = None if slot_states is None else local(slot_states[index])
            new_state, counts = run_chunk(local(chunk), state, counts)
            new_states.append(stacked(new_state))
        return tuple(new_states), counts

    def _init_chunk(self, seed):
        """run(chunk, state, counts) of a chunk's random initial state, its tokens added into
        the counts."""
        return lambda chunk, _, counts: esca.init_chunk(chunk, seed, counts, self.hyper)

    def _chunk_step(self, model, key):
        """run(chunk, state, counts) of a chunk's E-step and A's rebuild, its tokens added
        into the counts."""
        return lambda chunk, state, counts: esca.chunk_step(chunk, state, model, key, counts,
                                                            self.hyper)

    def _word_finish(self, slots, shares, alpha, topics, doc_major, zeros=None):
        """Partition by word, after the E-step of this device's share: its chunk's A rebuilt
        from the topics every device of the words axis drew for the chunk's tokens, its
        words' B counted into zeros (None: made here), and the model of its rows and prior
        alpha (totals summed over the mesh; on the two-axis mesh the share's counts reduced
        over the hosts, or counted whole from every host's topics)."""
        share, owner, peers = local(shares)
        chunk, own_topics = local(slots[0]), self._own_chunk_topics(doc_major, owner)
        if self.hyper.sparse:  # the share's rows of B, counted whole (B never moves)
            counts = sparse_rows.count_rows(share, topics, self.model_rows,
                                            self.hyper.padded_topics)
        else:
            counts = esca.count_word_topic(
                share, topics, self._zero_counts_beside() if zeros is None else zeros,
                self.hyper)
        if peers is not None:
            counts = self._peer_counts(share, peers, topics, counts)
        if self.row_parts > 1:  # the counts are reduced over the hosts first
            state = esca.chunk_state_from_topics(chunk, topics, own_topics, self.hyper)
            return (stacked(self._group_state(state)),), self._model_of_partial_counts(
                counts, alpha)
        # A rebuilt once the row totals are counted, they summed once A is rebuilt: the
        # count runs while the topics move, B-hat while A moves
        own_topics, totals = lax.optimization_barrier((own_topics, self._row_totals(counts)))
        state, totals = lax.optimization_barrier((esca.chunk_state_from_topics(
            chunk, topics, own_topics, self.hyper), totals))
        return (stacked(self._group_state(state)),), self._model_of_rows(
            counts, alpha, self._mesh_totals(totals))

    def _group_state(self, state: ChunkState) -> ChunkState:
        """Partition by word: a device's state with A of every chunk of its words group,
        gathered over the words axis from each device's own."""
        if self.size(self.axes.words) == 1:
            return state
        gather = functools.partial(lax.all_gather, axis_name=self.axes.words, axis=0,
                                   tiled=True)
        return state._replace(a_pairs=gather(state.a_pairs), a_nnz=gather(state.a_nnz))

    def _own_a_pairs(self, a_pairs):
        """Partition by word: the A pairs of this device's chunk, of its group's
        (_group_state); by document the chunk's own."""
        words = self.size(self.axes.words)
        if words == 1 or self.streamed:  # a streamed slot's state holds its own chunk's A
            return a_pairs
        tokens = a_pairs.shape[0] // words
        return lax.dynamic_slice_in_dim(a_pairs, lax.axis_index(self.axes.words) * tokens,
                                        tokens)

    @functools.cached_property
    def group_states(self):
        """Partition by word: (states of each device's own chunk) -> the states holding A
        of every chunk of its words group (_group_state), as an iteration leaves them."""
        def body(slot_states):
            return tuple(stacked(self._group_state(local(state))) for state in slot_states)
        return compilation.jit(self._shard_map(body, (self.by_device,), self.by_device))

    def _peer_counts(self, share, peers: PeerShares, topics, counts):
        """counts plus the share's tokens of every other host, counted from their topics,
        gathered over the documents axis (an integer sum: the order does not matter)."""
        every = lax.all_gather(topics, self.axes.documents)  # [hosts, share tokens]
        hosts, host = self.size(self.axes.documents), lax.axis_index(self.axes.documents)
        for j in range(hosts - 1):
            peer = dataclasses.replace(share, word=peers.word[j], num_tokens=peers.num_tokens[j])
            peer_topics = lax.dynamic_index_in_dim(every, (host + 1 + j) % hosts,
                                                   keepdims=False)
            counts = esca.count_word_topic(peer, peer_topics, counts, self.hyper)
        return counts

    def _own_chunk_topics(self, doc_major, owner=None):
        """Partition by word: the doc-major topics of this device's chunk, from the topics
        every device of the words axis drew for it (doc_major: this device's share's topics
        at their places in the doc-major space of its group's chunks): each position from
        the part of its owner (WordShares.owner; the other parts' values there are never
        read, so they may be unset), or, without owners, the parts summed (0 elsewhere)."""
        words = self.size(self.axes.words)
        if words == 1:
            return doc_major
        parts = doc_major.reshape(words, -1)  # the other devices' segments go to them
        received = lax.all_to_all(parts, self.axes.words, 0, 0, tiled=True)
        if owner is None:
            return received.sum(axis=0, dtype=doc_major.dtype)
        own = received[0]
        for part in range(1, words):
            own = jnp.where(owner == part, received[part], own)
        return own

    @functools.cached_property
    def doc_major_owners(self):
        """Partition by word: (slots, word shares) -> WordShares.owner of every device [N,
        T_pad] (int8, int16 past 126 devices of the words axis): each device marks its
        share's doc-major positions with its index along the words axis (plus one, so that 0
        is none), and they go to the chunks' devices as the topics do (the marks of padding
        tokens, past the doc-major space, are dropped)."""
        words = self.size(self.axes.words)
        dtype = jnp.int8 if words < 127 else jnp.int16

        def body(slots, shares):
            marks = jnp.zeros(words * slots[0].word.shape[1], dtype).at[
                local(shares).doc_major_pos].set(
                    (lax.axis_index(self.axes.words) + 1).astype(dtype), mode="drop",
                    unique_indices=True)  # a position a token; padding's past the space
            owner = self._own_chunk_topics(marks)  # 0 where no token is
            return jnp.maximum(owner - 1, 0).astype(dtype)[None]

        return compilation.jit(self._shard_map(body, (self.by_device,) * 2, self.by_device))

    @functools.cached_property
    def chunk_topics(self):
        """Partition by word: (slots, word shares, states) -> the doc-major topics of each
        device's chunk [N, T_pad], from every device's share (what a checkpoint keeps)."""
        def body(slots, shares, slot_states):
            share = local(shares)
            doc_major = segmented_count.shuffle_to_doc_major(
                local(slot_states[0]).topics, share.doc_major_pos,
                self.size(self.axes.words) * slots[0].word.shape[1])
            return self._own_chunk_topics(doc_major)[None]

        return compilation.jit(self._shard_map(body, (self.by_device,) * 3, self.by_device))

    # -- resident slots: a whole iteration in one program --

    @functools.cached_property
    def init(self):
        """(slots, shares, seed) -> (states, model); shares: the WordShares by word
        (Placement.program_shares), None by document."""
        def by_document(slots, _, seed):
            states, counts = self._over_slots(self._init_chunk(seed), slots, None,
                                              self._zero_counts())
            return states, self._model_of_partial_counts(counts, self.hyper.initial_alpha())

        def by_word(slots, shares, seed):
            share = local(shares.share)
            return self._word_finish(slots, shares, self.hyper.initial_alpha(),
                                     *esca.initial_topics(share, seed, self.hyper,
                                                          self.size(self.axes.words)
                                                          * slots[0].word.shape[1]))

        return compilation.jit(self._shard_map(by_word if self.by_word else by_document,
                                               (self.by_device, self.by_device, P()),
                                               (self.by_device, self.model_spec)))

    @functools.cached_property
    def iteration(self):
        """(slots, shares, states, model, key, zeros) -> (states, model, next zeros); shares as
        init's; zeros (donated): zero_partial_counts' where carries_zero_counts, else None,
        and so the next zeros."""
        def by_document(slots, _, slot_states, model, key, zeros):
            states, counts = self._over_slots(self._chunk_step(model, key), slots, slot_states,
                                              self._zero_counts())
            return states, self._model_of_partial_counts(counts, model.alpha), zeros

        def by_word(slots, shares, slot_states, model, key, zeros):
            share, state = local(shares.share), local(slot_states[0])
            states, model = self._word_finish(
                slots, shares, model.alpha, *esca.sample(share, state, model, key, self.hyper,
                                                         zero_doc_major=False),
                local(zeros))
            return states, model, None if zeros is None else stacked(
                self._next_zero_counts(model))

        device = self.by_device
        return compilation.jit(self._shard_map(by_word if self.by_word else by_document,
                                               (device,) * 3 + (self.model_spec, P(), device),
                                               (device, self.model_spec, device)),
                               donate_argnums=5)

    @functools.cached_property
    def reduce(self):
        """(partial counts [N, V_pad, K_pad] (donated), alpha) -> the model of their sum."""
        return compilation.jit(self._shard_map(
            lambda counts, alpha: self._reduced(local(counts), alpha),
            (self.by_device, P()), self.model_spec), donate_argnums=0)

    def _reduced(self, counts, alpha):
        """The model of a device's partial counts (reduce's body)."""
        return self._model_of_partial_counts(counts, alpha)

    @functools.cached_property
    def model(self):
        """(rows of B, alpha) -> the model (by word, each device keeps its rows' B-hat)."""
        return compilation.jit(self._shard_map(self._model_of_rows,
                                               (self.model_spec.word_topic, P()),
                                               self.model_spec))
