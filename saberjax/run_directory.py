"""The output directory of a training run: owned by one run at a time, never written over
earlier work, replaced whole.

A run writes while it trains (metrics.jsonl, line by line, and checkpoints/) into its working
directory, the sibling OUTPUT.partial, so that OUTPUT stays as it was until the run has
finished: absent for a fresh run, the earlier model for one that replaces it.  When training
ends, the finished directory is assembled in a hidden staging sibling (the model files, the
report, and hard links to the working directory's metrics and checkpoints) and replaces OUTPUT
in one step (outputs.replace_directory).  So a crash or a kill at any moment (SIGKILL, SIGTERM,
out of memory) leaves OUTPUT either as it was or as the finished run, never a mixture; an
interrupted run's checkpoints stay in OUTPUT.partial for --resume, and a next run needs no flag
where there are none.

One run at a time owns an output: the run that writes it (the writing process of a run of
several, processes.is_writer) holds an exclusive lock on the file .OUTPUT.lock beside it
(flock, which the kernel releases when the process ends, however it ends), from before it
looks at what is on disk until its directory is in place or it has given up.  A second run
into the same output refuses, naming the first; a killed run leaves nothing stuck.

`RunDirectory.plan` decides from the flags and what is on disk, before anything is written:

- the output's parent is checked first: a folder (or a path to one that can be created), one
  this user may write into, with room for the model (needed_bytes);
- a model in OUTPUT is replaced only with overwrite, or by resume continuing its checkpoint;
- an interrupted run (checkpoints in OUTPUT.partial, or in an OUTPUT without a model) is
  continued with resume, discarded with overwrite, and otherwise an error, as is an OUTPUT
  holding an unfinished run's files without a checkpoint; an OUTPUT.partial without
  checkpoints holds nothing resumable and is cleared;
- resume continues the newest undamaged checkpoint, of OUTPUT or OUTPUT.partial (a damaged
  newer one is named in a warning), and is an error when there is none;
- a path holding files that are not a run's is never written into, whatever the flags.

An OSError of the output's files during the run (a full disk, say) is reported as one naming
--output, the reason and the file (RunDirectory.failed).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import shutil
import socket
from pathlib import Path

from saberjax import checkpoint, processes
from saberjax.files import atomic_write
from saberjax.outputs import (OutputConflictError, check_replaceable, hidden_sibling,
                              holds_anything, remove_hidden_siblings, replace_directory)

WORK_SUFFIX = ".partial"
CHECKPOINTS = "checkpoints"
METRICS = "metrics.jsonl"
MODEL_FILE = "model.npz"
DOC_TOPICS = "doc_topics.npy"  # train.py --save_doc_topics
DOC_NAMES = "doc_names.txt"  # beside DOC_TOPICS: its rows' document ids (--id_field)
RUN_FILES = (MODEL_FILE, "vocab.txt", "config.json", METRICS, "report", CHECKPOINTS, DOC_TOPICS,
             DOC_NAMES)


class OutputInUseError(OutputConflictError):
    """Another run owns the output directory (holds its lock)."""


@dataclasses.dataclass(frozen=True)
class RunDirectory:
    """Where a run's result goes (directory), where it writes while training (work), the
    checkpoint it continues (resume_from, None for a fresh run), and the lock it holds on the
    directory (None in a process that does not write)."""

    directory: Path
    work: Path
    resume_from: Path | None
    lock: OutputLock | None = dataclasses.field(default=None, compare=False)

    @classmethod
    def plan(cls, directory, overwrite: bool = False, resume: bool = False,
             needed_bytes: int = 0) -> RunDirectory:
        """The run's directories after checking that the flags allow writing them and that the
        output's parent takes `needed_bytes` (see the module doc); raises OutputConflictError,
        naming the ways out, when they do not.  In the writing process it takes the output's
        lock first (creating the folders above the output where they are missing), and keeps
        it until finish or failed; it touches nothing else."""
        directory = Path(os.path.abspath(directory))  # "." and ".." have siblings too
        lock = None
        if processes.is_writer():
            _check_parent(directory, needed_bytes)
            lock = OutputLock.take(directory)
        try:
            work, resume_from = _plan(directory, overwrite, resume)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        return cls(directory, work, resume_from, lock)

    @property
    def checkpoint_dir(self) -> Path:
        return self.work / CHECKPOINTS

    @property
    def metrics_path(self) -> Path:
        return self.work / METRICS

    @contextlib.contextmanager
    def metrics_log(self, earlier: list[dict]):
        """Context yielding append(record), which adds a record as a line to the working
        directory's metrics.jsonl (started anew with the `earlier` records, a resumed run's)
        and flushes it, so that an interrupted run's metrics are on disk up to its last
        iteration; an OSError of the writing names the file."""
        atomic_write(self.metrics_path, lambda file: file.writelines(
            json.dumps(record) + "\n" for record in earlier), mode="w")
        with open(self.metrics_path, "a") as file:
            def append(record: dict) -> None:
                try:
                    file.write(json.dumps(record) + "\n")
                    file.flush()
                except OSError as error:
                    raise OSError(error.errno, error.strerror, str(self.metrics_path)) from error

            yield append

    def open(self) -> Path:
        """Prepare the working directory: kept when the run continues a checkpoint in it, else
        emptied of what an earlier run left there (debris without checkpoints, or with
        overwrite an interrupted run); also clears the hidden leftovers of interrupted saves.
        Returns the working directory."""
        try:
            remove_hidden_siblings(self.directory)
            if self.resume_from is None or not self.resume_from.is_relative_to(self.work):
                shutil.rmtree(self.work, ignore_errors=True)
            self.work.mkdir(parents=True, exist_ok=True)
        except BaseException as error:
            raise self.failed(error) from None
        return self.work

    def finish(self, write_result) -> Path:
        """Assemble the finished directory, write_result(staging) adding the model files and
        report to the working directory's metrics and checkpoints, and put it in place of the
        directory in one step; the working directory is gone afterwards, and the directory
        free for other runs."""
        staging = hidden_sibling(self.directory, "partial")
        staging.mkdir()
        try:
            _link_tree(self.work, staging)
            write_result(staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        replace_directory(staging, self.directory)
        shutil.rmtree(self.work)
        if self.lock is not None:
            self.lock.release()
        return self.directory

    def failed(self, error: BaseException) -> BaseException:
        """After the run failed with `error`: delete the working directory unless it holds a
        checkpoint to resume from, give the directory up, and return the exception to raise:
        `error` itself, or for an OSError at one of the output's paths (OUTPUT, OUTPUT.partial,
        their hidden siblings) an OSError "--output=OUTPUT: <reason> (<path>)"."""
        try:
            if self.work.exists() and not _latest_checkpoint(self.work):
                shutil.rmtree(self.work, ignore_errors=True)
        finally:
            if self.lock is not None:
                self.lock.release()
        return self._named(error)

    def _named(self, error: BaseException) -> BaseException:
        """An OSError at one of the output's paths restated naming --output; else `error`."""
        if not isinstance(error, OSError) or isinstance(error, OutputConflictError):
            return error
        paths = [Path(os.fsdecode(name)) for name in (error.filename, error.filename2)
                 if isinstance(name, (str, bytes, os.PathLike))]
        own = [path for path in paths if self._holds(path)]
        if not own:
            return error
        reason = error.strerror or str(error)
        return OSError(f"--output={self.directory}: {reason[:1].lower()}{reason[1:]} "
                       f"({own[0]})")

    def _holds(self, path: Path) -> bool:
        """Whether `path` is the directory's, its working directory's, a hidden sibling's or
        under one of them."""
        try:
            first = Path(os.path.abspath(path)).relative_to(self.directory.parent).parts[0]
        except (ValueError, IndexError):
            return False
        return (first in (self.directory.name, self.work.name)
                or first.startswith(f".{self.directory.name}."))


def _plan(directory: Path, overwrite: bool, resume: bool) -> tuple[Path, Path | None]:
    """(working directory, checkpoint to resume from or None) of a run into `directory` (see
    RunDirectory.plan)."""
    sibling = directory.with_name(directory.name + WORK_SUFFIX)
    for path in (directory, sibling):
        check_replaceable(path, RUN_FILES, "a saberjax model or training run")
    has_model = (directory / MODEL_FILE).exists()
    in_directory, in_sibling = _latest_checkpoint(directory), _latest_checkpoint(sibling)
    if resume:
        found = [found for found in (in_directory, in_sibling) if found]
        if not found:
            raise OutputConflictError(_nothing_to_resume(directory, sibling))
        return sibling, max(found, key=lambda found: found[1].stat().st_mtime_ns)[1]
    if not overwrite:
        interrupted = in_sibling or (None if has_model else in_directory)
        if interrupted:
            raise OutputConflictError(
                f"{interrupted[1].parent.parent} holds an interrupted run (checkpoint at "
                f"iteration {interrupted[0]}): --resume continues it, --overwrite discards it")
        if holds_anything(directory):
            what = (_describe(directory) if has_model
                    else "the files of an unfinished run without a checkpoint")
            resumable = (f", --resume continues its checkpoint (iteration "
                         f"{in_directory[0]})" if in_directory else "")
            raise OutputConflictError(
                f"{directory} already holds {what}: --overwrite replaces it{resumable}, or "
                f"choose another --output to keep it")
    return sibling, None


def _nothing_to_resume(directory: Path, sibling: Path) -> str:
    """Why --resume finds nothing to continue: every checkpoint damaged, or none."""
    damaged = [error for run in (directory, sibling)
               for error in checkpoint.find_checkpoints(run / CHECKPOINTS)[1]]
    if damaged:
        return (f"--resume: the checkpoint is damaged: {damaged[0]}; no earlier one is left, "
                f"nothing was changed (--overwrite starts afresh)")
    return (f"--resume: no checkpoint in {directory / CHECKPOINTS} or {sibling / CHECKPOINTS}; "
            f"nothing was changed (a run saves checkpoints with --checkpoint_every=N)")


def _check_parent(directory: Path, needed_bytes: int) -> None:
    """Raise OutputConflictError unless the folder `directory` goes into (its parent, or the
    nearest existing folder above it) is one this user may write into, on a file system with
    `needed_bytes` free."""
    existing = directory
    while not os.path.lexists(existing):
        existing = existing.parent
    folder = directory.parent if existing == directory else existing
    if not folder.is_dir():
        raise OutputConflictError(f"--output={directory}: {folder} is not a directory")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputConflictError(f"--output={directory}: {folder} is not writable")
    free = shutil.disk_usage(folder).free
    if free < needed_bytes:
        raise OutputConflictError(f"--output={directory}: the model needs about "
                                  f"{_size(needed_bytes)} and {_size(free)} is free there")


def _size(num_bytes: int) -> str:
    """A size for messages: "1.2 GB", "340 MB", "12 kB"."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6)):
        if num_bytes >= scale:
            return f"{num_bytes / scale:.{1 if num_bytes < 100 * scale else 0}f} {unit}"
    return f"{-(-num_bytes // 1000)} kB"


class OutputLock:
    """The exclusive lock a run holds on its output directory: flock on the file .NAME.lock
    beside it, which records the holder ("process 1234 on host").  The kernel releases it when
    the process ends; release() deletes the file while still holding it, and take() checks
    that the file it locked is still the one at the path, so that a run never holds the lock
    of a file another has just deleted."""

    def __init__(self, path: Path, handle: int):
        self.path, self.handle = path, handle

    @classmethod
    def take(cls, directory: Path) -> OutputLock:
        """The lock of `directory` (its parent created where missing); OutputInUseError, naming
        the holder, when another run holds it."""
        directory.parent.mkdir(parents=True, exist_ok=True)
        path = directory.with_name(f".{directory.name}.lock")
        while True:
            handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(handle, 200, 0).decode(errors="replace").strip()
                os.close(handle)
                raise OutputInUseError(
                    f"{directory} is in use by another run ({holder or 'a process'}); wait "
                    f"for it to end, or choose another --output") from None
            try:
                if os.path.samestat(os.fstat(handle), os.stat(path)):
                    break
            except FileNotFoundError:
                pass
            os.close(handle)  # released and deleted meanwhile: lock the file there now
        os.ftruncate(handle, 0)
        os.pwrite(handle, f"process {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        return cls(path, handle)

    def release(self) -> None:
        """Delete the lock file and give the lock up (nothing if released already)."""
        if self.handle is None:
            return
        self.path.unlink(missing_ok=True)
        os.close(self.handle)
        self.handle = None


def _link_tree(source: Path, target: Path) -> None:
    """Hard links in target to every file under source (copies where linking fails)."""
    for folder, _, files in os.walk(source):
        into = target / Path(folder).relative_to(source)
        into.mkdir(exist_ok=True)
        for name in files:
            try:
                os.link(Path(folder) / name, into / name)
            except OSError:
                shutil.copy2(Path(folder) / name, into / name)


def _latest_checkpoint(run: Path) -> tuple[int, Path] | None:
    """(iteration, manifest path) of the newest usable checkpoint of a run directory."""
    path = checkpoint.latest_checkpoint(run / CHECKPOINTS)
    return (checkpoint.read_manifest(path)["iteration"], path) if path else None


def _describe(directory: Path) -> str:
    """What a run directory holds, for messages: "a model (K = 20, 30 iterations)"."""
    try:
        config = json.loads((directory / "config.json").read_text())
        return (f"a model (K = {config['num_topics']}, "
                f"{config.get('iterations_run', config.get('iterations'))} iterations)")
    except (OSError, ValueError, KeyError, TypeError):
        return "a model"
