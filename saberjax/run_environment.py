"""Where a run ran: the device, the host, the software and the sources (git commit and a
digest of the saberjax sources), for benchmark and measurement records."""

from __future__ import annotations

import datetime
import hashlib
import importlib.metadata
import os
import pathlib
import platform
import subprocess

import jax

from saberjax.platform import cpu_cores


def _git_commit() -> str | None:
    """HEAD of the repository, with "+dirty" when its sources (saberjax/, launch/) differ from
    it, as in a copied working tree whose .git is older."""
    root = str(pathlib.Path(__file__).resolve().parents[1])

    def git(*args) -> str | None:
        try:
            out = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True,
                                 timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    head = git("rev-parse", "HEAD")
    if not head:
        return None
    changed = git("status", "--porcelain", "--untracked-files=no", "--", "saberjax", "launch")
    return head + ("+dirty" if changed else "")


def _source_digest() -> str:
    """Short SHA-256 of the saberjax sources that ran (git_commit misses uncommitted edits)."""
    root = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            digest.update(os.path.relpath(path, root).encode() + b"\0")
            with open(path, "rb") as f:
                digest.update(f.read() + b"\0")
    return digest.hexdigest()[:12]


def _host_cpu() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment() -> dict:
    """Device, software and date of this run."""
    device = jax.devices()[0]
    try:
        jaxlib_version = importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:
        jaxlib_version = None
    return dict(
        device=device.device_kind,
        platform=device.platform,
        num_devices=jax.device_count(),
        host_cpu=_host_cpu(),
        cpu_cores=cpu_cores(),
        jax_version=jax.__version__,
        jaxlib_version=jaxlib_version,
        python_version=platform.python_version(),
        git_commit=_git_commit(),
        source_digest=_source_digest(),
        load_average=[round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    )
