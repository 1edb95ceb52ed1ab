"""The memory plan covers the host: a run whose model does not fit the memory available is
refused before anything is allocated, with the GB it needs, and the plan of a CPU run is
within a quarter of the peak measured (docs/measurements/memory.md)."""

import dataclasses

import numpy as np
import pytest
from helpers import random_corpus

from saberjax import trainer
from saberjax.config import Hyperparams
from saberjax.corpus import Corpus
from saberjax.execution import memory
from saberjax.execution.mesh import model_rows
from saberjax.execution.plan import plan

# Peak resident memory of `launch/train.py --corpus=<V words, 60 documents> --num_topics=K
# --iterations=2 --em_iterations=2` (held-out documents scored) on a 2-core CPU with two CPU
# devices, and what the process held when the run was planned (GB); docs/measurements/memory.md.
MEASURED_PEAKS = [  # (V, K, held at the plan, peak)
    (20, 32, 0.076, 0.472),
    (20, 3_000_000, 0.076, 3.392),
    (74, 3_000_000, 0.076, 8.188),
    (20, 10_000_000, 0.076, 9.234),
]


@pytest.mark.parametrize("num_words,num_topics,held_gb,peak_gb", MEASURED_PEAKS)
def test_the_cpu_host_plan_is_within_a_quarter_of_the_measured_peak(num_words, num_topics,
                                                                   held_gb, peak_gb):
    padded_topics = Hyperparams.create(num_topics).padded_topics
    planned = held_gb + memory.host_bytes(num_words, padded_topics, 2, on_cpu=True,
                                          scoring=True) / 1e9
    assert abs(planned - peak_gb) <= 0.25 * peak_gb, (planned, peak_gb)


def test_a_model_too_large_for_the_host_is_refused_before_allocating(monkeypatch):
    corpus = random_corpus(num_docs=30, num_words=20, seed=2)
    monkeypatch.setattr(memory, "available_host_memory", lambda: 2_000_000_000)
    config = trainer.TrainConfig(num_topics=10_000_000, iterations=2, backend="xla",
                                 num_devices=1)
    needed = memory.host_bytes(20, Hyperparams.create(10_000_000).padded_topics, 1,
                               on_cpu=True, scoring=False)
    with pytest.raises(MemoryError, match=f"num_topics=10000000 over V=20 words needs "
                                          f"{needed / 1e9:.1f} GB of host memory .* 2.0 GB "
                                          f"are available"):
        trainer.train(corpus, config)
    scored = memory.host_bytes(20, Hyperparams.create(10_000_000).padded_topics, 1,
                               on_cpu=True, scoring=True)
    monkeypatch.setattr(memory, "available_host_memory", lambda: (needed + scored) // 2)
    with pytest.raises(MemoryError, match="needs .* GB of host memory"):  # scoring needs more
        trainer.place(corpus, Hyperparams.create(10_000_000), config, scoring=True)



def test_the_plan_takes_wide_pairs_for_a_longer_document_and_counts_their_bytes():
    lengths = [4096, 20, 7]
    corpus = Corpus(np.cumsum([0, *lengths]), np.zeros(sum(lengths), np.int32), ("a", "b"))
    assert not plan(corpus, Hyperparams.create(524_288), 1).wide_pairs  # counts 8,191
    assert plan(corpus, Hyperparams.create(1_000_000), 1).wide_pairs  # counts 4,095
    hyper = Hyperparams.create(40)
    wide = dataclasses.replace(hyper, wide_pairs=True)
    share = -(-corpus.num_tokens // 2)
    for partition, tokens in (("documents", share), ("words", share + corpus.num_tokens)):
        added = (memory.resident_bytes(corpus, wide, 2, partition, 100)
                 - memory.resident_bytes(corpus, hyper, 2, partition, 100))
        assert added == memory.WIDE_PAIR_EXTRA_BYTES * tokens



def test_the_plan_counts_the_zero_counts_an_iteration_by_word_carries_to_the_next():
    """By word (dense) an iteration makes the next one's zero counts (a third int32 copy of a
    device's rows, Programs.carries_zero_counts): the plan counts them beside the model and
    the partition's per-token bytes; by document it counts none."""
    corpus = random_corpus(num_docs=20, num_words=37, mean_length=10, seed=1)
    hyper = Hyperparams.create(40)
    share = -(-corpus.num_tokens // 2)
    words, documents = (memory.resident_bytes(corpus, hyper, 2, partition, 100)
                        for partition in ("words", "documents"))
    rows = {partition: model_rows(corpus.num_words, 2, partition)
            for partition in ("words", "documents")}
    carried = 4 * rows["words"] * hyper.padded_topics
    assert words - documents == (
        memory.model_bytes(rows["words"], hyper.padded_topics) + carried
        - memory.model_bytes(rows["documents"], hyper.padded_topics)
        + memory.WORD_PARTITION_BYTES_PER_TOKEN * corpus.num_tokens
        + memory.DOC_MAJOR_OWNER_BYTES_PER_TOKEN * share)
