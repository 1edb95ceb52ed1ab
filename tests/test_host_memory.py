"""The host side of the memory plan holds what a placement streamed from host memory holds:
its pinned chunks, word shares and states (twice: an iteration writes the new beside the
old), and the layout the host copies them from; a host budget below that streams from a
chunk store (by documents) or is refused naming host_memory_gb (by words)."""

import dataclasses
import os

import jax
import pytest
from helpers import needs_local_devices, random_corpus

from saberjax.config import Hyperparams
from saberjax.execution import host_memory, memory
from saberjax.execution.placement import place
from saberjax.execution.plan import held_host_bytes, plan

CHUNK_TOKENS = 700


def tree_bytes(tree) -> int:
    return sum(leaf.nbytes for leaf in jax.tree.leaves(tree))


def pinned_bytes(placement) -> int:
    """Bytes of the placement's pinned slots and word shares and of its states, twice."""
    state = placement.init(3)
    shares = tree_bytes(tuple(placement.word_shares)) if placement.word_shares else 0
    return tree_bytes(tuple(placement.slots)) + shares + 2 * tree_bytes(state.chunks)


def streamed(partition: str, hyper: Hyperparams):
    corpus = random_corpus(num_docs=200, num_words=1500, mean_length=12, seed=8)
    return corpus, place(corpus, hyper, 2, chunk_tokens=CHUNK_TOKENS, stream=True,
                         partition=partition)


@pytest.mark.parametrize("partition,hyper", [
    ("words", Hyperparams.create(40)),
    ("words", Hyperparams.create(40_000, model_format="sparse")),  # int32 topics
    ("documents", dataclasses.replace(Hyperparams.create(40), wide_pairs=True)),
    ("documents", Hyperparams.create(40_000, model_format="sparse")),
])
def test_the_host_plan_holds_a_streamed_placements_arrays(partition, hyper, monkeypatch):
    needs_local_devices(2)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # the builders at once: CI's cores
    corpus, placement = streamed(partition, hyper)
    assert placement.streamed and placement.partition == partition
    held = held_host_bytes(corpus, placement.hyper, placement.mesh, CHUNK_TOKENS, partition,
                           layout_on_devices=False)
    shape = host_memory.held_shape(corpus, 2, 2, CHUNK_TOKENS, partition == "words")
    assert (shape.num_slots, shape.padded_tokens) == (placement.num_slots,
                                                      placement.slots.padded_tokens)
    if placement.word_shares:
        assert shape.share_tokens >= placement.word_shares.padded_tokens
    pinned = pinned_bytes(placement)
    layout = tree_bytes(tuple(placement.slots))  # the host's layout beside its copies
    assert held >= max(pinned, 2 * layout)
    assert held < 2 * pinned  # with the temporaries of building the shares or the layout


def test_a_host_budget_below_the_plans_bytes_refuses_by_words_and_stores_by_documents(
        monkeypatch, tmp_path):
    """Budgets just below and at the model and what the host holds (the process's memory
    taken as none): by words refused naming host_memory_gb (a chunk store streams by document
    only), by documents streamed from a chunk store; at the figure, from host memory."""
    needs_local_devices(2)
    monkeypatch.setattr(memory, "anonymous_host_memory", lambda: 0)
    hyper = Hyperparams.create(40)
    for partition in ("words", "documents"):
        corpus, placement = streamed(partition, hyper)
        model = memory.host_model_bytes(corpus.num_words, hyper.padded_topics)
        pinned = pinned_bytes(placement)
        held = held_host_bytes(corpus, hyper, placement.mesh, CHUNK_TOKENS, partition, False)

        def plan_at(budget: int):
            return plan(corpus, hyper, 2, CHUNK_TOKENS, stream=True, partition=partition,
                        host_memory_gb=budget / 1e9, chunk_store_dir=tmp_path / partition)

        assert not plan_at(model + held).stored
        if partition == "words":
            with pytest.raises(ValueError, match=r"partition 'words' streams from host memory"
                                                 r".* do not fit host_memory_gb="):
                plan_at(model + pinned - 1)
        else:
            assert plan_at(model + pinned - 1).stored
