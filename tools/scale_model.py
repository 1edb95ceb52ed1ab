"""Predict training speed (Mtoken/s) on H hosts x G GPUs from a measured one-GPU rate and the
bandwidths of the links between GPUs.

An iteration costs its compute, a device's share of the tokens at the one-GPU rate, plus its
collectives, the bytes a device receives over a link divided by that link's bandwidth (NCCL's
bus bandwidth: a ring reduce-scatter or all-gather over N devices receives (N-1)/N of the
array on each); nothing is overlapped.  The bytes are those of saberjax.execution.programs:

- by documents (one axis over all N = H x G devices): the partial counts B_d reduce-scattered
  (int32: 4 bytes a model cell) and each device's rows of B-hat (bfloat16: 2 bytes a cell),
  its sampling trees (float32 levels, saberjax.tree.level_widths) and their totals (4 bytes
  a word) all-gathered: (N-1)/N x V_pad x (6 K_pad + 4 tree nodes + 4) bytes;
- by words (one axis): every chunk's A all-gathered (a uint32 pair per token slot, an int32
  nonzero count per document) and the E-step's doc-major topics all-to-all (2 bytes a token,
  4 above 32,767 topics): (N-1)/N x (T x (4 + topic bytes) + D x 4) bytes;
- two-axis (words within a host, documents across hosts): within a host, by words over the
  host's T / H tokens; across hosts, by documents over the H devices that hold one word share
  (V / G rows of B each), the counts crossing as int32 ("two-axis") or as float16
  ("two-axis f16": 2 bytes a cell instead of 4).  The programs send the counts of words of
  at most 2,048 corpus tokens as float16 (exact) and the rest as int32: between the two.
  "two-axis topics": across hosts each device receives instead the topics of its word
  share's tokens on the other hosts, (H-1) x T / (H x G) x topic bytes, and counts their B
  itself; that count, and B-hat of H times the rows, are compute the model does not add
  (the programs choose the exchange of less time, its bytes at the measured bandwidth between
  hosts and the topics' extra work: execution.plan.hosts_exchange).

A one-axis mesh that spans hosts moves all its bytes at the between-host bandwidth (a ring is
as fast as its slowest link).  The topic totals' all-reduce (K integers) is left out.

    python tools/scale_model.py --hosts=8,64 --gpus=8 --num_topics=1000,10000 \\
        --one_gpu_mtoken_s=2368,1847 --within_host_gbps=340 --between_host_gbps=50
    python tools/scale_model.py --check    # against docs/measurements/multi_gpu.md

Prints a Markdown table: per configuration and partition, the compute and collective
milliseconds of an iteration, the bytes a device receives within and between hosts, and the
predicted Mtoken/s (speed-up over one GPU).  --check prints every measured configuration of
docs/measurements/multi_gpu.md beside its prediction.
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from absl import app, flags

from saberjax.tree import level_widths, padded_width

PARTITIONS = ("documents", "words", "two-axis", "two-axis f16", "two-axis topics")
# NYTimes (--synth_preset=nytimes): 99.7M tokens, 300,000 documents, 102,660 words
NYTIMES_TOKENS, NYTIMES_DOCS, NYTIMES_WORDS = 99_700_000, 300_000, 102_660
MAX_INT16_TOPICS = 32_767

FLAGS = flags.FLAGS
flags.DEFINE_list("hosts", ["8", "64"], "Host counts H.")
flags.DEFINE_list("gpus", ["8"], "GPUs a host G.")
flags.DEFINE_list("num_topics", ["1000", "10000"], "K values.")
flags.DEFINE_list("one_gpu_mtoken_s", ["2368", "1847"], "Measured one-GPU Mtoken/s at each K "
                  "(NYTimes shape, 4 H200s, 2026-11-27).")
flags.DEFINE_float("within_host_gbps", 340, "Collective (bus) bandwidth between GPUs of a host, "
                   "GB/s a GPU (measured: NCCL all-reduce 329 on 2 H100s, 355 on 4).")
flags.DEFINE_float("between_host_gbps", 50, "Bandwidth between hosts, GB/s a GPU.")
flags.DEFINE_float("tokens_per_gpu", 100e6, "Corpus tokens a GPU (the corpus grows with the "
                   "mesh); see --tokens.")
flags.DEFINE_float("tokens", 0, "Corpus tokens, the same on every mesh (0: --tokens_per_gpu).")
flags.DEFINE_float("tokens_per_doc", NYTIMES_TOKENS / NYTIMES_DOCS, "Mean document length.")
flags.DEFINE_integer("num_words", NYTIMES_WORDS, "Vocabulary size V.")
flags.DEFINE_bool("check", False, "Print the measured configurations of "
                  "docs/measurements/multi_gpu.md beside their predictions instead.")


@dataclasses.dataclass(frozen=True)
class Setting:
    """What an iteration's cost depends on: corpus tokens and documents, V, K, the one-GPU
    rate (tokens/s) and the bandwidths (bytes/s a GPU) within and between hosts."""

    tokens: float
    docs: float
    num_words: int
    num_topics: int
    one_gpu_rate: float
    within_host: float
    between_hosts: float


@dataclasses.dataclass(frozen=True)
class Prediction:
    compute_seconds: float
    within_bytes: float  # a device receives over links within its host, an iteration
    between_bytes: float  # ... and between hosts
    collective_seconds: float
    tokens: float

    @property
    def seconds(self) -> float:
        return self.compute_seconds + self.collective_seconds

    @property
    def mtoken_s(self) -> float:
        return self.tokens / self.seconds / 1e6


def by_documents_bytes(num_words: int, num_topics: int, devices: int,
                       count_bytes: int = 4) -> float:
    """Bytes a device receives in the reduction by documents over `devices` devices: B_d
    reduce-scattered (count_bytes a cell), B-hat rows, trees and tree totals all-gathered (V
    padded to a multiple of the device count)."""
    if devices == 1:
        return 0.0
    padded_topics = padded_width(num_topics)
    rows = -(-num_words // devices) * devices
    row_bytes = count_bytes * padded_topics + 2 * padded_topics + 4 * sum(level_widths(padded_topics)) + 4
    return (devices - 1) / devices * rows * row_bytes


def by_words_bytes(tokens: float, docs: float, num_topics: int, devices: int) -> float:
    """Bytes a device receives in an iteration by words over `devices` devices holding
    `tokens` tokens of `docs` documents: every chunk's A pairs and nonzero counts all-gathered,
    the doc-major topics all-to-all."""
    topic_bytes = 2 if num_topics <= MAX_INT16_TOPICS else 4
    return (devices - 1) / devices * (tokens * (4 + topic_bytes) + docs * 4)


def topics_between_bytes(tokens: float, num_topics: int, hosts: int, gpus: int) -> float:
    """Bytes a device receives between hosts an iteration on the two-axis mesh exchanging
    topics: the other hosts' topics of its word share's tokens (T / (H x G) a host)."""
    topic_bytes = 2 if num_topics <= MAX_INT16_TOPICS else 4
    return (hosts - 1) * tokens / (hosts * gpus) * topic_bytes


def predict(setting: Setting, hosts: int, gpus: int, partition: str) -> Prediction:
    """The iteration of `partition` on hosts x gpus devices (see the module doc)."""
    devices = hosts * gpus
    s = setting
    if partition == "documents":
        moved, within = by_documents_bytes(s.num_words, s.num_topics, devices), hosts == 1
        within_bytes, between_bytes = (moved, 0.0) if within else (0.0, moved)
    elif partition == "words":
        moved, within = by_words_bytes(s.tokens, s.docs, s.num_topics, devices), hosts == 1
        within_bytes, between_bytes = (moved, 0.0) if within else (0.0, moved)
    elif partition.startswith("two-axis"):
        within_bytes = by_words_bytes(s.tokens / hosts, s.docs / hosts, s.num_topics, gpus)
        between_bytes = (topics_between_bytes(s.tokens, s.num_topics, hosts, gpus)
                         if partition == "two-axis topics" else
                         by_documents_bytes(-(-s.num_words // gpus), s.num_topics, hosts,
                                            2 if partition == "two-axis f16" else 4))
    else:
        raise ValueError(f"partition {partition!r}: one of {', '.join(PARTITIONS)}")
    collective = within_bytes / s.within_host + between_bytes / s.between_hosts
    return Prediction(s.tokens / devices / s.one_gpu_rate, within_bytes, between_bytes,
                      collective, s.tokens)


@dataclasses.dataclass(frozen=True)
class Measured:
    """A configuration of docs/measurements/multi_gpu.md: where, K, partition, processes x
    GPUs a process (all on one host; the two-axis mesh takes the processes as its hosts),
    corpus tokens, its one-GPU and its measured Mtoken/s, and the bandwidths (GB/s, within and
    between the "hosts") measured in its call, where they were (None: NCCL's bus bandwidth of
    that many GPUs of the host, BUS_GBPS)."""

    source: str
    num_topics: int
    partition: str
    processes: int
    gpus: int
    tokens: float
    one_gpu: float
    measured: float
    gbps: tuple[float, float] | None = None

    @property
    def devices(self) -> int:
        return self.processes * self.gpus


# NCCL all-reduce bus bandwidth measured on hosts of 2 and 4 H100s (notes/DISTRIBUTED.md)
BUS_GBPS = {2: 329, 4: 355}
NYT, NYT4 = NYTIMES_TOKENS, 4 * NYTIMES_TOKENS
MEASURED = (
    Measured("2 H100, 2026-11-26", 1000, "documents", 1, 2, NYT, 2456, 4894),
    Measured("2 H100, 2026-11-26", 10000, "documents", 1, 2, NYT, 1921, 2720),
    Measured("2 H200, 2026-11-26", 1000, "documents", 1, 2, NYT, 2715, 5281),
    Measured("2 H200, 2026-11-26", 1000, "words", 1, 2, NYT, 2715, 4935),
    Measured("2 H200, 2026-11-26", 10000, "documents", 1, 2, NYT, 2112, 2912),
    Measured("2 H200, 2026-11-26", 10000, "words", 1, 2, NYT, 2112, 3942),
    Measured("4 H100, 2026-11-26", 1000, "documents", 1, 4, NYT, 2448, 9615),
    Measured("4 H100, 2026-11-26", 1000, "words", 1, 4, NYT, 2448, 7945),
    Measured("4 H100, 2026-11-26", 10000, "documents", 1, 4, NYT, 1919, 3765),
    Measured("4 H100, 2026-11-26", 10000, "words", 1, 4, NYT, 1919, 6542),
    Measured("4 H100, 2026-11-26, 399M", 1000, "documents", 1, 4, NYT4, 2448, 9266),
    Measured("4 H100, 2026-11-26, 399M", 1000, "words", 1, 4, NYT4, 2448, 7412),
    Measured("4 H100, 2026-11-26, 399M", 10000, "documents", 1, 4, NYT4, 1919, 6165),
    Measured("4 H100, 2026-11-26, 399M", 10000, "words", 1, 4, NYT4, 1919, 6495),
    Measured("2 of 4 H100, 2026-11-26", 1000, "documents", 2, 1, NYT, 2448, 4812),
    Measured("4 H200, 2026-11-27", 1000, "documents", 1, 2, NYT, 2368, 4620),
    Measured("4 H200, 2026-11-27", 1000, "documents", 1, 4, NYT, 2368, 8690),
    Measured("4 H200, 2026-11-27", 1000, "documents", 4, 1, NYT, 2368, 8704),
    Measured("4 H200, 2026-11-27", 10000, "documents", 1, 2, NYT, 1847, 2666),
    Measured("4 H200, 2026-11-27", 10000, "documents", 1, 4, NYT, 1847, 3683),
    Measured("4 H200, 2026-11-27", 10000, "words", 1, 4, NYT, 1850, 6269),
    # the two-axis calls (mesh2d's section): bandwidths as their collectives ran in the call
    # (bytes over the seconds of the collectives alone)
    Measured("4 H100, 2026-11-27, 0078a9e", 1000, "documents", 1, 4, NYT, 2068, 8023,
             (215, 215)),
    Measured("4 H100, 2026-11-27, 0078a9e", 1000, "words", 1, 4, NYT, 2068, 6750, (293, 293)),
    Measured("4 H100, 2026-11-27, 0078a9e", 10000, "documents", 1, 4, NYT, 1595, 3447,
             (310, 310)),
    Measured("4 H100, 2026-11-27, 0078a9e", 10000, "words", 1, 4, NYT, 1595, 5487,
             (293, 293)),
    Measured("4 H100, 2026-11-27, 38a91d8", 1000, "two-axis f16", 2, 2, NYT, 2068, 7406,
             (174, 98)),
    Measured("4 H100, 2026-11-27, 38a91d8", 10000, "two-axis f16", 2, 2, NYT, 1597, 4122,
             (174, 179)),
    # 2 processes of one GPU each on the two-axis mesh (2 x 1), the hosts exchanging counts
    # or topics, and by words on both GPUs: the between-"hosts" rates of each run
    Measured("2 H200, 2026-11-27, f88e2d1", 1000, "two-axis f16", 2, 1, NYT, 2242, 4280,
             (122, 122)),
    Measured("2 H200, 2026-11-27, f88e2d1", 1000, "two-axis topics", 2, 1, NYT, 2242, 4291,
             (119, 119)),
    Measured("2 H200, 2026-11-27, f88e2d1", 10000, "two-axis f16", 2, 1, NYT, 1734, 2336,
             (214, 214)),
    Measured("2 H200, 2026-11-27, f88e2d1", 10000, "two-axis topics", 2, 1, NYT, 1734, 3127,
             (134, 134)),
    Measured("2 H200, 2026-11-27, f88e2d1", 10000, "words", 1, 2, NYT, 1734, 3278,
             (230, 230)),
    Measured("4 H200, 2026-11-27, 69b701f", 1000, "two-axis f16", 2, 2, NYT, 2247, 7854,
             (203, 93)),
    Measured("4 H200, 2026-11-27, 69b701f", 1000, "two-axis topics", 2, 2, NYT, 2247, 7774,
             (190, 110)),
    Measured("4 H200, 2026-11-27, 69b701f", 10000, "two-axis f16", 2, 2, NYT, 1743, 4386,
             (206, 197)),
    Measured("4 H200, 2026-11-27, 69b701f", 10000, "two-axis topics", 2, 2, NYT, 1743, 5931,
             (173, 82)),
    Measured("4 H200, 2026-11-27, 69b701f", 10000, "words", 1, 4, NYT, 1743, 5911,
             (317, 317)),
    # by words on 2 GPUs, the shares dealt round robin (main) and near-equal (share_order)
    Measured("2 H200, 2026-11-27, b22fab3", 10000, "words", 1, 2, NYT, 1771, 3332, (254, 254)),
    Measured("2 H200, 2026-11-27, 7bf8ea5", 10000, "words", 1, 2, NYT, 1771, 3399, (244, 244)),
    Measured("4 H200, 2026-11-27, 8cd7a0b", 10000, "words", 1, 4, NYT, 1721, 6197, (326, 326)),
    # main, and A rebuilt between barriers (the count beside the all_to_all)
    Measured("4 H200, 2026-11-27, 8256030", 10000, "words", 1, 4, NYT, 1777, 6383, (274, 274)),
    Measured("4 H100, 2026-11-27, 8256030", 10000, "words", 1, 4, NYT, 1631, 5948, (303, 303)),
    Measured("4 H100, 2026-11-27, f79bbaf", 10000, "words", 1, 4, NYT, 1631, 6058, (310, 310)),
    Measured("4 H100, 2026-11-27, 604b113", 1000, "two-axis topics", 2, 2, NYT, 2090, 7617,
             (191, 86)),
    Measured("4 H100, 2026-11-27, 604b113", 10000, "two-axis topics", 2, 2, NYT, 1629, 5572,
             (205, 93)),
    # by words, the doc-major topics taken from each token's device instead of summed zeroed
    # parts; the floors' call
    Measured("4 H100, 2026-11-28, aa18b63", 1000, "documents", 1, 4, NYT, 2103, 8169,
             (224, 224)),
    Measured("4 H100, 2026-11-28, aa18b63", 10000, "words", 1, 4, NYT, 1633, 6105, (306, 306)),
    Measured("4 H100, 2026-11-28, aa18b63", 1000, "two-axis f16", 2, 2, NYT, 2103, 7778,
             (222, 97)),
    Measured("4 H100, 2026-11-28, aa18b63", 10000, "two-axis topics", 2, 2, NYT, 1633, 5606,
             (217, 89)),
)


def check_table(measured=MEASURED) -> list[str]:
    """Markdown rows: every measured configuration beside its prediction (one host: the
    processes of a run share its links)."""
    rows = ["| machine | K | partition | processes x GPUs | 1 GPU | measured | predicted "
            "| predicted / measured |", "|---|---|---|---|---|---|---|---|"]
    for case in measured:
        within, between = case.gbps or (BUS_GBPS[case.devices],) * 2
        setting = Setting(case.tokens, case.tokens * NYTIMES_DOCS / NYTIMES_TOKENS,
                          NYTIMES_WORDS, case.num_topics, case.one_gpu * 1e6, within * 1e9,
                          between * 1e9)
        hosts = case.processes if case.partition.startswith("two-axis") else 1
        predicted = predict(setting, hosts, case.devices // hosts, case.partition).mtoken_s
        rows.append(f"| {case.source} | {case.num_topics:,} | {case.partition} | "
                    f"{case.processes} x {case.gpus} | {case.one_gpu:,.0f} | "
                    f"{case.measured:,.0f} | {predicted:,.0f} | {predicted / case.measured:.2f} |")
    return rows


def prediction_table(settings: list[Setting], meshes: list[tuple[int, int]]) -> list[str]:
    """Markdown rows: every setting on every mesh, each partition."""
    rows = ["| H x G | K | tokens | partition | compute ms | within-host GB | between-host GB "
            "| collective ms | Mtoken/s | speed-up |", "|---|---|---|---|---|---|---|---|---|---|"]
    for hosts, gpus in meshes:
        for setting in settings:
            for partition in PARTITIONS:
                p = predict(setting, hosts, gpus, partition)
                one = setting.one_gpu_rate / 1e6
                rows.append(f"| {hosts} x {gpus} | {setting.num_topics:,} | "
                            f"{_tokens(setting.tokens)} | {partition} | "
                            f"{p.compute_seconds * 1e3:,.1f} | {p.within_bytes / 1e9:.3g} | "
                            f"{p.between_bytes / 1e9:.3g} | {p.collective_seconds * 1e3:,.1f} | "
                            f"{p.mtoken_s:,.0f} | {p.mtoken_s / one:,.1f}x |")
    return rows


def _tokens(count: float) -> str:
    """A token count for the table: 99.7M, 6.4B."""
    return f"{count / 1e9:.3g}B" if count >= 1e9 else f"{count / 1e6:.3g}M"


def main(argv):
    del argv
    if FLAGS.check:
        print("\n".join(check_table()))
        return
    if len(FLAGS.num_topics) != len(FLAGS.one_gpu_mtoken_s):
        raise app.UsageError("--one_gpu_mtoken_s needs one rate for each --num_topics")
    meshes = [(int(hosts), int(gpus)) for hosts in FLAGS.hosts for gpus in FLAGS.gpus]
    rows = []
    for hosts, gpus in meshes:
        tokens = FLAGS.tokens or FLAGS.tokens_per_gpu * hosts * gpus
        settings = [Setting(tokens, tokens / FLAGS.tokens_per_doc, FLAGS.num_words, int(k),
                            float(rate) * 1e6, FLAGS.within_host_gbps * 1e9,
                            FLAGS.between_host_gbps * 1e9)
                    for k, rate in zip(FLAGS.num_topics, FLAGS.one_gpu_mtoken_s)]
        table = prediction_table(settings, [(hosts, gpus)])
        rows.extend(table if not rows else table[2:])
    print("\n".join(rows))


if __name__ == "__main__":
    app.run(main)
