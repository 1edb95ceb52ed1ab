"""Hash tables in numpy: uint64 keys and byte strings numbered by whole-array passes, never a
Python object per key, so that a tokenising thread numbers its block's words with the GIL
released and the text path needs no other library.

- `number_keys(keys)`: a batch's distinct keys and each key's index among them (a dictionary
  encoding).  Every key is scattered into a table of 2**bits slots at a multiplicative hash
  (any one key of a slot stays), read back, and the keys that find another key in their slot
  go through the same with another multiplier into a table of their own, until none is left:
  each round settles every slot's key, so it ends; a few per cent of the keys take a second.
- `KeyTable`: distinct keys numbered across batches (a corpus's words as its pieces arrive),
  open addressing with linear probing, every probe a whole-array pass over the batch's keys
  not yet found.
- `Strings`: byte strings as one buffer with offsets; `Runs`: byte strings where they lie in
  a buffer (a text's words); `chunk_hashes` a 64-bit hash of each (its bytes read 8 at a time,
  `Chunks`, each uint64 mixed with its place, summed over the string, mixed with its length);
  `number_runs` and `StringTable` number strings by their hashes and then compare every
  string with the one its number stands for, byte for byte, so that two strings of one hash
  are told apart (by a Python dictionary of their bytes, the rare path).

Key 0 marks an empty slot: keys are never 0 (hashes are made odd).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

# odd multipliers of the hash rounds (Fibonacci hashing: the top bits of key * multiplier)
_MULTIPLIERS = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                         0xD6E8FEB86659FD93, 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53],
                        np.uint64)
MIN_BITS, MAX_FIRST_BITS = 10, 16  # a batch's first table: 2**10 to 2**16 slots


def _slots(keys: np.ndarray, bits: int, round_: int = 0) -> np.ndarray:
    """Each key's slot in a table of 2**bits (int64, for indexing)."""
    product = keys * _MULTIPLIERS[round_ % _MULTIPLIERS.size]
    product >>= np.uint64(64 - bits)
    return product.view(np.int64)


def number_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct keys of a uint64 batch, never 0, in the order of their numbers; each
    key's number, int32) (see the module)."""
    keys = np.asarray(keys, np.uint64)
    bits = min(max(int(keys.size).bit_length(), MIN_BITS), MAX_FIRST_BITS)
    return _numbered(keys, bits, 0)


def _numbered(keys: np.ndarray, bits: int, round_: int) -> tuple[np.ndarray, np.ndarray]:
    slot = _slots(keys, bits, round_)
    table = np.zeros(1 << bits, np.uint64)
    table[slot] = keys
    missed = np.flatnonzero(table.take(slot) != keys)
    occupied = np.flatnonzero(table != 0)  # bool: numpy's fast nonzero
    number = np.empty(1 << bits, np.int32)  # read at every key's slot, each one occupied
    number[occupied] = np.arange(occupied.size, dtype=np.int32)
    numbers = number.take(slot)
    distinct = table.take(occupied)
    if missed.size:
        rest_bits = max(int(missed.size).bit_length() + 1, MIN_BITS)
        rest, rest_numbers = _numbered(keys.take(missed), rest_bits, round_ + 1)
        numbers[missed] = rest_numbers + occupied.size
        distinct = np.concatenate([distinct, rest])
    return distinct, numbers


class KeyTable:
    """Distinct uint64 keys (never 0) numbered 0, 1, ... in the order they are first given
    (see the module); at most half its slots are used."""

    def __init__(self):
        self._keys = np.zeros(1 << MIN_BITS, np.uint64)
        self._numbers = np.zeros(1 << MIN_BITS, np.int64)
        self.size = 0

    def numbers(self, keys: np.ndarray) -> np.ndarray:
        """The numbers (int64) of distinct keys, those not yet in the table numbered on from
        size in the order given."""
        keys = np.asarray(keys, np.uint64)
        if 2 * (self.size + keys.size) > self._keys.size:
            self._grow(self.size + keys.size)
        return self._placed(keys, None)

    def keys(self) -> np.ndarray:
        """Every key, in the order of their numbers."""
        occupied = np.flatnonzero(self._keys != 0)
        ordered = np.empty(self.size, np.uint64)
        ordered[self._numbers[occupied]] = self._keys[occupied]
        return ordered

    def _grow(self, size: int) -> None:
        occupied = np.flatnonzero(self._keys != 0)
        keys, numbers = self._keys[occupied], self._numbers[occupied]
        capacity = 1 << max(int(4 * size - 1).bit_length(), MIN_BITS)
        self._keys = np.zeros(capacity, np.uint64)
        self._numbers = np.zeros(capacity, np.int64)
        self.size = 0
        self._placed(keys, numbers)

    def _placed(self, keys: np.ndarray, given: np.ndarray | None) -> np.ndarray:
        """The keys' numbers: found in the table, or placed in the first free slot of their
        probe sequence and numbered on from size in the order given (or by `given`, when the
        table is rebuilt).  Keys competing for a free slot are scattered into it together:
        the one that stays has it, the others probe on."""
        mask = self._keys.size - 1
        slot = _slots(keys, mask.bit_length())
        numbers = self._numbers.take(slot)  # right for the keys found in their first slot
        pending = np.flatnonzero(self._keys.take(slot) != keys)
        placed = np.zeros(keys.size, bool)
        while pending.size:
            wanted, at = keys[pending], slot[pending]
            found = self._keys.take(at)
            hit = found == wanted
            numbers[pending[hit]] = self._numbers.take(at[hit])
            free = np.flatnonzero(found == 0)
            if free.size:
                self._keys[at[free]] = wanted[free]
                won = free[self._keys.take(at[free]) == wanted[free]]
                placed[pending[won]] = True
                hit[won] = True
            slot[pending[~hit]] = (at[~hit] + 1) & mask
            pending = pending[~hit]
        new = np.flatnonzero(placed)  # in the order given
        numbers[new] = (np.arange(self.size, self.size + new.size) if given is None
                        else given[new])
        self._numbers[slot[new]] = numbers[new]
        self.size += new.size
        return numbers


class Strings(NamedTuple):
    """Byte strings: string i is data[offsets[i]:offsets[i + 1]] (uint8, int64 [n + 1])."""

    data: np.ndarray
    offsets: np.ndarray

    @staticmethod
    def empty() -> Strings:
        return Strings(np.zeros(0, np.uint8), np.zeros(1, np.int64))

    @staticmethod
    def of(values: list[bytes]) -> Strings:
        offsets = np.zeros(len(values) + 1, np.int64)
        np.cumsum([len(value) for value in values], out=offsets[1:])
        return Strings(np.frombuffer(b"".join(values), np.uint8), offsets)

    @staticmethod
    def concatenate(parts: list[Strings]) -> Strings:
        """The strings of every part, in order."""
        sizes = np.cumsum([0] + [part.data.size for part in parts[:-1]])
        return Strings(np.concatenate([part.data for part in parts] + [np.zeros(0, np.uint8)]),
                       np.concatenate([np.zeros(1, np.int64)] + [
                           part.offsets[1:] + size for part, size in zip(parts, sizes)]))

    def __len__(self) -> int:
        return self.offsets.size - 1

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def tolist(self) -> list[bytes]:
        raw, offsets = self.data.tobytes(), self.offsets.tolist()
        return [raw[start:end] for start, end in zip(offsets[:-1], offsets[1:])]

    def take(self, indices: np.ndarray) -> Strings:
        """The strings at `indices`, in that order."""
        indices = np.asarray(indices, np.int64)
        lengths = self.lengths()[indices]
        offsets = np.zeros(indices.size + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return Strings(self.data[byte_ranges(self.offsets[indices], lengths)], offsets)


def byte_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated index ranges [starts[i], starts[i] + lengths[i])."""
    ends = np.cumsum(lengths)
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(ends[-1] if ends.size else 0)


_BYTE_MIX = np.uint64(0xFF51AFD7ED558CCD)
_LENGTH_MIX = np.uint64(0xC4CEB9FE1A85EC53)
# _LOW_BYTES[k]: the low k bytes of a uint64 (k >= 8: all of them)
_LOW_BYTES = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [2**64 - 1], np.uint64)


def _mixed(values: np.ndarray) -> np.ndarray:
    """A 64-bit finaliser (murmur3's) of uint64 values, in place."""
    values ^= values >> np.uint64(33)
    values *= _BYTE_MIX
    values ^= values >> np.uint64(33)
    values *= _LENGTH_MIX
    values ^= values >> np.uint64(33)
    return values


class Runs(NamedTuple):
    """Byte strings lying in a buffer: string i is buffer[starts[i]:starts[i] + lengths[i]]
    (uint8; int64 [n] each), with at least 8 bytes of the buffer after each string's start
    (RUN_PADDING after the last string), so that the strings are read 8 bytes at a time where
    they lie (a tokeniser's words in its text, say)."""

    buffer: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray

    @staticmethod
    def of(strings: Strings) -> Runs:
        """The strings as runs of a padded copy of their data."""
        return Runs(np.concatenate([strings.data, np.zeros(RUN_PADDING, np.uint8)]),
                    strings.offsets[:-1], strings.lengths())

    def __len__(self) -> int:
        return self.starts.size

    def strings(self, indices: np.ndarray) -> Strings:
        """The runs at `indices`, in that order, copied out."""
        lengths = self.lengths.take(indices)
        offsets = np.zeros(lengths.size + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return Strings(self.buffer[byte_ranges(self.starts.take(indices), lengths)], offsets)


RUN_PADDING = 8  # bytes of a Runs buffer after its last string


class Chunks(NamedTuple):
    """Byte strings 8 bytes at a time: string i's bytes are values[first[i]:first[i + 1]]
    (little-endian uint64, the last zero-padded), lengths[i] of them."""

    values: np.ndarray
    first: np.ndarray
    lengths: np.ndarray


def chunks_of(runs: Runs) -> Chunks:
    """The Chunks of runs, read where they lie."""
    counts = (runs.lengths + 7) >> 3
    first = np.zeros(counts.size + 1, np.int64)
    np.cumsum(counts, out=first[1:])
    within = np.arange(first[-1]) - np.repeat(first[:-1], counts)  # a chunk's place (x 8)
    within <<= 3
    windows = np.ndarray((runs.buffer.size - 7,), "<u8", runs.buffer, strides=(1,))
    values = windows[np.repeat(runs.starts, counts) + within]
    values &= _LOW_BYTES.take(np.repeat(runs.lengths, counts) - within, mode="clip")
    return Chunks(values, first, runs.lengths)


def chunk_hashes(chunks: Chunks) -> np.ndarray:
    """A 64-bit odd hash of each string (see the module)."""
    counts = np.diff(chunks.first)
    places = np.arange(chunks.values.size, dtype=np.uint64) - np.repeat(
        chunks.first[:-1].astype(np.uint64), counts)
    places += np.uint64(1)
    places *= _BYTE_MIX
    values = _mixed(places ^ chunks.values)
    hashes = np.zeros(counts.size, np.uint64)
    nonempty = np.flatnonzero(counts != 0)
    if nonempty.size:
        hashes[nonempty] = np.add.reduceat(values, chunks.first[nonempty])
    hashes ^= chunks.lengths.astype(np.uint64) * _LENGTH_MIX
    return _mixed(hashes) | np.uint64(1)


def _equal_strings(first: Strings, first_index: np.ndarray, second: Strings,
                   second_index: np.ndarray) -> np.ndarray:
    """Whether first's string first_index[i] equals second's string second_index[i]."""
    same = first.lengths()[first_index] == second.lengths()[second_index]
    ones = np.flatnonzero(same)
    these, those = first.take(first_index[ones]), second.take(second_index[ones])
    differ = np.flatnonzero(these.data != those.data)  # the two share their offsets
    if differ.size:
        same[ones[np.searchsorted(these.offsets, differ, "right") - 1]] = False
    return same


def _equal_chunks(chunks: Chunks, other: np.ndarray) -> np.ndarray:
    """Whether string i of chunks equals string other[i]."""
    same = chunks.lengths == chunks.lengths.take(other)
    counts = np.diff(chunks.first)
    at = np.repeat(chunks.first.take(other) - chunks.first[:-1], counts)
    at += np.arange(chunks.values.size)  # the other's chunk (of the same place, when as long)
    differ = np.flatnonzero(chunks.values != chunks.values.take(at, mode="clip"))
    if differ.size:
        same[np.searchsorted(chunks.first, differ, "right") - 1] = False
    return same


def number_runs(runs: Runs) -> tuple[np.ndarray, np.ndarray]:
    """(the index of the first of each distinct string, in the order of their numbers; each
    string's number, int32): number_keys of their hashes, checked byte for byte."""
    if len(runs) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int32)
    chunks = chunks_of(runs)
    distinct, numbers = number_keys(chunk_hashes(chunks))
    first = _firsts(numbers, distinct.size)
    if _equal_chunks(chunks, first.take(numbers)).all():
        return first, numbers
    index: dict[bytes, int] = {}  # two strings of one hash: numbered by their bytes
    values = runs.strings(np.arange(len(runs))).tolist()
    numbers = np.array([index.setdefault(value, len(index)) for value in values], np.int32)
    return _firsts(numbers, len(index)), numbers


def _firsts(numbers: np.ndarray, count: int) -> np.ndarray:
    """The position of the first of each number 0 .. count - 1 in `numbers`."""
    first = np.empty(count, np.int64)
    first[numbers[::-1]] = np.arange(numbers.size - 1, -1, -1)
    return first


class StringTable:
    """Distinct byte strings numbered 0, 1, ... as they are first given: their hashes in a
    KeyTable, each string compared with the one stored under its hash."""

    def __init__(self):
        self._hashes = KeyTable()
        self._string_of_hash = _Growing(np.int64)  # by a hash's number, its string's
        self._data = _Growing(np.uint8)
        self._offsets = _Growing(np.int64)
        self._offsets.extend(np.zeros(1, np.int64))
        self._collided: dict[bytes, int] = {}  # strings whose hash stands for another string

    @property
    def size(self) -> int:
        return self._offsets.size - 1

    def numbers(self, strings: Strings) -> np.ndarray:
        """The numbers (int64) of strings, those not yet in the table numbered on from size."""
        known = self._hashes.size
        hashes, of_hash = number_keys(chunk_hashes(chunks_of(Runs.of(strings))))
        firsts = _firsts(of_hash, hashes.size)
        hash_numbers = self._hashes.numbers(hashes)
        added = np.flatnonzero(hash_numbers >= known)  # in the order given (hash_numbers)
        self._string_of_hash.extend(self._append(strings.take(firsts[added])))
        numbers = self._string_of_hash.values()[hash_numbers[of_hash]]
        same = _equal_strings(self.strings(), numbers, strings, np.arange(len(strings)))
        for position in np.flatnonzero(~same).tolist():
            value = strings.data[strings.offsets[position]:strings.offsets[position + 1]]
            number = self._collided.get(value.tobytes())
            if number is None:
                number = self._collided[value.tobytes()] = int(
                    self._append(strings.take([position]))[0])
            numbers[position] = number
        return numbers

    def _append(self, strings: Strings) -> np.ndarray:
        """Stores strings as new ones; their numbers."""
        first = self.size
        self._offsets.extend(self._data.size + strings.offsets[1:])
        self._data.extend(strings.data)
        return np.arange(first, self.size)

    def strings(self) -> Strings:
        """Every string, in the order of their numbers."""
        return Strings(self._data.values(), self._offsets.values())


class _Growing:
    """A 1-D array appended to in place (its capacity doubled when full)."""

    def __init__(self, dtype):
        self._array = np.zeros(1 << 10, dtype)
        self.size = 0

    def extend(self, values: np.ndarray) -> None:
        end = self.size + values.size
        if end > self._array.size:
            grown = np.zeros(max(2 * self._array.size, end), self._array.dtype)
            grown[:self.size] = self._array[:self.size]
            self._array = grown
        self._array[self.size:end] = values
        self.size = end

    def values(self) -> np.ndarray:
        """The values so far (a view, valid until the next extend)."""
        return self._array[:self.size]
