"""A corpus's word ids file cut into parts, so that many processes write it at once: a file
takes one writer at a time (its lock), while each part is a file of its own.

The parts of `word_ids.npy` are that file (the .npy header and the first ids) followed by
`word_ids.npy.1`, `word_ids.npy.2`, ...; their bytes, in order, are the one file's, byte for
byte (a corpus of one part is the one file).  Each part but the last holds `part_bytes` bytes
of the whole, a multiple of LARGEST_PAGE, so that the parts map as one array with no copy
(WordIdParts.mapped: each part's file mapped at its place in one range of addresses
reserved for the whole).  The number of parts depends only on the corpus's tokens, never on
who wrote them.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from saberjax import files
from saberjax.errors import CorpusFormatError

LARGEST_PAGE = 1 << 16  # the largest memory page of the systems the parts map on (64 KiB)
PART_BYTES = 1 << 25  # bytes of the whole in each part but the last
_MAP_FIXED = 0x10  # mmap's flag, the same on Linux and macOS: map at the address given


class WordIdParts(NamedTuple):
    """The files holding word ids [0, num_tokens) (int32, little-endian) of a whole whose
    first id lies `data_start` bytes in, each file `part_bytes` bytes of it (the last
    fewer)."""

    paths: tuple[str, ...]
    part_bytes: int
    data_start: int
    num_tokens: int

    def write(self, ids: np.ndarray, start: int, write_back: bool = False) -> None:
        """Writes `ids` as ids start, start + 1, ... of the whole, each part's share by write()
        into its file, its write-back to disk started at once where `write_back` says
        (files.start_write_back)."""
        data = memoryview(np.ascontiguousarray(ids, "<i4")).cast("B")
        offset = self.data_start + 4 * start
        while data:
            part, within = divmod(offset, self.part_bytes)
            size = min(len(data), self.part_bytes - within)
            with open(self.paths[part], "r+b") as file:
                files.write_at(file.fileno(), data[:size], within)
                if write_back:
                    files.start_write_back(file.fileno(), within, size)
            data, offset = data[size:], offset + size

    def read(self) -> np.ndarray:
        """The word ids, read into memory."""
        whole = bytearray(self.data_start + 4 * self.num_tokens)
        view = memoryview(whole)
        for part, path in enumerate(self.paths):
            with open(path, "rb") as file:
                file.readinto(view[part * self.part_bytes:(part + 1) * self.part_bytes])
        return np.frombuffer(whole, "<i4", self.num_tokens, self.data_start)

    def mapped(self) -> np.ndarray:
        """The word ids memory-mapped read-only as one np.memmap (mode "r", so that
        word_ids.release_mapped drops its pages): each part's file mapped at its place in a
        range of addresses reserved for the whole; read into memory (read) where the system
        has no mmap or its pages do not divide the parts."""
        total = self.data_start + 4 * self.num_tokens
        map_file = _mmap()
        if map_file is None or self.part_bytes % mmap.ALLOCATIONGRANULARITY or total == 0:
            return self.read()
        region = mmap.mmap(-1, total, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
        try:
            base = np.frombuffer(region, np.uint8).ctypes.data
            for part, path in enumerate(self.paths):
                address = base + part * self.part_bytes
                size = min(self.part_bytes, total - part * self.part_bytes)
                handle = os.open(path, os.O_RDONLY)
                try:
                    mapped = map_file(address, size, mmap.PROT_READ,
                                      mmap.MAP_SHARED | _MAP_FIXED, handle, 0)
                finally:
                    os.close(handle)
                if mapped != address:
                    error = ctypes.get_errno()
                    raise OSError(error, f"mapping {path}: {os.strerror(error)}")
        except BaseException:
            region.close()
            raise
        array = np.ndarray.__new__(np.memmap, (self.num_tokens,), np.dtype("<i4"),
                                   buffer=region, offset=self.data_start)
        array._mmap, array.offset, array.mode = region, self.data_start, "r"
        array.filename = os.path.abspath(self.paths[0])
        return array


def part_count(total_bytes: int, part_bytes: int = PART_BYTES) -> int:
    """Parts of a whole of `total_bytes` (at least one)."""
    return max(1, math.ceil(total_bytes / part_bytes))


def part_paths(first: Path, count: int) -> list[Path]:
    """The files of `count` parts whose first is `first`."""
    first = Path(first)
    return [first] + [first.with_name(f"{first.name}.{part}") for part in range(1, count)]


def sized_parts(first: Path, data_start: int, num_tokens: int,
                part_bytes: int = PART_BYTES) -> WordIdParts:
    """The parts of a whole of `num_tokens` word ids after `data_start` bytes, their files
    (the first's bytes before data_start kept, where it exists) sized and their blocks
    allocated (files.allocate: OSError when the disk lacks the space), for writers to fill."""
    if part_bytes <= 0 or part_bytes % LARGEST_PAGE:
        raise ValueError(f"part_bytes must be a positive multiple of {LARGEST_PAGE}, "
                         f"got {part_bytes}")
    total = data_start + 4 * num_tokens
    paths = part_paths(first, part_count(total, part_bytes))
    for part, path in enumerate(paths):
        size = min(part_bytes, total - part * part_bytes)
        handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(handle, size)
            files.allocate(handle, data_start if part == 0 else 0,
                           size - (data_start if part == 0 else 0))
        finally:
            os.close(handle)
    return WordIdParts(tuple(map(str, paths)), part_bytes, data_start, num_tokens)


def found_parts(first: Path, count: int, part_bytes: int) -> WordIdParts:
    """The `count` parts of an int32 .npy file whose first is `first` (the header's shape
    gives the ids), each checked to hold its bytes of the whole.  CorpusFormatError naming
    the file that is missing, unreadable or of another size."""
    paths = part_paths(first, count)
    try:
        with open(first, "rb") as file:
            version = np.lib.format.read_magic(file)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, fortran_order, dtype = read_header(file)
            data_start = file.tell()
    except FileNotFoundError:
        raise CorpusFormatError(f"{first}: file not found") from None
    except (OSError, ValueError) as error:
        raise CorpusFormatError(f"{first}: not a readable .npy file ({error})") from error
    if len(shape) != 1 or dtype != np.dtype("<i4") or fortran_order:
        raise CorpusFormatError(f"{first}: expected a 1-D int32 array, found {dtype} with "
                                f"shape {shape}")
    total = data_start + 4 * shape[0]
    if part_count(total, part_bytes) != count:
        raise CorpusFormatError(f"{first}: {shape[0]} word ids fill "
                                f"{part_count(total, part_bytes)} parts of {part_bytes} "
                                f"bytes, not {count}")
    for part, path in enumerate(paths):
        expected = min(part_bytes, total - part * part_bytes)
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            raise CorpusFormatError(f"{path}: file not found") from None
        if size != expected:
            raise CorpusFormatError(f"{path}: holds {size} bytes, expected {expected} (part "
                                    f"{part + 1} of {count} of the word ids)")
    return WordIdParts(tuple(map(str, paths)), part_bytes, data_start, shape[0])


def _mmap():
    """The C library's mmap (returning the address), or None where there is none."""
    return files.c_function("mmap", ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                            ctypes.c_int, ctypes.c_int, ctypes.c_int64, restype=ctypes.c_void_p)
