"""Every training setting is defined once (trainer.TrainConfig): the launcher's flags, LDA's
defaults and the checkpoint's compatibility check all derive from it."""

import ast
import dataclasses
import inspect

import pytest
from absl import flags

from saberjax import cli, estimator, trainer
from saberjax.backend import resolve_backend
from saberjax.config import Hyperparams, TrainConfig
from helpers import ROOT


def test_the_train_launcher_flags_are_the_config_fields_with_their_defaults():
    fields = {field.name: field.default for field in dataclasses.fields(trainer.TrainConfig)}
    values = flags.FlagValues()
    cli.define_config_flags(trainer.TrainConfig, values)
    assert {name: values[name].default for name in fields} == fields
    tree = ast.parse((ROOT / "saberjax" / "commands" / "train.py").read_text(encoding="utf-8"))
    defined = {node.args[0].value for node in ast.walk(tree)
               if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr.startswith("DEFINE_") and node.args
               and isinstance(node.args[0], ast.Constant)}
    assert "corpus" in defined and not defined & set(fields)  # no second definition


def test_lda_defaults_are_the_config_defaults():
    config = trainer.TrainConfig()
    parameters = inspect.signature(estimator.LDA.__init__).parameters
    for field in dataclasses.fields(trainer.TrainConfig):
        if field.name in parameters:
            assert parameters[field.name].default == getattr(config, field.name), field.name
    assert estimator.LDA().num_topics == config.num_topics == 50


@pytest.mark.parametrize("setting, value, message", [
    ("num_topics", 1, "num_topics=1: must be at least 2"),
    ("alpha", -1.0, "alpha=-1.0: must be positive"),
    ("beta", 0.0, "beta=0.0: must be positive"),
    ("iterations", 0, "iterations=0: must be at least 1"),
    ("backend", "cuda", "backend='cuda': must be one of auto, xla, pallas"),
    ("partition", "topics", "partition='topics': must be one of auto, documents, words"),
    ("prefetch", 0, "prefetch=0: must be at least 1"),
])
def test_a_setting_out_of_range_is_an_error_naming_it(setting, value, message):
    with pytest.raises(ValueError, match=message):
        trainer.TrainConfig(**{setting: value})


def test_a_flag_out_of_range_fails_with_the_settings_own_requirement():
    values = flags.FlagValues()
    cli.define_config_flags(trainer.TrainConfig, values)
    with pytest.raises(flags.IllegalFlagValueError, match="--beta must be positive"):
        values(["train", "--beta=0"])
    values.unparse_flags()
    values(["train", "--num_topics=7", "--partition=words"])
    config = cli.config_from_flags(trainer.TrainConfig, values)
    assert (config.num_topics, config.partition, config.beta) == (7, "words", 0.01)


def test_the_model_settings_are_marked_once():
    assert trainer.TrainConfig.model_settings() == ("num_topics", "alpha", "optimize_alpha_every",
                                                    "burn_in", "beta", "seed")


def test_hyperparams_take_every_default_and_check_from_the_config():
    assert all(field.default is dataclasses.MISSING for field in dataclasses.fields(Hyperparams))
    default = TrainConfig()
    hyper = Hyperparams.create(10)
    assert (hyper.alpha, hyper.beta, hyper.backend) == (50 / 10, default.beta,
                                                        resolve_backend(default.backend))
    assert Hyperparams.from_config(TrainConfig(num_topics=4, alpha=0.3, beta=0.2,
                                               backend="xla")) == Hyperparams(4, 0.3, 0.2, "xla")
    with pytest.raises(ValueError, match="beta=0.0: must be positive"):
        Hyperparams.create(10, beta=0.0)
