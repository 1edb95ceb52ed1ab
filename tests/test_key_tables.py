"""The numpy hash tables numbering the text engine's words: exact numbering of keys and byte
strings, across batches, and strings of one hash told apart."""

import numpy as np
import pytest

from saberjax.corpus import key_tables
from saberjax.corpus.key_tables import (KeyTable, Runs, StringTable, Strings, number_keys,
                                        number_runs)


@pytest.mark.parametrize("size, distinct", [(0, 1), (1, 1), (1000, 10), (200_000, 60_000),
                                            (5000, 5000)])
def test_number_keys_numbers_each_distinct_key_once(size, distinct):
    rng = np.random.default_rng(size)
    pool = rng.integers(1, 2**63, distinct, dtype=np.uint64)
    keys = pool[rng.integers(0, distinct, size)]
    keys_distinct, numbers = number_keys(keys)
    np.testing.assert_array_equal(keys_distinct[numbers], keys)
    assert sorted(keys_distinct.tolist()) == sorted(set(keys.tolist()))


def test_keys_that_share_slots_still_get_numbers_of_their_own():
    # keys differing only above the slot bits of every round share a slot in each round
    keys = np.arange(1, 3000, dtype=np.uint64) << np.uint64(40)
    distinct, numbers = number_keys(np.concatenate([keys, keys[::-1]]))
    assert distinct.size == keys.size
    np.testing.assert_array_equal(distinct[numbers[:keys.size]], keys)


def test_a_key_table_numbers_keys_in_the_order_first_given_across_batches():
    rng = np.random.default_rng(1)
    table, expected = KeyTable(), {}
    for _ in range(40):  # the table grows several times
        batch = np.unique(rng.integers(1, 4000, 500).astype(np.uint64) * np.uint64(7919))
        rng.shuffle(batch)
        numbers = table.numbers(batch)
        assert numbers.tolist() == [expected.setdefault(key, len(expected))
                                    for key in batch.tolist()]
    assert table.size == len(expected)
    assert table.keys().tolist() == list(expected)


def test_number_runs_gives_equal_strings_one_number_and_points_at_the_first():
    strings = Strings.of([b"abc", b"", b"abc", b"xyz" * 10, b"", b"abd", b"bac"])
    first, numbers = number_runs(Runs.of(strings))
    values = strings.tolist()
    assert [values[first[number]] for number in numbers] == values
    assert len(first) == 5 and all(values.index(values[f]) == f for f in first)


@pytest.fixture
def one_hash(monkeypatch):
    """Every string hashes alike, so that only the byte comparison tells them apart."""
    monkeypatch.setattr(key_tables, "chunk_hashes",
                        lambda chunks: np.full(chunks.lengths.size, 12345, np.uint64))


def test_strings_of_one_hash_are_told_apart(one_hash):
    strings = Strings.of([b"ab", b"cd", b"ab", b"", b"cd"])
    first, numbers = number_runs(Runs.of(strings))
    assert numbers.tolist() == [0, 1, 0, 2, 1] and first.tolist() == [0, 1, 3]


@pytest.mark.parametrize("collide", [False, True])
def test_a_string_table_numbers_strings_across_batches(collide, monkeypatch):
    if collide:
        monkeypatch.setattr(key_tables, "chunk_hashes",
                            lambda chunks: np.full(chunks.lengths.size, 7, np.uint64))
    table, expected = StringTable(), {}
    for batch in ([b"a", b"bb", b""], [b"bb", b"ccc", b"a"], [b"dddd", b"", b"ccc", b"e" * 40]):
        numbers = table.numbers(Strings.of(batch))
        for value, number in zip(batch, numbers.tolist()):
            assert expected.setdefault(value, number) == number
    assert sorted(expected.values()) == list(range(table.size))
    stored = table.strings().tolist()
    assert all(stored[number] == value for value, number in expected.items())
