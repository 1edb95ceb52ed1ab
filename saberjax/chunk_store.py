"""The chunk store: a layout's chunks and their states on local disk, for corpora whose chunks
and states do not fit the host memory budget.

Streaming (saberjax.streaming) keeps every chunk and its state in host memory.  When they do
not fit the budget (`host_memory_gb`), the chunks live in a folder on local disk instead::

    DIR/manifest.json   what the store holds (format, key, file sizes); written last
    DIR/static.bin      the chunks in compact form, slot after slot; in a slot each field
                        for every device of the mesh ([devices, ...], one read a slot)
    DIR/state0.bin      the chunk states of even iterations: z alone (A is a function of z,
    DIR/state1.bin      rebuilt on the devices), and of odd ones, laid out like the chunks
    DIR.lock            held (flock) by the run that uses the store

The chunks are built once, out of core: the layout is planned (layout.plan_layout: document
ranges of the memory-mapped corpus, one padded shape), then each chunk is built, compacted
and written to its place.  On accelerators the store's devices build them
(layout_device.build_chunk: a sort on the device, where the host needs many cores' work),
slot after slot, one slot built while the one before is written; on CPUs worker threads
build chunk after chunk with layout's own builder, never holding more than a chunk per
worker (as many workers as the host budget holds).  Both give the same files.

Every iteration the producer thread of streaming puts slot after slot on the devices and
expands the chunk there, while reader threads read the next `prefetch` slots' chunks and
states from disk (in pieces, at once); the writer thread copies each new z to pinned host
memory and writes it from there into the other state file (in pieces, by the same
threads).  Reads go through pread into pinned read buffers of the store (the devices copy
from pinned memory at full speed) and writes through pwrite from pinned memory, so the
store's pages never count in the process's resident memory (the page cache holds them while
the machine has room).

Fewer bytes per token move than when streaming from host memory: a compact chunk keeps
doc_major_pos, doc_start and the tile list as they are and replaces the word-major `word` and
`doc` arrays (8 bytes a token) by the chunk's word runs (8 bytes a distinct word), from which
the devices recompute both (`expand`: a scatter and a cumulative sum each, and a gather).
A state is z alone: the slot's step rebuilds A from it on the devices (esca.state_of_topics,
the rebuild every step ends with, so the state is the one the step left) and gives back z
alone.  Per token about 6.6 bytes go to the device (the compact chunk and z) and 2 come back,
against 18.5 and 6 from host memory.

States of consecutive iterations go to the two state files in turn, so a step reads one
while it writes the other: the host view of a state (numpy memory maps, what checkpoints and
corpus_order_topics read) stays valid while the next step runs, as two states are alive at
a time in memory, and is overwritten by the step after.

A store is used only when its manifest names the same key (format, corpus fingerprint,
chunking, padded shape, devices) and its files have the sizes the key implies; anything else
is rebuilt, with a warning saying why.  A store is built in a hidden sibling folder and
renamed into place (outputs.staged_directory), so a crash leaves the old store or none; the
disk's free space is checked against the store's size before anything is written, a folder
holding other files is never used, and a store another run holds (its lock) is refused.
The states in a store are a run's working memory, not a checkpoint: a resumed run starts
from its checkpoint (saberjax.checkpoint, which keeps z alone for such a run) and writes them
anew.  One process uses a store.
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import functools
import gc
import hashlib
import json
import os
import shutil
import threading
import time
import warnings
from pathlib import Path

import jax
import numpy as np

from saberjax import compilation, layout_device, outputs, streaming, timing
from saberjax.chunk_compact import (COMPACT_FIELDS, CompactChunk, compact, compact_on_device,
                                    expand)
from saberjax.chunk_records import (ChunkStoreError, Records, pinned_rows, state_records,
                                    static_records)
from saberjax.config import DEFAULT_PREFETCH, Hyperparams
from saberjax.corpus import Corpus
from saberjax.corpus.cache import cache_root
from saberjax.layout import TILE_TOKENS, Chunk, LayoutPlan
from saberjax.state import ChunkState

FORMAT_VERSION = 2  # 2: states of z alone
MANIFEST = "manifest.json"
STATIC = "static.bin"
STATES = ("state0.bin", "state1.bin")
OWN_NAMES = (MANIFEST, STATIC, *STATES)
# Host bytes per token of building one chunk (layout.build_chunk's peak, the corpus slice
# and the compact copy included), for a corpus of one word run per token, the worst case.
BUILD_BYTES_PER_TOKEN = 72
# Host bytes per token of one slot streamed from the store: the compact chunk and z read
# (about 6.6) and z written back (2).
STREAM_BYTES_PER_TOKEN = 9
# Threads building a store's chunks at once where the host budget allows (chunks are planned
# small enough for them: building is most of the set-up before the first iteration).
BUILD_WORKERS = 8
IO_THREADS = 8  # threads reading and writing the store (in pieces: chunk_records)


def default_directory() -> Path:
    """Where a run keeps its chunk store unless told: chunk_store/ in saberjax's cache folder
    (corpus.cache.cache_root); one store, replaced when a run needs another."""
    return cache_root() / "chunk_store"


def host_chunk_tokens(budget: int, prefetch: int, workers: int = 1) -> int:
    """The most tokens per chunk a host memory budget (bytes, beyond the run's fixed needs)
    allows when streaming from the store: a chunk being built by each of `workers` threads,
    or prefetch + 2 slots read, worked on and written back."""
    return int(budget / max(BUILD_BYTES_PER_TOKEN * workers,
                            STREAM_BYTES_PER_TOKEN * (prefetch + 2)))


def _key(corpus: Corpus, plan: LayoutPlan, devices: int) -> dict:
    return dict(format_version=FORMAT_VERSION, corpus_fingerprint=corpus.fingerprint(),
                chunk_docs=hashlib.sha256(np.asarray(plan.chunk_docs, np.int64).tobytes())
                .hexdigest(), padded_tokens=plan.padded_tokens, padded_docs=plan.padded_docs,
                devices=devices, tile_tokens=TILE_TOKENS)


def _stale_reason(directory: Path, key: dict, static_bytes: int) -> str | None:
    """Why the store in `directory` cannot be used for `key` (None: it can)."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return "no manifest"
    except (OSError, ValueError) as error:
        return f"unreadable manifest ({error})"
    if not isinstance(manifest, dict) or manifest.get("key") != key:
        return "made for another corpus or chunking"
    size = (directory / STATIC).stat().st_size if (directory / STATIC).is_file() else None
    if size != static_bytes or manifest.get("static_bytes") != static_bytes:
        return f"{STATIC} has {size} bytes, {static_bytes} expected (truncated or damaged)"
    return None


def _own_bytes(directory: Path) -> int:
    """Bytes of the store files already in `directory` (replaced, so free for the new ones)."""
    return sum((directory / name).stat().st_size for name in OWN_NAMES
               if (directory / name).is_file())


def _check_room(directory: Path, needed: int, plan: LayoutPlan) -> None:
    probe = directory if directory.exists() else directory.parent
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free + (_own_bytes(directory) if directory.is_dir() else 0)
    if needed > free:
        raise ChunkStoreError(
            f"the chunk store needs {needed / 1e9:.1f} GB at {directory} ({len(plan.chunk_docs)} "
            f"chunks of {plan.padded_tokens:,} tokens and two generations of their states), "
            f"but that disk has {free / 1e9:.1f} GB free; free some space or choose a folder "
            f"on a larger disk with --chunk_store")


def _lock(directory: Path):
    """The store's lock file, held (flock) until it is closed; a ChunkStoreError when another
    run holds it."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    handle = open(directory.with_name(directory.name + ".lock"), "a+b")  # noqa: SIM115
    for attempt in range(2):
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if attempt == 0:
                gc.collect()  # a finished placement of this process may still hold it
    handle.close()
    raise ChunkStoreError(f"the chunk store {directory} is in use by another run; wait for it "
                          f"or choose another folder with --chunk_store")


@timing.in_phase("layout")
def _build(corpus: Corpus, plan: LayoutPlan, directory: Path, records: Records,
           key: dict, workers: int, sharding: jax.sharding.NamedSharding | None = None) -> None:
    """Build every chunk, write the compact chunks and the manifest into a hidden sibling and
    rename it to `directory`.  sharding: the store's devices build the chunks
    (_build_on_devices; the host does, with a warning, where they run out of memory);
    None: `workers` host threads do (layout.build_chunk)."""
    runs = records.fields[COMPACT_FIELDS.index("run_word")].shape[0]
    with outputs.staged_directory(directory, OWN_NAMES, "chunk store") as staging:
        path = staging / STATIC
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, records.file_bytes)
            if sharding is not None:
                try:
                    _build_on_devices(corpus, plan, fd, records, runs, sharding)
                except jax.errors.JaxRuntimeError as error:
                    if "RESOURCE_EXHAUSTED" not in str(error):
                        raise
                    warnings.warn(f"building the chunk store's chunks on the host: the devices "
                                  f"ran out of memory ({str(error).splitlines()[0]})",
                                  stacklevel=3)
                    sharding = None
            if sharding is None:
                def build_slot(slot: int) -> None:
                    chunks = [compact(plan.build_chunk(corpus, device * records.slots + slot),
                                      runs) for device in range(records.devices)]
                    records.write(fd, slot, {name: np.stack([getattr(chunk, name)
                                                             for chunk in chunks])
                                             for name in COMPACT_FIELDS})

                with concurrent.futures.ThreadPoolExecutor(workers) as pool:
                    for done in pool.map(build_slot, range(records.slots)):
                        del done
            os.fsync(fd)
        finally:
            os.close(fd)
        with open(staging / MANIFEST, "w", encoding="utf-8") as file:
            json.dump(dict(key=key, static_bytes=records.file_bytes), file, indent=1)
            file.flush()
            os.fsync(file.fileno())


def device_slot_builder(num_runs: int, sharding: jax.sharding.NamedSharding):
    """build(inputs, word_rank) -> a slot's CompactChunk [devices, ...] laid out by
    `sharding`: layout_device.slot_builder, each device's chunk compacted on the device
    (compact_on_device), so the host receives only what the store writes."""
    return layout_device.slot_builder(sharding, lambda chunk: compact_on_device(chunk,
                                                                                num_runs))


def _build_on_devices(corpus: Corpus, plan: LayoutPlan, fd: int, records: Records,
                      num_runs: int, sharding: jax.sharding.NamedSharding) -> None:
    """Write every slot's compact chunks into static.bin, each device of `sharding` building
    its chunk of the slot (device_slot_builder).  A slot's word ids are copied from the
    memory-mapped corpus into pinned buffers (two, in turn) and put on the devices in one
    copy; the compact chunks come back through pinned host memory and a writer thread writes
    them (in pieces, on IO_THREADS threads) while the devices build the next slot.  Device
    memory: one build (layout_device's docstring: 40-50 bytes a padded token) and the
    compact chunks of up to two slots in flight (about 4.5 bytes a token each), within what
    the store's chunks were planned for (the training step's needs); host memory: two
    pinned input buffers (4 bytes a padded token each) and the compact chunks in flight."""
    tokens, docs = plan.padded_tokens, plan.padded_docs
    build = device_slot_builder(num_runs, sharding)
    word_rank = jax.device_put(plan.word_rank, jax.sharding.NamedSharding(
        sharding.mesh, jax.sharding.PartitionSpec()))
    pinned = sharding.with_memory_kind("pinned_host")
    buffers = [pinned_rows(sharding, tokens, np.int32) for _ in range(2)]
    built: list[CompactChunk | None] = [None, None]  # each buffer's last slot, fetched

    def write(slot: int, chunk: CompactChunk) -> None:
        records.write(fd, slot, {name: np.asarray(getattr(chunk, name))
                                 for name in COMPACT_FIELDS}, io)

    with concurrent.futures.ThreadPoolExecutor(IO_THREADS) as io, \
            concurrent.futures.ThreadPoolExecutor(1) as writer:
        writing: list[concurrent.futures.Future] = []
        for slot in range(records.slots):
            raw, views = buffers[slot % 2]
            if built[slot % 2] is not None:  # that slot is built: its buffer is free
                jax.block_until_ready(built[slot % 2])
            inputs = [layout_device.chunk_inputs(
                corpus, *plan.chunk_docs[device * records.slots + slot], tokens, docs,
                words=views[device]) for device in range(records.devices)]
            rest = jax.device_put([np.stack(field) for field in list(zip(*inputs))[1:]],
                                  sharding)
            chunk = built[slot % 2] = jax.device_put(build(layout_device.ChunkInputs(
                jax.device_put(raw, sharding), *rest), word_rank), pinned)
            writing.append(writer.submit(write, slot, chunk))
            while writing and (len(writing) > 2 or writing[0].done()):  # two in flight
                writing.pop(0).result()
        for done in writing:
            done.result()


class StoredChunks:
    """The chunk store as streaming.stream_over_chunks' source: slot i's compact chunk and
    its state read from disk and put on the devices (`put`), new states written back to
    the other state file (`writer_for`).  Indexing gives slot i's chunk on the devices (for
    shapes and host views); len() is the number of slots.

    A store that is built is built by `workers` host threads, or by the devices of
    `sharding` where build_on_devices (None: where they are not CPUs)."""

    def __init__(self, corpus: Corpus, plan: LayoutPlan, hyper: Hyperparams, directory,
                 sharding: jax.sharding.NamedSharding, prefetch: int = DEFAULT_PREFETCH,
                 workers: int = 1, build_on_devices: bool | None = None):
        if jax.process_count() > 1:
            raise ChunkStoreError("a chunk store serves one process; with several processes "
                                  "give each host the memory to stream from RAM "
                                  "(--host_memory_gb)")
        if prefetch < 1:
            raise ValueError(f"prefetch must be at least 1, got {prefetch}")
        directory = Path(os.path.abspath(directory))
        outputs.check_replaceable(directory, OWN_NAMES, "a saberjax chunk store")
        devices = sharding.mesh.size
        self.directory, self.sharding, self.prefetch = directory, sharding, prefetch
        self.padded_tokens = plan.padded_tokens  # of one device's chunk in a slot
        self.counters = streaming.StreamCounters()
        self.static = static_records(plan, corpus.num_words, devices)
        self.states = state_records(plan, hyper, devices)
        self._io = concurrent.futures.ThreadPoolExecutor(
            IO_THREADS, thread_name_prefix="saberjax-store-io")
        self._ahead: dict[tuple[int | None, int], tuple] = {}
        self._free_buffers: list[tuple[jax.Array, list[np.ndarray]]] = []
        # one put at a time: the read-aheads and read buffers are the store's, not a thread's
        # (the learned prior's update compiles in a thread that reads slot 0 while the main
        # thread streams)
        self._put_lock = threading.Lock()
        self._lock = _lock(directory)
        try:
            key = _key(corpus, plan, devices)
            reason = _stale_reason(directory, key, self.static.file_bytes)
            if reason and (directory / MANIFEST).exists():
                warnings.warn(f"rebuilding the chunk store {directory}: {reason}", stacklevel=2)
            if reason:  # never trusted, so its room is free for the new one
                for name in OWN_NAMES:
                    (directory / name).unlink(missing_ok=True)
            _check_room(directory, self.disk_bytes, plan)
            start = time.perf_counter()
            if reason:
                if build_on_devices is None:  # the host builder is the faster one on CPUs
                    build_on_devices = sharding.mesh.devices.flat[0].platform != "cpu"
                _build(corpus, plan, directory, self.static, key, workers,
                       sharding if build_on_devices else None)
            self.build_seconds = time.perf_counter() - start if reason else 0.0
            self._static_fd = os.open(directory / STATIC, os.O_RDONLY)
            self._state_fds = tuple(os.open(directory / name, os.O_RDWR | os.O_CREAT, 0o644)
                                    for name in STATES)
            for fd in self._state_fds:
                os.ftruncate(fd, self.states.file_bytes)
            self._maps = tuple(np.memmap(directory / name, np.uint8, "r") for name in STATES)
        except BaseException:
            self.close()
            raise

    @property
    def disk_bytes(self) -> int:
        """Bytes of the store on disk: the compact chunks and two generations of states."""
        return self.static.file_bytes + 2 * self.states.file_bytes

    def close(self) -> None:
        """Close the store's files, free its read buffers and release its lock (also when it
        is garbage)."""
        if "_io" in self.__dict__:
            self.__dict__.pop("_io").shutdown(wait=True, cancel_futures=True)
        self.__dict__.pop("_ahead", None)
        self.__dict__.pop("_free_buffers", None)
        for fd in (*self.__dict__.pop("_state_fds", ()),
                   *([self.__dict__.pop("_static_fd")] if "_static_fd" in self.__dict__ else [])):
            os.close(fd)
        if "_lock" in self.__dict__:
            self.__dict__.pop("_lock").close()

    __del__ = close

    def __len__(self) -> int:
        return self.static.slots

    def __getitem__(self, slot: int) -> Chunk:
        return self.put(slot, None)[0]

    def __iter__(self):
        return (self[slot] for slot in range(len(self)))

    @functools.cached_property
    def _unpack(self):
        """(raw bytes of a slot on the devices, whether they hold z) -> (the slot's chunk, its
        z or None), on the devices."""
        def unpack(raw, with_topics: bool):
            chunk = jax.vmap(expand)(CompactChunk(**self.static.unpack(raw),
                                                  block_tokens=self.static.fields[0].shape[0]))
            return chunk, (self.states.unpack(raw, self.static.device_bytes)["topics"]
                           if with_topics else None)
        return compilation.jit(unpack, static_argnums=1, out_shardings=self.sharding)

    def _buffer(self) -> tuple[jax.Array, list[np.ndarray]]:
        """A free read buffer: pinned host bytes [devices, a slot's chunk and z], and writable
        views of each device's row.  The devices copy from pinned memory at full speed (from
        pageable memory a copy is staged and far slower), so reads land there directly."""
        if self._free_buffers:
            return self._free_buffers.pop()
        return pinned_rows(self.sharding, self.static.device_bytes + self.states.device_bytes,
                            np.uint8)

    def _generation(self, chunk_states) -> int:
        """The state file that holds host states (views of one of the two memory maps)."""
        for generation, mapped in enumerate(self._maps):
            if np.may_share_memory(chunk_states[0].topics, mapped):
                return generation
        raise ValueError("these chunk states are not in the chunk store")

    def _read_ahead(self, generation: int | None, slot: int) -> None:
        """Start reading a slot's compact chunk and (generation not None) its z from that
        state file into a read buffer, unless it was started."""
        if (generation, slot) not in self._ahead:
            raw, views = self._buffer()
            pieces = []
            for device, view in enumerate(views):
                pieces += self.static.read_into(self._io, self._static_fd, slot, device, view)
                if generation is not None:
                    pieces += self.states.read_into(
                        self._io, self._state_fds[generation], slot, device,
                        view[self.static.device_bytes:])
            self._ahead[generation, slot] = (raw, views, pieces)

    def _release(self, raw: jax.Array, views: list[np.ndarray], pieces) -> None:
        """Return a read buffer to the free ones once its reads are done."""
        concurrent.futures.wait(pieces)
        self._free_buffers.append((raw, views))

    def put(self, slot: int, chunk_states):
        """(slot's chunk, its state of z alone or None) on the devices, chunk_states being
        host states (None at initialisation).  The next `prefetch` slots are read from disk
        meanwhile; one thread's put at a time."""
        with self._put_lock:
            return self._put(slot, chunk_states)

    def _put(self, slot: int, chunk_states):
        generation = None if chunk_states is None else self._generation(chunk_states)
        for other in [key for key in self._ahead if key[0] != generation]:
            self._release(*self._ahead.pop(other))  # another iteration's (stopped by an error)
        for ahead in range(slot, min(slot + self.prefetch + 1, len(self))):
            self._read_ahead(generation, ahead)
        raw, views, pieces = self._ahead.pop((generation, slot))
        try:
            for piece in pieces:
                piece.result()
            # the buffer is reused once the devices hold its copy
            on_devices = jax.block_until_ready(jax.device_put(raw, self.sharding))
        finally:
            self._release(raw, views, pieces)
        self.counters.bytes_put += self.static.slot_bytes + (
            0 if generation is None else self.states.slot_bytes)
        chunk, topics = self._unpack(on_devices, generation is not None)
        return chunk, None if topics is None else ChunkState(topics, None, None)

    def writer_for(self, chunk_states):
        """write(slot, new state on the devices) -> its host state (z alone), into the state
        file that does not hold chunk_states (the even one at initialisation)."""
        generation = 0 if chunk_states is None else 1 - self._generation(chunk_states)
        return functools.partial(self._write, generation)

    def _write(self, generation: int, slot: int, chunk_state: ChunkState) -> ChunkState:
        # through pinned host memory: the devices copy into it at full speed (into pageable
        # memory a copy is staged and far slower), then the host writes from it
        topics = np.asarray(jax.device_put(
            chunk_state.topics, self.sharding.with_memory_kind("pinned_host")))
        self.states.write(self._state_fds[generation], slot, dict(topics=topics), self._io)
        self.counters.bytes_written += topics.nbytes
        return self.host_state(generation, slot)

    def host_state(self, generation: int, slot: int) -> ChunkState:
        """A read-only view of a slot's z in a state file ([devices, ...]); A is None."""
        return ChunkState(self.states.views(self._maps[generation], slot)["topics"], None, None)

    def write_states(self, slot_states) -> tuple[ChunkState, ...]:
        """Host states of every slot ([devices, ...] numpy; their z is kept) written as the
        even generation; their views in the store (a checkpoint being resumed)."""
        return tuple(self._write(0, slot, state) for slot, state in enumerate(slot_states))
