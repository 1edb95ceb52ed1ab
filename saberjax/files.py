"""Writing files that appear whole or not at all, fast: atomic writes (a temporary name beside
the file, fsynced, renamed over it), positioned writes, durable renames, and .npz archives
written in pieces by a thread per core with their CRC-32s combined.

The model (model.npz, vocab.txt, config.json), checkpoints, the chunk store, reports and the
launchers' outputs all write through here.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import errno
import functools
import io
import os
import pathlib
import struct
import tempfile
import zlib
from typing import Any, Callable

import numpy as np

from saberjax.platform import cpu_cores

PIECE_BYTES = 32 << 20  # bytes per task of write_npz: checksummed and written by one thread


def atomic_write(path: pathlib.Path, write: Callable[[Any], None], mode: str = "wb",
                 beside: pathlib.Path | None = None) -> None:
    """Call write(file) on a temporary file beside `path`, then rename it over `path`.  An
    OSError of the writing (a full disk) names `path` (writes to an open file name none).
    beside: the file or folder the temporary is a hidden sibling of instead (a folder of
    `path`'s, such as a cache entry whose files are checked, then holds no temporary)."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    beside = path if beside is None else pathlib.Path(beside)
    handle, temporary = tempfile.mkstemp(prefix=f".{beside.name}.", suffix=".tmp",
                                         dir=beside.parent)
    try:
        with os.fdopen(handle, mode) as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o644)  # mkstemp creates owner-only files
        os.replace(temporary, path)
    except OSError as error:
        pathlib.Path(temporary).unlink(missing_ok=True)
        if error.filename is not None or error.errno is None:
            raise
        raise OSError(error.errno, error.strerror, str(path)) from error
    except BaseException:
        pathlib.Path(temporary).unlink(missing_ok=True)
        raise


def write_at(fd: int, data, offset: int) -> None:
    """Write all of `data` (a bytes-like object) into the file `fd` at `offset` (os.pwrite
    writes part of a large buffer at a time)."""
    view = memoryview(data).cast("B")
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def allocate(fd: int, offset: int, size: int) -> None:
    """Allocate the file's blocks of the byte range (Linux's fallocate, the file's size
    unchanged within it), so that writers filling the range find its blocks there rather than
    each reserving them as it writes; nothing where the system or file system has no such
    call.  OSError when the disk lacks the space."""
    fallocate = _fallocate()
    if fallocate is None or size <= 0:
        return
    if fallocate(fd, 0, offset, size) != 0:
        error = ctypes.get_errno()
        if error == errno.ENOSPC:
            raise OSError(error, os.strerror(error))


@functools.cache
def c_function(name: str, *argtypes, restype=ctypes.c_int):
    """The C library's function `name` taking argtypes and returning restype (errno kept for
    ctypes.get_errno), or None where the system's C library has no such function."""
    try:
        function = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    function.argtypes, function.restype = argtypes, restype
    return function


def _fallocate():
    """The C library's fallocate, or None where there is none."""
    return c_function("fallocate", ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)


_SYNC_FILE_RANGE_WRITE = 2  # Linux's flag: start writing the range's dirty pages, not waiting


def start_write_back(fd: int, offset: int, size: int) -> None:
    """Start writing the file's dirty pages of the byte range to disk, not waiting for them
    (Linux's sync_file_range; elsewhere nothing), so that a later fsync waits for little."""
    sync_file_range = _sync_file_range()
    if sync_file_range is not None:
        sync_file_range(fd, offset, size, _SYNC_FILE_RANGE_WRITE)


def _sync_file_range():
    """The C library's sync_file_range, or None where there is none."""
    return c_function("sync_file_range", ctypes.c_int, ctypes.c_int64, ctypes.c_int64,
                      ctypes.c_uint)


def fsync_path(path) -> None:
    """Makes what was written to the file or directory at `path` durable (fsync through a
    read-only handle of its own)."""
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def fsync_directory(directory: pathlib.Path) -> None:
    """Make the renames into `directory` durable before anything older is deleted."""
    fsync_path(directory)


def crc32_combine(crc1: int, crc2: int, length2: int) -> int:
    """CRC-32 of A + B from crc1 = crc32(A), crc2 = crc32(B) and length2 = len(B), computed as
    zlib's crc32_combine does: crc1 times x^(8 length2) modulo the CRC polynomial, plus crc2.

    x^(8 length2) is the product of x^(2^(n + 3)) over the set bits n of length2, each read
    from a table of 32 (x^(2^32) is x modulo the polynomial), so the cost grows with
    log2(length2), and pieces checksummed in parallel combine in microseconds.
    """
    shift, power = 1 << 31, 3  # x^0 in the reflected bit order; 8 = 2^3
    while length2:
        if length2 & 1:
            shift = _multiply_mod_crc32(_X_TO_2_TO_N[power & 31], shift)
        length2 >>= 1
        power += 1
    return _multiply_mod_crc32(shift, crc1) ^ crc2


def _multiply_mod_crc32(a: int, b: int) -> int:
    """a times b modulo the CRC-32 polynomial, both in its reflected bit order (zlib's
    multmodp); a must not be 0."""
    product, bit = 0, 1 << 31
    while True:
        if a & bit:
            product ^= b
            if a & (bit - 1) == 0:
                return product
        bit >>= 1
        b = (b >> 1) ^ _CRC32_POLYNOMIAL if b & 1 else b >> 1


_CRC32_POLYNOMIAL = 0xEDB88320  # reflected
_X_TO_2_TO_N = [1 << 30]  # x^(2^n) modulo the polynomial, n = 0..31
for _ in range(31):
    _X_TO_2_TO_N.append(_multiply_mod_crc32(_X_TO_2_TO_N[-1], _X_TO_2_TO_N[-1]))


def write_npz(fd: int, arrays: dict[str, Callable[[], Any]]) -> None:
    """Write the arrays into the empty file `fd` as np.savez does (uncompressed: members
    NAME.npy in order, as np.save writes them, zip64 local headers as force_zip64 writes them).

    The array bytes go in PIECE_BYTES pieces to a thread per core, each checksumming its piece
    and writing it at its known offset (os.pwrite), so neither the CRC-32 nor the copy into
    the page cache is one serial pass (buffered writes to one file may still take turns on
    the file's lock; the checksums run meanwhile); a member's CRC is combined from its
    pieces'. An array is asked for (arrays[name]()) once the ones before it are queued, so
    computing the last overlaps writing the others. The local headers, which hold the CRCs,
    and the central directory (zip64 fields for every member, zip64 end records) are written
    last; the file is not fsynced here.
    """
    members, offset = [], 0
    with concurrent.futures.ThreadPoolExecutor(cpu_cores()) as pool:
        for name, value in arrays.items():
            array = np.asarray(value(), order="C")
            header, data = _npy_header(array), array.reshape(-1).view(np.uint8)
            filename = f"{name}.npy".encode()
            start = offset + len(_local_header(filename, 0, 0))
            pieces = [(header, start)] + [
                (data[first : first + PIECE_BYTES], start + len(header) + first)
                for first in range(0, len(data), PIECE_BYTES)]
            written = [pool.submit(_write_piece, fd, *piece) for piece in pieces]
            size = len(header) + len(data)
            members.append((filename, offset, size, written))
            offset = start + size
        directory = []
        for filename, at, size, written in members:
            crc = 0
            for piece in written:
                crc = crc32_combine(crc, *piece.result())
            write_at(fd, _local_header(filename, crc, size), at)
            directory.append(_central_header(filename, crc, size, at))
    write_at(fd, b"".join(directory) + _end_records(len(members), sum(map(len, directory)),
                                                    offset), offset)


def _npy_header(array: np.ndarray) -> bytes:
    """The .npy header np.save writes before a C-ordered array's bytes (format 1.0)."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, np.lib.format.header_data_from_array_1_0(array))
    return header.getvalue()


def _write_piece(fd: int, data, offset: int) -> tuple[int, int]:
    """Write data at offset; its CRC-32 and length."""
    crc = zlib.crc32(data)
    write_at(fd, data, offset)
    return crc, len(data)


# ZIP_STORED records as zipfile writes them: version 4.5 (zip64), no flags, 1980-01-01 00:00,
# 32-bit sizes and offsets 0xFFFFFFFF with the values in the zip64 extra field (id 1).
_ZIP64, _FULL, _DOS_DATE = 45, 0xFFFF_FFFF, (1 << 5) | 1


def _local_header(filename: bytes, crc: int, size: int) -> bytes:
    extra = struct.pack("<2H2Q", 1, 16, size, size)
    return struct.pack("<4s5H3L2H", b"PK\x03\x04", _ZIP64, 0, 0, 0, _DOS_DATE, crc, _FULL,
                       _FULL, len(filename), len(extra)) + filename + extra


def _central_header(filename: bytes, crc: int, size: int, offset: int) -> bytes:
    extra = struct.pack("<2H3Q", 1, 24, size, size, offset)
    return struct.pack("<4s2B5H3L5H2L", b"PK\x01\x02", _ZIP64, 3, _ZIP64, 0, 0, 0, _DOS_DATE,
                       crc, _FULL, _FULL, len(filename), len(extra), 0, 0, 0,
                       0o600 << 16, _FULL) + filename + extra  # made on Unix (3), rw-------


def _end_records(count: int, size: int, offset: int) -> bytes:
    """Zip64 end of central directory record and locator, then the end record, for a
    central directory of `count` entries, `size` bytes at `offset`."""
    return (struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, _ZIP64, _ZIP64, 0, 0, count, count,
                        size, offset)
            + struct.pack("<4sLQL", b"PK\x06\x07", 0, offset + size, 1)
            + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, min(count, 0xFFFF),
                          min(count, 0xFFFF), min(size, _FULL), min(offset, _FULL), 0))
