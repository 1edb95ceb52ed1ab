"""The chunk store's files as fixed-size slot records: every field of a slot for every device
of the mesh, field after field ([devices, ...], one read a slot), read and written in pieces of
IO_PIECE_BYTES by threads at once, through pinned host memory.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os

import jax
import jax.numpy as jnp
import numpy as np

from saberjax import compilation, files
from saberjax.chunk_compact import COMPACT_FIELDS
from saberjax.config import Hyperparams
from saberjax.layout import TILE_TOKENS, LayoutPlan, max_tiles

IO_PIECE_BYTES = 1 << 25  # the pieces a slot's read or write is cut into for the threads


class ChunkStoreError(OSError):
    """A chunk store that cannot be built or used (no room on the disk, in use by another
    run); the message names the folder and the flag that chooses another."""


@dataclasses.dataclass(frozen=True)
class Field:
    """One array of a slot record: its name, shape per device and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype

    def nbytes(self, devices: int) -> int:
        return devices * int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


@dataclasses.dataclass(frozen=True)
class Records:
    """Fixed-size slot records of a file: every field for every device, field after field."""

    fields: tuple[Field, ...]
    devices: int
    slots: int

    @property
    def slot_bytes(self) -> int:
        return sum(field.nbytes(self.devices) for field in self.fields)

    @property
    def device_bytes(self) -> int:
        """Bytes of one device's part of a slot (what read_into reads into a buffer)."""
        return sum(field.nbytes(1) for field in self.fields)

    @property
    def file_bytes(self) -> int:
        return self.slots * self.slot_bytes

    def offset(self, slot: int, name: str) -> int:
        """Where field `name` of a slot starts in the file."""
        before = 0
        for field in self.fields:
            if field.name == name:
                return slot * self.slot_bytes + before
            before += field.nbytes(self.devices)
        raise KeyError(name)

    def read_into(self, pool: concurrent.futures.Executor, fd: int, slot: int, device: int,
                  destination: np.ndarray) -> list[concurrent.futures.Future]:
        """Start reading one device's part of every field of a slot into a uint8 buffer (field
        after field, as `unpack` expects), in pieces of IO_PIECE_BYTES read by the pool's
        threads at once; returns the pieces' futures."""
        pieces, at = [], 0
        for field in self.fields:
            size = field.nbytes(1)
            offset = self.offset(slot, field.name) + device * size
            pieces += [pool.submit(read_exactly, fd, offset + start,
                                   destination[at + start: at + min(start + IO_PIECE_BYTES,
                                                                    size)])
                       for start in range(0, size, IO_PIECE_BYTES)]
            at += size
        return pieces

    def unpack(self, raw: jax.Array, at: int = 0) -> dict[str, jax.Array]:
        """The fields [devices, ...] of raw bytes [devices, n] read by read_into from byte `at`
        on; jax, so that it runs on the devices."""
        found = {}
        for field in self.fields:
            size, count = field.nbytes(1), int(np.prod(field.shape, dtype=np.int64))
            part = raw[:, at: at + size].reshape(raw.shape[0], count, field.dtype.itemsize)
            found[field.name] = jax.lax.bitcast_convert_type(part, field.dtype).reshape(
                raw.shape[0], *field.shape)
            at += size
        return found

    def write(self, fd: int, slot: int, arrays: dict[str, np.ndarray],
              pool: concurrent.futures.Executor | None = None) -> None:
        """Every field of a slot from [devices, ...] arrays, in pieces of IO_PIECE_BYTES
        written by the pool's threads at once (None: by this thread)."""
        offset = self.offset(slot, self.fields[0].name)
        pieces = []
        for field in self.fields:
            data = memoryview(np.ascontiguousarray(arrays[field.name], field.dtype)
                              .reshape(-1)).cast("B")
            pieces += [(offset + start, data[start: start + IO_PIECE_BYTES])
                       for start in range(0, len(data), IO_PIECE_BYTES)]
            offset += len(data)
        if pool is None:
            for at, piece in pieces:
                files.write_at(fd, piece, at)
            return
        for done in [pool.submit(files.write_at, fd, piece, at) for at, piece in pieces]:
            done.result()

    def views(self, mapped: np.ndarray, slot: int) -> dict[str, np.ndarray]:
        """Read-only [devices, ...] views of a slot's fields in a memory map of the file."""
        return {field.name: mapped[self.offset(slot, field.name):][: field.nbytes(self.devices)]
                .view(field.dtype).reshape(self.devices, *field.shape) for field in self.fields}


def read_exactly(fd: int, offset: int, buffer: np.ndarray) -> None:
    """Fill a uint8 buffer from the file at offset."""
    done = 0
    while done < buffer.size:
        count = os.preadv(fd, [memoryview(buffer)[done:]], offset + done)
        if count == 0:
            raise ChunkStoreError(f"chunk store file ends at byte {offset + done:,}, "
                                  f"{buffer.size - done:,} bytes short (truncated)")
        done += count


def pinned_rows(sharding: jax.sharding.NamedSharding, size: int,
                 dtype) -> tuple[jax.Array, list[np.ndarray]]:
    """Pinned host memory [devices, size] of dtype laid out by `sharding`, and writable numpy
    views of each device's row (filled in place through their addresses, then put on the
    devices as one pinned-to-device copy)."""
    devices = sharding.mesh.size
    raw = compilation.jit(lambda: jnp.zeros((devices, size), dtype),
                          out_shardings=sharding.with_memory_kind("pinned_host"))()
    rows = {shard.index[0].start or 0: shard.data for shard in raw.addressable_shards}
    c_type = np.ctypeslib.as_ctypes_type(np.dtype(dtype))
    return raw, [np.ctypeslib.as_array((c_type * size).from_address(
        jax.block_until_ready(rows[device]).unsafe_buffer_pointer()))
                 for device in range(devices)]


def static_records(plan: LayoutPlan, num_words: int, devices: int) -> Records:
    tokens, docs = plan.padded_tokens, plan.padded_docs
    runs = min(num_words, tokens) + 1  # the last run (of no tokens) sets the padding to word 0
    shapes = dict(doc_major_pos=(tokens,), doc_start=(docs + 1,),
                  tile_start=(max_tiles(tokens, num_words, TILE_TOKENS) + 1,), run_word=(runs,),
                  run_tokens=(runs,), num_tokens=(), token_base=(1, 2))
    return Records(tuple(Field(name, shapes[name], np.dtype(np.uint32 if name == "token_base"
                                                              else np.int32))
                          for name in COMPACT_FIELDS),
                    devices, len(plan.chunk_docs) // devices)


def state_records(plan: LayoutPlan, hyper: Hyperparams, devices: int) -> Records:
    tokens, docs = plan.padded_tokens, plan.padded_docs
    return Records((Field("topics", (tokens,), np.dtype(hyper.topic_dtype)),),
                    devices, len(plan.chunk_docs) // devices)
