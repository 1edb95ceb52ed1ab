"""Streaming workflow (paper section 3.1): chunks live on the host and stream through the device.

When the corpus does not fit the device, the token arrays of each PDOW chunk and its state
(z and the sparse A) stay in host memory; B, B-hat and the trees stay on the device.  Every
iteration walks the chunks in order:

    producer thread    put chunk i+1, i+2 (up to `prefetch` ahead) on the device
    main thread        sample chunk i and rebuild its A, adding its tokens into B
    writer thread      copy chunk i-1's new state back to host memory

so transfers hide behind compute, and device memory holds the model plus a few chunks.  The
computation per chunk is exactly the in-memory one, so streaming does not change the model.
A failure in either thread stops the iteration with an error naming the chunk; no thread is
left running.

Host memory (pinned) per token (K <= 32,767): word, doc and shuffle pointer (int32 each, 12
bytes), the E-step's work list (about 0.5 bytes), z (int16, 2 bytes), A's packed (topic, count)
pair (4 bytes): 18.5 bytes, plus 8 bytes per document (doc_start, nnz) and 4 per distinct word
of a chunk; 20.5 bytes per token when K > 32,767.
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

from saberjax.layout import Chunk
from saberjax.state import BHAT_DTYPE

DEFAULT_PREFETCH = 2
# Device memory left free for XLA and the allocator when the budget comes from the device.
HEADROOM_FRACTION = 0.1


@dataclasses.dataclass
class StreamCounters:
    """Where streaming time goes, summed over iterations (seconds)."""

    transfer: float = 0.0  # host -> device copies, in the producer thread
    waited: float = 0.0  # the main thread waiting for the next chunk (the device may still be
    # busy with queued work then, so this bounds the device's idle time from above)
    write_back: float = 0.0  # device -> host copies, in the writer thread
    chunks: int = 0

    def since(self, before: "StreamCounters") -> "StreamCounters":
        """The counts accumulated after `before` was copied."""
        return StreamCounters(*(getattr(self, field.name) - getattr(before, field.name)
                                for field in dataclasses.fields(self)))

    def as_metrics(self) -> dict:
        return dict(transfer_seconds=self.transfer, waited_seconds=self.waited,
                    write_back_seconds=self.write_back)


@dataclasses.dataclass(frozen=True, eq=False)
class HostChunks:
    """PDOW chunks kept in pinned host memory, streamed through one device every iteration.

    Pinned (page-locked) host buffers let the copies to and from the device run as DMA
    without a staging copy; the chunks' states are written back into pinned memory too.
    """

    chunks: tuple[Chunk, ...]
    prefetch: int = DEFAULT_PREFETCH
    device: jax.Device | None = None  # None: the default device
    counters: StreamCounters = dataclasses.field(default_factory=StreamCounters)

    def __post_init__(self):
        if self.prefetch < 1:
            raise ValueError(f"prefetch must be at least 1, got {self.prefetch}")
        object.__setattr__(self, "device", self.device or jax.devices()[0])
        object.__setattr__(self, "chunks", tuple(self.to_host(chunk) for chunk in self.chunks))

    def to_host(self, tree):
        """Copy a pytree into this device's pinned host memory."""
        return self._put(tree, "pinned_host")

    def to_device(self, tree):
        """Copy a pytree into the device's own memory."""
        return self._put(tree, "device")

    def _put(self, tree, memory_kind: str):
        sharding = jax.sharding.SingleDeviceSharding(self.device, memory_kind=memory_kind)
        return jax.device_put(tree, sharding)

    def __len__(self) -> int:
        return len(self.chunks)

    def __iter__(self):
        return iter(self.chunks)

    def __getitem__(self, index):
        return self.chunks[index]


def _put_in_order(host: "HostChunks", chunk_states, slots: queue.Queue,
                  stop: threading.Event) -> None:
    """Producer: put each (chunk, state) on the device, in order, as slots free up."""
    try:
        for index, chunk in enumerate(host.chunks):
            start = time.perf_counter()
            item = jax.block_until_ready(host.to_device(
                (chunk, None if chunk_states is None else chunk_states[index])))
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


def _write_back(host: "HostChunks", chunk_state):
    start = time.perf_counter()
    written = jax.block_until_ready(host.to_host(chunk_state))
    host.counters.write_back += time.perf_counter() - start
    return written


def stream_over_chunks(host: HostChunks, chunk_states, counts: jax.Array,
                       run_chunk: Callable):
    """run_chunk(chunk, state, device, counts) -> (state, counts) over host chunks, streamed.

    `chunk_states` are host states (None at initialisation); returns (new host states, counts).
    """
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
            new_state, counts = run_chunk(chunk, chunk_state, host.device, counts)
            if expected >= host.prefetch:  # bound the states waiting on the device
                written[expected - host.prefetch].result()
            written.append(writer.submit(_write_back, host, new_state))
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


def model_bytes(num_words: int, padded_topics: int) -> int:
    """Device bytes of the model during an iteration: B and the new counts (V x K_pad int32
    each), B-hat and its rebuild (state.BHAT_DTYPE), the trees (float32, about 1/31 of B-hat's
    cells)."""
    bhat_bytes = np.dtype(BHAT_DTYPE).itemsize
    return int(num_words * padded_topics * (2 * 4 + 2 * bhat_bytes + 4 / 31))


def free_device_memory(device=None) -> int | None:
    """Bytes the device can still allocate, less headroom; None when it does not say (CPU)."""
    stats = (device or jax.devices()[0]).memory_stats()
    if not stats or "bytes_limit" not in stats:
        return None
    free = stats["bytes_limit"] - stats.get("bytes_in_use", 0)
    return int(free * (1 - HEADROOM_FRACTION))


def plan_chunk_tokens(num_tokens: int, num_words: int, num_topics: int, padded_topics: int,
                      budget: int, device_bytes_per_token: float,
                      prefetch: int = DEFAULT_PREFETCH) -> int | None:
    """Tokens per chunk for a device budget: None when every chunk can stay on the device.

    Everything resident needs the model plus device_bytes_per_token for every token; otherwise
    the fewest chunks such that the model, `prefetch` chunks in flight and the one being
    worked on fit (the paper's rule: as few chunks as memory allows, for locality).
    """
    room = budget - model_bytes(num_words, padded_topics)
    if room <= 0:
        raise MemoryError(
            f"the model does not fit the device: K={num_topics} topics x V={num_words} words "
            f"need {model_bytes(num_words, padded_topics) / 1e9:.2f} GB for B, B-hat, the trees "
            f"and their update, but the device budget is {budget / 1e9:.2f} GB; use fewer "
            f"topics, a smaller vocabulary or a larger --device_memory_gb")
    if num_tokens * device_bytes_per_token <= room:
        return None
    chunk_tokens = int(room / (device_bytes_per_token * (prefetch + 1)))
    if chunk_tokens < 1024:
        raise MemoryError(f"a device budget of {budget / 1e9:.2f} GB leaves room for only "
                          f"{chunk_tokens} tokens per chunk next to the model; raise "
                          f"--device_memory_gb or lower K")
    return chunk_tokens
