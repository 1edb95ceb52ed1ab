"""`saberjax infer` run from a checkout, without installing (saberjax/commands/infer.py)."""

import pathlib
import sys

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from saberjax.commands import run  # noqa: E402

if __name__ == "__main__":
    run("infer")
