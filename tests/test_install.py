"""Issue 31: saberjax installed as a Python tool is the whole set-up.  The wheel built from
the sources, installed into a fresh virtual environment outside the repository, runs
`saberjax train` on its bundled corpus and `saberjax evaluate` on the model, from a folder
that is not the repository.  The environment borrows its dependencies (jax, numpy, absl)
from the one running the tests, so nothing is downloaded."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile

from helpers import ROOT


def run(*command, cwd, env) -> subprocess.CompletedProcess:
    result = subprocess.run([str(part) for part in command], capture_output=True, text=True,
                            cwd=cwd, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_the_wheel_installs_a_saberjax_command_that_trains_and_evaluates(tmp_path):
    env = {name: value for name, value in os.environ.items()
           if name not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    source = tmp_path / "source"  # a copy: building leaves build/ and *.egg-info behind
    shutil.copytree(ROOT / "saberjax", source / "saberjax",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
        "--no-index", "--wheel-dir", tmp_path / "dist", source, cwd=tmp_path, env=env)
    [wheel] = (tmp_path / "dist").glob("saberjax-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert "saberjax/data/kos/docword.txt.gz" in archive.namelist()

    environment = tmp_path / "venv"
    venv.create(environment, with_pip=False)
    python = environment / "bin" / "python"
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
               cwd=tmp_path, env=env).stdout.strip()
    # after the environment's own packages: the dependencies of the one running the tests
    (tmp_path / "venv" / site / "dependencies.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n")
    run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps",
        "--no-index", wheel, cwd=tmp_path, env=env)

    user = tmp_path / "user"  # not the repository
    user.mkdir()
    command = environment / "bin" / "saberjax"
    assert run(command, "--version", cwd=user, env=env).stdout.startswith("saberjax ")
    trained = run(command, "train", "--iterations=2", "--output=model", "--num_topics=4",
                  "--top_words=0", "--nocache", cwd=user, env=env)
    where = run(python, "-c", "import saberjax; print(saberjax.__file__)", cwd=user, env=env)
    assert where.stdout.startswith(str(environment)), where.stdout  # the wheel's, not the repo's
    summary = json.loads(trained.stdout.splitlines()[-1])
    assert summary["output"] == str(user / "model") and summary["iterations"] == 2
    scored = json.loads(run(command, "evaluate", "model", "--coherence=", cwd=user,
                            env=env).stdout.splitlines()[-1])
    assert abs(scored["heldout_loglik_per_token"] - summary["heldout_loglik_per_token"]) < 1e-6
