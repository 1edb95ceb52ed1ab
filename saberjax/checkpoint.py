"""Checkpoints: the whole training state on disk, so that a killed run resumes bit-identically,
on any mesh.

The checkpoint of iteration N is a set of files in the checkpoint folder::

    checkpoint-0000000N.npz     the word-topic counts B (word_topic, rows by word id; from a
                                sparse model its nonzeros by word, word_topic.indptr, .topics
                                and .counts), the prior alpha, iteration and seed, and
                                process 0's pieces of z
    checkpoint-0000000N.pP.npz  in a run of several processes, process P's pieces of z (P > 0)
    checkpoint-0000000N.json    the manifest: format version, iteration, seed, training config,
                                corpus fingerprint, the pieces of z ([first token, tokens,
                                process] each, together every token once), metrics so far and
                                the SHA-256 of every .npz

z is stored in corpus order, in pieces of consecutive tokens (topics.FIRST: the topics of the
tokens from FIRST on), one per chunk of the run that wrote it; a resumed run reads the tokens
of its own chunks, whatever pieces they span.  Nothing else of the state is stored: A is a
function of z (rebuilt as every iteration ends, esca.state_of_topics), B-hat, the topic totals
and the sampling trees of B and alpha (Placement.model_from_word_topic), so the restored state
is the saved one bit for bit, and a checkpoint depends on no mesh: one written by N processes
and devices, by documents, by words or on the two-axis mesh, resumes on M, by any of them.
Since every random draw is keyed by (seed, iteration, token id), a run resumed from a
checkpoint ends with the same model as an uninterrupted one.

Each file is written to a temporary name, fsynced and renamed into place (files.atomic_write),
the .npz files first (every process its own, then all wait for each other): process 0's
manifest is the commit mark and names the digests of the .npz files, so a checkpoint cut short
or damaged is never taken as the latest.  The checkpoint before the newest is kept too, so that
a newest one damaged later on disk leaves one to resume from (latest_checkpoint): before a save
every checkpoint but the newest is deleted, so that the folder never holds more than two, and
after it every one but the new one and the one before, with the leftovers of interrupted saves.
The processes of a run share the folder (one host, or a file system all hosts see)."""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import json
import re
import warnings
from pathlib import Path

import jax
import numpy as np

from saberjax import processes, sparse_word_topic
from saberjax.config import TrainConfig
from saberjax.corpus import Corpus
from saberjax.execution.placement import Placement
from saberjax.files import atomic_write, fsync_directory
from saberjax.sparse_word_topic import SparseWordTopic
from saberjax.state import TrainState

FORMAT_VERSION = 5  # 2: A as packed pairs (state.pack_pairs); 3: alpha stored; 4: z alone
# for runs from a chunk store; 5: z alone, in corpus order (any mesh)
READABLE_VERSIONS = (5,)

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
                        topics=_pieces(placement), arrays_sha256=_sha256(shards[0]),
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
    version = manifest.get("format_version") if isinstance(manifest, dict) else None
    if version in READABLE_VERSIONS:
        return manifest
    readable = " or ".join(map(str, READABLE_VERSIONS))
    if isinstance(version, int) and 0 < version < min(READABLE_VERSIONS):
        raise CheckpointError(f"{path}: a checkpoint of format {version}, written by an earlier "
                              f"saberjax (this one reads format {readable}); finish the run "
                              f"with that saberjax, or start afresh")
    raise CheckpointError(f"{path}: not a saberjax checkpoint manifest of format version "
                          f"{readable}")


def load_checkpoint(path, placement: Placement, corpus: Corpus, config
                    ) -> tuple[TrainState, list[dict]]:
    """(state, metrics so far) of a checkpoint of training on `corpus`, placed like
    `placement`'s chunks: on any mesh, by any partition.

    Raises CheckpointError when the checkpoint is damaged or was made for another corpus
    (Corpus.has_fingerprint: a checkpoint written before fingerprints were hashed in blocks
    records the legacy one) or model setting (`config.model_settings()`, config.TrainConfig).
    """
    path = Path(path)
    manifest = read_manifest(path)
    _check_compatible(path, manifest, corpus, dataclasses.asdict(config),
                      config.model_settings())
    hyper = placement.hyper
    with np.load(_verified_arrays_path(path, manifest), allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files
                  if name.startswith("word_topic") or name in ("alpha", "iteration", "seed")}
    word_topic = _saved_word_topic(path, arrays, placement)
    alpha = arrays["alpha"]
    if alpha.shape != (hyper.padded_topics,):
        raise CheckpointError(f"{path}: alpha is {list(alpha.shape)}, this run needs "
                              f"{[hyper.padded_topics]}")
    with _TopicPieces(path, manifest, corpus.num_tokens, hyper.topic_dtype) as pieces:
        chunk_states = placement.place_topics(pieces.read)
    model = placement.model_from_word_topic(word_topic, alpha)
    iteration, seed = (placement.replicated(arrays[name]) for name in ("iteration", "seed"))
    return TrainState(chunk_states, model, iteration, seed), manifest["metrics"]


def _pieces(placement: Placement) -> list[list[int]]:
    """[first token, tokens, process] of every chunk of the placement: the pieces of z in a
    checkpoint, each in its process's file."""
    process_of_device = [device.process_index for device in placement.mesh.devices.flat]
    return [[first, tokens, process_of_device[index // placement.num_slots]]
            for index, (first, tokens) in enumerate(placement.chunking)]


class _TopicPieces:
    """The pieces of z of a checkpoint (see the module doc): read(first, tokens) gives the
    topics of those tokens in corpus order from the pieces they span, each file checked
    against the manifest's digest when first opened."""

    def __init__(self, path: Path, manifest: dict, num_tokens: int, dtype):
        self.path, self.manifest, self.dtype = path, manifest, np.dtype(dtype)
        try:
            self.pieces = sorted((int(first), int(tokens), int(process))
                                 for first, tokens, process in manifest["topics"])
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{path}: unreadable list of the pieces of z") from None
        self.firsts = [first for first, _, _ in self.pieces]
        ends = [first + tokens for first, tokens, _ in self.pieces]
        if self.firsts != [0, *ends[:-1]] or ends[-1:] != [num_tokens]:
            raise CheckpointError(f"{path}: its pieces of z do not cover the corpus's "
                                  f"{num_tokens:,} tokens once")
        self.files = {}  # process -> its open .npz
        self.last = (None, None)  # (first token, topics) of the piece read last

    def __enter__(self) -> _TopicPieces:
        return self

    def __exit__(self, *_) -> None:
        for file in self.files.values():
            file.close()

    def read(self, first: int, tokens: int) -> np.ndarray:
        """The topics of tokens first .. first + tokens - 1, in corpus order."""
        parts, end = [np.zeros(0, self.dtype)], first + tokens
        index = bisect.bisect_right(self.firsts, first) - 1
        while first < end:
            piece_first, piece_tokens, _ = self.pieces[index]
            parts.append(self._piece(index)[first - piece_first:end - piece_first])
            first, index = piece_first + piece_tokens, index + 1
        return np.concatenate(parts)

    def _piece(self, index: int) -> np.ndarray:
        piece_first, piece_tokens, process = self.pieces[index]
        if self.last[0] == piece_first:
            return self.last[1]
        if process not in self.files:
            self.files[process] = np.load(
                _verified_arrays_path(self.path, self.manifest, process), allow_pickle=False)
        shard = _shard_path(self.path, process)
        try:
            topics = self.files[process][f"topics.{piece_first}"]
        except KeyError:
            raise CheckpointError(f"{shard}: no topics of the piece from token "
                                  f"{piece_first}") from None
        if topics.shape != (piece_tokens,) or topics.dtype != self.dtype:
            raise CheckpointError(f"{shard}: the piece of z from token {piece_first} is "
                                  f"{topics.dtype}{list(topics.shape)}, this run needs "
                                  f"{self.dtype}[{piece_tokens}]")
        self.last = (piece_first, topics)
        return topics


def _state_arrays(state: TrainState, placement: Placement) -> dict[str, np.ndarray]:
    """This process's share of the arrays the state is computed from, on the host: its
    chunks' topics in corpus order (topics.FIRST), and for process 0 also B, alpha, the
    iteration and the seed."""
    arrays = {f"topics.{placement.chunking[index][0]}": topics
              for index, topics in placement.chunk_topics(state).items()}
    if placement.hyper.sparse:  # a collective: every process gathers B
        word_topic = {f"word_topic.{field}": value for field, value
                      in placement.sparse_word_topic(state)._asdict().items()
                      if field != "num_topics"}
    else:
        word_topic = dict(word_topic=placement.word_topic(state))
    if not processes.is_writer():
        return arrays
    return dict(arrays, **word_topic,
                alpha=np.asarray(state.model.alpha.addressable_data(0)),
                iteration=np.asarray(state.iteration),
                seed=np.asarray(state.seed))


def _saved_word_topic(path: Path, arrays: dict, placement: Placement):
    """B as the checkpoint holds it: dense [V, K_pad] (word_topic) or its nonzeros by word
    (word_topic.indptr, .topics, .counts, from a sparse model), checked against the run."""
    hyper = placement.hyper
    if "word_topic" in arrays:
        word_topic = arrays["word_topic"]
        if word_topic.shape != (placement.num_words, hyper.padded_topics):
            raise CheckpointError(f"{path}: word_topic is {list(word_topic.shape)}, this run "
                                  f"needs {[placement.num_words, hyper.padded_topics]}")
        return word_topic
    fields = [f"word_topic.{field}" for field in ("indptr", "topics", "counts")]
    if not all(field in arrays for field in fields):
        raise CheckpointError(f"{path}: holds no word_topic")
    if arrays["word_topic.indptr"].shape != (placement.num_words + 1,):
        raise CheckpointError(f"{path}: word_topic.indptr has "
                              f"{arrays['word_topic.indptr'].shape} entries, this run needs "
                              f"{placement.num_words + 1}")
    try:
        return sparse_word_topic.validated(SparseWordTopic(
            *(arrays[field] for field in fields), hyper.num_topics))
    except ValueError as error:
        raise CheckpointError(f"{path}: word_topic: {error}") from None


def _check_compatible(path: Path, manifest: dict, corpus: Corpus, config: dict,
                      model_settings: tuple[str, ...]) -> None:
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
