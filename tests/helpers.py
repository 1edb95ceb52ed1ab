"""Shared test fixtures: small random corpora and the location of the shared real corpora."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest


def random_corpus(num_docs: int = 60, num_words: int = 50, mean_length: int = 40,
                  seed: int = 0):
    """A corpus of random documents with Zipf-like word frequencies (lengths >= 1)."""
    from saberjax.corpus import Corpus

    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 2 * mean_length, num_docs)
    weights = 1.0 / np.arange(1, num_words + 1)
    words = rng.choice(num_words, size=int(lengths.sum()), p=weights / weights.sum())
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return Corpus(offsets, words.astype(np.int32), tuple(f"w{i}" for i in range(num_words)),
                  name=f"random{seed}")


ROOT = pathlib.Path(__file__).resolve().parents[1]


def run_on_mesh(corpus, hyper, iterations: int, seed: int, **placement):
    """(placement, state) after `iterations` compiled steps of the corpus placed with
    `placement`'s settings (saberjax.execution.placement.place) from `seed`."""
    from saberjax.execution.placement import place
    placed = place(corpus, hyper, **placement)
    state = placed.init(seed)
    step = placed.compile(state)
    for _ in range(iterations):
        state = step(state)
    return placed, state


def needs_local_devices(count: int) -> None:
    """Skip unless this process has count local devices.  On the CPU it fails instead: the
    tests run with two host devices (conftest.py), so a skip there would hide a lost flag."""
    import jax

    if jax.default_backend() == "cpu":
        assert len(jax.local_devices()) >= count, "tests run with two host devices (conftest.py)"
    elif len(jax.local_devices()) < count:
        pytest.skip(f"needs {count} local devices; {jax.default_backend()} has "
                    f"{len(jax.local_devices())}")


def import_script(path: str, module_name: str):
    """A script of the repository (e.g. "launch/bench.py") imported as module `module_name`;
    a script that defines its flags in a registry of its own when imported keeps them there."""
    spec = importlib.util.spec_from_file_location(module_name, ROOT / path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # where dataclasses look up the module's annotations
    spec.loader.exec_module(module)
    return module


def run_launcher(script: str, *flags: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run launch/<script> with flags as a user would, from the repo root, whatever its exit."""
    return subprocess.run([sys.executable, str(ROOT / "launch" / script), *flags],
                          capture_output=True, text=True, cwd=ROOT, timeout=timeout)


def launch(script: str, *flags: str, timeout: float = 600) -> str:
    """Run launch/<script> with flags as a user would; its stdout (fails on a non-zero exit)."""
    result = run_launcher(script, *flags, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def shared_data(name: str) -> pathlib.Path:
    """Folder of a shared real corpus; skips the test when the shared data is absent."""
    root = os.environ.get("SABERJAX_SHARED_DATA")
    root = pathlib.Path(root) if root else pathlib.Path(__file__).resolve().parents[2] / "shared" / "data"
    folder = root / name
    if not (folder / "docword.txt.gz").is_file():
        pytest.skip(f"shared corpus {folder} not available")
    return folder


def goodness_of_fit_pvalue(samples: np.ndarray, probabilities: np.ndarray) -> float:
    """Chi-square p-value of integer samples against `probabilities` (sparse bins pooled)."""
    from scipy import stats

    probabilities = np.asarray(probabilities, np.float64)
    probabilities = probabilities / probabilities.sum()
    observed = np.bincount(np.asarray(samples).ravel(), minlength=len(probabilities))
    assert len(observed) == len(probabilities), "a sample fell outside the support"
    expected = probabilities * observed.sum()
    large = expected >= 5
    pooled_observed = np.append(observed[large], observed[~large].sum())
    pooled_expected = np.append(expected[large], expected[~large].sum())
    keep = pooled_expected > 0
    assert np.all(pooled_observed[~keep] == 0), "a zero-probability outcome was sampled"
    return float(stats.chisquare(pooled_observed[keep], pooled_expected[keep]).pvalue)


# the damages damage_entry does to a cache entry
ENTRY_DAMAGES = ("flip a token", "cut short", "manifest", "other key")


def damage_entry(array: pathlib.Path, manifest: pathlib.Path, damage: str) -> None:
    """Damage a cache entry of these array and JSON manifest files as a bad disk, a crash or
    another run would (one of ENTRY_DAMAGES): a bit of the array's last token flipped (still
    a valid file: only a digest tells), the array cut short, a manifest that is not JSON, or
    the manifest of another key."""
    if damage == "flip a token":
        data = bytearray(array.read_bytes())
        data[-4] ^= 1
        array.write_bytes(bytes(data))
    elif damage == "cut short":
        array.write_bytes(array.read_bytes()[:-4])
    elif damage == "manifest":
        manifest.write_text("{not json")
    elif damage == "other key":
        manifest.write_text(json.dumps(dict(json.loads(manifest.read_text()), key="0" * 64)))
    else:
        raise ValueError(f"unknown damage {damage!r}")
