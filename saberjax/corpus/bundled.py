"""Corpora shipped in the ``saberjax.data`` package (UCI format)."""

from __future__ import annotations

import importlib.resources
import os
from pathlib import Path

from saberjax.corpus.core import Corpus
from saberjax.corpus.uci import load_uci, uci_docwords

def bundled_corpus_path(name: str = "kos") -> Path:
    """Folder of a corpus shipped in ``saberjax/data`` (UCI format)."""
    root = Path(os.fspath(importlib.resources.files("saberjax.data")))
    available = sorted(p.name for p in root.iterdir() if p.is_dir() and uci_docwords(p))
    if name not in available:
        raise ValueError(f"no bundled corpus {name!r}; available: {', '.join(available)}")
    return root / name


def load_bundled(name: str = "kos") -> Corpus:
    """Loads a bundled corpus (see bundled_corpus_path)."""
    return load_uci(bundled_corpus_path(name))
