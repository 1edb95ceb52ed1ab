"""Every training setting is defined once (trainer.TrainConfig): the launcher's flags, LDA's
defaults and the checkpoint's compatibility check all derive from it."""

import ast
import dataclasses
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest
from absl import flags

from saberjax import cli, command_line, config, estimator, trainer
from saberjax.backend import resolve_backend
from saberjax.commands import train as train_command
from saberjax.config import Hyperparams, TrainConfig
from helpers import ROOT


def test_the_train_launcher_flags_are_the_config_fields_with_their_defaults():
    fields = {field.name: field.default for field in dataclasses.fields(trainer.TrainConfig)}
    values = flags.FlagValues()
    cli.define_config_flags(trainer.TrainConfig, values, groups=train_command.CONFIG_GROUPS)
    assert {name: values[name].default for name in fields} == fields
    assert {command_line.group_of(values[name]) for name in fields} <= set(command_line.GROUPS)
    tree = ast.parse((ROOT / "saberjax" / "commands" / "train.py").read_text(encoding="utf-8"))
    defined = {node.args[0].value for node in ast.walk(tree)
               if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr.startswith("DEFINE_") and node.args
               and isinstance(node.args[0], ast.Constant)}
    assert "test_corpus" in defined and not defined & set(fields)  # no second definition


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
    ("alpha", float("inf"), "alpha=inf: must be a finite number"),
    ("alpha", float("nan"), "alpha=nan: must be a finite number"),
    ("beta", float("inf"), "beta=inf: must be a finite number"),
    ("device_memory_gb", float("inf"), "device_memory_gb=inf: must be a finite number"),
    ("host_memory_gb", -1.0, "host_memory_gb=-1.0: must be positive"),
    ("num_topics", 2.5, "num_topics=2.5: must be an integer"),
    ("iterations", True, "iterations=True: must be an integer"),
    ("seed", "3", "seed='3': must be an integer"),
    ("beta", "0.1", "beta='0.1': must be a number"),
    ("eval_every", -1, "eval_every=-1: must be at least 0"),
    ("chunk_store", "", "chunk_store='': must be a non-empty string"),
])
def test_a_setting_out_of_range_is_an_error_naming_it(setting, value, message):
    with pytest.raises(ValueError, match=message):
        trainer.TrainConfig(**{setting: value})


def test_a_flag_out_of_range_fails_with_the_settings_own_requirement():
    values = flags.FlagValues()
    cli.define_config_flags(trainer.TrainConfig, values, groups=train_command.CONFIG_GROUPS)
    with pytest.raises(flags.IllegalFlagValueError, match="--beta must be positive"):
        values(["train", "--beta=0"])
    values.unparse_flags()
    values(["train", "--num_topics=7", "--partition=words"])
    config = cli.config_from_flags(trainer.TrainConfig, values)
    assert (config.num_topics, config.partition, config.beta) == (7, "words", 0.01)


def test_the_model_settings_are_marked_once():
    assert trainer.TrainConfig.model_settings() == ("num_topics", "alpha", "optimize_alpha_every",
                                                    "burn_in", "beta", "seed_words",
                                                    "seed_weight", "init_window_topics",
                                                    "seed")


def test_hyperparams_take_every_default_and_check_from_the_config():
    assert all(field.default is dataclasses.MISSING for field in dataclasses.fields(Hyperparams))
    default = TrainConfig()
    hyper = Hyperparams.create(10)
    assert (hyper.alpha, hyper.beta, hyper.backend) == (50 / 10, default.beta,
                                                        resolve_backend(default.backend))
    assert Hyperparams.from_config(TrainConfig(num_topics=4, alpha=0.3, beta=0.2,
                                               backend="xla")) == Hyperparams(4, 0.3, 0.2, "xla",
                                                                              "dense", None, False,
                                                                              0)
    assert Hyperparams.create(4, model_format="sparse").sparse
    assert Hyperparams.create(4, model_format="auto").model_format == "dense"  # until planned
    with pytest.raises(ValueError, match="beta=0.0: must be positive"):
        Hyperparams.create(10, beta=0.0)


def test_initial_topics_are_windowed_by_default_from_the_windowed_k_on():
    """init_window_topics None is default_window_topics of K; a value given is kept at any K."""
    assert TrainConfig().init_window_topics is None
    below, at = config.WINDOWED_TOPICS - 1, config.WINDOWED_TOPICS
    assert Hyperparams.create(below).init_window_topics == 0
    assert Hyperparams.create(at).init_window_topics == config.WINDOW_TOPICS > 0
    assert Hyperparams.create(at, init_window_topics=0).init_window_topics == 0
    assert Hyperparams.create(below, init_window_topics=8).init_window_topics == 8


def test_numbers_of_any_numeric_type_in_range_are_settings():
    config = trainer.TrainConfig(num_topics=np.int64(5), alpha=1, beta=np.float32(0.5),
                                 device_memory_gb=2)
    assert (config.num_topics, config.alpha, config.beta) == (5, 1, 0.5)


@pytest.mark.parametrize("alpha, beta", [(float("inf"), 0.01), (0.1, float("nan")),
                                         (0.1, float("inf"))])
def test_the_samplers_priors_are_positive_and_finite(alpha, beta):
    with pytest.raises(ValueError, match="must be a finite number"):
        Hyperparams.create(4, alpha=alpha, beta=beta)


def test_every_number_flag_is_finite():
    values = flags.FlagValues()
    cli.define_config_flags(trainer.TrainConfig, values,
                            groups=train_command.CONFIG_GROUPS)
    flags.DEFINE_float("fraction", 0.5, "A launcher's own number.", flag_values=values)
    cli.require_finite_numbers(values)
    for argument, message in (("--alpha=inf", "--alpha must be a finite number"),
                              ("--device_memory_gb=nan", "--device_memory_gb must be a finite"),
                              ("--fraction=-inf", "--fraction must be a finite number")):
        with pytest.raises(flags.IllegalFlagValueError, match=message):
            values(["train", argument])
        values.unparse_flags()
    values(["train", "--alpha=0.5", "--fraction=0.25"])
    assert (values.alpha, values.fraction) == (0.5, 0.25)


@pytest.mark.parametrize("launcher, flag", [
    ("train.py", "--alpha=inf"), ("train.py", "--beta=nan"), ("train.py", "--host_memory_gb=inf"),
    ("synth.py", "--alpha_true=nan"),
])
def test_a_launcher_refuses_a_number_that_is_not_finite_before_touching_a_file(tmp_path,
                                                                              launcher, flag):
    result = subprocess.run([sys.executable, str(ROOT / "launch" / launcher), flag,
                             "--output=out"], capture_output=True, text=True, cwd=tmp_path,
                            timeout=300)
    name, value = flag.split("=")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == f"error: {name}: {value} must be a finite number"
    assert os.listdir(tmp_path) == []
