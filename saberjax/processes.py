"""Several processes, on one host or many, as one JAX cluster (jax.distributed).

Every process runs the same program; `initialize` joins them before any device is touched, so
that jax.devices() lists every process's devices and the mesh (saberjax.execution) spans them
all.  The cluster is given by flags (--coordinator_address, --num_processes, --process_id), or
by the environment of a cluster manager that jax.distributed.initialize() reads by itself
(SLURM, Open MPI, ...).  On CPUs the collectives between processes go through gloo.

A process that dies stops the others: each one sends heartbeats to the coordinator, and a
process that misses them for `heartbeat_seconds` is declared dead, which ends every other
process with an error instead of leaving it waiting in a collective forever.
"""

from __future__ import annotations

import hashlib
import os

import jax
import numpy as np
from absl import flags

from saberjax.corpus import Corpus, CorpusPart

DEFAULT_HEARTBEAT_SECONDS = 60
GATHER_ROUND_BYTES = 1 << 28  # most bytes of each process's that gathered_bytes sends at once
# Variables whose presence says a cluster manager started this process among several.
CLUSTER_ENVIRONMENT = ("SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """The launchers' flags of a multi-process run."""
    flags.DEFINE_string("coordinator_address", None, "host:port of process 0's coordinator, "
                        "for a run of several processes (one or more hosts); with "
                        "--num_processes and --process_id.  Under SLURM or Open MPI they come "
                        "from the environment.", flag_values=flag_values)
    flags.DEFINE_integer("num_processes", None, "Processes in the run (see "
                         "--coordinator_address).", lower_bound=1, flag_values=flag_values)
    flags.DEFINE_integer("process_id", None, "This process's index, 0 .. num_processes - 1 "
                         "(process 0 writes the outputs).", lower_bound=0,
                         flag_values=flag_values)
    flags.DEFINE_integer("heartbeat_seconds", DEFAULT_HEARTBEAT_SECONDS, "A process silent this "
                         "long is taken as dead and the others stop with an error.",
                         lower_bound=1, flag_values=flag_values)


def initialize_from_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """initialize() with the launcher's flags (define_flags)."""
    initialize(flag_values.coordinator_address, flag_values.num_processes,
               flag_values.process_id, flag_values.heartbeat_seconds)


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None,
               heartbeat_seconds: int = DEFAULT_HEARTBEAT_SECONDS) -> bool:
    """Join the cluster of processes, if this run has several; returns whether it has.

    With none of the three arguments and no cluster manager's environment, nothing happens
    (one process).  All three or none must be given (ValueError naming what is missing).
    """
    given = dict(coordinator_address=coordinator_address, num_processes=num_processes,
                 process_id=process_id)
    missing = [f"--{name}" for name, value in given.items() if value is None]
    if 0 < len(missing) < len(given):
        raise ValueError(f"a run of several processes needs --coordinator_address, "
                         f"--num_processes and --process_id together; missing "
                         f"{', '.join(missing)}")
    if missing and not any(int(os.environ.get(name, "1")) > 1 for name in CLUSTER_ENVIRONMENT):
        return False
    if not missing and not 0 <= process_id < num_processes:
        raise ValueError(f"--process_id={process_id} must be in [0, --num_processes="
                         f"{num_processes})")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address, num_processes, process_id,
                               heartbeat_timeout_seconds=heartbeat_seconds)
    return True


def barrier(name: str) -> None:
    """Wait until every process gets here (nothing when alone): a step all processes must have
    taken before any goes on, such as process 0 creating the output directory."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils  # noqa: PLC0415 (several processes only)

        multihost_utils.sync_global_devices(name)


def check_agreement(what: str, *values: str) -> None:
    """Raise ValueError unless every process has the same values (its corpus fingerprint and
    settings, say): processes that disagree would train a model of nothing in particular or
    wait for each other forever.  Nothing when alone."""
    if jax.process_count() == 1:
        return
    from jax.experimental import multihost_utils  # noqa: PLC0415 (several processes only)

    digest = hashlib.sha256("\0".join(values).encode()).digest()
    digests = np.asarray(multihost_utils.process_allgather(
        np.frombuffer(digest, np.uint8)[None], tiled=True))
    others = [process for process, row in enumerate(digests) if row.tobytes() != digest]
    if others:
        raise ValueError(f"the processes disagree on {what}: process {jax.process_index()} "
                         f"differs from process(es) {', '.join(map(str, others))}; give every "
                         f"process the same corpus and flags")


def largest(value: int) -> int:
    """The largest of every process's value (this one's when alone): a size the processes
    must share, such as the padded shape of arrays each builds from its own documents."""
    if jax.process_count() == 1:
        return int(value)
    from jax.experimental import multihost_utils  # noqa: PLC0415 (several processes only)

    return int(np.max(multihost_utils.process_allgather(np.array([value], np.int32),
                                                        tiled=True)))


def gathered_bytes(data: bytes, round_bytes: int = GATHER_ROUND_BYTES) -> list[bytes]:
    """Every process's `data`, in process order: one all-gather of their sizes, then of the
    bytes, each padded to the largest, in rounds of at most `round_bytes` of each process's
    (an all-gather's result lies on every device, processes times as large)."""
    from jax.experimental import multihost_utils  # noqa: PLC0415 (several processes only)

    sizes = np.asarray(multihost_utils.process_allgather(np.array([len(data)], np.int64),
                                                         tiled=True)).tolist()
    source = np.frombuffer(data, np.uint8)
    gathered = [np.empty(size, np.uint8) for size in sizes]
    for start in range(0, max(sizes), round_bytes):
        end = min(start + round_bytes, max(sizes))
        piece = np.zeros((1, end - start), np.uint8)
        piece[0, :max(0, min(end, source.size) - start)] = source[start:end]
        rows = np.asarray(multihost_utils.process_allgather(piece, tiled=True))
        for row, whole in zip(rows, gathered):
            whole[start:end] = row[:max(0, min(end, whole.size) - start)]
    return [whole.tobytes() for whole in gathered]


def combine_corpus_parts(corpus: Corpus, first: int, last: int) -> None:
    """Give the corpus, on every process, the fingerprint and word counts of all its tokens
    while each process reads only its own tokens [first, last) (its documents'): each one's
    part (Corpus.part) is gathered from every process (gathered_bytes) and combined
    (Corpus.combine_parts), as one process reading the whole corpus computes them.  The
    processes' ranges must cover the corpus once (ValueError naming them).  Nothing when
    alone: the corpus computes them itself when asked."""
    if jax.process_count() == 1:
        return
    corpus.combine_parts([CorpusPart.from_bytes(data) for data in
                          gathered_bytes(corpus.part(first, last).to_bytes())])


def share_tokens(corpus: Corpus, first: int, last: int) -> None:
    """Give this process the tokens [first, last) of a corpus that each process holds only in
    part (Corpus.held_tokens: its share of a text input, saberjax.shared_text): the tokens it
    needs are received from the processes holding them.  Every process sends the run of its
    held tokens that the others need (one all-gather of the ranges, one of the tokens:
    gathered_bytes), so that what moves is what the processes' shares of the input and their
    documents in training do not have in common.  Nothing for a corpus held whole."""
    if corpus.held_tokens is None or jax.process_count() == 1:
        return
    from jax.experimental import multihost_utils  # noqa: PLC0415 (several processes only)

    ranges = np.asarray(multihost_utils.process_allgather(
        np.array([[*corpus.held_tokens, first, last]], np.int64), tiled=True))
    held_first, held_last = corpus.held_tokens
    wanted = [(max(held_first, start), min(held_last, end))
              for process, (_, _, start, end) in enumerate(ranges.tolist())
              if process != jax.process_index()]
    wanted = [(start, end) for start, end in wanted if start < end]
    sent_first = min((start for start, _ in wanted), default=held_first)
    sent_last = max((end for _, end in wanted), default=held_first)
    sent = np.ascontiguousarray(corpus.word_ids[sent_first:sent_last], "<i4")
    header = np.array([sent_first], "<i8").tobytes()
    for process, data in enumerate(gathered_bytes(header + sent.tobytes())):
        if process == jax.process_index():
            continue
        start = int(np.frombuffer(data, "<i8", 1)[0])
        tokens = np.frombuffer(data, "<i4", offset=8)
        lo, hi = max(start, first), min(start + tokens.size, last)
        if lo < hi:
            corpus.receive_tokens(lo, tokens[lo - start : hi - start])


def is_writer() -> bool:
    """Whether this process writes the run's outputs (process 0; the only one when alone)."""
    return jax.process_index() == 0
