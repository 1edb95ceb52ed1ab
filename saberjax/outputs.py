"""Output directories that appear whole or not at all and never replace earlier work unasked.

A command writes its directory's files into a staging sibling and `replace_directory` moves
the finished staging folder into place.  Where the directory already exists, the two are
exchanged in one atomic rename (Linux renameat2 RENAME_EXCHANGE), so a reader, a crash or a
kill finds either the old directory or the new one, never a mixture; elsewhere the old one is
renamed aside first (a kill between the two renames leaves both, whole, under their temporary
names).  `check_replaceable` refuses, before anything is written, to replace a path that holds
files the command did not make.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import glob
import os
import re
import shutil
import uuid
from collections.abc import Collection
from pathlib import Path


class OutputConflictError(FileExistsError):
    """The output path's state and the command disagree: earlier work would be replaced
    without --overwrite, a path holds files that are not the command's own, or --resume finds
    nothing to continue.  Raised before anything is written."""


def check_replaceable(path: Path, own_names: Collection[str], what: str) -> None:
    """Raise OutputConflictError unless `path` is absent, or a directory holding only entries
    named in `own_names` (the files of `what`, e.g. "a saberjax model")."""
    path = Path(path)
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise OutputConflictError(f"{path} exists and is not a plain directory (a file or a "
                                  f"link); choose another output")
    if path.is_dir():
        foreign = sorted(entry.name for entry in path.iterdir() if entry.name not in own_names)
        if foreign:
            shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
            raise OutputConflictError(f"{path} holds files that are not {what} ({shown}); it is "
                                      f"never replaced: choose another output")


def holds_anything(path: Path) -> bool:
    """Whether `path` is a directory with at least one entry."""
    return Path(path).is_dir() and any(Path(path).iterdir())


def check_absent_or_overwrite(path, overwrite: bool) -> None:
    """Raise OutputConflictError when `path` holds something (a file, or a directory with
    entries) and `overwrite` was not given."""
    path = Path(path)
    if not overwrite and (path.is_file() or holds_anything(path)):
        raise OutputConflictError(f"{path} already exists: --overwrite replaces it, or choose "
                                  f"another --output to keep it")


@contextlib.contextmanager
def staged_directory(directory, own_names: Collection[str], what: str):
    """Context yielding a fresh hidden sibling of `directory` to write into; on success it
    replaces `directory` (replace_directory), on an exception it is deleted.  Refuses first
    (check_replaceable) when `directory` holds files other than `own_names`."""
    directory = Path(os.path.abspath(directory))  # "." and ".." have siblings too
    check_replaceable(directory, own_names, what)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = hidden_sibling(directory, "partial")
    staging.mkdir()
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    replace_directory(staging, directory)


def replace_directory(staging: Path, directory: Path) -> None:
    """Move the finished folder `staging` to `directory`, deleting what was there before."""
    staging, directory = Path(staging), Path(directory)
    if not directory.exists():
        os.rename(staging, directory)
        return
    retired = hidden_sibling(directory, "replaced")
    if _exchange(staging, directory):
        os.rename(staging, retired)  # staging's name now holds the old directory
    else:
        os.rename(directory, retired)
        try:
            os.rename(staging, directory)
        except BaseException:
            os.rename(retired, directory)
            raise
    shutil.rmtree(retired)


def hidden_sibling(path: Path, role: str) -> Path:
    """A fresh hidden name beside `path` for a file or folder in the given role:
    .NAME.<random>.ROLE."""
    return path.with_name(f".{path.name}.{uuid.uuid4().hex}.{role}")


def remove_hidden_siblings(path: Path) -> None:
    """Delete the hidden_sibling leftovers of `path` that an interrupted command left behind."""
    path = Path(path)
    if path.parent.is_dir():
        for leftover in path.parent.glob(f".{glob.escape(path.name)}.*.*"):
            if not _HIDDEN_SIBLING.fullmatch(leftover.name.removeprefix(f".{path.name}")):
                continue
            if leftover.is_dir():
                shutil.rmtree(leftover)
            else:
                leftover.unlink()


_HIDDEN_SIBLING = re.compile(r"\.[0-9a-f]{32}\.(?:partial|replaced)")
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(first: Path, second: Path) -> bool:
    """Swap two existing paths atomically (renameat2 RENAME_EXCHANGE); False where the C
    library, kernel or file system does not offer it."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint)
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second),
                 _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(second))
