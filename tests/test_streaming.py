"""Streaming chunks through the devices gives the in-memory model and fails cleanly."""

import threading

import numpy as np
import pytest
from helpers import needs_local_devices, random_corpus

from saberjax import esca, streaming
from saberjax.execution import memory
from saberjax.execution.placement import place
from saberjax.config import Hyperparams
from saberjax.layout import build_layout


def reference_topics(corpus, hyper, iterations, seed=11):
    """Topics in corpus order after esca.init and esca.step on one resident chunk."""
    chunks = build_layout(corpus).chunks
    state = esca.init(chunks, corpus.num_words, hyper, seed)
    for _ in range(iterations):
        state = esca.step(state, chunks, hyper)
    return esca.corpus_order_topics(chunks, state.chunks), np.asarray(state.model.word_topic)


@pytest.mark.parametrize("num_devices,prefetch", [(1, 1), (2, 3)])
def test_streaming_gives_the_in_memory_model(num_devices, prefetch):
    needs_local_devices(num_devices)
    corpus = random_corpus(num_docs=120, num_words=50, mean_length=30, seed=12)
    hyper = Hyperparams.create(12)
    placement = place(corpus, hyper, num_devices, chunk_tokens=400, prefetch=prefetch,
                      stream=True)
    assert placement.streamed and placement.num_slots > 2
    state = placement.init(seed=11)
    step = placement.compile(state)
    for _ in range(4):
        state = step(state)
    assert all(leaf.sharding.memory_kind == "pinned_host"  # states stay in host memory
               for slot in state.chunks for leaf in slot)
    topics, word_topic = reference_topics(corpus, hyper, 4)
    np.testing.assert_array_equal(placement.corpus_order_topics(state), topics)
    np.testing.assert_array_equal(placement.word_topic(state), word_topic)
    assert placement.slots.counters.chunks == 5 * placement.num_slots
    assert placement.slots.counters.transfer > 0


def test_a_failed_transfer_stops_training_with_a_clear_error_and_no_thread_left(monkeypatch):
    corpus = random_corpus(num_docs=60, seed=13)
    placement = place(corpus, Hyperparams.create(4), 1, chunk_tokens=300, stream=True)
    state = placement.init(seed=0)
    step = placement.compile(state)
    real_to_device = streaming.HostChunks.to_device
    calls = []

    def failing_third_transfer(self, tree):
        calls.append(1)
        if len(calls) == 3:
            raise OSError("DMA engine on fire")
        return real_to_device(self, tree)

    monkeypatch.setattr(streaming.HostChunks, "to_device", failing_third_transfer)
    threads_before = threading.active_count()
    with pytest.raises(RuntimeError, match=f"putting chunk 2 of {placement.num_slots} on the "
                                           "device failed: DMA engine on fire"):
        step(state)
    assert threading.active_count() == threads_before


def test_plan_picks_the_fewest_chunks_that_fit_and_refuses_a_model_too_large():
    args = dict(num_tokens=10_000_000, num_words=10_000, num_topics=1000, padded_topics=1024,
                device_bytes_per_token=100.0, prefetch=2)
    model = memory.model_bytes(10_000, 1024)
    assert memory.plan_chunk_tokens(budget=model + 10**9 + 1, **args) is None
    chunk_tokens = memory.plan_chunk_tokens(budget=model + 300_000_000, **args)
    assert chunk_tokens == 1_000_000
    with pytest.raises(MemoryError, match="num_topics=1000 x V=10000 words need"):
        memory.plan_chunk_tokens(budget=model // 2, **args)


def test_training_under_a_tiny_device_budget_streams_and_gives_the_resident_model():
    from saberjax import trainer

    corpus = random_corpus(num_docs=400, num_words=60, mean_length=40, seed=14)
    base = dict(num_topics=8, iterations=3, backend="xla", num_devices=1)
    resident = trainer.train(corpus, trainer.TrainConfig(**base))
    per_token = memory.device_bytes_per_token(corpus, Hyperparams.create(8))
    room_for_three_sixths = 3 * corpus.num_tokens / 6 * per_token  # prefetch 2 + 1 at work
    budget_gb = (memory.model_bytes(60, 32) + room_for_three_sixths) / 1e9
    streamed = trainer.train(corpus, trainer.TrainConfig(**base, device_memory_gb=budget_gb))
    assert streamed.model.config["streamed"] and streamed.model.config["num_chunks"] > 3
    assert not resident.model.config["streamed"]
    np.testing.assert_array_equal(streamed.model.word_topic_counts,
                                  resident.model.word_topic_counts)
    assert all(m["transfer_seconds"] > 0 and m["waited_seconds"] >= 0 for m in streamed.metrics)


def test_a_model_too_large_for_the_budget_is_a_clear_error():
    from saberjax import trainer

    corpus = random_corpus(seed=15)
    with pytest.raises(MemoryError, match="need .* GB for B, B-hat"):
        trainer.train(corpus, trainer.TrainConfig(num_topics=8, iterations=1,
                                                  device_memory_gb=1e-6))


@pytest.mark.parametrize("num_devices, partition", [(1, "documents"), (2, "words")])
def test_a_resident_placement_too_large_for_the_budget_names_the_gb_it_needs(num_devices,
                                                                             partition):
    needs_local_devices(num_devices)
    corpus = random_corpus(num_docs=2500, num_words=60, seed=16)  # more tokens than the probes
    hyper = Hyperparams.create(30)
    needed = memory.resident_bytes(corpus, hyper, num_devices, partition,
                                   memory.device_bytes_per_token(corpus, hyper))
    with pytest.raises(MemoryError, match=f"resident by {partition}, num_topics=30 over {num_devices} "
                                          f"device.* needs {needed / 1e9:.1f} GB a device"):
        place(corpus, hyper, num_devices, device_memory_gb=needed / 2e9,
              stream=False, partition=partition)
    assert place(corpus, hyper, num_devices, device_memory_gb=needed / 1e9,
                 stream=False, partition=partition).partition == partition
