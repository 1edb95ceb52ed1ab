"""Files are written whole or not at all, and pieces checksummed in parallel combine into the
checksum of the whole."""

import zlib

import numpy as np
import pytest

from saberjax.files import atomic_write, crc32_combine


def test_an_atomic_write_that_fails_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "record.txt"
    atomic_write(path, lambda file: file.write("old"), mode="w")

    def failing(file):
        file.write("half of the new")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(path, failing, mode="w")
    assert [entry.name for entry in tmp_path.iterdir()] == ["record.txt"]
    assert path.read_text() == "old"
    atomic_write(path, lambda file: file.write("new"), mode="w")
    assert path.read_text() == "new" and oct(path.stat().st_mode & 0o777) == "0o644"


def test_an_atomic_write_beside_a_folder_keeps_its_temporary_out_of_it(tmp_path):
    """A cache entry, whose files are checked, never holds a temporary (cut short or not)."""
    entry = tmp_path / "entry"
    entry.mkdir()
    seen = []

    def write(file):
        seen.append((sorted(p.name for p in entry.iterdir()),
                     sorted(p.name for p in tmp_path.iterdir())))
        file.write("record")

    atomic_write(entry / "source.json", write, mode="w", beside=entry)
    (in_entry, beside_entry), = seen
    assert in_entry == [] and [name for name in beside_entry if name.startswith(".entry.")]
    assert (entry / "source.json").read_text() == "record"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry"]


def test_crc32_combine_gives_the_crc_of_the_concatenation():
    rng = np.random.default_rng(3)
    data = rng.integers(0, 256, 100_000, dtype=np.uint8).tobytes()
    for _ in range(200):
        cuts = np.sort(rng.integers(0, len(data) + 1, rng.integers(1, 6)))
        cuts = np.sort(np.concatenate([[0], cuts, cuts[:1], [len(data)]]))  # cuts[0] twice:
        # an empty piece
        pieces = [data[a:b] for a, b in zip(cuts[:-1], cuts[1:])]
        crc = 0
        for piece in pieces:
            crc = crc32_combine(crc, zlib.crc32(piece), len(piece))
        assert crc == zlib.crc32(b"".join(pieces))
    head, zeros = b"head", bytes(1 << 24)
    alone, after_head = 0, zlib.crc32(head)  # 33 x 16 MiB of zeros: length2 has bit 29 set,
    # where the table of x^(2^n) wraps round (n = 29 + 3)
    for _ in range(33):
        alone, after_head = zlib.crc32(zeros, alone), zlib.crc32(zeros, after_head)
    assert crc32_combine(zlib.crc32(head), alone, 33 << 24) == after_head


def test_ranges_written_in_any_order_with_their_write_back_make_the_file(tmp_path):
    from saberjax.files import allocate, start_write_back, write_at

    values = np.arange(10_000, dtype=np.int32)
    path = tmp_path / "ids"
    with open(path, "wb") as file:
        file.truncate(100 + values.nbytes)  # at an offset that is not a page's
        allocate(file.fileno(), 100, values.nbytes)  # where the file system can: same bytes
        allocate(file.fileno(), 0, 0)  # nothing
    assert path.read_bytes() == bytes(100 + values.nbytes)  # allocated blocks read as zeros
    with open(path, "r+b") as file:
        for part, write_back in zip(np.array_split(np.arange(values.size), 4)[::-1],
                                    (True, False, True, False)):
            write_at(file.fileno(), values[part], 100 + 4 * int(part[0]))
            if write_back:
                start_write_back(file.fileno(), 100 + 4 * int(part[0]), values[part].nbytes)
        write_at(file.fileno(), values[:0], 100)  # nothing to write
    assert path.read_bytes() == bytes(100) + values.tobytes()


def test_allocated_blocks_are_the_file_systems_where_it_allocates(tmp_path):
    from saberjax.files import _fallocate, allocate

    probe, path = tmp_path / "probe", tmp_path / "ids"
    with open(probe, "wb") as file:
        if _fallocate() is None or _fallocate()(file.fileno(), 0, 0, 1 << 20) != 0:
            pytest.skip("the system or file system allocates no blocks ahead")
    with open(path, "wb") as file:
        file.truncate(4096 + (1 << 20))
        allocate(file.fileno(), 4096, 1 << 20)
    assert path.stat().st_size == 4096 + (1 << 20)  # not grown
    assert path.stat().st_blocks * 512 >= 1 << 20  # a truncated file has none
