"""Every program saberjax compiles carries compilation.COMPILER_OPTIONS (on a CPU they change
nothing, but they reach XLA the same way as on a GPU, where they keep two compilations of one
program from adding floats in other orders)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import random_corpus
from test_sparse_sampler import scatters
from jax._src import compiler
from jax.sharding import PartitionSpec as P

from saberjax import compilation, inference, layout_device, streamed_rows, trainer
from saberjax.config import Hyperparams
from saberjax.corpus import split_document_halves, train_test_split
from saberjax.execution.placement import place


@pytest.fixture
def compilations(monkeypatch):
    """(program name, its compiler options) of every compilation from here on, none reused
    from earlier tests' caches."""
    seen, compile_program = [], compiler.compile_or_get_cached

    def record(backend, computation, devices, options, *args, **kwargs):
        seen.append((str(computation.operation.attributes["sym_name"]),
                     dict(options.env_option_overrides), str(computation)))
        return compile_program(backend, computation, devices, options, *args, **kwargs)

    jax.clear_caches()
    monkeypatch.setattr(compiler, "compile_or_get_cached", record)
    return seen


def without_options(seen):
    return [name for name, options, _ in seen if options != compilation.COMPILER_OPTIONS]


@pytest.mark.parametrize("devices", [1, 2])
def test_every_compilation_of_a_training_run_carries_the_options(compilations, devices):
    corpus = random_corpus(num_docs=40, num_words=30, mean_length=30, seed=3)
    train_part, test = train_test_split(corpus, 0.25, 0)
    config = trainer.TrainConfig(num_topics=6, iterations=3, optimize_alpha_every=2, burn_in=0,
                                 seed=11, backend="xla", num_devices=devices, eval_every=1)
    trainer.train(train_part, config, heldout=split_document_halves(test, 0))
    assert len(compilations) >= 5  # init, iteration, the prior's update, B-hat, the score
    assert without_options(compilations) == []


@pytest.fixture(scope="module")
def trained():
    """(corpus, a model trained on it): what inference runs on, trained once for every
    method."""
    corpus = random_corpus(num_docs=40, num_words=30, mean_length=30, seed=3)
    return corpus, trainer.train(corpus, trainer.TrainConfig(num_topics=6, iterations=2,
                                                             backend="xla")).model


@pytest.mark.parametrize("method", inference.METHODS)
def test_every_compilation_of_inference_carries_the_options(trained, compilations, method):
    corpus, model = trained
    theta = inference.infer_topics(model, corpus, iterations=4, method=method)
    assert np.allclose(theta.sum(axis=1), 1, atol=1e-5)
    assert compilations and without_options(compilations) == []


def test_a_sparse_runs_stores_declare_unique_indices(compilations):
    """Every scatter that stores values without combining them, in every program of a sparse
    model's training (resident by words), declares unique indices: under the options XLA
    runs any other store as a sort of its indices and a scan (segmented_count.distinct_targets;
    the streamed path's store: test_gathered_keys_store_declares_unique_indices)."""
    corpus = random_corpus(num_docs=40, num_words=30, mean_length=30, seed=3)
    config = trainer.TrainConfig(num_topics=6, iterations=2, seed=11, backend="xla",
                                 model_format="sparse", num_devices=2, partition="words")
    trainer.train(corpus, config)
    stores = [(name, unique) for name, _, text in compilations
              for unique, combines in scatters(text) if not combines]
    assert len(stores) >= 3  # the pairs' and the rows' stores of the iteration at least
    assert [name for name, unique in stores if not unique] == []


def test_gathered_keys_store_declares_unique_indices():
    """streamed_rows.gathered packs every device's token keys with a store of unique indices
    (the sparse model streamed by documents)."""
    mesh = jax.make_mesh((2,), ("x",), devices=jax.devices()[:2])
    keys = streamed_rows.TokenKeys(jnp.zeros(16, jnp.int32), jnp.zeros(16, jnp.int32),
                                   jnp.int32(5))
    gather = jax.jit(jax.shard_map(lambda k: streamed_rows.gathered(k, "x"), mesh=mesh,
                                   in_specs=P(), out_specs=P(), check_vma=False))
    stores = [unique for unique, combines in scatters(gather.lower(keys).as_text())
              if not combines]
    assert len(stores) == 2 and all(stores)  # rows and topics


def test_the_device_layout_and_the_inference_table_store_with_unique_indices():
    """The device's layout build (the tiles' starts, the words by rank) and a sparse model's
    fold-in table (B-hat's cells of the batch's words) store with unique indices, which XLA's
    deterministic mode runs as plain stores, not as a sort and a scan."""
    corpus = random_corpus(num_docs=10, num_words=12, mean_length=8, seed=2)
    inputs = layout_device.chunk_inputs(corpus, 0, corpus.num_docs, 128, 16)
    word_rank = jnp.asarray(np.random.default_rng(0).permutation(12).astype(np.int32))
    layout_text = jax.jit(layout_device.build_chunk).lower(inputs, word_rank).as_text()
    table_text = inference._word_rows_table.lower(
        jnp.zeros(6, jnp.float32), jnp.array([0, 1, 4, 4], jnp.int32),
        jnp.array([2, 2, 5, 5], jnp.int32), jnp.ones(4, jnp.float32), table_rows=4).as_text()
    for text, expected in ((layout_text, 2), (table_text, 1)):
        stores = [unique for unique, combines in scatters(text) if not combines]
        assert len(stores) == expected and all(stores)


def test_a_compiled_iteration_gives_its_optimized_program():
    """CompiledStep.program_texts: the optimized program of each executable an iteration
    runs (one for resident chunks), what a profile's kernel names are looked up in."""
    corpus = random_corpus(num_docs=20, num_words=15, mean_length=10, seed=1)
    placed = place(corpus, Hyperparams.create(4, backend="xla"), 1)
    state = placed.init(0)
    texts = placed.compile(state).program_texts()
    assert len(texts) == 1 and texts[0].startswith("HloModule")
