"""The E-step's roofline: the bytes the sampling kernel (saberjax.pallas.sampler) moves per
token, array by array and memory level by level, and the time floor they set on a card.

Per word-major token t of document d (nnz_d nonzeros in A_d) and word v, the kernel touches:

    token lists   doc and doc_major_pos (4 B each), the old topic (2 B) read; the new topic
                  written twice (2 B word-major, 2 B scattered to doc-major order) onto two
                  zeroed outputs (4 B): streamed through L2 from and to HBM
    doc metadata  doc_start[d] and a_nnz[d]: two 32 B sectors from L2 (8 B a document: the
                  arrays stay resident)
    A row         the 32 B sectors holding A_d's nnz_d packed pairs (4 B each), through L2 into
                  L1 once per run of one (word, document) pair (a run's repeated tokens find
                  them in L1)
    B-hat row     nnz_d bfloat16 gathers from L1; the row's lines reach an SM's L1 from L2 once
                  for the SM's share of the word's tiles, and L2 from HBM once a chunk
    tree          dense draws only, one 32-child level a level from L1 (not counted)

Which level serves the A rows is the chunk's doing: the word-major order meets a document
once per distinct word, and between two meetings the kernel walks the rest of a word's
documents, so an A row is still in L2 at its next read only when the chunk's resident set
(its A sectors, its doc-major topics, its doc metadata) fits the L2.  The model takes the
share of A reads that hit L2 as L2 capacity / resident set (capped at 1): every byte of a
chunk whose set fits the L2 comes from HBM once an iteration, the rest from L2.  Likewise the
doc-major scatter writes a 2-byte topic into a sector that stays in L2 until filled, or costs
a 32 B sector at HBM.

L1 is counted in 32 B sectors: a 32-lane block of one token row loads its 32 pairs (128 B,
5 sectors unless aligned) and gathers its 32 B-hat values, whose sorted topics span 32 K / nnz_d
columns, 16 to a sector of bfloat16 (at most 32 sectors); an SM's L1 delivers 4 a cycle.

The floor is the largest of the three times: HBM bytes over the measured copy bandwidth, L2
bytes over the card's L2 read rate, L1 sectors over 4 a cycle per SM.  The L2 rate and size
and the clock come from a table by device kind (jax reports none of them; the rate is an
assumption, docs/measurements/roofline.md).  The floor leaves out issue and latency, which is
what a kernel at none of the three floors is bound by; it reports the kernel's tiles and block
steps (a tile runs its block loop to its longest row), which times the compiled kernel's
instructions a tile and a step give the issue floor.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from saberjax import compilation
from saberjax.layout import Chunk
from saberjax.sparse_rows import ROW_TABLE_WINDOW
from saberjax.state import BHAT_DTYPE, ChunkState

SECTOR = 32  # bytes of an L2 / HBM access
PAIR_BYTES = 4  # a packed A pair (state.pack_pairs)
TOKEN_STREAM_BYTES = 4 + 4 + 2 + 2 + 4  # doc, doc_major_pos, old topic, new topic, zeroed outputs
DOC_METADATA_SECTORS = 2  # doc_start[d], a_nnz[d]
TOPIC_BYTES = 2  # the doc-major copy of a new topic
L1_SECTORS_PER_CYCLE = 4  # 128 B a cycle per SM

# by device kind: L2 read bytes a second, L2 bytes, boost clock (jax reports none of them)
_CARDS = {"H100": (5.5e12, 50 << 20, 1.98e9), "H200": (5.5e12, 50 << 20, 1.98e9)}


@dataclasses.dataclass(frozen=True)
class Card:
    """What the floor divides by: the measured HBM copy rate (bytes read + written a second),
    the L2's read rate and capacity, the SM count and clock."""

    hbm_bytes_per_s: float
    l2_bytes_per_s: float
    l2_bytes: int
    num_sms: int
    clock_hz: float

    @classmethod
    def of_device(cls, device, hbm_bytes_per_s: float) -> Card:
        """The card of a jax device with its measured copy rate (the rest by kind, Hopper's
        where the kind is not in the table)."""
        l2_rate, l2_bytes, clock = next((spec for name, spec in _CARDS.items()
                                         if name in device.device_kind), _CARDS["H100"])
        return cls(hbm_bytes_per_s, l2_rate, l2_bytes,
                   int(getattr(device, "core_count", 0) or 132), clock)


@functools.partial(compilation.jit, static_argnames=("num_words",))
def chunk_traffic(chunk: Chunk, chunk_state: ChunkState, num_words: int) -> dict:
    """The per-chunk sums the floor is made of (device arrays): real tokens and tiles, the
    kernel's block steps (each tile's longest row in 32-blocks, summed over tiles), the
    token-weighted mean nonzeros of a row, A sectors summed over (word, document) runs, the
    chunk's A footprint and resident set (bytes), tokens and tiles of each word, and each
    document's nonzeros and length."""
    num_tokens = chunk.num_tokens
    starts, ends = chunk.doc_start[:-1], chunk.doc_start[1:]
    real_doc = starts < num_tokens  # the padding document starts at num_tokens
    lengths = jnp.where(real_doc, ends - starts, 0).astype(jnp.float32)
    nnz = jnp.where(real_doc, chunk_state.a_nnz, 0)
    first_sector = (PAIR_BYTES * starts) // SECTOR
    end_sector = (PAIR_BYTES * (starts + nnz) + SECTOR - 1) // SECTOR
    sectors = jnp.where(nnz > 0, end_sector - first_sector, 0).astype(jnp.float32)

    positions = jnp.arange(chunk.padded_tokens)
    real = positions < num_tokens
    new_run = real & ((chunk.word != jnp.roll(chunk.word, 1))
                      | (chunk.doc != jnp.roll(chunk.doc, 1)) | (positions == 0))
    tokens = jnp.sum(lengths)
    tile_first = chunk.tile_start[:-1]
    tile_real = tile_first < chunk.tile_start[1:]
    tile_word = chunk.word[jnp.minimum(tile_first, chunk.padded_tokens - 1)]
    footprint = SECTOR * jnp.sum(sectors)
    tile_of = jnp.searchsorted(chunk.tile_start, positions, side="right") - 1
    token_blocks = jnp.where(real, (nnz[jnp.minimum(chunk.doc, nnz.shape[0] - 1)] + 31) // 32, 0)
    tile_blocks = jax.ops.segment_max(token_blocks, tile_of, num_segments=tile_first.shape[0])
    return dict(
        tokens=tokens, tiles=jnp.sum(tile_real),
        block_steps=jnp.sum(jnp.maximum(tile_blocks, 0).astype(jnp.float32)),
        nnz_per_token=jnp.sum(lengths * nnz) / jnp.maximum(tokens, 1.0),
        run_sectors=jnp.sum(jnp.where(new_run, sectors[chunk.doc], 0.0)),
        footprint=footprint,
        resident=footprint + TOPIC_BYTES * tokens + 8.0 * jnp.sum(real_doc),
        word_tokens=jnp.zeros(num_words, jnp.float32).at[chunk.word].add(real),
        word_tiles=jnp.zeros(num_words, jnp.float32).at[tile_word].add(tile_real),
        doc_nnz=nnz, doc_lengths=lengths)


def _span_sectors(nnz, padded_topics: int, value_bytes: int, xp=np, lanes=32.0):
    """The sectors a block's gathers at `lanes` lanes span in a row of padded_topics values of
    value_bytes, for a document of nnz nonzeros: its sorted topics lie K / nnz columns apart
    (at most a sector a lane).  xp: numpy, or jax.numpy under jit."""
    return xp.minimum(lanes, lanes * padded_topics / xp.maximum(nnz, 1.0)
                      * value_bytes / SECTOR + 1.0)


def row_lookup_sectors(nnz, padded_topics: int, value_bytes: int, xp=np, past_row=False):
    """The sectors a token's blocks of gathers span in a row of padded_topics values of
    value_bytes, for a document of nnz (float) nonzeros: its full blocks', then the last
    block's lanes inside the row; past_row: one sector more where that block has lanes past
    the row (a dense row's, which gather one column: sparse_lanes).  xp: numpy, or jax.numpy
    under jit."""
    full = xp.floor(nnz / 32)
    tail = nnz - 32 * full
    sectors = (full * _span_sectors(nnz, padded_topics, value_bytes, xp)
               + xp.where(tail > 0, _span_sectors(nnz, padded_topics, value_bytes, xp, tail),
                          0.0))
    return sectors + (tail > 0) if past_row else sectors


ARRAYS = ("token_lists", "doc_metadata", "doc_major_copy", "a_rows", "bhat_rows")
LEVELS = ("hbm", "l2", "l1")


def floor(chunks, chunk_states, bhat_shape: tuple[int, int], card: Card) -> dict:
    """The E-step's floor over chunks in their states, for a B-hat of bhat_shape (V, padded K):
    `arrays`, each array's bytes per token from HBM and through L2 and its L1 sectors per
    token; the same summed per level; each level's seconds; the floor (the largest) and the
    level that sets it (see the module docstring)."""
    num_words, padded_topics = bhat_shape
    bhat_bytes = np.dtype(BHAT_DTYPE).itemsize
    row_bytes = padded_topics * bhat_bytes
    moved = {name: dict.fromkeys(LEVELS, 0.0) for name in ARRAYS}  # summed over tokens
    totals = dict(tokens=0.0, nnz=0.0, footprint=0.0, a_l2_share=0.0, tiles=0.0,
                  block_steps=0.0)
    for chunk, chunk_state in zip(chunks, chunk_states):
        sums = jax.device_get(chunk_traffic(chunk, chunk_state, num_words))
        tokens = float(sums["tokens"])
        if tokens == 0:
            continue
        nnz_mean = float(sums["nnz_per_token"])
        hit = min(1.0, card.l2_bytes / max(float(sums["resident"]), 1.0))
        # B-hat: a word's tiles spread over min(tiles, SMs) SMs, each gather one sector at most
        words_tokens = np.asarray(sums["word_tokens"], np.float64)
        present = words_tokens > 0
        gathers = words_tokens[present] * nnz_mean
        sms = np.clip(np.asarray(sums["word_tiles"], np.float64)[present], 1, card.num_sms)
        # L1: a block's 32 pairs, and the sectors its 32 sorted topics span
        nnz = np.asarray(sums["doc_nnz"], np.float64)
        blocks = np.asarray(sums["doc_lengths"], np.float64) * np.ceil(nnz / 32)
        span_sectors = _span_sectors(nnz, padded_topics, bhat_bytes)
        run_bytes = SECTOR * float(sums["run_sectors"])
        for name, hbm, l2, l1 in (
                ("token_lists", TOKEN_STREAM_BYTES * tokens + 4.0 * float(sums["tiles"]),
                 TOKEN_STREAM_BYTES * tokens, 0.0),
                ("doc_metadata", 0.0, DOC_METADATA_SECTORS * SECTOR * tokens, 0.0),
                # a sector per scattered topic, at HBM when evicted unfilled
                ("doc_major_copy", (1 - hit) * SECTOR * tokens, SECTOR * tokens, 0.0),
                ("a_rows", float(sums["footprint"]) + (1 - hit) * run_bytes, run_bytes,
                 float(np.sum(blocks)) * (32 * PAIR_BYTES / SECTOR + 1.0)),
                ("bhat_rows", np.sum(np.minimum(row_bytes, SECTOR * gathers)),
                 np.sum(sms * np.minimum(row_bytes, SECTOR * gathers / sms)),
                 float(np.sum(blocks * span_sectors)))):
            for level, value in zip(LEVELS, (hbm, l2, l1)):
                moved[name][level] += float(value)
        totals["tokens"] += tokens
        totals["nnz"] += nnz_mean * tokens
        totals["footprint"] = max(totals["footprint"], float(sums["footprint"]))
        totals["a_l2_share"] += hit * tokens
        totals["tiles"] += float(sums["tiles"])
        totals["block_steps"] += float(sums["block_steps"])
    tokens = max(totals["tokens"], 1.0)
    level_sums = {level: sum(moved[name][level] for name in ARRAYS) for level in LEVELS}
    seconds = dict(hbm=level_sums["hbm"] / card.hbm_bytes_per_s,
                   l2=level_sums["l2"] / card.l2_bytes_per_s,
                   l1=level_sums["l1"] / (L1_SECTORS_PER_CYCLE * card.num_sms * card.clock_hz))
    bound = max(seconds, key=seconds.get)
    return dict(floor_seconds=seconds[bound], floor_bound=bound,
                hbm_seconds=seconds["hbm"], l2_seconds=seconds["l2"], l1_seconds=seconds["l1"],
                hbm_bytes_per_token=level_sums["hbm"] / tokens,
                l2_bytes_per_token=level_sums["l2"] / tokens,
                l1_sectors_per_token=level_sums["l1"] / tokens,
                nnz_per_token=totals["nnz"] / tokens,
                chunk_a_footprint_bytes=totals["footprint"],
                a_l2_share=totals["a_l2_share"] / tokens,
                tiles=totals["tiles"], block_steps=totals["block_steps"],
                arrays={name: {level: float(f"{value / tokens:.4g}")
                               for level, value in moved[name].items()} for name in ARRAYS})


@functools.partial(compilation.jit, static_argnames=("padded_topics",))
def _lookup_sectors(chunk: Chunk, chunk_state: ChunkState, num_dense_rows,
                    padded_topics: int):
    """Term 1's gathers summed over the chunk's real tokens (device arrays): the tokens on
    dense rows, the B-hat sectors their blocks span (bfloat16), the denominator sectors the
    other tokens' blocks span (float32) and those tokens' nonzeros."""
    real = jnp.arange(chunk.padded_tokens) < chunk.num_tokens
    nnz = chunk_state.a_nnz[jnp.minimum(chunk.doc, chunk_state.a_nnz.shape[0] - 1)]
    nnz = jnp.where(real, nnz, 0).astype(jnp.float32)
    dense = real & (chunk.word < num_dense_rows)
    sparse = real & ~dense
    bhat = row_lookup_sectors(nnz, padded_topics, np.dtype(BHAT_DTYPE).itemsize, jnp,
                              past_row=True)
    denominators = row_lookup_sectors(nnz, padded_topics, 4, jnp)
    return (jnp.sum(dense.astype(jnp.float32)),
            jnp.sum(jnp.where(dense, bhat, 0.0)),
            jnp.sum(jnp.where(sparse, denominators, 0.0)),
            jnp.sum(jnp.where(sparse, nnz, 0.0)))


def sparse_floor(chunks, chunk_states, num_dense_rows: int, bhat_shape: tuple[int, int],
                 card: Card, table_window: int = ROW_TABLE_WINDOW) -> dict:
    """The sparse model's E-step floor (saberjax.pallas.sparse_sampler) over chunks in their
    states, for V x padded K (bhat_shape) with dense rows for words 0 .. num_dense_rows - 1:
    floor's dict with its B-hat row term replaced by the lookups of term 1, and the share of
    tokens on dense rows and the mean nonzeros of A a token beside it.

    A dense row of K bfloat16 values outgrows an SM's L1 beside the SM's other programs at
    the K that take the sparse model, so each 32 B sector a block's gathers span (floor's
    count, with a row's last block spanning its own lanes, and one sector more for the lanes
    past the row) comes from L2: term 1 of a dense-row token costs SECTOR bytes of L2 a sector.  A
    sparse-row token's nonzero loads a float32 denominator (D_k, the same span at 4 bytes)
    and a window of table_window int32 slots (1 + (window - 1) * 4 / SECTOR sectors: a
    window starting at a uniform slot of a sector), both from L2 (the tables are far
    larger than an L1).  Rows without a table (a bucket search, about 2 entries) count as
    tabled; the HBM bytes of the lookups are floor's B-hat term (a row, or its gathered
    sectors, once a chunk)."""
    base = floor(chunks, chunk_states, bhat_shape, card)
    window_sectors = 1.0 + (table_window - 1) * 4 / SECTOR
    tokens = dense_tokens = dense_sectors = sparse_sectors = 0.0
    for chunk, chunk_state in zip(chunks, chunk_states):
        dense, bhat, denominators, nonzeros = map(float, jax.device_get(_lookup_sectors(
            chunk, chunk_state, num_dense_rows, bhat_shape[1])))
        tokens += float(chunk.num_tokens)
        dense_tokens += dense
        dense_sectors += bhat
        sparse_sectors += denominators + window_sectors * nonzeros
    tokens = max(tokens, 1.0)
    arrays = {name: levels for name, levels in base["arrays"].items() if name != "bhat_rows"}
    bhat_hbm = base["arrays"]["bhat_rows"]["hbm"]
    for name, sectors, hbm in (
            ("dense_lookups", dense_sectors, bhat_hbm * dense_tokens / tokens),
            ("sparse_lookups", sparse_sectors, bhat_hbm * (1 - dense_tokens / tokens))):
        arrays[name] = dict(hbm=hbm, l2=SECTOR * sectors / tokens, l1=sectors / tokens)
    per_token = {level: sum(levels[level] for levels in arrays.values()) for level in LEVELS}
    seconds = dict(hbm=per_token["hbm"] * tokens / card.hbm_bytes_per_s,
                   l2=per_token["l2"] * tokens / card.l2_bytes_per_s,
                   l1=per_token["l1"] * tokens / (L1_SECTORS_PER_CYCLE * card.num_sms
                                                  * card.clock_hz))
    bound = max(seconds, key=seconds.get)
    return {**base, "floor_seconds": seconds[bound], "floor_bound": bound,
            "hbm_seconds": seconds["hbm"], "l2_seconds": seconds["l2"],
            "l1_seconds": seconds["l1"], "hbm_bytes_per_token": per_token["hbm"],
            "l2_bytes_per_token": per_token["l2"], "l1_sectors_per_token": per_token["l1"],
            "dense_share": dense_tokens / tokens, "arrays": arrays}
