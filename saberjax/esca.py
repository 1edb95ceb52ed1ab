"""ESCA (stochastic EM) for LDA: `init` and `step` over the PDOW chunks (paper Algorithm 1).

E-step: every token draws a new topic from (A_dk + alpha) B-hat_vk with the current counts.
M-step: A rebuilt per chunk by shuffle and segmented count, B counted, B-hat and the sampling
trees recomputed.  `step(state, chunks, hyper)` is pure and jit-able; the trainer instead jits
`chunk_step` (one chunk's E-step and A rebuild, adding its tokens into B) and `finish_step`
(B-hat and trees), so compile time does not grow with the number of chunks and chunks can be
streamed through the device one at a time.

`hyper.backend` chooses the implementation of the hot operations: "xla" (the plain-JAX
reference, runs anywhere) or "pallas" (the GPU kernels in saberjax.pallas).
"""

from __future__ import annotations

import concurrent.futures
import functools
import time
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from saberjax import rng, sampler, segmented_count, streaming
from saberjax.layout import Chunk
from saberjax.state import BHAT_DTYPE, ChunkState, Hyperparams, Model, TrainState
from saberjax.tree import build_tree, tree_totals


def count_word_topic(chunk: Chunk, topics: jax.Array, word_topic: jax.Array) -> jax.Array:
    """B plus the (word, topic) counts of the chunk's real tokens."""
    real = jnp.arange(chunk.padded_tokens) < chunk.num_tokens
    return word_topic.at[chunk.word, topics.astype(jnp.int32)].add(real.astype(jnp.int32))


def bhat_denominator(totals: jax.Array, num_words: int, beta) -> jax.Array:
    """Each topic's B-hat denominator, topic total + V beta (float32)."""
    return totals.astype(jnp.float32) + num_words * beta


def float32_bhat(word_topic: jax.Array, totals: jax.Array, num_topics: int, beta):
    """B-hat = (B + beta) / (topic totals + V beta) in float32, 0 in padding columns."""
    real_topic = jnp.arange(word_topic.shape[1]) < num_topics
    denominator = bhat_denominator(totals, word_topic.shape[0], beta)
    return jnp.where(real_topic, (word_topic + beta) / denominator, 0.0).astype(jnp.float32)


def bhat_and_tree(word_topic: jax.Array, totals: jax.Array, num_topics: int, beta,
                  dtype=BHAT_DTYPE):
    """B-hat in dtype and its sampling trees' levels above it, top first, summed in float32
    from the values B-hat holds (so a tree walk's last level adds up to the node above it)."""
    bhat = float32_bhat(word_topic, totals, num_topics, beta).astype(dtype)
    return bhat, build_tree(bhat.astype(jnp.float32))


def model_arrays(word_topic: jax.Array, num_topics: int, beta):
    """(topic totals, B-hat, its tree levels top first) of counts B."""
    totals = word_topic.sum(axis=0)
    return (totals, *bhat_and_tree(word_topic, totals, num_topics, beta))


def model_from_counts(word_topic: jax.Array, hyper: Hyperparams) -> Model:
    """The model (B, its topic totals, B-hat and its sampling trees) of counts B."""
    totals, bhat, tree = backend_ops(hyper.backend).model_arrays(word_topic, hyper.num_topics,
                                                                 hyper.beta)
    return Model(word_topic, totals, bhat, tree, tree_totals(tree, bhat))


def sample_and_shuffle(chunk: Chunk, chunk_state: ChunkState, model: Model, key, alpha):
    """The E-step's new topics, word-major and shuffled to doc-major (the A rebuild's input)."""
    topics = sampler.sample_chunk(chunk, chunk_state, model, key, alpha)
    return topics, segmented_count.shuffle_to_doc_major(topics, chunk.doc_major_pos)


class Backend(NamedTuple):
    """The hot operations of one backend; the XLA set is the reference for every other."""

    # (chunk, chunk_state, model, key, alpha) -> (word-major topics, doc-major topics)
    sample_and_shuffle: Callable
    # (chunk, doc-major topics, num_topics) -> (a_pairs, a_nnz), padding tokens not counted
    rebuild_doc_topic: Callable
    count_word_topic: Callable  # (chunk, word-major topics, word_topic) -> B plus the chunk
    # (B, num_topics, beta) -> (topic totals, B-hat, its tree levels above it, top first)
    model_arrays: Callable


XLA = Backend(sample_and_shuffle, segmented_count.rebuild_doc_topic, count_word_topic,
              model_arrays)


def backend_ops(name: str) -> Backend:
    """The operations of backend "xla" or "pallas" (the latter imported only when asked for)."""
    if name == "pallas":
        from saberjax.pallas import kernels  # noqa: PLC0415 (GPU kernels, imported on demand)

        return kernels.BACKEND
    return XLA


def chunk_state_from_topics(chunk: Chunk, topics: jax.Array, doc_major_topics: jax.Array,
                            hyper: Hyperparams) -> ChunkState:
    """A chunk's state for given word-major topics, A rebuilt from the same topics doc-major."""
    return ChunkState(topics, *backend_ops(hyper.backend).rebuild_doc_topic(
        chunk, doc_major_topics, hyper.num_topics))


def _sample(chunk: Chunk, chunk_state: ChunkState, model: Model, key, hyper: Hyperparams):
    """One chunk's E-step: new topics, (word-major, doc-major)."""
    return backend_ops(hyper.backend).sample_and_shuffle(chunk, chunk_state, model, key,
                                                         hyper.alpha)


def _state_and_counts(chunk: Chunk, topics, word_topic, hyper: Hyperparams):
    """(the chunk's state for topics (word-major, doc-major), B with the chunk's tokens added)."""
    return (chunk_state_from_topics(chunk, *topics, hyper),
            backend_ops(hyper.backend).count_word_topic(chunk, topics[0], word_topic))


@functools.partial(jax.jit, static_argnames=("hyper",), donate_argnames=("word_topic",))
def chunk_step(chunk: Chunk, chunk_state: ChunkState, model: Model, key, word_topic,
               hyper: Hyperparams):
    """One chunk's E-step and A rebuild; returns (new chunk state, B with its tokens added)."""
    return _state_and_counts(chunk, _sample(chunk, chunk_state, model, key, hyper), word_topic,
                             hyper)


@functools.partial(jax.jit, static_argnames=("hyper",))
def resample_chunk(chunk: Chunk, chunk_state: ChunkState, model: Model, key,
                   hyper: Hyperparams) -> ChunkState:
    """One chunk's E-step and A rebuild with the model held fixed (fold-in of new documents)."""
    return chunk_state_from_topics(chunk, *_sample(chunk, chunk_state, model, key, hyper), hyper)


# B is donated: the model returns it as its word_topic, which otherwise costs a copy of B (2.4 ms
# of a 60 ms iteration at K = 10,000 on the NYTimes shape, H200)
finish_step = jax.jit(model_from_counts, static_argnames=("hyper",),
                      donate_argnames=("word_topic",))


@functools.partial(jax.jit, static_argnames=("hyper",), donate_argnames=("word_topic",))
def _init_chunk(chunk: Chunk, seed, word_topic, hyper: Hyperparams):
    """Uniformly random initial topics of a chunk, keyed like every other draw."""
    positions = jnp.arange(chunk.padded_tokens)
    lo, hi = rng.global_token_ids(chunk.token_base[0], chunk.token_base[1], chunk.doc_major_pos)
    state = rng.token_hash(rng.iteration_key(seed, 0), lo, hi)
    draw = (rng.uniform(state, rng.STREAM_INIT) * hyper.num_topics).astype(jnp.int32)
    topics = jnp.where(positions < chunk.num_tokens, jnp.minimum(draw, hyper.num_topics - 1),
                       0).astype(hyper.topic_dtype)
    doc_major = segmented_count.shuffle_to_doc_major(topics, chunk.doc_major_pos)
    return _state_and_counts(chunk, (topics, doc_major), word_topic, hyper)


def init(chunks: tuple[Chunk, ...], num_words: int, hyper: Hyperparams, seed: int) -> TrainState:
    """The state after random initialisation (iteration 0).

    `chunks`: device chunks (a tuple, possibly spread over devices) or streaming.HostChunks,
    whose states then stay in host memory.  No document may be longer than
    state.max_pair_count(K) tokens (state.check_document_lengths says which one is).
    """
    seed = jnp.uint32(seed)
    home = device_of(chunks[0])
    chunk_states, word_topic = _over_chunks(
        chunks, None, home, jax.ShapeDtypeStruct((num_words, hyper.padded_topics), jnp.int32),
        lambda chunk, _, device, counts: _init_chunk(chunk, seed, counts, hyper))
    return TrainState(chunk_states, finish_step(word_topic, hyper), _put(jnp.int32(0), home),
                      _put(seed, home))


def local_devices(num_devices: int = 0) -> list:
    """The first num_devices local devices of the default backend (0: all of them)."""
    return jax.local_devices()[: num_devices or None]


def device_of(tree):
    """The one device holding a pytree's arrays (None while tracing or when not committed)."""
    leaf = jax.tree.leaves(tree)[0]
    if isinstance(leaf, jax.core.Tracer) or not getattr(leaf, "committed", False):
        return None
    (device,) = leaf.devices()
    return device


def _device_memory(device):
    """The sharding of arrays in a device's own memory (None: not committed anywhere)."""
    return None if device is None else jax.sharding.SingleDeviceSharding(device,
                                                                          memory_kind="device")


def _put(tree, device):
    """The tree in the device's own memory (from another device or pinned host memory)."""
    if device is None:
        return tree
    return jax.device_put(tree, _device_memory(device))


def _abstract(tree, device):
    """Shapes, dtypes and placement of the tree as `_put(tree, device)` would give them."""
    sharding = _device_memory(device)
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=sharding),
                        tree)


def _over_chunks(chunks, chunk_states, home, counts_like, run_chunk: Callable):
    """run_chunk(chunk, chunk state, device, counts) -> (chunk state, counts) over all chunks.

    Chunks on devices may live on several: each device works through its own chunks in a
    thread of its own (XLA:CPU runs a computation on the thread that calls it) and accumulates
    their word-topic counts; the integer partial counts are then summed on `home`, so the
    result is the same on any number of devices.  Host chunks (streaming.HostChunks) stream
    through the default device.  `chunk_states` is None at initialisation.
    Returns (chunk states, counts).
    """
    if isinstance(chunks, streaming.HostChunks):
        return streaming.stream_over_chunks(chunks, chunk_states,
                                            zero_counts(counts_like, chunks.device), run_chunk)
    by_device: dict = {}
    for index, chunk in enumerate(chunks):
        by_device.setdefault(device_of(chunk) or home, []).append(index)

    def run_device(device, indices):
        counts = zero_counts(counts_like, device)
        states = {}
        for index in indices:
            chunk_state = None if chunk_states is None else chunk_states[index]
            states[index], counts = run_chunk(chunks[index], chunk_state, device, counts)
        return states, counts

    if len(by_device) == 1:  # no wait: the model update queues right behind the chunk steps
        results = [run_device(*next(iter(by_device.items())))]
    else:  # each thread waits for its device's work, which XLA:CPU runs on the calling thread
        with concurrent.futures.ThreadPoolExecutor(len(by_device)) as pool:
            results = list(pool.map(lambda *args: jax.block_until_ready(run_device(*args)),
                                    by_device, by_device.values()))
    states = {index: state for device_states, _ in results for index, state in device_states.items()}
    partials = [_put(counts, home) for _, counts in results]
    return tuple(states[index] for index in range(len(chunks))), sum(partials[1:], partials[0])


def _chunk_devices(chunks, home) -> set:
    """The devices the chunks' steps run on: each chunk's own, `home` for uncommitted ones."""
    return {device_of(chunk) or home for chunk in chunks}


def zero_counts(like: jax.Array, device) -> jax.Array:
    """Zero word-topic counts shaped like `like` on `device`, where a step adds its chunks' up.

    An eager op, so compiled on first use: CompiledStep makes that use, so that it counts as
    compile time and not as the first iteration's."""
    return jnp.zeros_like(like, device=device)


@jax.jit
def next_iteration(seed, iteration):
    """(iteration + 1, its random key), as one dispatch compiled ahead (eagerly, the key's ten
    ops took 0.2 ms of host time a step on a CPU, during which a GPU waits, and each compiled
    on first use, inside the first iteration)."""
    return iteration + 1, rng.iteration_key(seed, iteration + 1)


def _iterate(state: TrainState, chunks, run_chunk: Callable, finish: Callable) -> TrainState:
    """One ESCA iteration given the per-chunk step and the model update to run it with."""
    iteration, key = next_iteration(state.seed, state.iteration)
    home = device_of(state.model)
    models = {device: _put((state.model, key), device)
              for device in _chunk_devices(chunks, home)}

    def visit(chunk, chunk_state, device, counts):
        return run_chunk(chunk, chunk_state, *models[device], counts)

    chunk_states, word_topic = _over_chunks(chunks, state.chunks, home, state.model.word_topic,
                                            visit)
    return TrainState(chunk_states, finish(word_topic), iteration, state.seed)


def step(state: TrainState, chunks: tuple[Chunk, ...], hyper: Hyperparams) -> TrainState:
    """One ESCA iteration over all chunks: new_state = step(state, chunks, hyper)."""
    return _iterate(state, chunks, functools.partial(chunk_step, hyper=hyper),
                    functools.partial(finish_step, hyper=hyper))


def _signature(*trees):
    """What an executable is specialised on: structure, shapes, dtypes and device."""
    return tuple((jax.tree.structure(tree), device_of(tree),
                  tuple((leaf.shape, str(leaf.dtype)) for leaf in jax.tree.leaves(tree)))
                 for tree in trees)


class CompiledStep:
    """`step` through ahead-of-time compiled executables (one per distinct chunk shape).

    Same computation and results as `step`, but calling it never compiles, so training and
    benchmark loops time iterations apart from compilation (`compile_seconds`).
    """

    def __init__(self, chunks: tuple[Chunk, ...], state: TrainState, hyper: Hyperparams):
        start = time.perf_counter()
        _, key = next_iteration(state.seed, state.iteration)
        for device in _chunk_devices(chunks, device_of(state.model)):
            zero_counts(state.model.word_topic, device)
        self._chunk_step = {}
        for chunk, chunk_state in zip(chunks, state.chunks):
            signature = _signature(chunk, chunk_state)
            if signature not in self._chunk_step:  # (host chunks move to device memory)
                example = _abstract((chunk, chunk_state, state.model, key,
                                     state.model.word_topic), device_of(chunk))
                self._chunk_step[signature] = chunk_step.lower(*example, hyper=hyper).compile()
        self._finish = finish_step.lower(state.model.word_topic, hyper=hyper).compile()
        self.compile_seconds = time.perf_counter() - start
        self.num_executables = len(self._chunk_step) + 1

    def _run_chunk(self, chunk, chunk_state, model, key, word_topic):
        executable = self._chunk_step[_signature(chunk, chunk_state)]
        return executable(chunk, chunk_state, model, key, word_topic)

    def __call__(self, state: TrainState, chunks: tuple[Chunk, ...]) -> TrainState:
        return _iterate(state, chunks, self._run_chunk, self._finish)


def corpus_order_topics(chunks: tuple[Chunk, ...], state: TrainState) -> np.ndarray:
    """Every token's topic in corpus (document) order, gathered from all chunks to the host."""
    parts = []
    for chunk, chunk_state in zip(chunks, state.chunks):
        num_tokens = int(chunk.num_tokens)
        doc_major = np.empty(chunk.padded_tokens, np.int32)
        doc_major[np.asarray(chunk.doc_major_pos)] = np.asarray(chunk_state.topics)
        parts.append(doc_major[:num_tokens])
    return np.concatenate(parts)
