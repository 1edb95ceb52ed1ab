r"""Performance benchmark of the ESCA trainer: Mtoken/s per device count, partition, K and
backend, phase by phase.

For one corpus and each (device count, partition, K, backend) it times full ESCA iterations
(E-step and A rebuild of every chunk, B counted, then the M-step: B-hat and the sampling
trees, with the collectives between devices), and prints one JSON object per line, then one
summary line.

Reproduce (from the repo root; no install needed):

  CPU (2 cores), bundled kos, K = 100:
    .venv/bin/python launch/bench.py --num_topics=100 --iterations=5

  GPU (one H100 / H200), wiki25k at K = 1024, XLA reference against the Pallas kernels
  (the shared corpora are in shared/data/ of the checkout, ../shared/data/ beside /work/main):
    python launch/bench.py --corpus=shared/data/wiki25k --num_topics=1024 \
        --backends=xla,pallas --iterations=10 --output=runs/bench.jsonl

  GPU, the issue's wiki25k protocol: 90/10 document split, 100 iterations from the random
  start, Mtoken_per_s_mean and the held-out log-likelihood after them:
    python launch/bench.py --corpus=shared/data/wiki25k --num_topics=1024 --backends=pallas \
        --warmup=0 --iterations=100 --test_fraction=0.1

  GPU, NYTimes-shaped synthetic corpus (27,000 documents, about 9M tokens, V = 102,660,
  generated in memory, nothing written to disk) at K = 1000 and 10000:
    python launch/bench.py --synth_preset=nytimes --synth_scale=0.09 --num_topics=1000,10000 \
        --backends=xla,pallas --iterations=10 --output=runs/bench.jsonl

What is measured (field names of the per-(K, backend) line, "type": "result"):
  Mtoken_per_s_mean     tokens x timed iterations / their seconds (`--iterations` of them, run
                        after `--warmup` untimed ones, which start from the random init).
  Mtoken_per_s_steady   the same without the first timed iteration.
  Mtoken_per_s_best     tokens / the fastest timed iteration (the least disturbed figure when
                        other processes share the machine).
  iteration_seconds     wall time of each timed iteration, from the end of the one before
                        (as trainer.train_placed runs them: each iteration is queued on the
                        devices before the one before it is waited for, as in training).
  compile_seconds       lower + compile of the iteration's program (CompiledStep),
                        done explicitly with jax.jit(f).lower(...).compile(); the timed iterations
                        call the compiled executable, so they never compile (the first
                        iteration of a process still loads it onto the devices).
                        init_seconds: Placement.init, compile included.
  devices, partition    the mesh's device count and how they share the work (place;
              `--num_devices` and `--partition` are lists, every pair runs), and chunk_tokens,
              the PDOW chunk size (`--chunk_tokens`, also a list; null: place's default);
                        mesh_shape the devices along each axis ({"hosts": H, "gpus": G}
                        for hybrid, `--mesh`).
  speedup_vs_one_device steady Mtoken/s over the one-device run's at the same K and backend in
                        the same run (when 1 is in `--num_devices`).
  reduction_seconds     what an iteration spends combining the devices' work, timed alone
                        (bench.measure_reduction): by documents the whole reduction program
                        (reduce-scatter of B, totals, B-hat and trees of each device's rows,
                        all-gather), by words its collectives; reduction_share = its share of
                        the steady iteration; collective_seconds the collectives alone, with
                        collective_bytes_per_device received and collective_GB_per_s; the
                        same by axis (collective_bytes_by_axis, collective_seconds_by_axis),
                        axis_GB_per_s each axis's measured bandwidth (reduce-scatter and
                        all-gather of 256 MiB a GPU) and collective_floor_seconds the
                        bytes over it; hybrid: cross_host_share_of_by_documents, the bytes
                        over the hosts axis against the one-axis partition by documents',
                        and hosts_exchange, what crosses it ("counts": the word share's
                        counts and B-hat; "topics": its tokens' topics; `--hosts_exchange`).
  placement             layout build and transfer to the devices (seconds, bytes, GB_per_s).
  peak_device_GB        the most memory a local device held so far in the process, beside
                        planned_device_GB, the memory plan's figure for the placement
                        (memory.resident_bytes with the measured bytes per token).
  phases                each phase as its own jitted function over the first device's chunks,
                        block_until_ready between phases, median of `--phase_repeats` passes
                        after one compiling pass (one process only):
                        sample (backend.sample_and_shuffle: the E-step and the shuffle of its
                        topics to doc-major order), rebuild_a (backend.rebuild_doc_topic),
                        count_b (backend.count_word_topic, B donated as in the trainer), bhat_trees
                        (backend.topic_totals and bhat_and_tree of the state's B); each with
                        seconds, Mtoken_per_s, share of the steady iteration and compile_seconds.
                        The sample phase also carries the E-step's roofline on the state it ran
                        on (saberjax.roofline): floor_seconds and floor_bound (hbm, l2 or l1,
                        the level that sets it), over_floor = seconds / floor_seconds, each
                        level's seconds, hbm_bytes_per_token, l2_bytes_per_token,
                        l1_sectors_per_token, nnz_per_token (the mean A row a token reads),
                        chunk_a_footprint_bytes (the largest chunk's A), a_l2_share (the A
                        reads the model serves from L2) and arrays (per array: token_lists,
                        doc_metadata, doc_major_copy, a_rows, bhat_rows, its hbm and l2 bytes
                        and l1 sectors per token).
  copy_GB_per_s         measured device copy bandwidth: y = x + 1 over a float32 array of
                        `--copy_mib` MiB (default 1024 on GPU, 256 elsewhere), (read + written
                        bytes) / seconds, best of several runs.
  *_bytes_per_token     chunk arrays (Chunk), chunk state (ChunkState) and their sum, over real
                        tokens;
                        model_bytes: B, totals, B-hat, trees.
  min_traffic_bytes     a crude lower bound of the memory traffic of one iteration: chunk arrays
                        read once, chunk state read and written once, model read and written once.
                        bandwidth_floor_seconds = min_traffic_bytes / copy bandwidth,
                        bandwidth_bound_Mtoken_per_s = tokens / that floor, achieved_GB_per_s =
                        min_traffic_bytes / steady iteration seconds (compare with copy_GB_per_s).
  heldout_loglik_per_token  with --test_fraction: document completion on the held-out documents
                        after the timed iterations (saberjax.evaluate, 50 EM iterations).
  speedup_vs_xla        steady Mtoken/s over the xla backend's at the same K in the same run
                        (only when several backends run and xla is one of them).
Every line also carries the run's environment: device (jax.devices()[0].device_kind), platform,
num_devices, host_cpu, cpu_cores, jax_version, jaxlib_version, python_version, git_commit
("+dirty" when the sources differ from it), source_digest (of the saberjax sources that ran),
load_average (1, 5, 15 min: other processes sharing the CPU slow the figures down) and date (UTC).
A backend that cannot run here (Pallas without a GPU or without its kernels,
backend.pallas_unavailable_reason) gives a line with "type": "skipped" and the reason instead.
The summary line
("type": "summary") repeats the environment and lists every result's steady Mtoken/s.
"""

from __future__ import annotations

import os

from absl import flags

from saberjax import corpus as corpus_io
from saberjax import command_line, processes, synth, trainer
from saberjax.execution import memory
from saberjax.config import PARTITIONS
from saberjax.execution.placement import place
from saberjax.execution.programs import HOSTS_EXCHANGES
from saberjax.benchmark import BACKENDS, run_benchmark, synthetic_corpus
from saberjax.corpus import Corpus, load_bundled, load_corpus
from saberjax.files import atomic_write


INTERFACE = command_line.Interface(paths=("corpus", "output"))


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """The command's flags, in `flag_values` (absl's registry by default)."""
    _flag = dict(flag_values=flag_values)
    with command_line.group("data", flag_values):
        flags.DEFINE_string("corpus", None, "Corpus path (any format load_corpus reads); "
                            "default: the bundled kos corpus, unless --synth_preset is given.",
                            **_flag)
        flags.DEFINE_enum("synth_preset", None, sorted(synth.PRESETS), "Benchmark a synthetic "
                          "corpus of this shape, generated in memory.", **_flag)
        flags.DEFINE_float("synth_scale", 1.0, "Multiplies the synthetic preset's number of "
                           "documents.", **_flag)
        flags.DEFINE_float("test_fraction", 0.0, "Hold out this fraction of documents (seeded), "
                           "train on the rest and score the held-out ones by document "
                           "completion after the timed iterations (heldout_loglik_per_token); "
                           "0: train on everything.", lower_bound=0.0, upper_bound=0.5, **_flag)
    with command_line.group("model", flag_values):
        flags.DEFINE_list("num_topics", ["100"], "Comma list of K values, e.g. 1000,10000.",
                          **_flag)
        flags.DEFINE_list("optimize_alpha_every", [str(trainer.TrainConfig.optimize_alpha_every)],
                          "Comma list of optimize_alpha_every values (0: alpha fixed) to run "
                          "each K with; with 0 first, the others' lines carry "
                          "learned_alpha_cost, the share of mean throughput that learning alpha "
                          "costs.", **_flag)
        flags.DEFINE_list("init_window_topics", ["auto"],
                          "Comma list of init_window_topics values (0: uniform initial "
                          "topics; auto: the setting's default for each K) to run each K "
                          "with.", **_flag)
        flags.DEFINE_integer("seed", 0, "Seed of the random init (and of a synthetic corpus and "
                             "the test split).", **_flag)
    with command_line.group("run", flag_values):
        define_measurement_flags(flag_values)
    with command_line.group("devices", flag_values):
        flags.DEFINE_list("backends", ["xla"], f"Comma list of backends out of "
                          f"{', '.join(BACKENDS)}.", **_flag)
        flags.DEFINE_list("num_devices", ["0"], "Comma list of device counts to run on, e.g. "
                          "1,2,4 (0: every device of every process; on a CPU one per core); "
                          "each gets its own mesh and lines, with the speed-up over 1 when 1 is "
                          "in the list.", **_flag)
        flags.DEFINE_list("partition", ["auto"], "Comma list of partitions to run each device "
                          "count with, out of auto, documents, words, hybrid (place).",
                          **_flag)
        flags.DEFINE_string("mesh", None, "The two-axis mesh HOSTSxGPUS (e.g. 2x2) of the "
                            "hybrid and auto runs of --num_devices 0 (default for hybrid: "
                            "processes x the devices of each).", **_flag)
        flags.DEFINE_list("hosts_exchange", ["auto"], "Comma list of what crosses between "
                          "the hosts of the two-axis mesh, out of auto, counts, topics, each "
                          "run in turn on a hybrid placement (place).", **_flag)
        flags.DEFINE_list("chunk_tokens", [], "Comma list of tokens per PDOW chunk, each run in "
                          "turn (default: place's).", **_flag)
        processes.define_flags(flag_values)
    with command_line.group("output", flag_values):
        flags.DEFINE_string("output", None, "Also append the JSON lines to this file "
                            "(atomically).", **_flag)
    flags.mark_flags_as_mutual_exclusive(["corpus", "synth_preset"], **_flag)
    for name, (check, message) in _LIST_CHECKS.items():
        flags.register_validator(name, check, message, **_flag)


def define_measurement_flags(flag_values: flags.FlagValues) -> None:
    """The flags of what is measured and how often."""
    _flag = dict(flag_values=flag_values)
    flags.DEFINE_integer("iterations", 10, "Timed ESCA iterations per (K, backend).",
                         lower_bound=1, **_flag)
    flags.DEFINE_integer("warmup", 2, "Untimed iterations before the timed ones.",
                         lower_bound=0, **_flag)
    flags.DEFINE_bool("phases", True, "Measure the per-phase breakdown.", **_flag)
    flags.DEFINE_integer("phase_repeats", 3, "Timed passes per phase (the median is "
                         "reported).", lower_bound=1, **_flag)
    flags.DEFINE_integer("copy_mib", 0, "Array size of the copy-bandwidth test in MiB "
                         "(0: 1024 on GPU, 256 elsewhere).", lower_bound=0, **_flag)


def _check_counts(values):
    return all(value.strip().isdigit() for value in values)


def _check_backends(values):
    unknown = [v for v in values if v not in BACKENDS]
    if unknown:
        raise flags.ValidationError(f"--backends: unknown backend(s) {', '.join(unknown)}; "
                                    f"choose from {', '.join(BACKENDS)}")
    return bool(values)


def _check_num_devices(values):
    try:
        return bool(values) and all(int(v) >= 0 for v in values)
    except ValueError:
        return False


def _check_partition(values):
    return bool(values) and all(v in ("auto",) + PARTITIONS for v in values)


def _check_num_topics(values):
    try:
        return bool(values) and all(int(v) >= 2 for v in values)
    except ValueError:
        return False


# list flag -> (check of its values, the message when they fail it)
_LIST_CHECKS = {
    "optimize_alpha_every": (_check_counts,
                             "--optimize_alpha_every: each must be an integer >= 0"),
    "init_window_topics": (lambda values: _check_counts([v for v in values if v != "auto"]),
                           "--init_window_topics: each must be auto or an integer >= 0"),
    "backends": (_check_backends, f"--backends: each must be one of {', '.join(BACKENDS)}"),
    "num_devices": (_check_num_devices, "--num_devices: a comma list of integers >= 0"),
    "partition": (_check_partition, "--partition: each must be one of auto, "
                  + ", ".join(PARTITIONS)),
    "hosts_exchange": (lambda values: bool(values) and all(
        v in ("auto",) + HOSTS_EXCHANGES for v in values),
                       "--hosts_exchange: each must be one of auto, " + ", ".join(HOSTS_EXCHANGES)),
    "num_topics": (_check_num_topics, "--num_topics: a comma list of integers >= 2"),
    "chunk_tokens": (lambda values: all(v.strip().isdigit() and int(v) >= 1 for v in values),
                     "--chunk_tokens: each must be an integer >= 1"),
}


def append_lines(path: str, lines: list[str]) -> None:
    """Append lines to a file atomically: the old content plus the lines go to a temporary file
    in the same folder, which then replaces the file (readers never see a half-written line)."""
    old = b""
    if os.path.exists(path):
        with open(path, "rb") as f:
            old = f.read()
        if old and not old.endswith(b"\n"):
            old += b"\n"
    new = "".join(line + "\n" for line in lines).encode("utf-8")
    atomic_write(path, lambda f: f.write(old + new))


def corpus_from_flags(values: flags.FlagValues) -> Corpus:
    """The corpus the flags name: --corpus, a --synth_preset's, or the bundled one."""
    if values.corpus:
        return load_corpus(values.corpus)
    if values.synth_preset:
        return synthetic_corpus(values.synth_preset, values.synth_scale, values.seed)
    return load_bundled("kos")


def main(argv, values: flags.FlagValues = flags.FLAGS):
    """Benchmark as the flag `values` say, one JSON line per record (also appended to
    --output)."""
    del argv
    processes.initialize_from_flags(values)
    corpus, heldout = corpus_from_flags(values), None
    if values.test_fraction > 0:
        corpus, test = corpus_io.train_test_split(corpus, values.test_fraction, values.seed)
        heldout = corpus_io.split_document_halves(test, values.seed)

    def emit(line: str) -> None:
        if not processes.is_writer():
            return
        print(line, flush=True)
        if values.output:
            append_lines(values.output, [line])

    run_benchmark(corpus, [int(k) for k in values.num_topics], list(values.backends),
                  iterations=values.iterations, warmup=values.warmup,
                  chunk_tokens=tuple(int(n) for n in values.chunk_tokens) or (None,),
                  num_devices=tuple(int(n) for n in values.num_devices),
                  partitions=tuple(values.partition), seed=values.seed, phases=values.phases,
                  phase_repeats=values.phase_repeats, copy_mib=values.copy_mib, heldout=heldout,
                  optimize_alpha_every=tuple(int(n) for n in values.optimize_alpha_every),
                  init_window_topics=tuple(None if n == "auto" else int(n)
                                           for n in values.init_window_topics),
                  mesh=values.mesh, hosts_exchanges=tuple(values.hosts_exchange),
                  emit=emit)
