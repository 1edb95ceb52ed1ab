"""A cache of corpora read from text formats (UCI, LDA-C, plain text) in the native format.

Reading a corpus from a gzipped UCI file or from raw text takes seconds; the native format
loads memory-mapped in a fraction of that.  `load_corpus` reads a corpus once, keeps a native
copy under the cache directory and loads that copy on later calls.  An entry is keyed by the
SHA-256 of the source files' contents (names within the source and bytes) and the reading
options (format, text options), so a changed file or option never finds an old entry; its
`cache.json` repeats the key and records the copy's corpus fingerprint and the warnings reading
the source gave (dropped empty documents), which every load repeats.

An entry is used only when its manifest is readable and names the same key, its files load as
a native corpus and the loaded corpus has the recorded fingerprint (a full hash of its tokens
and vocabulary); anything else (a file cut short or changed on disk) is reported in a warning
and rebuilt from the source.  The key carries CACHE_VERSION, so the entries of another version
(version 1's manifests hold Corpus.legacy_fingerprint) are never found: the source is read
again, quietly, and the new entry replaces theirs.  Writing an entry that fails (a read-only
or full disk) is a warning too: the corpus read from the source is returned either way.  When
an entry is written, entries of earlier contents of the same source path are removed, so
editing a corpus in place does not fill the cache.

Entries are written into a hidden staging folder and renamed into place (saberjax.outputs),
so concurrent runs and kills never leave a half-written entry under a key.

Hashing the source reads it whole on every cached load, so an entry also keeps a source record
(`source.json`): the cache version, the source path and reading options, the key, each source
file's size, modification and status-change times, inode and device (os.stat), and a SHA-256
of each file's first and last SAMPLE_BYTES.  A later load whose source files show the same
record (of this cache version) takes the key from it without reading the files whole.  A
file's bytes cannot change without its status-change time (ctime) changing: every write and
every change of its times sets it to the current time, which no call can set back (so does the
making of a file put in its place).  Two writes within one tick of the file system's clock can
leave the same times, so a record is written only after hashing, and only when the files had
not changed for SETTLED_SECONDS before the hashing began and did not change during it; the
sample is checked as well (on file systems that keep no real ctime it catches most changes).
Anything else hashes the source as before.  An entry rebuilt at a key taken from a record
keeps the record.

A text input that the processes of a run read in shares (saberjax.shared_text) has an entry
per process instead, of the same kind: each process's share (text_sources.FileShare: its
files, or their spans) is a source of its own, keyed by the bytes it covers, its reading
options and the process's place (source_key), and its entry holds the corpus of the share's
documents over the input's vocabulary, and its source record; its manifest also
records every process's share's key, together, which it serves only (read_entry's
`expected`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from saberjax import outputs
from saberjax.background import thread_count
from saberjax.corpus import formats, native, plain_text, text_sources
from saberjax.corpus.text_blocks import reading_fields
from saberjax.corpus.text_sources import FileShare
from saberjax.corpus.core import PACKAGE_DIR, Corpus
from saberjax.errors import CorpusFormatError
from saberjax.files import atomic_write

# 2: corpus fingerprints hashed in blocks (Corpus.fingerprint); 3: source contents hashed in
# blocks on threads (_content_key), text options of the block engine; 4: fingerprints of
# blocks of 256 KiB (format saberjax-corpus-v3)
CACHE_VERSION = 4
MANIFEST = "cache.json"
CORPUS_FOLDER = "corpus"
SOURCE_RECORD = "source.json"
_ENTRY_FILES = (MANIFEST, CORPUS_FOLDER, SOURCE_RECORD)
_READ_BLOCK = 1 << 24
# A source record is written only for files unchanged this long before they were hashed:
# longer than a tick of any file system's clock.
SETTLED_SECONDS = 2.0
SAMPLE_BYTES = 1 << 12  # the source record's content sample: each file's first and last bytes
COMPILE_SECONDS_CACHED = 0.2


def cache_root() -> Path:
    """saberjax's cache folder: $SABERJAX_CACHE_DIR, else the user's cache directory
    ($XDG_CACHE_HOME or ~/.cache)/saberjax.  It holds corpora/ (this module's entries) and
    xla/ (compiled programs, use_compilation_cache)."""
    if os.environ.get("SABERJAX_CACHE_DIR"):
        return Path(os.environ["SABERJAX_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "saberjax"


def default_cache_dir() -> Path:
    """Where load_corpus keeps its entries by default: cache_root()/corpora."""
    return cache_root() / "corpora"


def use_compilation_cache(directory) -> None:
    """Keep the programs XLA compiles in `directory` (JAX's persistent compilation cache), so
    that a later run with the same shapes and settings loads them instead of compiling
    (wiki25k at K = 16 on two cores: the iteration's 2.5 s compile becomes 0.3 s).  Only
    compilations of COMPILE_SECONDS_CACHED or more are kept."""
    import jax

    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", COMPILE_SECONDS_CACHED)


def reading_options(path, format: str = "auto", **text_options) -> dict:
    """The settings that decide what load_corpus(path, format, **text_options) returns: the
    detected format and, for raw text, every text option (defaults filled in) and, for the
    formats with fields, the text and id fields (under one name each)."""
    chosen = formats.detect_format(Path(path)) if format == "auto" else format
    if chosen not in text_sources.FORMATS:
        return dict(format=chosen)
    options = plain_text.recorded_options(**text_options)
    if chosen in text_sources.FIELD_FORMATS:
        fields = reading_fields(**plain_text.reading_options(text_options))
        options.update(text_field=fields.text, id_field=fields.id)
    return {**options, "format": chosen}


def cache_key(path, format: str = "auto", **text_options) -> str:
    """SHA-256 hex of the source files' contents and the reading options (see the module)."""
    path = Path(path)
    return _content_key([FileShare(file) for file in formats.source_files(path, format)],
                        reading_options(path, format, **text_options))


def _content_key(files: list[FileShare], options: dict) -> str:
    """The key of the source files `files` (whole, or the spans of a process's share of a text
    input) read with reading options `options`: SHA-256 of the version, the options and, per
    file, its name, size, span (when it has one) and the SHA-256 of each _READ_BLOCK of the
    bytes it covers (hashed on a thread per core: hashlib releases the GIL)."""
    digest = hashlib.sha256(f"saberjax-corpus-cache-v{CACHE_VERSION}\0".encode())
    digest.update(json.dumps(options, sort_keys=True).encode())
    blocks, headers = [], []
    for file in files:
        size = file.path.stat().st_size
        first, last = file.span or (0, size)
        span = "" if file.span is None else f"{first}\0{last}\0"
        headers.append((f"\0{file.path.name}\0{size}\0{span}".encode(),
                        len(range(first, last, _READ_BLOCK))))
        blocks += [(file.path, offset, min(_READ_BLOCK, last - offset))
                   for offset in range(first, last, _READ_BLOCK)]
    with ThreadPoolExecutor(thread_count(len(blocks))) as pool:
        block_digests = iter(pool.map(_block_digest, blocks))
        for header, count in headers:
            digest.update(header)
            for _ in range(count):
                digest.update(next(block_digests))
    return digest.hexdigest()


def _block_digest(block: tuple[Path, int, int]) -> bytes:
    """SHA-256 of a block of a file's bytes: (the file, its first byte's offset, its size)."""
    file, offset, size = block
    with open(file, "rb") as stream:
        stream.seek(offset)
        return hashlib.sha256(stream.read(size)).digest()


class SourceKey(NamedTuple):
    """The key of a source's contents and reading options (_content_key), and the source
    record it was taken from, or, when it was hashed, when the hashing began (time.time())
    and the files' stat then (_file_stats), for a new record (_source_record)."""

    key: str
    record: dict | None = None
    hashed: tuple[float, list[list]] | None = None


def source_key(cache_dir: Path, origin: dict, files: list[FileShare], options: dict
               ) -> SourceKey:
    """The key of the source files `files` read with reading `options`: from the source record
    of an entry of cache_dir of the same `origin` whose files show the same stat and sample
    (_recorded), else hashed (_content_key).  OSError when a file cannot be read."""
    paths = [file.path for file in files]
    record = _recorded(cache_dir, origin, paths)
    if record is not None:
        return SourceKey(record["key"], record=record)
    hashed = time.time(), _file_stats(paths)
    return SourceKey(_content_key(files, options), hashed=hashed)


def record_source(entry: Path, source: SourceKey, origin: dict, files: list[FileShare]
                  ) -> None:
    """Gives a valid entry made for a hashed key its source record (_source_record), where
    its files allow one and the entry can be written (the key is hashed again otherwise)."""
    if source.hashed is None:
        return
    record = _source_record(source, origin, files)
    if record is None:
        return
    try:
        atomic_write(entry / SOURCE_RECORD, lambda file: file.write(
            json.dumps(record, indent=1) + "\n"), mode="w", beside=entry)
    except OSError:
        return


def load_corpus(path, format: str = "auto", cache_dir=None, log=None, checked: bool = True,
                **text_options) -> Corpus:
    """corpus.load_corpus(path, format, **text_options), through the cache in cache_dir
    (None: default_cache_dir()).  A native corpus is loaded as it is (it is a native copy
    already); errors in the source or the options are load_corpus's, raised before the cache
    entry appears.  Plain text is read straight into the entry (out of core: see
    plain_text.load_text), with progress lines to `log` when reading takes a while.
    checked=False: a native corpus's word ids are left to whoever counts them (load_native);
    an entry of the cache is checked whole (its fingerprint)."""
    path = Path(path)
    chosen = formats.detect_format(path) if format == "auto" else format
    if chosen == "native" or (text_options and chosen not in text_sources.FORMATS):
        # as it is, or its error
        return formats.load_corpus(path, chosen, checked, **text_options)
    cache_dir = Path(default_cache_dir() if cache_dir is None else cache_dir)
    options = reading_options(path, chosen, **text_options)
    origin = dict(source=str(path.resolve()), options=options)
    try:
        files = [FileShare(file) for file in formats.source_files(path, chosen)]
        source = source_key(cache_dir, origin, files, options)
    except OSError:  # a missing or unreadable source: load_corpus names it
        return formats.load_corpus(path, chosen, **text_options)
    entry = cache_dir / source.key[:32]
    cached = read_entry(entry, source.key)
    if cached is not None:
        record_source(entry, source, origin, files)
        return cached[0]
    raw_text = chosen in text_sources.FORMATS
    # the entry's bytes left to the system's write-back: every load checks its fingerprint
    run_options = dict(log=log, durable=False) if raw_text else {}
    notes: list[str] = []
    corpus = None if raw_text else _noted(notes, formats.load_corpus, path, chosen)

    def write_corpus(folder: Path) -> Corpus:
        if corpus is not None:
            native.save_native(corpus, folder)
            return corpus
        return _noted(notes, formats.load_corpus, path, chosen, directory=folder,
                      **run_options, **text_options)

    try:
        corpus = store_entry(entry, source, write_corpus, origin, files, notes)
    except OSError as error:
        cache_warning(f"corpus cache entry {entry} not written ({error}); the corpus is read "
                      f"from {path} each time")
        if corpus is None:
            notes.clear()
            corpus = _noted(notes, formats.load_corpus, path, chosen, **run_options,
                            **text_options)
    for note in notes:
        cache_warning(note)
    return corpus


def _noted(notes: list[str], function, *args, **kwargs):
    """function(*args, **kwargs), the warnings it gives appended to `notes` instead."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = function(*args, **kwargs)
    notes.extend(str(warning.message) for warning in caught)
    return result


def _file_stats(files: list[Path]) -> list[list]:
    """[absolute path, size, modification and status-change times in ns, inode, device] of each file
    (os.stat, through links)."""
    stats = []
    for file in files:
        stat = os.stat(file)
        stats.append([os.path.abspath(file), stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns,
                      stat.st_ino, stat.st_dev])
    return stats


def _content_sample(files: list[Path]) -> str:
    """SHA-256 hex of the first and last SAMPLE_BYTES of each file (its whole when smaller)."""
    digest = hashlib.sha256()
    for file in files:
        with open(file, "rb") as stream:
            digest.update(stream.read(SAMPLE_BYTES))
            size = os.fstat(stream.fileno()).st_size
            if size > SAMPLE_BYTES:
                stream.seek(max(SAMPLE_BYTES, size - SAMPLE_BYTES))
                digest.update(stream.read(SAMPLE_BYTES))
        digest.update(b"\0")
    return digest.hexdigest()


def _recorded(cache_dir: Path, origin: dict, files: list[Path]) -> dict | None:
    """The source record of an entry of cache_dir for this source and reading options
    (`origin`) whose files' stat and content sample are those of `files` now; None when there
    is none (see the module)."""
    try:
        entries = list(cache_dir.iterdir())
    except OSError:
        return None
    stats = sample = None
    for entry in entries:
        try:
            record = json.loads((entry / SOURCE_RECORD).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not _same_origin(record, origin) or record.get("version") != CACHE_VERSION:
            continue
        key = record.get("key")
        if not isinstance(key, str) or key[:32] != entry.name:
            continue
        stats = _file_stats(files) if stats is None else stats
        if record.get("files") != stats:
            continue
        sample = _content_sample(files) if sample is None else sample
        if record.get("sample") == sample:
            return record
    return None


def _source_record(source: SourceKey, origin: dict, files: list[FileShare]) -> dict | None:
    """The source record of an entry made for source.key: the one the key was taken from;
    for a hashed key, a new one when the files (stat source.hashed[1] when their hashing
    began at source.hashed[0]) still have that stat and had not changed for SETTLED_SECONDS
    before; else None."""
    if source.hashed is None:
        return source.record
    hashed_at, stats = source.hashed
    newest = max((max(mtime, ctime) for _, _, mtime, ctime, _, _ in stats), default=0)
    if newest > (hashed_at - SETTLED_SECONDS) * 1e9:
        return None
    paths = [file.path for file in files]
    try:
        sample = _content_sample(paths)
        if _file_stats(paths) != stats:
            return None
    except OSError:
        return None
    return dict(origin, version=CACHE_VERSION, key=source.key, files=stats, sample=sample)


def keyed_manifest(path: Path, key: str) -> dict:
    """The JSON manifest of a cache entry made for `key`; ValueError when it is not one
    (OSError when it cannot be read)."""
    manifest = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(manifest, dict) or manifest.get("key") != key:
        raise ValueError(f"{path}: not the manifest of key {key[:32]}")
    return manifest


def read_entry(entry: Path, key: str, **expected) -> tuple[Corpus, dict] | None:
    """(the corpus, the manifest) of a valid entry made for `key`, the warnings its manifest
    notes given again; None (with a warning when the entry exists but is not valid)
    otherwise.  `expected`: values of its manifest's fields (store_entry's `fields`); an
    entry holding others is quietly None (a share's entry made with other shares)."""
    if not entry.exists():
        return None
    try:
        manifest = keyed_manifest(entry / MANIFEST, key)
        if any(manifest.get(name) != value for name, value in expected.items()):
            return None
        corpus = dataclasses.replace(native.load_native(entry / CORPUS_FOLDER),
                                     dropped_empty_docs=int(manifest["dropped_empty_docs"]))
        if corpus.fingerprint() != manifest.get("corpus_fingerprint"):
            raise CorpusFormatError(f"{entry / CORPUS_FOLDER}: its tokens or vocabulary differ "
                                    f"from those cached")
        notes = [str(note) for note in manifest["notes"]]
    except (OSError, ValueError, KeyError, TypeError) as error:
        cache_warning(f"corpus cache entry {entry} is damaged or stale ({error}); rebuilding "
                      f"it")
        return None
    for note in notes:
        cache_warning(note)
    return corpus, manifest


def store_entry(entry: Path, source: SourceKey, write_corpus, origin: dict,
                files: list[FileShare], notes: list[str], **fields) -> Corpus:
    """Writes the entry made for source.key (replacing a damaged one at the same key): its
    corpus folder by write_corpus(folder) (which returns the corpus), its manifest with
    `origin`, the warnings reading the source gave (`notes` once the corpus is written,
    repeated on every cached load) and `fields`, and its source record where there is one
    (_source_record: the entry replacing one keeps its record); then removes the entries of
    earlier contents of the same origin.  Returns the corpus; OSError when the entry cannot
    be written."""
    with outputs.staged_directory(entry, _ENTRY_FILES, "a saberjax corpus cache entry") as staging:
        corpus = write_corpus(staging / CORPUS_FOLDER)
        manifest = dict(format="saberjax-corpus-cache", version=CACHE_VERSION, key=source.key,
                        **origin, corpus_fingerprint=corpus.fingerprint(),
                        dropped_empty_docs=corpus.dropped_empty_docs, notes=notes, **fields)
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        record = _source_record(source, origin, files)
        if record is not None:
            (staging / SOURCE_RECORD).write_text(json.dumps(record, indent=1) + "\n",
                                                 encoding="utf-8")
    _remove_earlier_entries(entry, origin)
    return corpus


# What an entry's manifest and source record say of where it comes from: the source and its
# reading options; for a process's share of a text input, the process and their number.
_ORIGIN_FIELDS = ("source", "options", "process", "processes")


def _same_origin(record: dict, origin: dict) -> bool:
    """Whether a manifest or source record (a dict) records `origin` (every _ORIGIN_FIELDS
    alike, absent ones None: a whole corpus's entry is no process's share's)."""
    return isinstance(record, dict) and all(record.get(name) == origin.get(name)
                                            for name in _ORIGIN_FIELDS)


def _remove_earlier_entries(entry: Path, origin: dict) -> None:
    """Removes the entries beside `entry` whose manifest records the same origin: earlier
    contents of it."""
    for other in entry.parent.iterdir():
        if other == entry or not (other / MANIFEST).is_file():
            continue
        try:
            earlier = json.loads((other / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if _same_origin(earlier, origin):
            shutil.rmtree(other, ignore_errors=True)


def cache_warning(message: str) -> None:
    """A warning about a cache entry, attributed to the caller outside saberjax."""
    warnings.warn(message, stacklevel=2, skip_file_prefixes=(PACKAGE_DIR,))
