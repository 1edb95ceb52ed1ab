"""What an iteration on a placement costs, piece by piece, for the benchmark's records: the
collectives between devices (each mesh axis's bandwidth, the reduction's bytes and seconds)
and each phase of the E-step and M-step timed on its own.  Figures are rounded to a few
significant digits (significant), as every benchmark record is.
"""

from __future__ import annotations

import statistics

import jax
import jax.numpy as jnp
import numpy as np

from saberjax import compilation, esca, roofline
from saberjax.backend import backend_ops
from saberjax.execution.link_speed import axis_bytes_per_second
from saberjax.execution.placement import Placement
from saberjax.execution.plan import counts_exchange_bytes, topics_exchange_bytes
from saberjax.state import BHAT_DTYPE, TrainState
from saberjax.timing import timed


def significant(x: float, digits: int = 5) -> float:
    """x rounded to a few significant digits (for readable JSON)."""
    return float(f"{x:.{digits}g}")


def _median_seconds(program, make_input, repeats: int) -> float:
    """Median seconds of program(make_input()) over `repeats` runs after a compiling one."""
    times = []
    for _ in range(repeats + 1):
        argument = jax.block_until_ready(make_input())
        _, seconds = timed(lambda: jax.block_until_ready(program(argument)))
        times.append(seconds)
    return statistics.median(times[1:])


def axis_bandwidth(placement: Placement, num_bytes: int, repeats: int) -> dict[str, float]:
    """GB/s each device receives in collectives along each axis of the placement's mesh of
    more than one device (link_speed.axis_bytes_per_second of num_bytes a device)."""
    return {axis: significant(axis_bytes_per_second(placement.mesh, axis, num_bytes,
                                                    repeats) / 1e9)
            for axis, size in placement.mesh.shape.items() if size > 1}


def _zeros(placement: Placement, shape, dtype):
    """A program making zeros of `shape` on every device (by device)."""
    return compilation.jit(lambda: jnp.zeros((placement.num_devices, *shape), dtype),
                           out_shardings=placement.sharding())


def _on_mesh(placement: Placement, body):
    """body on each device's part of by-device arrays, jitted over the placement's mesh."""
    spec = placement.sharding().spec
    return compilation.jit(jax.shard_map(lambda x: jax.tree.map(lambda y: y[None], body(x[0])),
                                         mesh=placement.mesh, in_specs=spec, out_specs=spec))


def measure_reduction(placement: Placement, repeats: int, bandwidth_bytes: int) -> dict:
    """What an iteration moves between devices, median of `repeats` after a compiling pass.

    Over the words axis (by word; the gpus of the two-axis mesh): the all-gather of every
    chunk's A pairs and nonzeros and the all-to-all of the E-step's doc-major topics.  Over
    the documents axis (by document; the hosts of the two-axis mesh): the reduce-scatter of
    B's rows of the device (all of them by document, int32; its word share on the two-axis
    mesh, the rows of words of more than 2,048 tokens as int32, the others as float16:
    Programs._model_of_partial_counts) and the all-gather of B-hat's bfloat16 rows, or,
    where the hosts exchange topics (hosts_exchange), the all-gather of the topics of the
    device's word share's tokens (Programs._peer_counts).  Per axis: bytes each device receives an iteration, the collectives' seconds alone, and their
    floor, bytes / the axis's bandwidth (axis_bandwidth of bandwidth_bytes).
    reduction_seconds: by document the whole reduction program (collectives, totals, B-hat
    and trees of each device's rows; Programs.reduce), else the collectives.
    cross_host_share_of_by_documents: on the two-axis mesh, the bytes over the hosts axis
    against those the one-axis partition by document moves on as many devices."""
    programs, hyper = placement.programs, placement.hyper
    size, chunk = placement.num_devices, placement.slots[0]
    tokens, docs = chunk.word.shape[1], chunk.doc_start.shape[1] - 1
    axes, bandwidth = programs.axes, axis_bandwidth(placement, bandwidth_bytes, repeats)
    bhat_bytes = np.dtype(BHAT_DTYPE).itemsize
    moved, seconds = {}, {}
    words = programs.size(axes.words)
    if words > 1:
        def word_collectives(a_pairs_and_nnz):
            topics = jnp.zeros((words, tokens), hyper.topic_dtype)
            return (jax.lax.all_gather(a_pairs_and_nnz, axes.words, axis=0, tiled=True),
                    jax.lax.all_to_all(topics, axes.words, 0, 0, tiled=True).sum(axis=0))

        topic_bytes = np.dtype(hyper.topic_dtype).itemsize
        moved[axes.words] = int((words - 1) * (tokens * (4 + topic_bytes) + docs * 4))
        seconds[axes.words] = _median_seconds(_on_mesh(placement, word_collectives),
                                              _zeros(placement, (tokens + docs,), jnp.int32),
                                              repeats)
    documents = programs.size(axes.documents)
    counts = _zeros(placement, (programs.model_rows, hyper.padded_topics), jnp.int32)
    if documents > 1 and programs.exchanges_topics:
        share_tokens = placement.word_shares.word.shape[1]
        moved[axes.documents] = topics_exchange_bytes(
            share_tokens, np.dtype(hyper.topic_dtype).itemsize, documents)
        seconds[axes.documents] = _median_seconds(
            _on_mesh(placement, lambda topics: jax.lax.all_gather(topics, axes.documents)),
            _zeros(placement, (share_tokens,), hyper.topic_dtype), repeats)
    elif documents > 1:
        first = programs.first_float16_row  # int32 rows before it, float16 from it

        def row_collectives(rows):
            return [jax.lax.all_gather(jax.lax.psum_scatter(
                block.astype(dtype), axes.documents, scatter_dimension=0,
                tiled=True).astype(BHAT_DTYPE), axes.documents, axis=0, tiled=True)
                for block, dtype in ((rows[:first], jnp.int32), (rows[first:], jnp.float16))
                if block.shape[0]]

        moved[axes.documents] = counts_exchange_bytes(programs.model_rows, first,
                                                      hyper.padded_topics, documents)
        seconds[axes.documents] = _median_seconds(_on_mesh(placement, row_collectives),
                                                  counts, repeats)
    total_bytes, total_seconds = sum(moved.values()), sum(seconds.values())
    reduction = total_seconds
    if placement.partition == "documents" and size > 1:
        alpha = placement.replicated(np.asarray(hyper.initial_alpha()))
        reduction = _median_seconds(lambda partial: programs.reduce(partial, alpha), counts,
                                    repeats)
    record = dict(reduction_seconds=significant(reduction),
                  collective_seconds=significant(total_seconds),
                  collective_bytes_per_device=total_bytes,
                  collective_GB_per_s=significant(total_bytes / total_seconds / 1e9)
                  if total_seconds else None,
                  collective_bytes_by_axis=moved,
                  collective_seconds_by_axis={axis: significant(t) for axis, t in seconds.items()},
                  axis_GB_per_s=bandwidth,
                  collective_floor_seconds=significant(sum(moved[axis] / (bandwidth[axis] * 1e9)
                                                    for axis in moved)))
    if placement.partition == "hybrid":
        record["hosts_exchange"] = placement.hosts_exchange
        by_documents = (programs.padded_words * hyper.padded_topics * (4 + bhat_bytes)
                        * (size - 1) / size)
        record["cross_host_share_of_by_documents"] = significant(
            moved.get(axes.documents, 0) / by_documents, 4)
    return record


def measure_phases(placement: Placement, state: TrainState, repeats: int,
                   card: roofline.Card | None = None) -> dict:
    """Each phase of an iteration as its own jitted function over the first device's chunks
    (one device's share of the work; Mtoken/s counts that device's tokens).  With a card, the
    sample phase also carries the E-step's roofline (saberjax.roofline.floor) on this state:
    floor_seconds, the level that sets it and each level's figures."""
    hyper = placement.hyper
    chunks, chunk_states = jax.tree.map(lambda x: x[0], (tuple(placement.slots), state.chunks))
    state = state._replace(chunks=chunk_states)
    num_tokens = sum(int(chunk.num_tokens) for chunk in chunks)
    ops = backend_ops(hyper.backend)
    key = esca.next_iteration(state.seed, state.iteration)[1]
    sample = compilation.jit(ops.sample_and_shuffle)
    rebuild = compilation.jit(ops.rebuild_doc_topic, static_argnums=2)
    count = compilation.jit(ops.count_word_topic, donate_argnums=2)
    # what esca.finish_step runs on B, B not donated: the state's B serves every pass, where a
    # copy of it per pass (a third V x K int32 array) ran an H100 out of memory at K = 30,000
    @compilation.jit
    def bhat_trees(word_topic):
        totals = ops.topic_totals(word_topic)
        return totals, ops.bhat_and_tree(word_topic, totals, state.model.alpha, hyper.num_topics,
                                         hyper.beta)

    def run_sample():
        return [sample(c, s, state.model, key) for c, s in zip(chunks, state.chunks)]

    topics = None  # per chunk (word-major, doc-major), from the sample phase

    def run_rebuild():
        return [rebuild(c, doc_major, hyper.num_topics)
                for c, (_, doc_major) in zip(chunks, topics)]

    def run_count(word_topic):
        for c, (word_major, _) in zip(chunks, topics):
            word_topic = count(c, word_major, word_topic)
        return word_topic

    def phase(fn, prepare=lambda: ()):
        """(result, median seconds, first-pass seconds) of fn(*prepare())."""
        times, result = [], None
        for _ in range(repeats + 1):
            args = jax.block_until_ready(prepare())
            result = None  # free the previous pass's output first
            result, seconds = timed(lambda: fn(*args))
            times.append(seconds)
        return result, statistics.median(times[1:]), times[0]

    empty = lambda: (jnp.zeros_like(state.model.word_topic),)  # noqa: E731
    out = {}
    topics, out["sample"], first_sample = phase(run_sample)
    _, out["rebuild_a"], first_rebuild = phase(run_rebuild)
    _, out["count_b"], first_count = phase(run_count, empty)
    _, out["bhat_trees"], first_bhat = phase(bhat_trees, lambda: (state.model.word_topic,))
    firsts = dict(sample=first_sample, rebuild_a=first_rebuild, count_b=first_count,
                  bhat_trees=first_bhat)
    phases = {name: dict(seconds=significant(seconds),
                         Mtoken_per_s=significant(num_tokens / seconds / 1e6),
                         compile_seconds=significant(max(firsts[name] - seconds, 0.0)))
              for name, seconds in out.items()}
    if card is not None:
        floor = roofline.floor(chunks, state.chunks, state.model.bhat.shape, card)
        phases["sample"].update({key: significant(value, 4) if isinstance(value, float) else value
                                 for key, value in floor.items()})
        phases["sample"]["over_floor"] = significant(out["sample"] / floor["floor_seconds"], 3)
    return phases
