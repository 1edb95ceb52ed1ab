"""The host side of the memory plan for chunks the host holds (streamed from pinned host memory,
or a resident layout the host builds for CPU devices): the bytes of the arrays the placement
creates, from their shapes and dtypes, and the measured temporaries of building them.

    chunks       every slot's chunk of each of the process's devices (layout.Chunk)
    word shares  by word, every slot's share of each device (layout.word_shares)
    states       every slot's state (z, A's pairs and nonzeros); an iteration writes the new
                 states back beside the old ones, so twice
    building     the host's layout (its chunks, then their copies, and each chunk being built)
                 or, by word, the slots' word shares being built (several slots at once)

On CPU devices the pinned arrays come from the heap too, so the peak is the larger of placing
and an iteration; on accelerators they come from the runtime's pinned pool (pinned_pool_bytes),
beside the heap placing leaves.  The corpus and the runtime are what the process holds when
the run is planned (memory.anonymous_host_memory), not counted here; the trained model fetched
to the host is memory.host_model_bytes.  The plan (execution.plan) decides from these whether
the host holds the chunks or a chunk store does (plan_store_chunk_tokens).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from saberjax import chunk_store
from saberjax.config import Hyperparams
from saberjax.corpus import Corpus
from saberjax.execution import memory
from saberjax.layout import (TILE_TOKENS, bucket_size, chunk_spans, max_tiles, padded_shape,
                             word_share_slots_at_once)
from saberjax.state import pair_dtype

# Host bytes, per token of a slot's words group (every device's chunk of the slot), that
# building the slot's word shares holds beyond the shares: the group's arrays a token
# (layout._WordGroup) and each share's positions, sort keys and order (layout.word_shares,
# every share at once); measured (docs/measurements/memory.md).
WORD_SHARE_BUILD_BYTES_PER_TOKEN = 64
# The largest word share of a slot beyond an equal part of its group's tokens (share_order
# deals the whole corpus's words into near-equal shares; a slot's documents shift them).
WORD_SHARE_EXCESS = 0.01
# Device bytes a padded token of building a chunk on a device (layout_device: its input,
# output and sort temporaries), which on CPU devices are the host's.
DEVICE_BUILD_BYTES_PER_TOKEN = 50
# The first region of XLA's pinned host allocator on a GPU (a BFC allocator growing by
# regions of doubling size: tsl BFCAllocator with allow_growth); pinned_pool_bytes.
PINNED_FIRST_REGION_BYTES = 2 << 20


@dataclasses.dataclass(frozen=True)
class HeldShape:
    """The shapes of what the host holds for one process's devices (own_devices of
    num_devices), each with num_slots slots of padded_tokens tokens and padded_docs documents;
    by word (share_tokens > 0) each slot's word share of share_tokens tokens over the
    doc-major space of every device's chunk of the slot."""

    num_devices: int
    own_devices: int
    num_slots: int
    padded_tokens: int
    padded_docs: int
    share_tokens: int = 0

    @property
    def by_words(self) -> bool:
        return self.share_tokens > 0


def held_shape(corpus: Corpus, num_devices: int, own_devices: int, chunk_tokens: int | None,
               by_words: bool) -> HeldShape:
    """The shapes placement.placed gives a corpus on num_devices devices in chunks of about
    chunk_tokens tokens (None: one a device), from the document offsets alone: the layout's
    padded shape (layout.padded_shape) and, by word, a share of the largest slot's group of
    tokens (WORD_SHARE_EXCESS above an equal part, bucket_size'd)."""
    spans = chunk_spans(corpus, chunk_tokens or -(-corpus.num_tokens // num_devices),
                        num_devices)
    padded_tokens, padded_docs = padded_shape(corpus.doc_offsets, spans)
    num_slots = len(spans) // num_devices
    share_tokens = 0
    if by_words:
        offsets = np.asarray(corpus.doc_offsets, np.int64)
        tokens = np.array([offsets[last] - offsets[first] for first, last in spans], np.int64)
        group = int(tokens.reshape(num_devices, num_slots).sum(axis=0).max())
        share_tokens = bucket_size(int(group / num_devices * (1 + WORD_SHARE_EXCESS)) + 1)
    return HeldShape(num_devices, own_devices, num_slots, padded_tokens, padded_docs,
                     share_tokens)


def chunk_bytes(padded_tokens: int, padded_docs: int, num_rows: int, chunks: int = 1) -> int:
    """Bytes of one device's layout.Chunk of padded_tokens tokens over the documents of
    `chunks` chunks (a word share spans every device's): word, doc and doc_major_pos (int32
    each), the documents' starts, the E-step's work list over num_rows rows, the real tokens
    and a token base a chunk."""
    return (12 * padded_tokens + 4 * (chunks * padded_docs + 1)
            + 4 * (max_tiles(padded_tokens, num_rows, TILE_TOKENS) + 1) + 4 + 8 * chunks)


def state_bytes(shape: HeldShape, hyper: Hyperparams) -> int:
    """Bytes of one device's state of a slot (state.ChunkState): z of its chunk's tokens (by
    word, of its share's), A's pairs (packed or wide) of its chunk and its documents'
    nonzeros."""
    topics = shape.share_tokens if shape.by_words else shape.padded_tokens
    return (topics * np.dtype(hyper.topic_dtype).itemsize
            + shape.padded_tokens * np.dtype(pair_dtype(hyper.wide_pairs)).itemsize
            + 4 * shape.padded_docs)


def pinned_pool_bytes(pinned: int) -> int:
    """Bytes an accelerator's pinned host allocator holds for `pinned` bytes of arrays: XLA's
    (one a device) grows by regions of doubling size from PINNED_FIRST_REGION_BYTES and
    keeps them, so it holds the smallest sum of such regions that reaches `pinned`."""
    held, region = 0, PINNED_FIRST_REGION_BYTES
    while held < pinned:
        held, region = held + region, 2 * region
    return held


def held_bytes(shape: HeldShape, hyper: Hyperparams, num_words: int, layout_on_host: bool,
               pinned_pool: bool) -> int:
    """Peak host bytes of the chunks, word shares and states of `shape` (module docstring).
    layout_on_host: the host builds the layout (layout.build_layout: its chunks, each being
    built, then their copies; else the devices build the chunks from 4 bytes a token of
    word ids, two slots at a time).  pinned_pool: the pinned arrays come from an
    accelerator's pool (pinned_pool_bytes a device) beside the host's heap, whose placing
    temporaries stay; else (CPU devices) from the heap, which the iteration reuses."""
    per_slot = shape.own_devices * shape.num_slots
    chunks = per_slot * chunk_bytes(shape.padded_tokens, shape.padded_docs, num_words)
    shares = 0
    if shape.by_words:
        shares = per_slot * chunk_bytes(shape.share_tokens, shape.padded_docs,
                                        -(-num_words // shape.num_devices), shape.num_devices)
    pinned = chunks + shares + 2 * per_slot * state_bytes(shape, hyper)
    layout = chunks if layout_on_host else 0  # the host's layout, beside the pinned copies
    if layout_on_host:  # each chunk being built, then the layout beside its copies
        building = layout + (min(per_slot, os.cpu_count() or 1) * shape.padded_tokens
                             * chunk_store.BUILD_BYTES_PER_TOKEN)
    else:  # two slots' word ids at a time (on CPU devices their builds are the host's too)
        building = 2 * shape.own_devices * shape.padded_tokens * (
            4 + (0 if pinned_pool else DEVICE_BUILD_BYTES_PER_TOKEN))
    sharing = 0  # by word: the slots' shares being built
    if shape.by_words:
        at_once = word_share_slots_at_once(shape.num_slots, shape.own_devices)
        sharing = at_once * (shape.num_devices * shape.padded_tokens
                             * WORD_SHARE_BUILD_BYTES_PER_TOKEN + shares // shape.num_slots)
    heap = max(building, layout + sharing)
    if pinned_pool:
        return int(heap + shape.own_devices * pinned_pool_bytes(pinned // shape.own_devices))
    return int(max(building + (0 if layout_on_host else chunks),
                   layout + chunks + shares + sharing, pinned))


def coarse(tokens: int) -> int:
    """tokens rounded down to four significant bits (less than 12.5% less), so that the few MB
    a process holds more or less from run to run give the same chunking, and the next run
    finds its chunk store instead of building it again."""
    drop = max(tokens.bit_length() - 4, 0)
    return tokens >> drop << drop


def host_room(corpus: Corpus, hyper: Hyperparams, host_budget: int) -> tuple[int, int]:
    """(room, model): bytes a host memory budget leaves beside what the process holds
    already (memory.anonymous_host_memory), and host bytes of the trained model
    (memory.host_model_bytes)."""
    return (host_budget - memory.anonymous_host_memory(),
            memory.host_model_bytes(corpus.num_words, hyper.padded_topics,
                                    corpus.num_tokens if hyper.sparse else None))


def only_a_store_fits(corpus: Corpus, hyper: Hyperparams, host_budget: int, held: int) -> bool:
    """Whether the model fits a host memory budget but the chunks and states the host would
    hold beside it (`held` bytes, held_bytes) do not (a chunk store holds them then)."""
    room, model = host_room(corpus, hyper, host_budget)
    return model <= room < model + held


def plan_store_chunk_tokens(corpus: Corpus, hyper: Hyperparams, host_budget: int,
                            prefetch: int, held: int) -> int | None:
    """Tokens per chunk for streaming from a chunk store on disk under a host memory budget
    (bytes, of which the process holds memory.anonymous_host_memory already): None when the
    chunks and states held in host memory (`held` bytes, held_bytes) fit the budget beside
    the model (streaming from host memory).
    Chunks are small enough for chunk_store.BUILD_WORKERS builders (or as many as the cores)
    where the room allows, else for one.  The chunks of a store are gone when the model is
    fetched, so either fits the room on its own.
    ValueError, naming host_memory_gb, when the room cannot hold the model or one chunk."""
    room, model = host_room(corpus, hyper, host_budget)
    if model + held <= room:
        return None
    needed = max(int(corpus.doc_lengths().max(initial=0)), 1024)
    workers = min(os.cpu_count() or 1, chunk_store.BUILD_WORKERS)
    tokens = coarse(chunk_store.host_chunk_tokens(max(room, 0), prefetch, workers))
    if tokens < needed:  # fewer builders, larger chunks
        tokens = coarse(chunk_store.host_chunk_tokens(max(room, 0), prefetch))
    if tokens < needed or model > room:
        raise ValueError(
            f"host_memory_gb={host_budget / 1e9:.3g} cannot hold one chunk and the model: "
            f"beside the {(host_budget - room) / 1e9:.2f} GB this process holds it leaves room "
            f"for chunks of {tokens:,} tokens (a chunk needs {needed:,}: 1,024 or the longest "
            f"document) and the model needs {model / 1e9:.2f} GB; raise host_memory_gb")
    return tokens
