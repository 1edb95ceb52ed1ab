"""Checkpoints: the whole training state on disk, so that a killed run resumes bit-identically.

The checkpoint of iteration N is a set of files in the checkpoint folder::

    checkpoint-0000000N.npz     the state arrays: per chunk i, z and A (chunk{i}.topics,
                                chunk{i}.a_pairs, chunk{i}.a_nnz; partitioned by word, z of
                                device i's share of the vocabulary; z alone for a run from
                                a chunk store, whose states are z), the word-topic counts B
                                (word_topic), the prior alpha, iteration and seed
    checkpoint-0000000N.pP.npz  in a run of several processes, process P's chunks (P > 0;
                                process 0's are in the .npz above)
    checkpoint-0000000N.json    the manifest: format version, iteration, seed, training config,
                                corpus fingerprint, chunking, partition, metrics so far and the
                                SHA-256 of every .npz

B-hat, the topic totals and the sampling trees are not stored: loading recomputes them from B
and alpha with the computation every iteration ends with (Placement.model_from_word_topic), so
the restored state is the saved one bit for bit.  Chunk states are stored by layout chunk, so
a checkpoint depends on the chunking, not on where the chunks were placed.  Since every random
draw is keyed by (seed, iteration, token id), a run resumed from a checkpoint ends with the
same model as an uninterrupted one.

Each file is written to a temporary name, fsynced and renamed into place (files.atomic_write),
the .npz files first (every process its own, then all wait for each other): process 0's
manifest is the commit mark and names the digests of the .npz files, so a checkpoint cut short
or damaged is never taken as the latest.  The checkpoint before the newest is kept too, so that
a newest one damaged later on disk leaves one to resume from (latest_checkpoint): before a save
every checkpoint but the newest is deleted, so that the folder never holds more than two, and
after it every one but the new one and the one before, with the leftovers of interrupted saves.
The processes of a run share the folder (one host, or a file system all hosts see)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import warnings
from pathlib import Path

import jax
import numpy as np

from saberjax import processes
from saberjax.config import Hyperparams, TrainConfig
from saberjax.corpus import Corpus
from saberjax.execution.placement import Placement
from saberjax.files import atomic_write, fsync_directory
from saberjax.state import ChunkState, TrainState

FORMAT_VERSION = 4  # 2: A as packed pairs (state.pack_pairs); 3: alpha stored; 4: z alone
# for runs from a chunk store
READABLE_VERSIONS = (3, 4)

_MANIFEST_NAME = re.compile(r"checkpoint-(\d+)\.json")
# ours (process shards and temporaries too)
_OWN_FILE = re.compile(r"\.?checkpoint-(\d+)\.(?:p\d+\.)?(?:npz|json)(\..+\.tmp)?")


class CheckpointError(ValueError):
    """A checkpoint that cannot be read, or that belongs to another corpus or setting."""


def save_checkpoint(directory, state: TrainState, placement: Placement, config,
                    corpus_fingerprint: str, metrics: list[dict]) -> Path:
    """Write the checkpoint of `state` into `directory`, keeping the newest earlier one and
    deleting every other (see the module doc).

    `config` is the run's settings dataclass (config.TrainConfig), `placement` the corpus
    on the mesh the state belongs to.  Returns the manifest path.
    """
    directory = Path(directory)
    iteration = int(state.iteration)
    manifest_path = directory / f"checkpoint-{iteration:08d}.json"
    earlier = [found for found in _manifests(directory) if found[0] < iteration]
    previous = max(earlier)[0] if earlier else iteration
    if processes.is_writer() and directory.is_dir():  # not the files being written
        _delete_all_but(directory, {previous, iteration}, temporaries=False)
    arrays = _state_arrays(state, placement)  # every process takes part (B is gathered)
    shard = _shard_path(manifest_path, jax.process_index())
    atomic_write(shard, lambda file: np.savez(file, **arrays))
    processes.barrier(f"checkpoint {iteration} written")
    if processes.is_writer():
        shards = [_shard_path(manifest_path, process) for process in range(jax.process_count())]
        manifest = dict(format_version=FORMAT_VERSION, iteration=iteration, seed=int(state.seed),
                        config=dataclasses.asdict(config), corpus_fingerprint=corpus_fingerprint,
                        chunking=chunking(placement), partition=placement.partition,
                        arrays_sha256=_sha256(shards[0]),
                        shards_sha256={path.name: _sha256(path) for path in shards[1:]},
                        metrics=list(metrics))
        atomic_write(manifest_path, lambda file: json.dump(manifest, file, indent=1), mode="w")
        fsync_directory(directory)
        _delete_all_but(directory, {previous, iteration}, temporaries=True)
    processes.barrier(f"checkpoint {iteration} committed")
    return manifest_path


def _shard_path(manifest_path: Path, process: int) -> Path:
    """The arrays file of a process: process 0's holds B, the iteration and the seed too."""
    return manifest_path.with_suffix(".npz" if process == 0 else f".p{process}.npz")



def latest_checkpoint(directory) -> Path | None:
    """Manifest path of the newest complete, undamaged checkpoint in `directory` (or None).

    Each newer damaged checkpoint is skipped with a warning naming its file and what is wrong;
    files of unfinished saves are ignored.
    """
    latest, damaged = find_checkpoints(directory)
    for problem in damaged:
        warnings.warn(f"skipping damaged checkpoint: {problem}", stacklevel=2)
    return latest


def find_checkpoints(directory) -> tuple[Path | None, list[CheckpointError]]:
    """(manifest path of the newest complete, undamaged checkpoint in `directory` or None,
    what is wrong with each newer checkpoint, newest first: the damaged ones)."""
    damaged = []
    for _, path in sorted(_manifests(Path(directory)), reverse=True):
        try:
            _verify_all(path, read_manifest(path))
        except CheckpointError as error:
            damaged.append(error)
            continue
        return path, damaged
    return None, damaged


def _manifests(directory: Path) -> list[tuple[int, Path]]:
    """(iteration, path) of every checkpoint manifest in `directory`."""
    if not directory.is_dir():
        return []
    return [(int(match[1]), path) for path in directory.iterdir()
            if (match := _MANIFEST_NAME.fullmatch(path.name))]


def read_manifest(path) -> dict:
    """The manifest of a checkpoint: iteration, seed, config, corpus fingerprint, metrics, ..."""
    path = Path(path)
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such checkpoint") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path}: unreadable manifest ({error})") from error
    if not isinstance(manifest, dict) or manifest.get("format_version") not in READABLE_VERSIONS:
        raise CheckpointError(f"{path}: not a saberjax checkpoint manifest of format version "
                              f"{' or '.join(map(str, READABLE_VERSIONS))}")
    return manifest


def load_checkpoint(path, placement: Placement, corpus: Corpus, config
                    ) -> tuple[TrainState, list[dict]]:
    """(state, metrics so far) of a checkpoint of training on `corpus`, placed like
    `placement`'s chunks.

    Raises CheckpointError when the checkpoint is damaged or was made for another corpus
    (Corpus.has_fingerprint: a checkpoint written before fingerprints were hashed in blocks
    records the legacy one), chunking, or model setting (`config.model_settings()`,
    config.TrainConfig).
    """
    path = Path(path)
    manifest = read_manifest(path)
    _check_compatible(path, manifest, placement, corpus, dataclasses.asdict(config),
                      config.model_settings())
    arrays = _verify_arrays(path, manifest, jax.process_index())
    hyper = placement.hyper
    chunk_states = {}
    for index in placement.own_chunks():
        chunk_state = ChunkState(*(arrays.get(f"chunk{index}.{field}")
                                   for field in ChunkState._fields))
        if chunk_state.topics is None or (chunk_state.a_pairs is None and not placement.stored):
            raise CheckpointError(
                f"{path}: chunk {index} holds "
                f"{'no z' if chunk_state.topics is None else 'z alone (a run from a chunk store)'}"
                f"; resume with the checkpointed run's memory settings (host_memory_gb, "
                f"device_memory_gb)")
        _check_shapes(path, index, placement, chunk_state, hyper)
        chunk_states[index] = chunk_state
    word_topic = arrays["word_topic"]
    if word_topic.shape != (placement.num_words, hyper.padded_topics):
        raise CheckpointError(f"{path}: word_topic is {list(word_topic.shape)}, this run needs "
                              f"{[placement.num_words, hyper.padded_topics]}")
    alpha = arrays["alpha"]
    if alpha.shape != (hyper.padded_topics,):
        raise CheckpointError(f"{path}: alpha is {list(alpha.shape)}, this run needs "
                              f"{[hyper.padded_topics]}")
    model = placement.model_from_word_topic(word_topic, alpha)
    iteration, seed = (placement.replicated(arrays[name]) for name in ("iteration", "seed"))
    return (TrainState(placement.place_chunk_states(chunk_states), model, iteration, seed),
            manifest["metrics"])


def chunking(placement: Placement) -> list[list[int]]:
    """[first token id, number of tokens] of every chunk: what a state's arrays are laid out by."""
    return [list(pair) for pair in placement.chunking]


def _state_arrays(state: TrainState, placement: Placement) -> dict[str, np.ndarray]:
    """This process's share of the arrays the state is computed from, on the host: its
    chunks' states, and for process 0 also B, alpha, the iteration and the seed."""
    arrays = {f"chunk{index}.{field}": np.asarray(value)
              for index, chunk_state in sorted(placement.chunk_states(state).items())
              for field, value in chunk_state._asdict().items() if value is not None}
    word_topic = placement.word_topic(state)  # a collective: every process gathers B
    if not processes.is_writer():
        return arrays
    return dict(arrays, word_topic=word_topic,
                alpha=np.asarray(state.model.alpha.addressable_data(0)),
                iteration=np.asarray(state.iteration),
                seed=np.asarray(state.seed))


def _check_compatible(path: Path, manifest: dict, placement: Placement, corpus: Corpus,
                      config: dict, model_settings: tuple[str, ...]) -> None:
    if not corpus.has_fingerprint(manifest["corpus_fingerprint"]):
        raise CheckpointError(
            f"{path} was made for another corpus (fingerprint {manifest['corpus_fingerprint']}, "
            f"this corpus {corpus.fingerprint()}); resume with the same corpus, test split and "
            f"seed, or start afresh")
    # a setting the checkpoint does not record is one added since, at its default
    saved = dict(dataclasses.asdict(TrainConfig()), **manifest["config"])
    differences = [f"{name}={saved.get(name)!r} (this run: {config[name]!r})"
                   for name in model_settings if saved.get(name) != config[name]]
    if differences:
        raise CheckpointError(f"{path} was trained with {', '.join(differences)}; resume with "
                              f"the same settings, or start afresh")
    saved_partition = manifest.get("partition", "documents")
    if saved_partition != placement.partition:
        raise CheckpointError(f"{path} was trained partitioned by {saved_partition}, this run "
                              f"by {placement.partition}; resume with "
                              f"partition={saved_partition!r}")
    if manifest["chunking"] != chunking(placement):
        raise CheckpointError(
            f"{path} holds {len(manifest['chunking'])} chunk(s) [first token, tokens] "
            f"{manifest['chunking']}, this run has {placement.num_chunks}: "
            f"{chunking(placement)}; resume "
            f"with the checkpointed run's chunking (num_devices={saved.get('num_devices')}, "
            f"chunk_tokens={saved.get('chunk_tokens')} on the same number of devices)")


def _check_shapes(path: Path, index: int, placement: Placement, chunk_state: ChunkState,
                  hyper: Hyperparams) -> None:
    expected = placement.state_shapes()
    dtypes = ChunkState(hyper.topic_dtype, np.uint32, np.int32)
    for field, array, shape, dtype in zip(ChunkState._fields, chunk_state, expected, dtypes):
        if array is not None and (array.shape != shape or array.dtype != np.dtype(dtype)):
            raise CheckpointError(
                f"{path}: chunk {index} {field} is {array.dtype}{list(array.shape)}, this run "
                f"lays it out as {np.dtype(dtype)}{list(shape)}")


def _verified_arrays_path(path: Path, manifest: dict, process: int = 0) -> Path:
    """A process's .npz of the checkpoint, after checking it against the manifest's digest."""
    arrays_path = _shard_path(path, process)
    expected = (manifest.get("arrays_sha256") if process == 0
                else manifest.get("shards_sha256", {}).get(arrays_path.name))
    if not arrays_path.is_file():
        raise CheckpointError(f"{arrays_path}: missing")
    if _sha256(arrays_path) != expected:
        raise CheckpointError(f"{arrays_path}: content does not match its manifest (damaged)")
    return arrays_path


def _verify_all(path: Path, manifest: dict) -> None:
    """Check every process's .npz of the checkpoint against the manifest."""
    for process in range(1 + len(manifest.get("shards_sha256", {}))):
        _verified_arrays_path(path, manifest, process)


def _verify_arrays(path: Path, manifest: dict, process: int) -> dict[str, np.ndarray]:
    """B, the iteration and the seed (process 0's file) and this process's chunk states,
    after checking both files against the manifest's digests."""
    arrays = {}
    for shard in {0, process}:
        with np.load(_verified_arrays_path(path, manifest, shard), allow_pickle=False) as npz:
            arrays.update(npz)
    return arrays


def _sha256(path: Path) -> str:
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def _delete_all_but(directory: Path, iterations: set[int], temporaries: bool) -> None:
    """Delete the checkpoints of other iterations than `iterations` (manifests first), and with
    `temporaries` the temporary files of interrupted saves."""
    stale = [path for path in directory.iterdir()
             if (match := _OWN_FILE.fullmatch(path.name))
             and (int(match[1]) not in iterations or (temporaries and match[2]))]
    for path in sorted(stale, key=lambda path: path.suffix != ".json"):
        path.unlink(missing_ok=True)
