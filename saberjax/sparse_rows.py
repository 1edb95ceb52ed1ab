"""The sparse word-topic model on the device: B as sorted (topic, count) rows per word, and what
the sparse E-step (saberjax.sparse_sampler) draws from, plain JAX.

With the token left out, the sampler's p(k) splits along B's sparsity::

    p(k)  proportional to  A_dk B-hat_vk  +  alpha_k B_vk / D_k  +  alpha_k beta / D_k
                           term 1            term 2                 term 3

(D_k = n_k + V beta, B-hat_vk = (B_vk + beta) / D_k).  Term 1 has one entry per nonzero of
the document's row A_d, each looking B_vk up in the word's row; term 2 one entry per nonzero
of the word's row B_v, drawn by a search of the row's prefix sums (`row_prefix`); term 3 is
the same for every word: one W-ary tree over K for the whole model (saberjax.tree).  No array
of the model has V x K cells: the rows hold at most as many nonzeros as the device has
tokens, so the model's size follows the corpus, not K.

The hybrid part: the rows of the most frequent words (a device's first rows: its words by
decreasing frequency) are also kept dense, as many as DENSE_ROW_BYTES holds: their B-hat row
(`dense_bhat`, DENSE_ROW_DTYPE) and a W-ary tree over alpha_k B-hat_vk each (`dense_tree`), the
dense model's structures (saberjax.state.Model) for those rows.  A token of such a word draws
as the dense sampler does: term 1's lookups are one load of its B-hat row, and terms 2 and 3
together, alpha_k (B_vk + beta) / D_k = alpha_k B-hat_vk, are one descent of its tree, so the
tokens of those words, most of the corpus, never search a sparse row.  Any other word's
term-1 lookups read its row's table (RowTables: a window of slots loaded at once), or, for a
row without one, search a bucket of its row (RowBuckets); a rare word's row is short, and
its searches take few steps.

The M-step (count_rows) is a segmented count over the word-ordered tokens: the (row, topic)
pairs sorted and run-length counted, the same shuffle-free count as A's rebuild.  Row sums in
float32 run as a segmented scan in a fixed order, so the model is the same floats whatever
the chunking or the device count.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from saberjax.layout import Chunk
from saberjax.segmented_count import store_distinct
from saberjax.tree import WIDTH


# Bytes of a device's dense B-hat rows (K_pad each) for the most frequent words, and their
# type: bfloat16 (the dense model's B-hat) holds twice the rows of float32 and halves each
# lookup's bytes; the samplers take the own topic's mass from B_vz in the sparse row, not from
# B-hat_vz D_z - 1, which in bfloat16 cancels to rounding where B_vz = 1.
DENSE_ROW_BYTES = 1 << 32
DENSE_ROW_DTYPE = jnp.bfloat16


class Compaction(NamedTuple):
    """The prefixes of the rows' entries that the M-step's passes over them may run on
    (sparse_build, topic_totals): capacity // share for each of `shares`, those of at least
    `min_entries` (the shortest holding B's nonzeros is taken; each prefix is one more copy
    of the build to compile, which a small capacity does not repay)."""

    shares: tuple[int, ...]
    min_entries: int


COMPACTION = Compaction(shares=(4, 3, 2), min_entries=1 << 20)


# The row tables (RowTables) of the sparse rows without a dense row: a device's bytes for all of
# their slots, the most slots a lookup reads (a power of two, at most 2**DISPLACEMENT_BITS),
# and a table's home slots as a power of two over its row's length (2**ROW_TABLE_SPREAD
# times the next power of two of it: a table at most a quarter full).
ROW_TABLE_BYTES = 1 << 30
ROW_TABLE_WINDOW = 4
ROW_TABLE_SPREAD = 2
DISPLACEMENT_BITS = 3


def dense_row_count(num_rows: int, padded_topics: int, dense_row_bytes: int = DENSE_ROW_BYTES,
                    dtype=DENSE_ROW_DTYPE) -> int:
    """Rows of B kept dense: as many of the first rows as dense_row_bytes holds, at least one
    (so the array has a shape every kernel takes)."""
    return max(1, min(num_rows, dense_row_bytes // (jnp.dtype(dtype).itemsize * padded_topics)))


def dense_rows_bytes(num_rows: int, padded_topics: int) -> int:
    """Device bytes of the dense part of a model of num_rows rows: B-hat rows and their trees'
    levels (float32, about 1/31 of the rows' cells)."""
    return int(dense_row_count(num_rows, padded_topics) * padded_topics
               * (jnp.dtype(DENSE_ROW_DTYPE).itemsize + 4 / 31))


class SparseRows(NamedTuple):
    """B's rows as compressed sparse rows of fixed capacity (one device's words).

    Row r's nonzeros are at row_start[r] .. row_start[r + 1] - 1, topics increasing, counts
    positive; entries from row_start[-1] on are empty (topic = padded K, count 0)."""

    row_start: jax.Array  # int32 [rows + 1]
    topics: jax.Array  # int32 [capacity]
    counts: jax.Array  # int32 [capacity]

    @property
    def num_rows(self) -> int:
        return self.row_start.shape[0] - 1


class SparseModel(NamedTuple):
    """The sparse model: B's rows, the topic totals and prior, term 2's per-row prefix sums and
    term 3's global tree (the module docstring)."""

    word_topic: SparseRows  # B
    buckets: RowBuckets  # B's rows' bucket directory (the own topic's lookups, and term 1's
    # of a row without a table)
    tables: RowTables  # the rows' tables (term 1's lookups of the sparse rows)
    topic_totals: jax.Array  # int32 [K_pad] column sums of B
    alpha: jax.Array  # float32 [K_pad] the document-topic prior; 0 in padding columns
    bhat_denominator: jax.Array  # float32 [K_pad] D_k = n_k + V beta
    beta: jax.Array  # float32 scalar, the topic-word prior
    row_prefix: jax.Array  # float32 [capacity] inclusive prefix sums of alpha_k B_vk / D_k
    # within each row (0 past the rows)
    row_mass: jax.Array  # float32 [rows] each row's total of term 2
    prior_leaves: jax.Array  # float32 [1, K_pad] beta / D_k, 0 in padding columns
    prior_tree: tuple[jax.Array, ...]  # float32 [1, width] levels over alpha_k beta / D_k
    prior_total: jax.Array  # float32 [1] the tree's total mass
    # the hybrid part, B's first rows dense: B-hat [dense rows, K_pad] (0 in padding columns),
    # the levels of each row's tree over alpha_k B-hat_vk (top first, tree.build_tree) and
    # each tree's total
    dense_bhat: jax.Array  # DENSE_ROW_DTYPE [dense rows, K_pad]
    dense_tree: tuple[jax.Array, ...]  # float32 [dense rows, width] each
    dense_tree_total: jax.Array  # float32 [dense rows]


def count_rows(chunk: Chunk, topics: jax.Array, num_rows: int, padded_topics: int) -> SparseRows:
    """B's sparse rows of a chunk's real tokens (chunk.word: rows < num_rows) with their
    word-major topics: (row, topic) pairs sorted and counted in runs, a run's count the
    distance from its first position to the next run's (no atomic adds, which a long run's
    tokens would all make on one address), a row's start the runs before its first token
    (a search of the sorted tokens, so no array of the runs' rows is stored).  Capacity: the
    chunk's padded tokens (a row has no more nonzeros than tokens)."""
    size = chunk.padded_tokens
    real = jnp.arange(size) < chunk.num_tokens
    rows, topics = sort_by_row_then_topic(jnp.where(real, chunk.word, num_rows),
                                          topics.astype(jnp.int32), num_rows, padded_topics)
    counted = rows < num_rows  # padding sorts last
    new_pair = counted & ((jnp.arange(size) == 0) | (rows != jnp.roll(rows, 1))
                          | (topics != jnp.roll(topics, 1)))
    pairs_through = jnp.cumsum(new_pair, dtype=jnp.int32)  # the runs up to each position
    slot = pairs_through - 1
    pair_topics = store_distinct(jnp.full(size, padded_topics, jnp.int32), slot, new_pair,
                                 topics)
    # each run's first position; past the runs, the real tokens' end (padding sorts last)
    end = jnp.reshape(chunk.num_tokens, ()).astype(jnp.int32)
    first = store_distinct(jnp.full(size + 1, end), slot, new_pair,
                           jnp.arange(size, dtype=jnp.int32))
    counts = first[1:] - first[:-1]
    # a row's first run: the runs before its first token (the tokens sort by row)
    row_token = jnp.searchsorted(rows, jnp.arange(num_rows + 1, dtype=jnp.int32),
                                 side="left").astype(jnp.int32)
    row_start = jnp.concatenate([jnp.zeros(1, jnp.int32), pairs_through])[row_token]
    return SparseRows(row_start, pair_topics, counts)


def sort_by_row_then_topic(rows: jax.Array, topics: jax.Array, num_rows: int,
                           padded_topics: int) -> tuple[jax.Array, jax.Array]:
    """(row, topic) pairs (rows <= num_rows, topics < padded_topics) sorted by row, then topic.

    One uint32 key row * K_pad + topic where it fits, else two stable sorts: by a uint32 key
    of the row's low bits and the topic (the row's high bits carried as uint16), then by the
    row's high bits as a key of 8 or 16 bits, whose radix sort takes one or two passes where
    a uint32 key takes four (single-key sorts are radix sorts on a GPU, where a two-key sort
    compares).  All give the same order."""
    rows, topics = rows.astype(jnp.uint32), topics.astype(jnp.uint32)
    if (num_rows + 1) * padded_topics <= 2**32:
        key = jnp.sort(rows * jnp.uint32(padded_topics) + topics)
        return ((key // padded_topics).astype(jnp.int32),
                (key % padded_topics).astype(jnp.int32))
    topic_bits = max(padded_topics - 1, 1).bit_length()
    low_bits = 32 - topic_bits
    if num_rows >> low_bits >= 1 << 16:
        raise ValueError(f"{num_rows} rows of {padded_topics} topics: more than 48 bits a pair")
    high_type = jnp.uint8 if num_rows >> low_bits < 1 << 8 else jnp.uint16
    low = (rows & ((1 << low_bits) - 1)) << topic_bits | topics
    low, high = jax.lax.sort((low, (rows >> low_bits).astype(jnp.uint16)), num_keys=1,
                             is_stable=True)
    high, low = jax.lax.sort((high.astype(high_type), low), num_keys=1, is_stable=True)
    return ((high.astype(jnp.uint32) << low_bits | low >> topic_bits).astype(jnp.int32),
            (low & ((1 << topic_bits) - 1)).astype(jnp.int32))


def nonzero_rows(rows: SparseRows) -> jax.Array:
    """The row of every entry of B's sparse rows (int32 [capacity]; num_rows past the rows):
    the number of rows after the first that start at or before it."""
    capacity = rows.topics.shape[0]
    starts = jnp.zeros(capacity + 1, jnp.int32).at[rows.row_start[1:]].add(1)
    return jnp.cumsum(starts[:capacity], dtype=jnp.int32)


class RowBuckets(NamedTuple):
    """A directory of B's sparse rows by the topics' high bits, so that finding a topic in a
    row searches one bucket of about two entries instead of the whole row.

    Row r of L nonzeros has 2**floor(log2 L) buckets (one when empty), between L / 2 and L:
    topic k falls in bucket k >> shift[r] (topics are ids with no order of meaning, so a row's
    topics spread over its buckets).  Directory slot base[r] + b holds the position of row r's
    first entry whose bucket is b or more (its end after the last bucket), so bucket b's
    entries are start[base[r] + b] .. start[base[r] + b + 1] - 1."""

    base: jax.Array  # int32 [rows + 1] each row's first directory slot
    shift: jax.Array  # int32 [rows] a topic's bucket in the row: topic >> shift
    steps: jax.Array  # int32 [rows] halvings a search of the row's fullest bucket needs
    start: jax.Array  # int32 [capacity + 2 rows + 1] the directory


def row_buckets(rows: SparseRows, row_of_entry: jax.Array, padded_topics: int) -> RowBuckets:
    """The bucket directory of B's sparse rows (row_of_entry: nonzero_rows)."""
    num_rows, capacity = rows.num_rows, rows.topics.shape[0]
    lengths = rows.row_start[1:] - rows.row_start[:-1]
    bucket_bits = 31 - jax.lax.clz(jnp.maximum(lengths, 1))  # floor(log2 max(L, 1))
    shift = (max(padded_topics - 1, 1).bit_length() - bucket_bits).astype(jnp.int32)
    base = jnp.concatenate([jnp.zeros(1, jnp.int32),
                            jnp.cumsum((1 << bucket_bits) + 1, dtype=jnp.int32)])
    size = capacity + 2 * num_rows + 1  # sum of (buckets + 1) <= nonzeros + 2 rows
    filled = jnp.arange(capacity) < rows.row_start[-1]
    row = jnp.where(filled, row_of_entry, num_rows)  # the empty entries: no row
    slot = jnp.where(filled, base[jnp.minimum(row, num_rows - 1)]
                     + (rows.topics >> shift[jnp.minimum(row, num_rows - 1)]), size)
    occupancy = jnp.zeros(size, jnp.int32).at[slot].add(1, mode="drop")
    # entries sort by slot, so the first entry at slot j or later is the count of those before
    start = jnp.cumsum(occupancy, dtype=jnp.int32) - occupancy
    fullest = row_max(occupancy[jnp.minimum(slot, size - 1)], row, num_rows)
    steps = 32 - jax.lax.clz(fullest)  # bit length
    return RowBuckets(base, shift, steps.astype(jnp.int32), start)


def row_max(values: jax.Array, row: jax.Array, num_rows: int) -> jax.Array:
    """Each row's largest value (0 for a row without entries) of non-negative int32 values of
    entries sorted by row (row >= num_rows: no row).  Every 32 consecutive entries of one row
    are reduced before the scatter, so a long row's entries do not all wait on the atomic
    maximum of one address (a row's entries are consecutive)."""
    pad = -values.shape[0] % WIDTH
    values = jnp.pad(values, (0, pad)).reshape(-1, WIDTH)
    row = jnp.pad(row, (0, pad), constant_values=num_rows).reshape(-1, WIDTH)
    one_row = row[:, 0] == row[:, -1]  # sorted: the whole block is that row's
    block_max = jnp.zeros(num_rows, jnp.int32).at[jnp.where(one_row, row[:, 0], num_rows)].max(
        jnp.max(values, axis=1), mode="drop")
    return block_max.at[jnp.where(one_row[:, None], num_rows, row)].max(values, mode="drop")


def find_in_bucket(rows: SparseRows, buckets: RowBuckets, row: jax.Array, topic: jax.Array
                   ) -> tuple[jax.Array, jax.Array]:
    """(position of `topic` in `row` of B: the end of its bucket where absent, B_row,topic:
    0 where absent), elementwise over arrays of equal shape: a binary search of the topic's
    bucket (RowBuckets); topic <= K_pad (K_pad: no topic)."""
    slot = buckets.base[row] + (topic >> buckets.shift[row])
    low, high = buckets.start[slot], buckets.start[slot + 1]
    position = lower_bound(rows.topics, low, high, topic, jnp.max(buckets.steps))
    clamped = jnp.minimum(position, rows.topics.shape[0] - 1)
    found = (position < high) & (rows.topics[clamped] == topic)
    return position, jnp.where(found, rows.counts[clamped], 0)


class RowTables(NamedTuple):
    """B's sparse rows as tables read at a fixed window of slots, so that finding a topic in a
    row is one round of independent loads instead of a chain of dependent ones (RowBuckets:
    the directory, then the bucket's halvings, then the count).

    Row r of L nonzeros has 2**h home slots (h: ceil(log2 L) + ROW_TABLE_SPREAD, at most the
    bits of a topic id), from slot base[r]: topic k's home is base[r] + (k >> shift[r]), its
    high bits, so homes follow the topic order.  The row's topics, in order, take the first
    free slot at or after their home (ordered linear probing: slot_i = max(home_i, slot_(i-1)
    + 1), a running maximum, no insertion order), so every topic sits less than window[r]
    slots past its home and a lookup reads the window[r] slots from the home, all at once.  A
    slot holds count << (shift + DISPLACEMENT_BITS) | displacement << shift | the topic's low
    shift bits (0: empty): the home and the low bits name the topic.  window[r] = 0: the row
    has no table (a row with a dense row, a row past the table's slots or past the entries
    their build reads (row_table_entries), or one whose topics
    sit the build's window or more past their homes or whose counts do not fit their bits),
    and its lookups search its buckets."""

    base: jax.Array  # int32 [rows] each row's first slot
    shift: jax.Array  # int32 [rows] a topic's home in the row: topic >> shift
    window: jax.Array  # int32 [rows] slots a lookup reads (0: no table)
    slots: jax.Array  # int32 [row_table_slots] the tables


def row_table_slots(capacity: int, num_rows: int, table_bytes: int = ROW_TABLE_BYTES,
                    window: int = ROW_TABLE_WINDOW, spread: int = ROW_TABLE_SPREAD) -> int:
    """Slots of the row tables of rows of `capacity` entries: room for every row's table
    (fewer than 2**(spread + 1) max(L, 1) home slots and window - 1 more), within
    table_bytes and 2**30 slots, at least `window`."""
    every_row = (2 << spread) * (capacity + num_rows) + (window - 1) * num_rows
    return max(min(every_row, table_bytes // 4, 1 << 30), window)


def row_table_entries(capacity: int, num_rows: int, table_bytes: int = ROW_TABLE_BYTES,
                      window: int = ROW_TABLE_WINDOW, spread: int = ROW_TABLE_SPREAD) -> int:
    """Entries of the rows that the tables' build reads (row_tables): the slots' share of
    entries at 2**spread home slots an entry, at most `capacity`, so that the build's arrays
    are bounded by the tables' bytes instead of growing with the rows."""
    return min(capacity, max(row_table_slots(capacity, num_rows, table_bytes, window, spread)
                             >> spread, 1))


def row_tables(rows: SparseRows, row_of_entry: jax.Array, padded_topics: int, num_dense: int,
               table_bytes: int = ROW_TABLE_BYTES, window: int = ROW_TABLE_WINDOW,
               spread: int = ROW_TABLE_SPREAD, capacity: int | None = None) -> RowTables:
    """The tables of B's sparse rows from row num_dense on (row_of_entry: nonzero_rows), the
    rows in order while table_bytes holds them and their entries lie within
    row_table_entries of the first such row's; `window`: the most slots a lookup reads (at
    most 2**DISPLACEMENT_BITS), `spread`: ROW_TABLE_SPREAD; capacity: the rows' capacity the
    tables are sized for (None: the entries'; the rows may be a prefix of rows of that
    capacity holding all their nonzeros, and get the same tables)."""
    if not 1 <= window <= 1 << DISPLACEMENT_BITS:
        raise ValueError(f"row table window must be in [1, {1 << DISPLACEMENT_BITS}], got "
                         f"{window}")
    num_rows, entries = rows.num_rows, rows.topics.shape[0]
    capacity = capacity or entries
    size = row_table_slots(capacity, num_rows, table_bytes, window, spread)
    topic_bits = max(padded_topics - 1, 1).bit_length()
    lengths = rows.row_start[1:] - rows.row_start[:-1]
    length_bits = 32 - jax.lax.clz(jnp.maximum(lengths, 1) - 1)  # ceil(log2 max(L, 1))
    home_bits = jnp.minimum(length_bits + spread, topic_bits)
    shift = (topic_bits - home_bits).astype(jnp.int32)
    extent = jnp.where(jnp.arange(num_rows) >= num_dense, (1 << home_bits) + window - 1, 0)
    # the rows' ends, saturating past the slots (a sum over many rows would overflow int32)
    end = jax.lax.associative_scan(lambda left, right: jnp.minimum(left + right, size + 1),
                                   extent.astype(jnp.int32))
    base = end - extent
    # the entries read: `span` from the first table row's (from fewer where the rows end
    # sooner; those before it are dense rows', which get no table)
    span = min(row_table_entries(capacity, num_rows, table_bytes, window, spread), entries)
    low = jnp.minimum(rows.row_start[min(num_dense, num_rows)], entries - span)
    entry = low + jnp.arange(span, dtype=jnp.int32)
    topics, counts, entry_rows = (jax.lax.dynamic_slice(values, (low,), (span,))
                                  for values in (rows.topics, rows.counts, row_of_entry))
    filled = entry < rows.row_start[-1]
    row = jnp.where(filled, entry_rows, num_rows)  # the empty entries: no row
    entry_row = jnp.minimum(row, num_rows - 1)
    entry_shift = shift[entry_row]
    home = topics >> entry_shift
    index = entry - rows.row_start[entry_row]
    displacement = segmented_prefix_sum(home - index, row, jnp.maximum) + index - home
    fits = counts < 1 << (31 - DISPLACEMENT_BITS - entry_shift)
    # each row's largest displacement, `window` where a count does not fit its bits
    farthest = row_max(jnp.where(filled, jnp.where(fits, displacement, window), 0), row,
                       num_rows)
    read_whole = rows.row_start[1:] <= low + span
    row_window = jnp.where((extent > 0) & (end <= size) & read_whole & (farthest < window),
                           farthest + 1, 0)
    stored = filled & (row_window[entry_row] > 0)
    value = ((counts << (entry_shift + DISPLACEMENT_BITS)) | (displacement << entry_shift)
             | (topics & ((1 << entry_shift) - 1)))
    slots = store_distinct(jnp.zeros(size, jnp.int32), base[entry_row] + home + displacement,
                           stored, value)
    return RowTables(jnp.where(row_window > 0, base, 0), shift, row_window.astype(jnp.int32),
                     slots)


def find_in_table(tables: RowTables, row: jax.Array, topic: jax.Array) -> jax.Array:
    """B_row,topic (0 where absent) from the row's table, elementwise over arrays of equal
    shape, rows with a table (tables.window[row] > 0; 0 for the others)."""
    shift, window = tables.shift[row], tables.window[row]
    home = tables.base[row] + (topic >> shift)
    named = topic & ((1 << shift) - 1)
    count = jnp.zeros(jnp.shape(topic), jnp.int32)
    for offset in range(1 << DISPLACEMENT_BITS):
        value = tables.slots[jnp.minimum(home + offset, tables.slots.shape[0] - 1)]
        count = jnp.where(table_match(value, offset, named, shift) & (offset < window),
                          value >> (shift + DISPLACEMENT_BITS), count)
    return count


def table_match(value, offset: int, named, shift):
    """Whether a slot `offset` past topic k's home holds k (`named`: k's low shift bits):
    its displacement and low bits are k's (an empty slot matches only as a count of 0)."""
    return ((value ^ named) & ((1 << (shift + DISPLACEMENT_BITS)) - 1)) == offset << shift


def count_in_row(rows: SparseRows, buckets: RowBuckets, tables: RowTables, row: jax.Array,
                 topic: jax.Array) -> jax.Array:
    """B_row,topic, elementwise: from the row's table where it has one, else from its
    bucket (find_in_bucket)."""
    return jnp.where(tables.window[row] > 0, find_in_table(tables, row, topic),
                     find_in_bucket(rows, buckets, row, topic)[1])


def compact_prefixes(capacity: int, compaction: Compaction = COMPACTION) -> tuple[int, ...]:
    """The proper prefixes of rows of `capacity` entries that `compaction` gives, shortest
    first."""
    return tuple(sorted({capacity // share for share in compaction.shares
                         if compaction.min_entries <= capacity // max(share, 1) < capacity
                         and capacity // share > 0}))


def on_nonzero_prefix(rows: SparseRows, compaction: Compaction, on_prefix, on_whole):
    """on_prefix(entries) for the shortest of the rows' compact_prefixes that holds their
    nonzeros, else on_whole() (a lax.switch: the shapes stay static); on_whole() alone where
    the compaction gives no prefix."""
    prefixes = compact_prefixes(rows.topics.shape[0], compaction)
    if not prefixes:
        return on_whole()
    longer = sum((rows.row_start[-1] > entries).astype(jnp.int32) for entries in prefixes)
    return jax.lax.switch(longer, [*(lambda entries=entries: on_prefix(entries)
                                     for entries in prefixes), on_whole])


def topic_totals(rows: SparseRows, padded_topics: int,
                 compaction: Compaction = COMPACTION) -> jax.Array:
    """Each topic's total count over the rows (int32 [K_pad]): over the shortest prefix of
    compact_prefixes holding the nonzeros (on_nonzero_prefix)."""
    def totals(entries: int):
        return jnp.zeros(padded_topics, jnp.int32).at[rows.topics[:entries]].add(
            rows.counts[:entries], mode="drop")

    return on_nonzero_prefix(rows, compaction, totals, lambda: totals(rows.topics.shape[0]))


def segmented_prefix_sum(values: jax.Array, segment: jax.Array, operator=jnp.add) -> jax.Array:
    """Inclusive prefix sums (or another associative operator's) of values restarting where
    `segment` changes (a scan of fixed order: the same floats on any device)."""
    starts = jnp.concatenate([jnp.ones(1, bool), segment[1:] != segment[:-1]])

    def combine(left, right):
        left_sum, left_start = left
        right_sum, right_start = right
        return (jnp.where(right_start, right_sum, operator(left_sum, right_sum)),
                left_start | right_start)

    return jax.lax.associative_scan(combine, (values, starts))[0]


def search_steps(rows: SparseRows) -> jax.Array:
    """Halvings a binary search of any row needs: the bit length of the longest row."""
    longest = jnp.max(rows.row_start[1:] - rows.row_start[:-1])
    return 32 - jax.lax.clz(longest.astype(jnp.int32))


def lower_bound(values: jax.Array, low: jax.Array, high: jax.Array, target,
                steps=None) -> jax.Array:
    """The first position p in low .. high with values[p] >= target (high where none),
    elementwise: `steps` halvings (None: enough for any range of values)."""
    return bisect(_clamped_load(values), low, high, lambda value: value < target,
                  _enough_steps(values) if steps is None else steps)


def upper_bound(values: jax.Array, low: jax.Array, high: jax.Array, target,
                steps=None) -> jax.Array:
    """The first position p in low .. high with values[p] > target (high where none)."""
    return bisect(_clamped_load(values), low, high, lambda value: value <= target,
                  _enough_steps(values) if steps is None else steps)


def _clamped_load(values: jax.Array):
    return lambda positions, searching: values[jnp.minimum(positions, values.shape[0] - 1)]


def _enough_steps(values: jax.Array) -> int:
    return max(int(values.shape[0]).bit_length(), 1)


def bisect(load, low, high, before, steps):
    """The first position p in low .. high where before(value at p) is false (high where
    none), for `before` true on a prefix of every range: `steps` halvings, each reading
    load(positions, searching) (values at positions, needed only where searching), so the
    same search runs over arrays and inside a Pallas kernel."""

    def halve(_, bounds):
        low, high = bounds
        middle = (low + high) // 2
        searching = low < high
        go_right = before(load(middle, searching))
        return (jnp.where(searching & go_right, middle + 1, low),
                jnp.where(searching & ~go_right, middle, high))

    return jax.lax.fori_loop(0, steps, halve, (low, high))[0]
