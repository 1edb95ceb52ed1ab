"""A cache of PDOW layouts on disk, so that a run on the corpus of an earlier run with the same
chunking loads its layout instead of building it.

`cached_layout` is `layout.build_layout` through the cache that `use` turns on for the current
context (the launchers do, in --cache_dir/layouts; off otherwise, as for library callers).  An
entry holds every array of the layout as an .npy file, loaded memory-mapped: a CPU device then
computes on the file's pages in place, so a cached layout costs neither the build nor fresh
memory.

An entry is keyed by the SHA-256 of the corpus fingerprint, the build's arguments and the source
of the code that builds it (saberjax.layout and saberjax.rng), so a changed corpus, setting or
algorithm never finds an old entry.  Its manifest (`layout.json`) repeats the key and records
every array's shape, dtype and SHA-256; an entry is used only when the manifest names the same
key and every array loads with its recorded shape, dtype and digest (hashed in threads, as
hashlib releases the GIL), anything else being a warning and a rebuild.  Entries are written
into a hidden staging folder and renamed into place (saberjax.outputs); writing one that fails
is a warning, and writing one removes the least recently used entries beyond KEPT_ENTRIES.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import dataclasses
import functools
import hashlib
import json
import os
import shutil
from collections.abc import Collection
from pathlib import Path

import numpy as np

from saberjax import layout, layout_sort, outputs, rng, timing
from saberjax.corpus import Corpus
from saberjax.corpus import cache as corpus_cache

CACHE_VERSION = 1
MANIFEST = "layout.json"
KEPT_ENTRIES = 4
_CHUNK_ARRAYS = tuple(field.name for field in dataclasses.fields(layout.Chunk)
                      if not field.metadata.get("static"))
_CHUNK_STATICS = tuple(field.name for field in dataclasses.fields(layout.Chunk)
                       if field.metadata.get("static"))
_DIRECTORY: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "saberjax_layout_cache", default=None)


def use(directory) -> contextvars.Token:
    """Keep layouts in `directory` (None: build every layout) for the rest of the current
    context; returns the token that restores the previous setting (ContextVar.reset)."""
    return _DIRECTORY.set(None if directory is None else Path(directory))


@functools.cache
def _code_digest() -> str:
    """SHA-256 of the source of the modules whose code decides a layout's arrays."""
    digest = hashlib.sha256()
    for module in (layout, layout_sort, rng):
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()


def cache_key(corpus: Corpus, chunk_tokens: int | None, num_parts: int,
              parts: Collection[int] | None) -> str:
    """SHA-256 hex of what build_layout(corpus, chunk_tokens, num_parts, parts) depends on."""
    settings = dict(version=CACHE_VERSION, corpus=corpus.fingerprint(), code=_code_digest(),
                    chunk_tokens=chunk_tokens, num_parts=num_parts,
                    parts=None if parts is None else sorted(int(part) for part in parts))
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


@timing.in_phase("layout")
def cached_layout(corpus: Corpus, chunk_tokens: int | None = None, num_parts: int = 1,
                  parts: Collection[int] | None = None) -> layout.Layout:
    """layout.build_layout(corpus, chunk_tokens, num_parts, parts), read from the cache `use`
    turned on when it holds a valid entry, else built (and written there)."""
    directory = _DIRECTORY.get()
    if directory is None:
        return layout.build_layout(corpus, chunk_tokens, num_parts, parts)
    key = cache_key(corpus, chunk_tokens, num_parts, parts)
    entry = directory / key[:32]
    cached = _read_entry(entry, key)
    if cached is not None:
        return cached
    built = layout.build_layout(corpus, chunk_tokens, num_parts, parts)
    try:
        _write_entry(entry, key, built)
    except OSError as error:
        corpus_cache.cache_warning(f"layout cache entry {entry} not written ({error}); the "
                                   f"layout is built each time")
    return built


def _files(built: layout.Layout) -> dict[str, np.ndarray]:
    """The layout's arrays by file name."""
    files = {"word_order.npy": built.word_order}
    for index, chunk in enumerate(built.chunks):
        if chunk is not None:
            files.update({f"chunk{index}.{name}.npy": getattr(chunk, name)
                          for name in _CHUNK_ARRAYS})
    return files


def _digests(arrays: dict[str, np.ndarray]) -> dict[str, str]:
    """SHA-256 hex of each array's bytes, largest arrays first over a thread per core."""
    def digest(array: np.ndarray) -> str:
        return hashlib.sha256(memoryview(np.ascontiguousarray(array)).cast("B")).hexdigest()

    names = sorted(arrays, key=lambda name: -arrays[name].nbytes)
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        return dict(zip(names, pool.map(digest, (arrays[name] for name in names))))


def _write_entry(entry: Path, key: str, built: layout.Layout) -> None:
    """Writes the entry (replacing a damaged one at the same key), then removes the least
    recently used entries beyond KEPT_ENTRIES."""
    arrays = _files(built)
    digests = _digests(arrays)
    manifest = dict(
        format="saberjax-layout-cache", version=CACHE_VERSION, key=key,
        chunk_docs=[[int(first), int(last)] for first, last in built.chunk_docs],
        num_words=int(built.num_words), num_docs=int(built.num_docs),
        num_tokens=int(built.num_tokens),
        chunks=[None if chunk is None else {name: int(getattr(chunk, name))
                                             for name in _CHUNK_STATICS}
                for chunk in built.chunks],
        arrays={name: dict(shape=list(array.shape), dtype=array.dtype.str,
                           sha256=digests[name]) for name, array in arrays.items()})
    with outputs.staged_directory(entry, [MANIFEST, *arrays], "a saberjax layout cache "
                                  "entry") as staging:
        for name, array in arrays.items():
            np.save(staging / name, array)
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    kept = sorted((other for other in entry.parent.iterdir() if (other / MANIFEST).is_file()),
                  key=lambda other: (other / MANIFEST).stat().st_mtime, reverse=True)
    for other in kept[KEPT_ENTRIES:]:
        shutil.rmtree(other, ignore_errors=True)


def _read_entry(entry: Path, key: str) -> layout.Layout | None:
    """The layout of a valid entry, its arrays memory-mapped, marked as used now; None (with a
    warning when the entry exists but is not valid) otherwise."""
    if not entry.exists():
        return None
    try:
        manifest = corpus_cache.keyed_manifest(entry / MANIFEST, key)
        arrays = {name: np.load(entry / name, mmap_mode="r") for name in manifest["arrays"]}
        for name, array in arrays.items():
            recorded = manifest["arrays"][name]
            if list(array.shape) != recorded["shape"] or array.dtype.str != recorded["dtype"]:
                raise ValueError(f"{entry / name}: shape {array.shape} {array.dtype}, "
                                 f"recorded {recorded['shape']} {recorded['dtype']}")
        changed = [name for name, digest in _digests(arrays).items()
                   if digest != manifest["arrays"][name]["sha256"]]
        if changed:
            raise ValueError(f"{entry}: {', '.join(sorted(changed))} differ from the arrays "
                             f"cached")
        chunks = tuple(None if statics is None else layout.Chunk(
            **{name: arrays[f"chunk{index}.{name}.npy"] for name in _CHUNK_ARRAYS}, **statics)
            for index, statics in enumerate(manifest["chunks"]))
        cached = layout.Layout(
            chunks=chunks, chunk_docs=tuple(map(tuple, manifest["chunk_docs"])),
            num_words=manifest["num_words"], num_docs=manifest["num_docs"],
            num_tokens=manifest["num_tokens"], word_order=arrays["word_order.npy"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        corpus_cache.cache_warning(f"layout cache entry {entry} is damaged or stale ({error}); "
                                   f"rebuilding it")
        return None
    with contextlib.suppress(OSError):  # a read-only cache is still read
        os.utime(entry / MANIFEST)
    return cached
