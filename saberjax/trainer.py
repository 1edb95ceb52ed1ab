"""The training loop: corpus -> PDOW layout -> ESCA iterations -> TopicModel, with metrics.

A thin loop over saberjax.execution: it places the corpus on a mesh of devices (an equal share
per device, streamed when a share does not fit; results do not depend on it), compiles once
ahead of time (timed apart from the iterations), runs the iterations (each queued on the
devices behind the one before, so they do not wait for the host), scores the held-out
documents every `eval_every` iterations and hands per-iteration metrics to an optional
callback, which may stop training early by returning True.  With `checkpoint_every` it saves
the whole state every so many iterations (saberjax.checkpoint), and `resume_from` continues
from such a checkpoint, ending with the same model as an uninterrupted run.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import sys
import time
from typing import Callable, NamedTuple

import jax

from saberjax import checkpoint, prior, processes, seeding, timing
from saberjax.background import in_background
from saberjax.config import Hyperparams, TrainConfig
from saberjax.corpus import Corpus
from saberjax.evaluate import HeldoutScorer
from saberjax.execution.placement import Placement, placed
from saberjax.execution.plan import Plan, plan
from saberjax.model import TopicModel
from saberjax.progress import Progress, chain
from saberjax.state import TrainState, check_document_lengths


@dataclasses.dataclass
class TrainResult:
    model: TopicModel
    state: TrainState
    metrics: list[dict]
    init_seconds: float  # initialisation or loading the checkpoint, compilation included
    # the wait after initialisation for the iteration (and the update of a learned alpha) to
    # compile: on accelerators they compile while the devices initialise
    compile_seconds: float


def plan_run(corpus: Corpus, hyper: Hyperparams, config: TrainConfig,
             scoring: bool = False) -> Plan:
    """The plan of the run config asks for on the devices (execution.plan.plan); scoring:
    held-out documents are scored during the run."""
    return plan(corpus, hyper, config.num_devices, config.chunk_tokens, config.device_memory_gb,
                config.prefetch, partition=config.partition,
                host_memory_gb=config.host_memory_gb, chunk_store_dir=config.chunk_store,
                scoring=scoring, mesh=config.mesh, model_format=config.model_format)


def place(corpus: Corpus, hyper: Hyperparams, config: TrainConfig,
          scoring: bool = False) -> Placement:
    """The corpus on the devices config asks for, as plan_run plans it."""
    return placed(corpus, hyper, plan_run(corpus, hyper, config, scoring))


def _ready_at(tree) -> float:
    """The time at which every array of tree is ready (waits for them)."""
    jax.block_until_ready(tree)
    return time.perf_counter()


class Iterations(NamedTuple):
    """What train_placed ran: the last state, one metrics record per iteration, the seconds
    of initialisation (or loading the checkpoint, compilation included) and those spent
    waiting after it for the iteration (and the update of a learned alpha) to compile."""

    state: TrainState
    metrics: list[dict]
    init_seconds: float
    compile_seconds: float


def compiles_beside_init(placement: Placement) -> bool:
    """Whether train_placed compiles the iteration and prepares the held-out scorer while the
    devices initialise (the programs need only the state's shapes and shardings): on
    accelerators; CPU devices, one per core, initialise on every core, so the compilation
    would only slow them."""
    return placement.mesh.devices.flat[0].platform != "cpu"


def train_placed(corpus: Corpus, placement: Placement, config: TrainConfig,
                 heldout: tuple[Corpus, Corpus] | None = None,
                 callback: Callable[[int, dict, TrainState], bool | None] | None = None,
                 checkpoint_dir=None, resume_from=None,
                 on_last_state: Callable[[TrainState], None] | None = None) -> Iterations:
    """Initialise (or resume), compile and run the iterations of config over a corpus already
    placed (place: on the devices, or streamed); see train.  on_last_state(state) is called
    with the state of the last iteration (config.iterations) as soon as it is ready, before
    it is scored.

    Each iteration is queued on the device before the one before it is waited for, so the
    devices never idle while the host dispatches the next: the host records, evaluates and
    calls back while the next iteration runs, and a callback that stops the run discards that
    one.  Two states are alive at a time, as in any step: the one being computed and the one
    it comes from.  Streamed chunks are the exception: a streamed step returns only once its
    chunks are back in host memory, so queueing ahead would only delay the callback by an
    iteration.  A thread waits for each state from its dispatch on, so a record's seconds run
    from the later of the previous iteration's end and this one's dispatch to this one's end,
    whatever the host is doing meanwhile.
    """
    start = time.perf_counter()
    if resume_from is None:
        state, metrics = placement.init(config.seed), []
    else:
        state, metrics = checkpoint.load_checkpoint(resume_from, placement, corpus, config)
        if int(state.iteration) > config.iterations:
            raise ValueError(f"{resume_from} is at iteration {int(state.iteration)}, beyond "
                             f"iterations={config.iterations}")
    schedule = AlphaSchedule(config.optimize_alpha_every, config.burn_in)
    ready = _prepare(corpus, placement, config, state, heldout, schedule, start)
    loop = _Loop(corpus, placement, config, ready, schedule, heldout, checkpoint_dir)
    state = loop.run(metrics, callback, on_last_state)
    return Iterations(state, metrics, ready.init_seconds, ready.compile_seconds)


class AlphaSchedule(NamedTuple):
    """When alpha is learned: after every `every` iterations (0: never) once more than
    `burn_in` have run (prior.is_due)."""

    every: int
    burn_in: int

    def is_due(self, iteration: int) -> bool:
        return prior.is_due(iteration, self.every, self.burn_in)

    def any_due(self, first: int, last: int) -> bool:
        """Whether an update falls in iterations first..last (else none is compiled)."""
        return any(self.is_due(iteration) for iteration in range(first, last + 1))


class _Ready(NamedTuple):
    """A run ready to iterate: its first state, the compiled iteration and alpha update (None
    when no update is due), the held-out scorer (None without held-out documents) and the
    seconds of initialisation and of the wait for compilation after it."""

    state: TrainState
    step: Callable[[TrainState], TrainState]
    update_alpha: Callable[[TrainState], TrainState] | None
    scorer: HeldoutScorer | None
    init_seconds: float
    compile_seconds: float


def _prepare(corpus: Corpus, placement: Placement, config: TrainConfig, state: TrainState,
             heldout, schedule: AlphaSchedule, start: float) -> _Ready:
    """Compile the iteration (and the alpha update when one is due) and prepare the held-out
    scorer for `state`, initialising since `start`: beside initialisation where the devices
    are not the host's cores; elsewhere after it, and the scorer after the compilation too
    (its tracing holds the GIL, which they need), so that it prepares while the devices
    iterate."""
    learns_alpha = schedule.any_due(int(state.iteration) + 1, config.iterations)

    def compiling():
        """The iteration and the update compiling in threads (XLA compiles without the GIL):
        (their futures)."""
        return (in_background(placement.compile, state, name="saberjax-compile"),
                learns_alpha and in_background(placement.compile_alpha_update, state,
                                               corpus.doc_lengths(), name="saberjax-compile"))

    def preparing_scorer():
        """The held-out scorer, preparing (padding the documents, compiling) in a thread: of
        the whole topic-word matrix, or for a sparse model of each batch's words' rows."""
        sparse = placement.hyper.sparse
        return heldout and HeldoutScorer(
            *heldout, placement.hyper.num_topics, None if sparse else placement.num_words,
            config.em_iterations,
            None if sparse else placement.sharding(jax.sharding.PartitionSpec()))

    beside = compiles_beside_init(placement)
    programs, scorer = (compiling(), preparing_scorer()) if beside else (None, None)
    state = jax.block_until_ready(state)
    init_seconds = time.perf_counter() - start
    start = time.perf_counter()
    compiling_step, compiling_update = programs or compiling()
    step = compiling_step.result()
    update_alpha = compiling_update.result() if compiling_update else None
    compile_seconds = time.perf_counter() - start
    if not beside:
        scorer = preparing_scorer()
    return _Ready(state, step, update_alpha, scorer, init_seconds, compile_seconds)


@dataclasses.dataclass
class _Loop:
    """The iterations of a prepared run (train_placed): each dispatched ahead of the host's
    work on the one before (but for streamed chunks), then recorded, scored, saved and
    handed to the callback."""

    corpus: Corpus
    placement: Placement
    config: TrainConfig
    ready: _Ready
    schedule: AlphaSchedule
    heldout: tuple[Corpus, Corpus] | None
    checkpoint_dir: object

    def dispatch(self, waiter, state: TrainState, iteration: int):
        """(the state after `iteration`, alpha learned if due, when it is ready (a future),
        when it was dispatched)."""
        dispatched = time.perf_counter()
        following = self.ready.step(state)
        if self.schedule.is_due(iteration):
            following = self.ready.update_alpha(following)
        return following, waiter.submit(_ready_at, following), dispatched

    def run(self, metrics: list[dict], callback, on_last_state) -> TrainState:
        """Run the iterations after the ready state's up to config.iterations (fewer when
        the callback stops them), appending their records to metrics; the last state."""
        state, streamed = self.ready.state, self.placement.streamed
        first, last = int(state.iteration) + 1, self.config.iterations
        counters = self.placement.slots.counters if streamed else None
        previous_counters = dataclasses.replace(counters) if streamed else None
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="saberjax-wait") \
                as waiter:
            finished = time.perf_counter()
            following = self.dispatch(waiter, state, first) if first <= last else None
            for iteration in range(first, last + 1):
                (state, ready_at, dispatched), following = following, None
                if not streamed and iteration < last:
                    following = self.dispatch(waiter, state, iteration + 1)
                now = ready_at.result()
                # from the later of the previous iteration's end and this one's dispatch, so
                # host work between iterations (evaluation, callbacks, checkpoints) is not
                # counted
                seconds, finished = now - max(finished, dispatched), now
                record = dict(iteration=iteration, seconds=seconds,
                              tokens_per_second=self.corpus.num_tokens / seconds)
                if streamed:
                    record.update(counters.since(previous_counters).as_metrics())
                    previous_counters = dataclasses.replace(counters)
                if iteration == last and on_last_state is not None:
                    on_last_state(state)
                self.score_and_save(state, iteration, record, metrics, following)
                if callback is not None and callback(iteration, record, state):
                    break
                if following is None and iteration < last:
                    following = self.dispatch(waiter, state, iteration + 1)
        return state

    def score_and_save(self, state: TrainState, iteration: int, record: dict,
                       metrics: list[dict], following) -> None:
        """Score the held-out documents into record when due, append it to metrics and save
        a checkpoint when due."""
        config = self.config
        due = config.eval_every and iteration % config.eval_every == 0
        evaluate = self.heldout is not None and (due or iteration == config.iterations)
        save = config.checkpoint_every and iteration % config.checkpoint_every == 0
        if (evaluate or save) and following is not None and jax.process_count() > 1:
            # their collectives must not run beside the queued iteration's: processes could
            # pair up different collectives (seen with CPU collectives)
            jax.block_until_ready(following[0])
        if evaluate:
            # alpha on the host: slicing the device array compiles small programs each run
            if self.placement.hyper.sparse:  # never K x V: the batches' words' rows
                score = self.ready.scorer.score_model(TopicModel(
                    self.placement.sparse_word_topic(state), self.placement.alpha(state),
                    self.placement.hyper.beta, tuple(self.corpus.vocab)))
            else:
                score = self.ready.scorer.score(self.placement.topic_word(state),
                                                self.placement.alpha(state))
            record.update(heldout_loglik_per_token=score.loglik_per_token,
                          perplexity=score.perplexity)
        metrics.append(record)
        if save:
            checkpoint.save_checkpoint(self.checkpoint_dir, state, self.placement, config,
                                       self.corpus.fingerprint(), metrics)


def read_own_tokens(corpus: Corpus, run_plan: Plan) -> None:
    """Give this process the tokens the plan has it train on, then combine the corpus's
    fingerprint and word counts with the other processes.

    By words on one axis a process trains on its words' tokens of every document, so it needs
    them all; a corpus of which each process read a share of the text receives the tokens it
    needs from the processes that read them."""
    own_tokens = run_plan.own_tokens(corpus)
    every_document = run_plan.partition == "words"
    processes.share_tokens(corpus, *((0, corpus.num_tokens) if every_document else own_tokens))
    processes.combine_corpus_parts(corpus, *own_tokens)
    if every_document:
        corpus.check()


def train(corpus: Corpus, config: TrainConfig,
          heldout: tuple[Corpus, Corpus] | None = None,
          callback: Callable[[int, dict, TrainState], bool | None] | None = None,
          checkpoint_dir=None, resume_from=None, verbose: int = 0,
          on_model: Callable[[TopicModel], None] | None = None) -> TrainResult:
    """Train LDA on `corpus`; `heldout` = (observed, held-out) halves of test documents.

    Checkpoints go to `checkpoint_dir` (needed when config.checkpoint_every is set);
    `resume_from` is a checkpoint (e.g. checkpoint.latest_checkpoint(dir)) to continue from,
    its metrics included, instead of initialising.  verbose=N prints a progress line
    (progress.Progress: Mtoken/s, ETA, latest held-out score) to stderr every N iterations
    and after the last.

    on_model(model), in a thread of its own, receives the model of the last iteration as soon
    as that iteration is done and while it is being scored: its arrays (counts, alpha, beta,
    vocabulary) are those of the model train returns; its config holds only the seed words
    (seed_words, seed_weight, when seeded) and its metrics are empty.  A
    caller can write the arrays meanwhile (TopicModel.write_arrays).  It is not called when
    training stops before the last iteration (a callback), nor in a run of several processes
    (fetching the counts is a collective there, which must not run beside the scoring's).
    """
    if verbose:
        callback = chain(Progress(config.iterations, verbose,
                                  lambda line: print(line, file=sys.stderr)), callback)
    if config.checkpoint_every and checkpoint_dir is None:
        raise ValueError("checkpoint_every is set but no checkpoint_dir was given")
    hyper = Hyperparams.from_config(config, corpus.vocab)
    check_document_lengths(corpus.doc_lengths())
    # the corpus's outline (sizes, offsets, vocabulary) before any process reads its tokens;
    # then each reads its own and they combine the fingerprint and the word counts
    processes.check_agreement("the corpus and the settings", corpus.outline(),
                              repr(dataclasses.asdict(config)))
    run_plan = plan_run(corpus, hyper, config, scoring=heldout is not None)
    read_own_tokens(corpus, run_plan)
    placement = placed(corpus, hyper, run_plan)
    # the seed words found in the vocabulary (as JSON) and their weight, which the model's
    # topic_word reads
    seed_config = {} if hyper.seeds is None else dict(
        seed_words=seeding.seed_json(hyper.seeds, corpus.vocab), seed_weight=config.seed_weight)

    def model_arrays(state):
        """The state's counts B (K columns; a SparseWordTopic from the sparse model) and
        alpha, on the host."""
        if placement.hyper.sparse:
            return placement.sparse_word_topic(state), placement.alpha(state)
        return placement.word_topic(state)[:, :hyper.num_topics], placement.alpha(state)

    def fetched(state):
        """Fetch the state's counts and alpha in a thread, then call on_model there."""
        def fetch():
            counts, alpha = model_arrays(state)
            on_model(TopicModel(counts, alpha, hyper.beta, tuple(corpus.vocab), seed_config))
            return counts, alpha
        last.append((state, in_background(fetch, name="saberjax-model")))

    last = []  # (the last iteration's state, its arrays: a future) once on_model is called
    run = train_placed(corpus, placement, config, heldout, callback, checkpoint_dir,
                       resume_from, on_last_state=fetched if on_model is not None
                       and jax.process_count() == 1 else None)
    with timing.phase("transfer"):
        if last and last[0][0] is run.state:
            counts, alpha = last[0][1].result()
        else:
            counts, alpha = model_arrays(run.state)
    model_config = dict(dataclasses.asdict(config), alpha=hyper.alpha, backend=hyper.backend,
                        corpus_fingerprint=corpus.fingerprint(), corpus_name=corpus.name,
                        corpus_docs=corpus.num_docs, corpus_tokens=corpus.num_tokens,
                        num_chunks=placement.num_chunks, devices=placement.num_devices,
                        processes=jax.process_count(), streamed=placement.streamed,
                        stored=placement.stored,
                        partition=placement.partition,
                        model_format=placement.hyper.model_format,
                        iterations_run=len(run.metrics), **seed_config)
    model = TopicModel(counts, alpha, hyper.beta, tuple(corpus.vocab),
                       model_config, tuple(run.metrics))
    return TrainResult(model, *run)
