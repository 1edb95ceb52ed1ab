"""Streaming workflow (paper section 3.1): chunks live on the host and stream through the device.

When the corpus does not fit the device, the token arrays of each PDOW chunk and its state
(z and the sparse A) stay in host memory; B, B-hat and the trees stay on the device.  Every
iteration walks the chunks in order:

    producer thread    put chunk i+1, i+2 (up to `prefetch` ahead) on the device
    main thread        sample chunk i and rebuild its A, adding its tokens into B
    writer thread      copy chunk i-1's new state back to host memory

On a mesh of several devices "chunk i" is slot i: one chunk per device, each device streaming
its own (saberjax.execution).

so transfers hide behind compute, and device memory holds the model plus a few chunks.  The
computation per chunk is exactly the in-memory one, so streaming does not change the model.
A failure in either thread stops the iteration with an error naming the chunk; no thread is
left running.

Host memory (pinned) per token (K <= 32,767): word, doc and shuffle pointer (int32 each, 12
bytes), the E-step's work list (about 0.5 bytes), z (int16, 2 bytes), A's packed (topic, count)
pair (4 bytes): 18.5 bytes, plus 8 bytes per document (doc_start, nnz) and 4 per distinct word
of a chunk; 20.5 bytes per token when K > 32,767.  When that does not fit the host memory
budget, the chunks stream from local disk instead (saberjax.chunk_store, the same loop).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import queue
import threading
import time
from typing import Callable

import jax
import numpy as np

from saberjax.config import DEFAULT_PREFETCH
from saberjax.layout import Chunk


@dataclasses.dataclass
class StreamCounters:
    """Where streaming time goes, summed over iterations (seconds)."""

    transfer: float = 0.0  # host -> device copies, in the producer thread
    waited: float = 0.0  # the main thread waiting for the next chunk (the device may still be
    # busy with queued work then, so this bounds the device's idle time from above)
    write_back: float = 0.0  # device -> host copies, in the writer thread
    chunks: int = 0
    bytes_put: int = 0  # host -> device
    bytes_written: int = 0  # device -> host

    def since(self, before: "StreamCounters") -> "StreamCounters":
        """The counts accumulated after `before` was copied."""
        return StreamCounters(*(getattr(self, field.name) - getattr(before, field.name)
                                for field in dataclasses.fields(self)))

    def as_metrics(self) -> dict:
        return dict(transfer_seconds=self.transfer, waited_seconds=self.waited,
                    write_back_seconds=self.write_back, bytes_put=self.bytes_put,
                    bytes_written=self.bytes_written)


@dataclasses.dataclass(frozen=True, eq=False)
class HostChunks:
    """PDOW chunks kept in pinned host memory, streamed through the devices every iteration.

    Each of `chunks` is one slot of a mesh (saberjax.execution): its arrays hold one chunk per
    device along their leading axis, laid out by `sharding`, so every device streams its own
    chunks.  Pinned (page-locked) host buffers let the copies to and from the devices run as
    DMA without a staging copy; the chunks' states are written back into pinned memory too.
    """

    chunks: tuple[Chunk, ...]
    sharding: jax.sharding.Sharding  # where a slot's arrays live on the devices
    prefetch: int = DEFAULT_PREFETCH
    counters: StreamCounters = dataclasses.field(default_factory=StreamCounters)

    def __post_init__(self):
        if self.prefetch < 1:
            raise ValueError(f"prefetch must be at least 1, got {self.prefetch}")
        object.__setattr__(self, "chunks", tuple(self.to_host(chunk) for chunk in self.chunks))

    def to_host(self, tree):
        """Copy a pytree into the devices' pinned host memory."""
        return jax.device_put(tree, self.sharding.with_memory_kind("pinned_host"))

    def to_device(self, tree):
        """Copy a pytree into the devices' own memory."""
        return jax.device_put(tree, self.sharding.with_memory_kind("device"))

    def __len__(self) -> int:
        return len(self.chunks)

    @property
    def padded_tokens(self) -> int:
        """The padded tokens of one device's chunk in a slot."""
        return self.chunks[0].word.shape[1]

    def __iter__(self):
        return iter(self.chunks)

    def __getitem__(self, index):
        return self.chunks[index]

    def put(self, index: int, chunk_states):
        """(chunk index, its state or None) on the devices; chunk_states: host states, None
        at initialisation."""
        item = (self.chunks[index], None if chunk_states is None else chunk_states[index])
        self.counters.bytes_put += sum(leaf.nbytes for leaf in jax.tree.leaves(item))
        return self.to_device(item)

    def writer_for(self, chunk_states):
        """write(index, new state on the devices) -> its host state (pinned)."""
        del chunk_states  # every state has pinned buffers of its own
        return self._write

    def _write(self, index: int, chunk_state):
        del index
        self.counters.bytes_written += sum(leaf.nbytes for leaf in jax.tree.leaves(chunk_state))
        return self.to_host(chunk_state)


def _put_in_order(host, chunk_states, slots: queue.Queue, stop: threading.Event) -> None:
    """Producer: put each (chunk, state) on the device, in order, as slots free up."""
    try:
        for index in range(len(host)):
            start = time.perf_counter()
            item = jax.block_until_ready(host.put(index, chunk_states))
            host.counters.transfer += time.perf_counter() - start
            while not stop.is_set():
                try:
                    slots.put((index, item), timeout=0.05)
                    break
                except queue.Full:
                    continue
            if stop.is_set():
                return
    except BaseException as error:  # handed to the main thread, which raises it
        slots.put((None, error))


def _write_back(host, write: Callable, index: int, chunk_state):
    start = time.perf_counter()
    written = jax.block_until_ready(write(index, chunk_state))
    host.counters.write_back += time.perf_counter() - start
    return written


def stream_over_chunks(host, chunk_states, counts: jax.Array, run_chunk: Callable):
    """run_chunk(chunk, state, counts) -> (state, counts) over streamed chunks.

    `host` is where the chunks live: HostChunks (host memory) or chunk_store.StoredChunks
    (local disk), each giving len(), put(index, chunk_states) -> (chunk, state) on the
    devices, writer_for(chunk_states) -> write(index, new state) -> host state, `prefetch`
    and `counters`.  `chunk_states` are host states (None at initialisation); returns (new
    host states, counts).
    """
    write = host.writer_for(chunk_states)
    slots: queue.Queue = queue.Queue(maxsize=host.prefetch)
    stop = threading.Event()
    producer = threading.Thread(target=_put_in_order, name="saberjax-prefetch", daemon=True,
                                args=(host, chunk_states, slots, stop))
    writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="saberjax-write-back")
    written = []
    producer.start()
    try:
        for expected in range(len(host)):
            start = time.perf_counter()
            index, item = slots.get()
            host.counters.waited += time.perf_counter() - start
            if index is None:
                raise RuntimeError(f"putting chunk {expected} of {len(host)} on the device "
                                   f"failed: {item}") from item
            chunk, chunk_state = item
            new_state, counts = run_chunk(chunk, chunk_state, counts)
            if expected >= host.prefetch:  # bound the states waiting on the device
                written[expected - host.prefetch].result()
            written.append(writer.submit(_write_back, host, write, expected, new_state))
            host.counters.chunks += 1
        return tuple(future.result() for future in written), counts
    finally:
        stop.set()
        while producer.is_alive():  # let a producer blocked on a full queue see the stop
            try:
                slots.get_nowait()
            except queue.Empty:
                producer.join(timeout=0.05)
        writer.shutdown(wait=True, cancel_futures=True)
