"""The model on the mesh: the row of its global arrays that holds each word, B between the
host and those rows (dense [V, K_pad], or a sparse model's rows of nonzeros) and B-hat whole
from them.

    by document   row v holds word v (V padded to equal shares of the mesh)
    by word       share r % W's row r // W holds the word at position r of the share order
                  (layout.share_order; W the devices of the words axis); on the two-axis mesh exchanging counts each share's rows
                  are split among its hosts' devices by block (row_of_word)

The placement is execution.placement.Placement (its mesh, word order, programs and
shardings), whose host views of the model call these functions; this module does not
import it.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from saberjax import compilation, segmented_count
from saberjax import sparse_word_topic as swt
from saberjax.execution.mesh import to_host
from saberjax.mstep import float32_bhat
from saberjax.sparse_rows import SparseRows
from saberjax.sparse_word_topic import SparseWordTopic
from saberjax.state import Model, TrainState


def row_of_word(placement) -> np.ndarray:
    """Row of the model's global arrays holding each word (by id): the word itself by
    document; by word, share r % W's row r // W for the word at position r of the share
    order (layout.share_order; W the devices of the words axis).  On the two-axis mesh of
    H hosts exchanging counts each share's rows are split among its H devices by block:
    the int32 rows' H parts, then the float16 rows' (Programs._model_of_partial_counts),
    host h holding part h of each; exchanging topics every host holds them whole
    (row_parts 1)."""
    if placement.word_shares is None:
        return np.arange(placement.num_words)
    in_order = np.empty(placement.num_words, np.int64)
    in_order[placement.word_order] = np.arange(placement.num_words)
    share, row = in_order % placement.word_parts, in_order // placement.word_parts
    model_rows = placement.model_rows
    hosts = placement.row_parts
    first = placement.first_float16_row
    int32_part, float16_part = first // hosts, (model_rows - first) // hosts
    in_float16 = row >= first
    host = np.where(in_float16, (row - first) // max(float16_part, 1),
                    row // max(int32_part, 1))
    position = np.where(in_float16, int32_part + (row - first) % max(float16_part, 1),
                        row % max(int32_part, 1))
    return (share * hosts + host) * (model_rows // hosts) + position


def _dense(counts: SparseWordTopic, num_words: int, padded_topics: int) -> np.ndarray:
    """int32 B [V, K_pad] of B's nonzeros."""
    dense = np.zeros((num_words, padded_topics), np.int32)
    dense[np.repeat(np.arange(num_words), np.diff(counts.indptr)), counts.topics] = counts.counts
    return dense


def word_topic(placement, state: TrainState) -> np.ndarray:
    """B [V, K_pad] on the host, rows by word id (every process takes part; a sparse
    model made dense)."""
    if placement.hyper.sparse:
        return _dense(sparse_word_topic(placement, state), placement.num_words,
                      placement.hyper.padded_topics)
    return to_host(state.model.word_topic)[row_of_word(placement)]


def sparse_word_topic(placement, state: TrainState) -> SparseWordTopic:
    """B's nonzeros of the real topics on the host, rows by word id (every process takes
    part): of a sparse model's rows, or of dense B."""
    hyper, copies, model_rows = placement.hyper, placement.sparse_copies, placement.model_rows
    if not hyper.sparse:
        return swt.from_dense(word_topic(placement, state)[:, :hyper.num_topics])
    row_start, topics, counts = (to_host(array).reshape(copies, -1)
                                 for array in state.model.word_topic)
    word_of_row = np.zeros(placement.padded_words, np.int64)
    word_of_row[row_of_word(placement)] = np.arange(placement.num_words)
    words, entries_topics, entries_counts = [], [], []
    for device in range(copies):
        starts, filled = row_start[device], row_start[device, -1]
        rows = device * model_rows + np.repeat(np.arange(model_rows), np.diff(starts))
        words.append(word_of_row[rows])
        entries_topics.append(topics[device, :filled])
        entries_counts.append(counts[device, :filled])
    return swt.from_entries(
        np.concatenate(words), np.concatenate(entries_topics),
        np.concatenate(entries_counts), placement.num_words, hyper.num_topics)


def model_from_word_topic(placement, word_topic, alpha: np.ndarray) -> Model:
    """The model of host counts B (dense [V, K_pad], or a SparseWordTopic) and prior
    alpha [K_pad]: B's rows spread over the mesh."""
    hyper, programs = placement.hyper, placement.programs
    if hyper.sparse:
        placed = _sparse_rows(placement, word_topic)
    else:
        if isinstance(word_topic, SparseWordTopic):
            word_topic = _dense(word_topic, placement.num_words, hyper.padded_topics)
        rows = np.zeros((placement.padded_words, word_topic.shape[1]), word_topic.dtype)
        rows[row_of_word(placement)] = word_topic
        placed = jax.make_array_from_callback(
            rows.shape, placement.sharding(programs.model_spec.word_topic),
            lambda index: rows[index])
    return programs.model(placed, placement.replicated(np.asarray(alpha, np.float32)))


def _sparse_rows(placement, word_topic) -> SparseRows:
    """A sparse model's rows of host counts B (dense or a SparseWordTopic) on the mesh:
    each device's rows, or (streamed by document) the whole rows on every device, as sparse
    rows of the placement's capacity (Placement.sparse_capacity)."""
    hyper, copies, rows = placement.hyper, placement.sparse_copies, placement.model_rows
    if not isinstance(word_topic, SparseWordTopic):
        word_topic = swt.from_dense(word_topic[:, :hyper.num_topics])
    capacity = placement.sparse_capacity
    word_of_row = np.full(placement.padded_words, -1, np.int64)
    word_of_row[row_of_word(placement)] = np.arange(placement.num_words)
    row_start = np.zeros((copies, rows + 1), np.int32)
    topics = np.full((copies, capacity), hyper.padded_topics, np.int32)
    counts = np.zeros((copies, capacity), np.int32)
    for device in range(copies):
        words = word_of_row[device * rows:(device + 1) * rows]
        lengths = np.where(words >= 0, np.diff(word_topic.indptr)[np.maximum(words, 0)], 0)
        np.cumsum(lengths, out=row_start[device, 1:])
        entries = np.concatenate([np.arange(word_topic.indptr[word],
                                            word_topic.indptr[word + 1])
                                  for word in words[words >= 0]] or [np.zeros(0, np.int64)])
        if len(entries) > capacity:
            raise ValueError(f"B has {len(entries):,} nonzeros in device {device}'s rows, "
                             f"more than its {capacity:,} tokens")
        topics[device, :len(entries)] = word_topic.topics[entries]
        counts[device, :len(entries)] = word_topic.counts[entries]
    return SparseRows(*(jax.make_array_from_callback(
        (array.size,), placement.sharding(placement.programs.model_spec.word_topic.row_start),
        lambda index, array=array: array.reshape(-1)[index])
        for array in (row_start, topics, counts)))


def topic_word(placement, state: TrainState) -> jax.Array:
    """float32 B-hat [K, V] of the state's counts, whole on every device (for scoring)."""
    hyper = placement.hyper
    rows = placement.replicated(row_of_word(placement))
    if hyper.sparse:
        return _sparse_topic_word(state.model.word_topic, state.model.topic_totals, rows,
                                  placement.sparse_copies, hyper.num_topics, hyper.beta,
                                  placement.num_words, placement.sharding(P()))
    return _dense_topic_word(state.model.word_topic, state.model.topic_totals, rows,
                             hyper.num_topics, hyper.beta, placement.num_words, hyper.seeds,
                             placement.sharding(P()))


def _topic_word(word_topic, totals, row_of_word, num_topics: int, beta: float,
                num_words: int, seeds, sharding):
    """float32 B-hat [K, V] of B's rows row_of_word (by word id; seeds over word ids), laid
    out by `sharding` (traced inside the program calling it)."""
    bhat = float32_bhat(word_topic[row_of_word], totals, num_topics, beta, num_words, seeds)
    return jax.lax.with_sharding_constraint(bhat[:, :num_topics].T, sharding)


_dense_topic_word = compilation.jit(_topic_word, static_argnames=(
    "num_topics", "beta", "num_words", "seeds", "sharding"))


@functools.partial(compilation.jit, static_argnames=("num_devices", "num_topics", "beta",
                                                     "num_words", "sharding"))
def _sparse_topic_word(rows: SparseRows, totals, row_of_word, num_devices: int,
                       num_topics: int, beta: float, num_words: int, sharding):
    """float32 B-hat [K, V] of every device's sparse rows of B (rows of row_of_word by word
    id), made dense, laid out by `sharding`."""
    row_start = rows.row_start.reshape(num_devices, -1)
    capacity = rows.topics.shape[0] // num_devices
    device_rows = row_start.shape[1] - 1
    positions = jnp.arange(capacity, dtype=jnp.int32)
    local_row = jax.vmap(lambda starts: jnp.searchsorted(starts, positions, side="right") - 1
                         )(row_start)
    filled = positions[None, :] < row_start[:, -1:]
    dense = segmented_count.store_distinct(
        jnp.zeros((num_devices * device_rows, totals.shape[0]), jnp.int32),
        (jnp.arange(num_devices)[:, None] * device_rows + local_row).ravel(), filled.ravel(),
        rows.counts, rows.topics)
    return _topic_word(dense, totals, row_of_word, num_topics, beta, num_words, None, sharding)
