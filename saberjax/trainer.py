"""The training loop: corpus -> PDOW layout -> ESCA iterations -> TopicModel, with metrics.

A thin shell around `esca.init` and `esca.step`: it spreads the chunks over the local devices
(one chunk per device unless chunk_tokens asks for more; results do not depend on it), compiles
once ahead of time (timed apart from the iterations), runs the iterations (each queued on the
device behind the one before, so the device does not wait for the host), scores the held-out
documents every `eval_every` iterations and hands per-iteration metrics to an optional
callback, which may stop training early by returning True.  With `checkpoint_every` it saves
the whole state every so many iterations (saberjax.checkpoint), and `resume_from` continues
from such a checkpoint, ending with the same model as an uninterrupted run.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import time
from typing import Callable, NamedTuple

import jax
import numpy as np

from saberjax import checkpoint, esca, streaming
from saberjax.corpus import Corpus
from saberjax.evaluate import DEFAULT_EM_ITERATIONS, heldout_loglik
from saberjax.layout import Layout, build_layout
from saberjax.model import TopicModel
from saberjax.state import Hyperparams, TrainState, check_document_lengths


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Every setting of a training run (saved with the model)."""

    num_topics: int = 100
    alpha: float | None = None  # None: 50 / num_topics
    beta: float = 0.01
    iterations: int = 100
    seed: int = 0
    backend: str = "auto"  # "auto", "xla" or "pallas"
    chunk_tokens: int | None = None  # None: one chunk per device
    num_devices: int = 0  # 0: every local device (chunks are spread over them)
    eval_every: int = 0  # 0: only after the last iteration (when held-out data is given)
    em_iterations: int = DEFAULT_EM_ITERATIONS
    checkpoint_every: int = 0  # 0: never; else save the state every N iterations
    device_memory_gb: float | None = None  # None: what the device has free, less headroom
    prefetch: int = streaming.DEFAULT_PREFETCH  # chunks in flight when streaming


@dataclasses.dataclass
class TrainResult:
    model: TopicModel
    state: TrainState
    metrics: list[dict]
    init_seconds: float  # initialisation or loading the checkpoint, compilation included
    compile_seconds: float  # compiling the iteration


def pallas_unavailable_reason() -> str | None:
    """Why the Pallas kernels cannot run here (not importable, or no GPU), or None."""
    try:
        from saberjax.pallas import kernels  # noqa: F401, PLC0415
    except ImportError as error:
        return f"ImportError: {error}"
    if jax.default_backend() != "gpu":
        return f"the pallas kernels need a GPU; this platform is {jax.default_backend()}"
    return None


def pallas_available() -> bool:
    """Whether the Pallas kernels are importable and a GPU is present."""
    return pallas_unavailable_reason() is None


def heldout_score(state: TrainState, hyper: Hyperparams, heldout,
                  em_iterations: int = DEFAULT_EM_ITERATIONS):
    """Document completion of the (observed, held-out) halves `heldout` under the state's
    B-hat, computed on the device in float32 (training's evaluation and the benchmark's)."""
    bhat = esca.float32_bhat(state.model.word_topic, state.model.topic_totals, hyper.num_topics,
                             hyper.beta)
    return heldout_loglik(bhat[:, :hyper.num_topics].T, *heldout, hyper.alpha, em_iterations)


def resolve_backend(name: str) -> str:
    """'auto' becomes 'pallas' on a GPU with the kernels available, else 'xla'."""
    if name == "auto":
        return "pallas" if pallas_available() else "xla"
    if name == "pallas" and not pallas_available():
        raise ValueError("backend 'pallas' is not yet available here (needs a GPU and the "
                         "saberjax.pallas kernels); use --backend=xla or auto")
    if name not in ("xla", "pallas"):
        raise ValueError(f"backend must be 'auto', 'xla' or 'pallas', got {name!r}")
    return name


def spread_over_devices(chunks, devices) -> tuple:
    """Chunk i placed on devices[i % len(devices)]."""
    return tuple(jax.device_put(chunk, devices[index % len(devices)])
                 for index, chunk in enumerate(chunks))


def layout_for_devices(corpus: Corpus, chunk_tokens: int | None, devices) -> Layout:
    """The PDOW layout with at least one chunk per device (unless chunk_tokens is given)."""
    return build_layout(corpus, chunk_tokens or -(-corpus.num_tokens // len(devices)))


# Tokens of the two probe chunks whose compiled steps measure device bytes per token.
PROBE_TOKENS = (1 << 15, 1 << 16)
# Device bytes per token no chunk step exceeds (measured: 87 for the XLA path on a CPU,
# 61 for the Pallas path on an H200).
BYTES_PER_TOKEN_BOUND = 512


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
    the size of the model do not count as per-token."""
    (small_tokens, small), (large_tokens, large) = (
        _chunk_step_bytes(corpus, hyper, tokens) for tokens in PROBE_TOKENS)
    if large_tokens == small_tokens:  # a corpus smaller than the probes
        return large / large_tokens
    return max(large - small, 0) / (large_tokens - small_tokens)


def place_chunks(corpus: Corpus, hyper: Hyperparams, config: TrainConfig):
    """(chunks, devices): chunks on the devices when they fit, else streamed.

    The device budget is config.device_memory_gb, or what the first device has free less
    headroom (none on a CPU: everything stays resident).  When the corpus does not fit, the
    fewest chunks that fit are streamed through one device (streaming.HostChunks); a given
    chunk_tokens overrides the chunk size.  The model alone not fitting is a clear error.
    """
    devices = esca.local_devices(config.num_devices)
    budget = (int(config.device_memory_gb * 1e9) if config.device_memory_gb
              else streaming.free_device_memory(devices[0]))
    model_bytes = streaming.model_bytes(corpus.num_words, hyper.padded_topics)
    cheap_bound = model_bytes + corpus.num_tokens * BYTES_PER_TOKEN_BOUND
    if budget is not None and cheap_bound > budget:
        planned = streaming.plan_chunk_tokens(
            corpus.num_tokens, corpus.num_words, hyper.num_topics, hyper.padded_topics, budget,
            device_bytes_per_token(corpus, hyper), config.prefetch)
        if planned is not None:  # the layout's numpy copies are freed once pinned
            layout = build_layout(corpus, config.chunk_tokens or planned)
            return streaming.HostChunks(layout.chunks, config.prefetch, devices[0]), devices[:1]
    layout = layout_for_devices(corpus, config.chunk_tokens, devices)
    return spread_over_devices(layout.chunks, devices), devices


def _ready_at(tree) -> float:
    """The time at which every array of tree is ready (waits for them)."""
    jax.block_until_ready(tree)
    return time.perf_counter()


class Iterations(NamedTuple):
    """What train_on_chunks ran: the last state, one metrics record per iteration, the seconds
    of initialisation (or loading the checkpoint, compilation included) and of compiling the
    iteration."""

    state: TrainState
    metrics: list[dict]
    init_seconds: float
    compile_seconds: float


def train_on_chunks(corpus: Corpus, chunks, hyper: Hyperparams, config: TrainConfig,
                    heldout: tuple[Corpus, Corpus] | None = None,
                    callback: Callable[[int, dict, TrainState], bool | None] | None = None,
                    checkpoint_dir=None, resume_from=None) -> Iterations:
    """Initialise (or resume), compile and run the iterations of config over chunks already
    placed (place_chunks: on the devices, or streaming.HostChunks); see train.

    Each iteration is queued on the device before the one before it is waited for, so the
    device never idles while the host dispatches the next (1.2 ms of a 9.7 ms iteration on
    wiki25k at K = 1,024, H200; no difference on two CPU devices, whose threads wait for their
    chunks inside a step): the host records, evaluates and calls back while the next
    iteration runs, and a callback that stops the run discards that one.  Two states are
    alive at a time, as in any step: the one being computed and the one it comes from.
    Streamed chunks are the exception: a streamed step returns only once its chunks are back
    in host memory, so queueing ahead would only delay the callback by an iteration.  A thread
    waits for each state, so a record's seconds run from the previous iteration's end to this
    one's whatever the host is doing meanwhile.
    """
    streamed = isinstance(chunks, streaming.HostChunks)
    start = time.perf_counter()
    if resume_from is None:
        state, metrics = esca.init(chunks, corpus.num_words, hyper, config.seed), []
    else:
        state, metrics = checkpoint.load_checkpoint(resume_from, chunks, hyper,
                                                    corpus.fingerprint(), config)
        if int(state.iteration) > config.iterations:
            raise ValueError(f"{resume_from} is at iteration {int(state.iteration)}, beyond "
                             f"iterations={config.iterations}")
    state = jax.block_until_ready(state)
    init_seconds = time.perf_counter() - start
    step = esca.CompiledStep(chunks, state, hyper)
    previous_counters = dataclasses.replace(chunks.counters) if streamed else None

    first, last = int(state.iteration) + 1, config.iterations
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="saberjax-wait") as waiter:
        finished = time.perf_counter()
        following = step(state, chunks) if first <= last else None
        for iteration in range(first, last + 1):
            state, following = following, None
            ready_at = waiter.submit(_ready_at, state)
            if not streamed and iteration < last:
                following = step(state, chunks)
            now = ready_at.result()
            seconds, finished = now - finished, now
            record = dict(iteration=iteration, seconds=seconds,
                          tokens_per_second=corpus.num_tokens / seconds)
            if streamed:
                record.update(chunks.counters.since(previous_counters).as_metrics())
                previous_counters = dataclasses.replace(chunks.counters)
            due = config.eval_every and iteration % config.eval_every == 0
            if heldout is not None and (due or iteration == last):
                score = heldout_score(state, hyper, heldout, config.em_iterations)
                record.update(heldout_loglik_per_token=score.loglik_per_token,
                              perplexity=score.perplexity)
            metrics.append(record)
            if config.checkpoint_every and iteration % config.checkpoint_every == 0:
                checkpoint.save_checkpoint(checkpoint_dir, state, chunks, config,
                                           corpus.fingerprint(), metrics)
            if callback is not None and callback(iteration, record, state):
                break
            if following is None and iteration < last:
                following = step(state, chunks)
    return Iterations(state, metrics, init_seconds, step.compile_seconds)


def train(corpus: Corpus, config: TrainConfig,
          heldout: tuple[Corpus, Corpus] | None = None,
          callback: Callable[[int, dict, TrainState], bool | None] | None = None,
          checkpoint_dir=None, resume_from=None) -> TrainResult:
    """Train LDA on `corpus`; `heldout` = (observed, held-out) halves of test documents.

    Checkpoints go to `checkpoint_dir` (needed when config.checkpoint_every is set);
    `resume_from` is a checkpoint (e.g. checkpoint.latest_checkpoint(dir)) to continue from,
    its metrics included, instead of initialising.
    """
    if config.checkpoint_every and checkpoint_dir is None:
        raise ValueError("checkpoint_every is set but no checkpoint_dir was given")
    hyper = Hyperparams.create(config.num_topics, config.alpha, config.beta,
                               resolve_backend(config.backend))
    check_document_lengths(corpus.doc_lengths(), hyper.num_topics)
    chunks, devices = place_chunks(corpus, hyper, config)
    run = train_on_chunks(corpus, chunks, hyper, config, heldout, callback, checkpoint_dir,
                          resume_from)
    counts = np.asarray(run.state.model.word_topic[:, :hyper.num_topics])
    model_config = dict(dataclasses.asdict(config), alpha=hyper.alpha, backend=hyper.backend,
                        corpus_fingerprint=corpus.fingerprint(), corpus_name=corpus.name,
                        corpus_docs=corpus.num_docs, corpus_tokens=corpus.num_tokens,
                        num_chunks=len(chunks), devices=len(devices),
                        streamed=isinstance(chunks, streaming.HostChunks),
                        iterations_run=len(run.metrics))
    model = TopicModel(counts, hyper.alpha, hyper.beta, tuple(corpus.vocab), model_config)
    return TrainResult(model, *run)
