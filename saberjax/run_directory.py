"""The output directory of a training run: never written over earlier work, replaced whole.

A run has a working directory for what it writes while it trains (metrics.jsonl, line by line,
and checkpoints/): OUTPUT itself when OUTPUT holds no model, else the sibling OUTPUT.partial, so
that a model already in OUTPUT stays untouched until the new one is finished.  When training
ends, the finished directory is assembled in a hidden staging sibling (the model files, the
report, and hard links to the working directory's metrics and checkpoints) and replaces OUTPUT
in one step (outputs.replace_directory).  So a crash or a kill at any moment leaves OUTPUT
either as it was or as the finished run, never a mixture; an interrupted run's checkpoints stay
in its working directory for --resume.

`RunDirectory.plan` decides from the flags and what is on disk, before anything is written:

- a model in OUTPUT is replaced only with overwrite, or by resume continuing its checkpoint;
- an interrupted run (checkpoints in OUTPUT without a model, or in OUTPUT.partial) is
  continued with resume, discarded with overwrite, and otherwise an error, as is an OUTPUT
  holding an unfinished run's files without a checkpoint; an OUTPUT.partial without
  checkpoints (beside an intact OUTPUT) holds nothing resumable and is cleared;
- resume continues the checkpoint written last, of OUTPUT or OUTPUT.partial, and is an error
  when there is none;
- a path holding files that are not a run's is never written into, whatever the flags.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

from saberjax import checkpoint
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


@dataclasses.dataclass(frozen=True)
class RunDirectory:
    """Where a run's result goes (directory), where it writes while training (work), and the
    checkpoint it continues (resume_from, None for a fresh run)."""

    directory: Path
    work: Path
    resume_from: Path | None

    @classmethod
    def plan(cls, directory, overwrite: bool = False, resume: bool = False) -> RunDirectory:
        """The run's directories after checking that the flags allow writing them (see the
        module doc); raises OutputConflictError, naming the ways out, when they do not.
        Touches nothing."""
        directory = Path(os.path.abspath(directory))  # "." and ".." have siblings too
        sibling = directory.with_name(directory.name + WORK_SUFFIX)
        for path in (directory, sibling):
            check_replaceable(path, RUN_FILES, "a saberjax model or training run")
        has_model = (directory / MODEL_FILE).exists()
        fresh_work = sibling if has_model else directory
        in_directory, in_sibling = _latest_checkpoint(directory), _latest_checkpoint(sibling)
        if resume:
            found = [found for found in (in_directory, in_sibling) if found]
            if not found:
                raise OutputConflictError(
                    f"--resume: no checkpoint in {directory / CHECKPOINTS} or "
                    f"{sibling / CHECKPOINTS}; nothing was changed (a run saves checkpoints "
                    f"with --checkpoint_every=N)")
            resume_from = max(found, key=lambda found: found[1].stat().st_mtime_ns)[1]
            continued = resume_from.parent.parent
            return cls(directory, fresh_work if continued == directory and has_model
                       else continued, resume_from)
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
        return cls(directory, fresh_work, None)

    @property
    def checkpoint_dir(self) -> Path:
        return self.work / CHECKPOINTS

    @property
    def metrics_path(self) -> Path:
        return self.work / METRICS

    def open(self) -> Path:
        """Prepare the working directory: kept when the run continues a checkpoint in it, else
        emptied of what an earlier run left there (debris without checkpoints, or with overwrite
        an interrupted run), as is OUTPUT.partial; also clears the hidden leftovers of
        interrupted saves.  Returns the working directory."""
        remove_hidden_siblings(self.directory)
        if self.resume_from is None or not self.resume_from.is_relative_to(self.work):
            sibling = self.directory.with_name(self.directory.name + WORK_SUFFIX)
            shutil.rmtree(sibling, ignore_errors=True)
            if self.work == self.directory:
                shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True, exist_ok=True)
        return self.work

    def finish(self, write_result) -> Path:
        """Assemble the finished directory, write_result(staging) adding the model files and
        report to the working directory's metrics and checkpoints, and put it in place of the
        directory in one step; the working directory is gone afterwards."""
        staging = hidden_sibling(self.directory, "partial")
        staging.mkdir()
        try:
            _link_tree(self.work, staging)
            write_result(staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        replace_directory(staging, self.directory)
        if self.work != self.directory:
            shutil.rmtree(self.work)
        return self.directory

    def abandon(self) -> None:
        """After a failed run: delete the working directory unless it holds a checkpoint to
        resume from or is a model directory."""
        if (self.work.exists() and not (self.work / MODEL_FILE).exists()
                and not _latest_checkpoint(self.work)):
            shutil.rmtree(self.work)


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
