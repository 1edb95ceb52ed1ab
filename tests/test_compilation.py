"""Every program saberjax compiles carries compilation.COMPILER_OPTIONS (on a CPU they change
nothing, but they reach XLA the same way as on a GPU, where they keep two compilations of one
program from adding floats in other orders)."""

import jax
import numpy as np
import pytest
from helpers import random_corpus
from jax._src import compiler

from saberjax import compilation, inference, trainer
from saberjax.corpus import split_document_halves, train_test_split


@pytest.fixture
def compilations(monkeypatch):
    """(program name, its compiler options) of every compilation from here on, none reused
    from earlier tests' caches."""
    seen, compile_program = [], compiler.compile_or_get_cached

    def record(backend, computation, devices, options, *args, **kwargs):
        seen.append((str(computation.operation.attributes["sym_name"]),
                     dict(options.env_option_overrides)))
        return compile_program(backend, computation, devices, options, *args, **kwargs)

    jax.clear_caches()
    monkeypatch.setattr(compiler, "compile_or_get_cached", record)
    return seen


def without_options(seen):
    return [name for name, options in seen if options != compilation.COMPILER_OPTIONS]


@pytest.mark.parametrize("devices", [1, 2])
def test_every_compilation_of_a_training_run_carries_the_options(compilations, devices):
    corpus = random_corpus(num_docs=40, num_words=30, mean_length=30, seed=3)
    train_part, test = train_test_split(corpus, 0.25, 0)
    config = trainer.TrainConfig(num_topics=6, iterations=3, optimize_alpha_every=2, burn_in=0,
                                 seed=11, backend="xla", num_devices=devices, eval_every=1)
    trainer.train(train_part, config, heldout=split_document_halves(test, 0))
    assert len(compilations) >= 5  # init, iteration, the prior's update, B-hat, the score
    assert without_options(compilations) == []


@pytest.mark.parametrize("method", inference.METHODS)
def test_every_compilation_of_inference_carries_the_options(compilations, method):
    corpus = random_corpus(num_docs=40, num_words=30, mean_length=30, seed=3)
    model = trainer.train(corpus, trainer.TrainConfig(num_topics=6, iterations=2,
                                                      backend="xla")).model
    compilations.clear()
    theta = inference.infer_topics(model, corpus, iterations=4, method=method)
    assert np.allclose(theta.sum(axis=1), 1, atol=1e-5)
    assert compilations and without_options(compilations) == []
