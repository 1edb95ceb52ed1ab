"""ESCA (stochastic EM) for LDA: `init` and `step` over the PDOW chunks (paper Algorithm 1).

E-step: every token draws a new topic from (A_dk + alpha_k) B-hat_vk with the current counts.
M-step: A rebuilt per chunk by shuffle and segmented count, B counted, B-hat and the sampling
trees recomputed.  The learned prior: every few iterations alpha is re-estimated from the
documents' topic counts (`update_alpha`, saberjax.prior).  Every function here is a pure
function of pytrees: `init`, `step` and `update_alpha` run a whole iteration over a tuple of
chunks; `init_chunk` / `chunk_step` (one chunk's E-step and A
rebuild, adding its tokens into B) and `model_from_counts` / `model_from_totals` (B-hat and
trees) are the pieces saberjax.execution composes to run the same iteration on a mesh of
devices or streamed through one.  Where a computation runs is not decided here.

`hyper.backend` chooses the implementation of the hot operations (saberjax.backend);
`hyper.model_format` the form of the model: dense V x K arrays, or B's sparse rows
(saberjax.sparse_rows, sampled by saberjax.sparse_sampler; made by execution.programs, which
counts a word share's rows).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from saberjax import compilation, prior, rng, segmented_count, sparse_build, sparse_sampler
from saberjax.backend import backend_ops
from saberjax.config import Hyperparams
from saberjax.layout import Chunk
from saberjax.mstep import bhat_denominator
from saberjax.state import ChunkState, Model, TrainState
from saberjax.tree import tree_totals

INIT_WINDOW_BITS = 10  # a window of initial topics: 2**10 consecutive corpus tokens
INIT_WINDOW_TOKENS = 1 << INIT_WINDOW_BITS


def model_from_totals(word_topic: jax.Array, totals: jax.Array, alpha: jax.Array,
                      hyper: Hyperparams, num_words: int | None = None, first_row=0) -> Model:
    """The model of rows of B given the topic totals and the prior alpha [K_pad]: B-hat and
    its trees over alpha_k B-hat_vk for those rows.

    num_words: the vocabulary's V when word_topic holds only some of its rows (a device's
    share, the model's rows first_row, first_row + 1, ...: where hyper.seeds finds its rows),
    None when it holds them all.  With hyper.sparse, word_topic is B's sparse rows
    (sparse_rows.SparseRows) and the model a sparse_rows.SparseModel."""
    if hyper.sparse:
        return sparse_build.model_from_totals(
            word_topic, totals, alpha, hyper.num_topics, hyper.beta,
            num_words or word_topic.num_rows,
            level_of_leaves=backend_ops(hyper.backend).leaf_level)
    bhat, tree = backend_ops(hyper.backend).bhat_and_tree(word_topic, totals, alpha,
                                                          hyper.num_topics, hyper.beta,
                                                          num_words, hyper.seeds, first_row)
    return Model(word_topic, totals, bhat, tree, tree_totals(tree, bhat, alpha), alpha,
                 bhat_denominator(totals, num_words or word_topic.shape[0], hyper.beta,
                                  hyper.seeds))


def model_from_counts(word_topic: jax.Array, alpha: jax.Array, hyper: Hyperparams) -> Model:
    """The model (B, its topic totals, B-hat, alpha and the sampling trees) of counts B."""
    return model_from_totals(word_topic, backend_ops(hyper.backend).topic_totals(word_topic),
                             alpha, hyper)


def chunk_state_from_topics(chunk: Chunk, topics: jax.Array, doc_major_topics: jax.Array,
                            hyper: Hyperparams) -> ChunkState:
    """A chunk's state for given word-major topics, A rebuilt from the same topics doc-major
    (wide pairs by the reference: the kernels pack uint32 pairs)."""
    if hyper.wide_pairs:
        return ChunkState(topics, *segmented_count.rebuild_doc_topic(
            chunk, doc_major_topics, hyper.num_topics, wide=True))
    return ChunkState(topics, *backend_ops(hyper.backend).rebuild_doc_topic(
        chunk, doc_major_topics, hyper.num_topics))


def state_of_topics(chunk: Chunk, topics: jax.Array, hyper: Hyperparams) -> ChunkState:
    """A chunk's whole state from its word-major topics alone: A is a function of z, so a
    chunk store keeps z and the devices rebuild A when the chunk is put (the same rebuild as
    the end of a step, so the state is the one the step left)."""
    return chunk_state_from_topics(
        chunk, topics, segmented_count.shuffle_to_doc_major(topics, chunk.doc_major_pos), hyper)


def whole_state(chunk: Chunk, chunk_state: ChunkState, hyper: Hyperparams) -> ChunkState:
    """A chunk's state with its A: as it is, or rebuilt from z where it holds z alone."""
    if chunk_state.a_pairs is not None:
        return chunk_state
    return state_of_topics(chunk, chunk_state.topics, hyper)


def sample(chunk: Chunk, chunk_state: ChunkState, model: Model, key, hyper: Hyperparams,
           zero_doc_major: bool = True):
    """One chunk's E-step: new topics, (word-major, doc-major as long as chunk_state's A; where
    no token of the chunk is, 0, or without zero_doc_major maybe unset: for a reader of the
    tokens' positions alone).  Wide pairs are read by the plain-JAX samplers (the kernels
    load uint32 pairs)."""
    kernels = hyper.backend == "pallas" and not hyper.wide_pairs
    if hyper.sparse and kernels:
        from saberjax.pallas import sparse_sampler as kernel  # noqa: PLC0415 (GPU kernels)

        sample_and_shuffle = kernel.sample_and_shuffle
    elif hyper.sparse:
        sample_and_shuffle = sparse_sampler.sample_and_shuffle
    else:
        sample_and_shuffle = backend_ops(hyper.backend if kernels else "xla").sample_and_shuffle
    return sample_and_shuffle(chunk, chunk_state, model, key, zero_doc_major=zero_doc_major)


def count_word_topic(chunk: Chunk, topics: jax.Array, word_topic: jax.Array,
                     hyper: Hyperparams) -> jax.Array:
    """B (rows indexed by chunk.word) plus the chunk's tokens with their word-major topics."""
    return backend_ops(hyper.backend).count_word_topic(chunk, topics, word_topic)


def _state_and_counts(chunk: Chunk, topics, word_topic, hyper: Hyperparams):
    """(the chunk's state for topics (word-major, doc-major), B with the chunk's tokens added)."""
    return (chunk_state_from_topics(chunk, *topics, hyper),
            count_word_topic(chunk, topics[0], word_topic, hyper))


@functools.partial(jax.jit, static_argnames=("hyper",), donate_argnames=("word_topic",))
def chunk_step(chunk: Chunk, chunk_state: ChunkState, model: Model, key, word_topic,
               hyper: Hyperparams):
    """One chunk's E-step and A rebuild; returns (new chunk state, B with its tokens added)."""
    return _state_and_counts(chunk, sample(chunk, chunk_state, model, key, hyper), word_topic,
                             hyper)


@functools.partial(jax.jit, static_argnames=("hyper",))
def resample_chunk(chunk: Chunk, chunk_state: ChunkState, model: Model, key,
                   hyper: Hyperparams) -> ChunkState:
    """One chunk's E-step and A rebuild with the model held fixed (fold-in of new documents)."""
    return chunk_state_from_topics(chunk, *sample(chunk, chunk_state, model, key, hyper), hyper)


# B is donated: the model returns it as its word_topic, which otherwise costs a copy of B every
# iteration (docs/measurements/single_gpu_throughput.md)
finish_step = jax.jit(model_from_counts, static_argnames=("hyper",),
                      donate_argnames=("word_topic",))


def initial_topics(chunk: Chunk, seed, hyper: Hyperparams, doc_major_tokens: int | None = None):
    """Random topics of a chunk's tokens, keyed by token like every other draw:
    (word-major, doc-major in an array of doc_major_tokens, None: the chunk's own).

    Uniform over the K topics, or with hyper.init_window_topics = S uniform over the S
    topics of the token's window (its global id // INIT_WINDOW_TOKENS), each drawn uniformly
    from the window's id: a function of the corpus position alone, so the same whatever the
    chunking, partition or device."""
    positions = jnp.arange(chunk.padded_tokens)
    key = rng.iteration_key(seed, 0)
    token_lo, token_hi = chunk.token_ids(chunk.doc_major_pos)
    uniform = rng.uniform(rng.token_hash(key, token_lo, token_hi), rng.STREAM_INIT)
    if hyper.init_window_topics:
        choices = hyper.init_window_topics
        choice = jnp.minimum((uniform * choices).astype(jnp.uint32), choices - 1)
        window = (token_lo >> INIT_WINDOW_BITS) | (token_hi << (32 - INIT_WINDOW_BITS))
        uniform = rng.uniform(rng.token_hash(key, window, choice), rng.STREAM_INIT_WINDOW)
    draw = (uniform * hyper.num_topics).astype(jnp.int32)
    topics = jnp.where(positions < chunk.num_tokens, jnp.minimum(draw, hyper.num_topics - 1),
                       0).astype(hyper.topic_dtype)
    return topics, segmented_count.shuffle_to_doc_major(topics, chunk.doc_major_pos,
                                                        doc_major_tokens)


@functools.partial(jax.jit, static_argnames=("hyper",), donate_argnames=("word_topic",))
def init_chunk(chunk: Chunk, seed, word_topic, hyper: Hyperparams):
    """A chunk's random initial state (initial_topics); returns (its state, B with its tokens
    added)."""
    return _state_and_counts(chunk, initial_topics(chunk, seed, hyper), word_topic, hyper)


def zero_counts(num_words: int, hyper: Hyperparams) -> jax.Array:
    """Zero word-topic counts B [V, K_pad] (int32), into which an iteration adds its chunks."""
    return jnp.zeros((num_words, hyper.padded_topics), jnp.int32)


def init(chunks: tuple[Chunk, ...], num_words: int, hyper: Hyperparams, seed) -> TrainState:
    """The state after random initialisation (iteration 0).

    Documents longer than state.max_pair_count(K) tokens need hyper.wide_pairs
    (state.needs_wide_pairs).
    """
    seed = jnp.uint32(seed)
    word_topic, chunk_states = zero_counts(num_words, hyper), []
    for chunk in chunks:
        chunk_state, word_topic = init_chunk(chunk, seed, word_topic, hyper)
        chunk_states.append(chunk_state)
    return TrainState(tuple(chunk_states), finish_step(word_topic, hyper.initial_alpha(), hyper),
                      jnp.int32(0), seed)


def iteration_and_key(seed, iteration):
    """(iteration + 1, its random key)."""
    return iteration + 1, rng.iteration_key(seed, iteration + 1)


# one dispatch compiled ahead (eagerly, the key's ten ops would be ten dispatches of host time
# a step, during which a GPU waits); traced inside a program, iteration_and_key
next_iteration = compilation.jit(iteration_and_key)


def step(state: TrainState, chunks: tuple[Chunk, ...], hyper: Hyperparams) -> TrainState:
    """One ESCA iteration over all chunks: new_state = step(state, chunks, hyper)."""
    iteration, key = iteration_and_key(state.seed, state.iteration)
    word_topic = zero_counts(state.model.word_topic.shape[0], hyper)
    chunk_states = []
    for chunk, chunk_state in zip(chunks, state.chunks):
        chunk_state, word_topic = chunk_step(chunk, chunk_state, state.model, key, word_topic,
                                             hyper)
        chunk_states.append(chunk_state)
    return TrainState(tuple(chunk_states), finish_step(word_topic, state.model.alpha, hyper),
                      iteration, state.seed)


def count_topic_histogram(chunk: Chunk, chunk_state: ChunkState, histogram: jax.Array,
                          hyper: Hyperparams) -> jax.Array:
    """histogram [K_pad, width] (int32) plus the (topic, count) pairs of a chunk's A
    (prior.count_histogram; A rebuilt where the state holds z alone)."""
    return prior.count_histogram(whole_state(chunk, chunk_state, hyper).a_pairs, histogram)


def model_with_alpha(model: Model, alpha: jax.Array, hyper: Hyperparams,
                     num_words: int | None = None) -> Model:
    """The model for prior alpha [K_pad]: B and its totals as they are, B-hat's trees rebuilt
    (num_words: as model_from_totals)."""
    return model_from_totals(model.word_topic, model.topic_totals, alpha, hyper, num_words)


def update_alpha(state: TrainState, chunks: tuple[Chunk, ...], length_histogram: jax.Array,
                 hyper: Hyperparams) -> TrainState:
    """The learned prior's update (saberjax.prior): alpha re-estimated by Minka's fixed point
    from the documents' (topic, count) pairs and lengths, and B-hat's trees rebuilt for it; z,
    A and B unchanged.  length_histogram: prior.length_histogram of the corpus's document
    lengths.  `train` runs it after each iteration that prior.is_due names
    (optimize_alpha_every, burn_in); with `step`, it is the whole iteration `train` runs::

        state = step(state, chunks, hyper)
        if prior.is_due(iteration, every, burn_in):
            state = update_alpha(state, chunks, length_histogram, hyper)
    """
    width = prior.histogram_width(length_histogram.shape[0] - 1, hyper.padded_topics)
    histogram = jnp.zeros((hyper.padded_topics, width), jnp.int32)
    for chunk, chunk_state in zip(chunks, state.chunks):
        histogram = count_topic_histogram(chunk, chunk_state, histogram, hyper)
    alpha = prior.fixed_point(state.model.alpha, histogram, length_histogram, hyper.num_topics)
    return state._replace(model=model_with_alpha(state.model, alpha, hyper))


def corpus_order_topics(chunks: tuple[Chunk, ...], chunk_states) -> np.ndarray:
    """Every token's topic in corpus (document) order, gathered from all chunks to the host;
    the chunks in corpus order with their states (a sequence of ChunkState)."""
    return np.concatenate([chunk_corpus_topics(chunk, chunk_state)
                           for chunk, chunk_state in zip(chunks, chunk_states)])


def chunk_corpus_topics(chunk: Chunk, chunk_state: ChunkState) -> np.ndarray:
    """A chunk's topics in corpus (document) order, on the host: its doc-major topics less
    the padding."""
    doc_major = np.empty(chunk.padded_tokens, np.asarray(chunk_state.topics).dtype)
    doc_major[np.asarray(chunk.doc_major_pos)] = np.asarray(chunk_state.topics)
    return doc_major[:int(chunk.num_tokens)]
