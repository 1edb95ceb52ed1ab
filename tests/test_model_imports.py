"""A trained model loads and is used without the training engine: importing saberjax.model and
loading a model directory load none of the modules that place, stream or store a corpus on the
devices, and the package's public names are imported on first use."""

import subprocess
import sys

from helpers import ROOT

# the engine: saberjax.execution and its modules, and what they stream and store
ENGINE_MODULES = ("saberjax.execution", "saberjax.streaming", "saberjax.chunk_store",
                  "saberjax.layout_device", "saberjax.trainer")


def engine_modules(loaded: set[str]) -> list[str]:
    return sorted(name for name in loaded
                  if any(name == engine or name.startswith(engine + ".")
                         for engine in ENGINE_MODULES))

LOAD_A_MODEL = """
import sys
import numpy as np
from saberjax.model import TopicModel
model = TopicModel(np.arange(12, dtype=np.int32).reshape(6, 2), 0.5, 0.01, tuple("abcdef"))
model.save(sys.argv[1])
TopicModel.load(sys.argv[1]).top_words(2)
print(" ".join(sorted(name for name in sys.modules if name.startswith("saberjax"))))
"""


def loaded_modules(script: str, *args: str) -> set[str]:
    """The saberjax modules a fresh interpreter has loaded after running `script`."""
    result = subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                            text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return set(result.stdout.split())


def test_loading_a_model_loads_no_training_engine(tmp_path):
    loaded = loaded_modules(LOAD_A_MODEL, str(tmp_path / "model"))
    assert "saberjax.model" in loaded and not engine_modules(loaded), sorted(loaded)


def test_the_package_imports_its_public_names_on_first_use():
    loaded = loaded_modules("import sys, saberjax\n"
                            "before = {n for n in sys.modules if n.startswith('saberjax')}\n"
                            "saberjax.train\n"
                            "print(' '.join(sorted(before)), 'then', saberjax.train.__module__)")
    assert loaded == {"saberjax", "then", "saberjax.trainer"}
