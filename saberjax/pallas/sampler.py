"""The sparsity-aware E-step as a Pallas (Triton) kernel; reference: saberjax.sampler.

One program (one warp) samples a tile: up to chunk.tile_tokens consecutive word-major tokens of
one word (Chunk.tile_start, built by the layout; layout.with_tile_tokens for other sizes), so the
word's B-hat row (bfloat16, state.BHAT_DTYPE) and tree stay hot in L1 while its tiles run
(gathers with eviction_policy="evict_last"; the row through shared memory instead: NOTES.md).
B-hat and the tree levels are 2-D refs indexed (word,
column), so Pallas computes 64-bit offsets once an array exceeds 4 GiB (e.g. K = 30,000 at
V = 102,660).  Token t of the tile is row t of [tile, 32] arrays: the nonzeros of its
document row A_d (packed pairs, state.pack_pairs: one load each) are visited 32 lanes at a
time, in one pass, as in the reference:

    per block   products P = A_dk * B-hat_vk (0 for the token's own topic z, whose count A_dz
                the block keeps instead); each lane adds its product to its running mass
                and keeps the product's topic when u_block * (lane mass) < P (a weighted
                reservoir per lane; u_block one uniform per token and block); A_dz is
                held once a thread (the largest of its lanes' own counts); the next
                block's A entries are loaded in the same step, after this block's B-hat
                gathers (a lane past the row: topic own ^ 1, count 0)
    own topic   lane 0 takes z's whole mass without the token, (A_dz - 1 + alpha_z) times
                B-hat_vz without it (saberjax.sampler.own_topic_mass), as one more product
    branch      S = the lane masses' sum; sparse part with probability S / (S + Q), Q the
                tree's total (the sum of alpha_k B-hat_vk) less z's leaf alpha_z B-hat_vz
    sparse      search the 32 lane masses for u_position * S; that lane's kept topic
    dense       descend word v's W-ary tree over alpha_k B-hat_vk, 32 children per level, the
                leaves formed as B-hat times alpha, skipping z's leaf
                (tree.descend_excluding; only if a token needs it)

A block thus costs no sum across the warp's lanes (five shuffle steps per row) and no
per-block bookkeeping; the lane masses are added across lanes once, after the loop (against a
per-block reservoir: docs/measurements/kernels.md).  The uniforms are the reference's
(rng.token_hash of token_base + doc_major_pos, one stream per block), the lane masses are added
in the reference's butterfly order (see sample_and_shuffle's block_reduction) and the search is
the reference's own tree.search_block, so on the same inputs a token gets the same topic, up to
float rounding: the order in which Triton and XLA add a prefix sum, and a multiply-add one of
them fuses (the share of tokens that differ: docs/measurements/kernels.md).  The block loop runs
to the tile's longest row (shorter rows masked); the layout puts a word's tokens of longer documents
first, so a tile's rows have similar lengths.  Tiles follow the word-major order, most
frequent words first.
Each new topic is stored twice: at its word-major position (the state's z) and at its
doc-major position, where the A rebuild reads it (the shuffle, folded in here).

Roofline: saberjax.roofline counts what the kernel moves per token, array by array and level
by level (HBM, L2, L1).  A document's A row is read once per distinct word of it, from L2 when
the chunk's A fits the L2 and from HBM otherwise.  Either way the measurements point at the
latency of each tile's chain of dependent loads, not at any level's bandwidth, as what bounds
the kernel (docs/measurements/roofline.md, NOTES.md).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from saberjax import rng
from saberjax.layout import Chunk
from saberjax.pallas import default_interpret, registers, scatter, warp
from saberjax.pallas import tile_queues as tile_queues_module
from saberjax.sampler import dense_mass, own_topic_mass
from saberjax.sampler import sample_chunk as sample_chunk_reference
from saberjax.state import ChunkState, Model, unpack_pairs
from saberjax.tree import WIDTH, descend_excluding, search_block

__all__ = ["sample_and_shuffle", "sample_chunk_reference"]


TILE_INPUTS = 9  # tile_inputs' arrays, the first refs of every sampling kernel


class Tile(NamedTuple):
    """A tile's tokens (row t of each array is token t): their word (one per tile), own
    (current) topics, document rows of A (`start`, `nnz` nonzeros long), random states, and
    which are real tokens."""
    word: jax.Array
    own: jax.Array
    start: jax.Array
    nnz: jax.Array
    state: jax.Array
    real: jax.Array


def tile_inputs(chunk: Chunk, chunk_state: ChunkState, key):
    """The arrays sample_tile reads, in its refs' order."""
    return (jnp.reshape(chunk.token_base, (-1,)).astype(jnp.uint32),
            jnp.reshape(key, (1,)).astype(jnp.uint32), chunk.tile_start, chunk.word, chunk.doc,
            chunk.doc_major_pos, chunk.doc_start, chunk_state.a_nnz, chunk_state.topics)


def sample_tile(tile_refs, output_refs, draw, *, tile_tokens: int, block_tokens: int,
                tile_index=None):
    """Draw the new topics of tile tile_index's tokens (program_id's if None; draw: Tile ->
    topics) and store each at its word-major and its doc-major position; tiles past the last
    are empty."""
    (token_base_ref, key_ref, tile_start_ref, word_ref, doc_ref, doc_major_pos_ref,
     doc_start_ref, a_nnz_ref, old_topics_ref) = tile_refs
    topics_ref, doc_major_topics_ref = output_refs
    tile_index = pl.program_id(0) if tile_index is None else tile_index
    first, end = tile_start_ref[tile_index], tile_start_ref[tile_index + 1]

    @pl.when(first < end)
    def _():
        positions = first + jnp.arange(tile_tokens, dtype=jnp.int32)
        real = positions < end
        doc = plgpu.load(doc_ref.at[positions], mask=real, other=0)
        doc_major_pos = plgpu.load(doc_major_pos_ref.at[positions], mask=real, other=0)
        topic = draw(Tile(
            word=word_ref[first],
            own=plgpu.load(old_topics_ref.at[positions], mask=real, other=0).astype(jnp.int32),
            start=plgpu.load(doc_start_ref.at[doc], mask=real, other=0),
            nnz=plgpu.load(a_nnz_ref.at[doc], mask=real, other=0),
            state=_token_state(token_base_ref, key_ref, doc_major_pos, real, block_tokens),
            real=real))
        plgpu.store(topics_ref.at[positions], topic.astype(topics_ref.dtype), mask=real)
        scatter(doc_major_topics_ref, doc_major_pos, topic.astype(topics_ref.dtype), real)


def call_sampler(kernel, inputs, chunk: Chunk, chunk_state: ChunkState, *, name: str,
                 num_warps: int, num_stages: int, interpret: bool | None,
                 zero_doc_major: bool = True, num_programs: int | None = None,
                 max_registers: int | None = None, tile_queues: int = 0,
                 queue_programs: int = 32, claim_tiles: int = 1):
    """kernel (its refs: inputs, two arrays the outputs start from, the outputs; its keyword
    tile_index: the tile to draw, None for program_id's) run over the chunk's tiles, one
    program a tile (or num_programs programs that share them out), or with tile_queues (not 0)
    tile_queues * queue_programs programs claiming them claim_tiles at a time from that many
    queues (saberjax.pallas.tile_queues): (word-major topics, padding 0; doc-major topics, 0
    where no token of the chunk is, or unset there without zero_doc_major: then the second
    array is one unused element and the output is not aliased to it).  max_registers:
    a cap on a thread's registers (saberjax.pallas.registers), None for ptxas's choice."""
    interpret = default_interpret() if interpret is None else interpret
    starts = [(jnp.zeros_like(chunk_state.topics), True),
              (jnp.zeros(chunk_state.a_pairs.shape, chunk_state.topics.dtype) if zero_doc_major
               else jnp.zeros((1,), chunk_state.topics.dtype), zero_doc_major)]
    body, grid = kernel, num_programs or chunk.tile_start.shape[0] - 1
    if tile_queues:
        inputs = (*inputs, tile_queues_module.queue_bounds(chunk.tile_start, tile_queues))
        starts.append((tile_queues_module.queue_counters(tile_queues), True))
        body = functools.partial(_queued_kernel, kernel, len(inputs), interpret, claim_tiles)
        grid = tile_queues * queue_programs
    outputs = [jax.ShapeDtypeStruct(chunk_state.topics.shape, chunk_state.topics.dtype),
               jax.ShapeDtypeStruct(chunk_state.a_pairs.shape, chunk_state.topics.dtype)]
    outputs += [jax.ShapeDtypeStruct(start.shape, start.dtype) for start, _ in starts[2:]]
    results = pl.pallas_call(
        body,
        out_shape=tuple(outputs),
        grid=(grid,),
        input_output_aliases={len(inputs) + index: index  # padding keeps the zeros
                              for index, (_, aliased) in enumerate(starts) if aliased},
        name=name,
        compiler_params=registers.compiler_params(num_warps, num_stages, max_registers),
        interpret=interpret,
    )(*inputs, *(start for start, _ in starts))
    return results[:2]


def _queued_kernel(kernel, num_inputs: int, interpret: bool, claim_tiles: int, *refs):
    """kernel over the tiles this program claims from the tile queues: refs are kernel's
    inputs, the queues' bounds, then (topics, doc-major topics, queue counters) as the
    arrays the outputs start from and as the outputs."""
    inputs, bounds_ref, counters_ref = refs[:num_inputs - 1], refs[num_inputs - 1], refs[-1]
    kernel_refs = (*inputs, *refs[num_inputs:num_inputs + 2], *refs[-3:-1])
    tile_queues_module.visit_queues(lambda tile: kernel(*kernel_refs, tile_index=tile),
                                    bounds_ref, counters_ref, interpret=interpret,
                                    claim_tiles=claim_tiles)


def _sample_kernel(*refs, tile_tokens: int, block_tokens: int, level_widths: tuple[int, ...],
                   block_reduction: str, tile_index=None):
    """Sample the tokens of tile tile_index, program_id's if None (see the module docstring)."""
    # refs: tile_inputs', alpha, B-hat's denominator, A's pairs, the trees' totals, the tree
    # levels and B-hat, two zeroed arrays aliased to the two outputs, the outputs
    alpha_ref, denominator_ref, a_pairs_ref, tree_total_ref = refs[TILE_INPUTS:TILE_INPUTS + 4]
    level_refs = refs[TILE_INPUTS + 4:-4]
    sample_tile(refs[:TILE_INPUTS], refs[-2:], lambda tile: row_topics(
        a_pairs_ref, alpha_ref, denominator_ref, tree_total_ref, level_refs, level_widths,
        block_reduction, tile), tile_tokens=tile_tokens, block_tokens=block_tokens,
        tile_index=tile_index)


def row_topics(a_pairs_ref, alpha_ref, denominator_ref, tree_total_ref, level_refs,
               level_widths: tuple[int, ...], block_reduction: str, tile: Tile,
               own_mass=own_topic_mass):
    """New topics of a tile's tokens drawn over the tile word's dense B-hat row
    level_refs[-1][word] and its tree (the levels above it): the module docstring's steps,
    from the sparse part to the topic.  own_mass(own_count, alpha_z, B-hat_vz, D_z): the own
    topic's mass without the token (sampler.own_topic_mass: from B-hat as held)."""
    bhat_ref, word, own, real, state = level_refs[-1], tile.word, tile.own, tile.real, tile.state

    def products(topics, counts, inside, is_own):
        # a lane past the row gathers a column of the row and has count 0 (sparse_lanes)
        weights = plgpu.load(bhat_ref.at[word, topics], mask=~is_own, other=0.0,
                             eviction_policy="evict_last")
        return counts * weights.astype(jnp.float32)  # 0 outside the row and for own

    lane_mass, kept_topics, own_count = sparse_lanes(a_pairs_ref, bhat_ref.shape[1], tile,
                                                     products, word * bhat_ref.shape[1])
    own_bhat = plgpu.load(bhat_ref.at[word, own], mask=real, other=0.0).astype(jnp.float32)
    own_alpha = plgpu.load(alpha_ref.at[own], mask=real, other=0.0)
    lane_mass, kept_topics = join_own_topic(
        lane_mass, kept_topics, own_mass(own_count, own_alpha, own_bhat, plgpu.load(
            denominator_ref.at[own], mask=real, other=1.0)), tile)
    total = (warp.lane_total(lane_mass) if block_reduction == "butterfly"
             else jnp.sum(lane_mass, axis=1))
    dense_total = dense_mass(tree_total_ref[word], own_alpha, own_bhat)
    take_sparse = (rng.uniform(state, rng.STREAM_BRANCH)
                   * (total + dense_total) < total)
    u_position = rng.uniform(state, rng.STREAM_POSITION)
    sparse_topic = lane_topic(lane_mass, kept_topics, u_position * total)
    # the tree's products formed in the branch that descends
    dense_topic = tree_topic(level_refs, alpha_ref, level_widths, word, real & ~take_sparse,
                             lambda: u_position * dense_total, own,
                             lambda: own_bhat * own_alpha, eviction_policy="evict_last")
    return jnp.where(take_sparse, sparse_topic, dense_topic)


def _token_state(token_base_ref, key_ref, doc_major_pos, real, block_tokens: int):
    """The random state of each token of the tile: its global id (Chunk.token_ids) hashed with
    the iteration's key."""
    if token_base_ref.shape[0] == 2:  # one block: the chunk's documents are consecutive
        lo, hi = rng.global_token_ids(token_base_ref[0], token_base_ref[1], doc_major_pos)
    else:  # Chunk.token_ids
        block = doc_major_pos // block_tokens
        base_lo = plgpu.load(token_base_ref.at[2 * block], mask=real, other=0)
        base_hi = plgpu.load(token_base_ref.at[2 * block + 1], mask=real, other=0)
        lo, hi = rng.global_token_ids(base_lo, base_hi, doc_major_pos - block * block_tokens)
    return rng.token_hash(key_ref[0], lo, hi)


THREAD_LANES = 8  # lanes of a token one thread holds in Triton's layout of a tile's blocks


def row_inside(nnz, block, tile_tokens: int):
    """[tile, 32]: which lanes of block hold one of the row's nnz nonzeros.  Formed per group
    of THREAD_LANES lanes (a thread's, as Triton lays out a one-warp tile of 8 tokens): a
    thread compares one value of its own with the constants 0 .. 7, instead of holding 8 lane
    offsets in registers across the block loop.  Exact whatever the layout."""
    groups = WIDTH // THREAD_LANES
    left = (nnz - block * WIDTH)[:, None] - THREAD_LANES * jnp.arange(groups, dtype=jnp.int32)
    inside = jnp.arange(THREAD_LANES, dtype=jnp.int32)[None, None, :] < left[:, :, None]
    return inside.reshape(tile_tokens, WIDTH)


def sparse_lanes(a_pairs_ref, padded_topics: int, tile: Tile, products, row_offset=0):
    """The part of each token's distribution over its document's nonzeros, 32 a block:
    (each lane's mass, the topic its reservoir kept, the document's count of the token's own
    topic, whose mass is left out of the lanes).  products(topics, counts, inside, is_own):
    a block's products, 0 outside the row (not inside) and for the own topic.

    A lane past the row holds the pair (own ^ 1, count 0): a column of B-hat (its padded width
    is even) that is never the own topic, so the own-topic test needs no row mask and the
    dense kernel's B-hat gathers are masked by it alone, about one instruction a nonzero fewer
    in a kernel bound by issuing them (docs/measurements/roofline.md).

    The loop holds A_dz once a group of THREAD_LANES lanes (a thread's; a row holds each
    topic once, so one lane meets it): the largest of the group's own counts over the blocks,
    the one nonzero, by in-thread maxima (no shuffles).  That holds 7 registers a thread fewer
    across the loop than one own count a lane, what brings the dense kernel's loop to the 64
    registers at which an SM holds 32 one-warp programs instead of 28
    (docs/measurements/roofline.md, runs 18-19).

    row_offset: where the tile word's row starts in B-hat's flat index (0 if none).  The own
    test compares topic + row_offset with the own topic's: where the padded width is a power
    of two, the gather's offset ((pair & mask) | row_offset) is then one instruction (padding
    rows match no topic, which keeps the compiler from folding the test back to topics ==
    own).  The reservoirs keep topic + row_offset, and the offset comes off after the loop.
    """
    lanes, own, state, tile_tokens = warp.lane_offsets(), tile.own, tile.state, tile.own.shape[0]
    own_at_row = jnp.where(tile.real, own + row_offset, -1)
    outside = jnp.broadcast_to((own ^ 1).astype(jnp.uint32)[:, None], (tile_tokens, WIDTH))

    def load_block(block):
        """Lanes inside and pairs of block (nonzeros 32*block .. 32*block + 31)."""
        inside = row_inside(tile.nnz, block, tile_tokens)
        return inside, plgpu.load(
            a_pairs_ref.at[(tile.start + block * WIDTH)[:, None] + lanes[None, :]],
            mask=inside, other=outside)

    def visit_block(block, carry):
        """Add block's products to the lane masses; each lane keeps its product's topic
        w.p. product / lane mass (one uniform per token and block, shared by its lanes); the
        own topic's count joins its thread's.

        The next block's A entries do not depend on this block: they are loaded last in the
        program's order, and ptxas issues this block's B-hat gathers first, together.
        """
        lane_mass, kept, own_counts, (inside, pairs) = carry
        topics, counts = unpack_pairs(pairs, padded_topics)
        at_row = topics + row_offset
        is_own = at_row == own_at_row[:, None]
        own_counts = jnp.maximum(own_counts, jnp.max(jnp.where(is_own, counts, 0).reshape(
            tile_tokens, WIDTH // THREAD_LANES, THREAD_LANES), axis=2))
        block_products = products(topics, counts.astype(jnp.float32), inside, is_own)
        lane_mass = lane_mass + block_products
        keep = (rng.uniform(state, rng.STREAM_BLOCK + block)[:, None] * lane_mass
                < block_products)
        following = load_block(block + 1)
        return lane_mass, jnp.where(keep, at_row, kept), own_counts, following

    lane_mass, kept, own_counts, _ = jax.lax.fori_loop(
        0, jnp.max((tile.nnz + WIDTH - 1) // WIDTH), visit_block,
        (jnp.zeros((tile_tokens, WIDTH), jnp.float32),
         jnp.full((tile_tokens, WIDTH), row_offset, jnp.int32),
         jnp.zeros((tile_tokens, WIDTH // THREAD_LANES), jnp.int32), load_block(0)))
    return lane_mass, kept - row_offset, jnp.sum(own_counts, axis=1).astype(jnp.float32)


def join_own_topic(lane_mass, kept_topics, own_mass, tile: Tile):
    """The lanes with the own topic's whole mass joined to lane 0's reservoir as one more
    product: (lane masses, kept topics)."""
    first_lane = warp.lane_offsets()[None, :] == 0
    lane_mass = lane_mass + jnp.where(first_lane, own_mass[:, None], 0.0)
    keep_own = (rng.uniform(tile.state, rng.STREAM_OWN)
                * warp.pick_lane(lane_mass, jnp.zeros_like(tile.own)) < own_mass)
    return lane_mass, jnp.where(first_lane & keep_own[:, None], tile.own[:, None], kept_topics)


def lane_topic(lane_mass, kept_topics, target):
    """The kept topic of the lane whose mass holds target (a search of the 32 lane masses)."""
    lane, _ = search_block(lane_mass, target)
    return warp.pick_lane(kept_topics, lane)


def tree_topic(level_refs, alpha_ref, level_widths: tuple[int, ...], row, take, target, own,
               own_weight, *, eviction_policy: str | None = None):
    """The topic each `take` token draws at target() from row `row` of the W-ary tree over
    alpha_k times the leaves level_refs[-1], its own topic's leaf (weight own_weight()) left
    out (tree.descend_excluding); 0 for the others.  The branch that descends, where target
    and own_weight are formed, runs only when the tile has a `take` token."""

    def load_children(level, children, inside):
        """Children of the row's tree nodes (leaves: times alpha); only `take` tokens' rows
        touch memory."""
        mask = take[:, None] & inside
        values = plgpu.load(level_refs[level].at[row, children], mask=mask, other=0.0,
                            eviction_policy=eviction_policy).astype(jnp.float32)
        if level == len(level_widths) - 1:
            values = values * plgpu.load(alpha_ref.at[children], mask=mask, other=0.0)
        return values

    return jax.lax.cond(
        jnp.max(take.astype(jnp.int32)) > 0,
        lambda: descend_excluding(level_widths, load_children, target(), own, own_weight()),
        lambda: jnp.zeros(own.shape, jnp.int32))


@functools.partial(jax.jit, static_argnames=("zero_doc_major", "num_warps", "num_stages",
                                             "max_registers", "block_reduction",
                                             "tile_queues", "queue_programs", "claim_tiles",
                                             "interpret"))
def sample_and_shuffle(chunk: Chunk, chunk_state: ChunkState, model: Model, key, *,
                       zero_doc_major: bool = True, num_warps: int = 1, num_stages: int = 1,
                       max_registers: int | None = 64, block_reduction: str = "sum",
                       tile_queues: int = 0, queue_programs: int = 32, claim_tiles: int = 4,
                       interpret: bool | None = None):
    """New topic of every word-major token of a chunk (padding tokens get topic 0), and the same
    topics at their doc-major positions (what the A rebuild reads; stored by the kernel as it
    goes, instead of a separate scatter).

    Same contract as saberjax.sampler.sample_and_shuffle, but for zero_doc_major=False: the
    doc-major positions of no token of the chunk are left unset (not written, and not zeroed
    first), for a reader of its tokens' positions alone.  The tiles are the chunk's
    (chunk.tile_tokens, layout.TILE_TOKENS unless layout.with_tile_tokens chose another power
    of two); they and num_warps and num_stages (Triton's) default to the fastest measured on an
    H200 (NOTES.md).  max_registers caps a thread's registers, which set how many one-warp
    programs an SM holds (saberjax.pallas.registers): 64, 32 programs an SM, which the block
    loop of the layout's 8-token tiles on one warp fits without spilling
    (docs/measurements/roofline.md, run 18; larger tiles a warp hold more a thread and spill
    under it); None or 0 leaves them to ptxas.
    block_reduction: "sum" adds the 32 lane masses with Triton's reduction, which for a row
    held one lane per thread of a warp is the xor-shuffle butterfly of the reference (other
    layouts change only the rounding); "butterfly" spells that order out with splits, exact
    whatever the layout.  tile_queues, queue_programs, claim_tiles: the tiles claimed
    claim_tiles at a time from tile_queues queues (one an SM) by queue_programs programs a
    queue (saberjax.pallas.tile_queues; tile_queues 0: one program a tile), the same topics
    either way.  interpret=None: interpret unless on a GPU.
    """
    levels = tuple(model.tree) + (model.bhat,)
    kernel = functools.partial(_sample_kernel, tile_tokens=chunk.tile_tokens,
                               block_tokens=chunk.block_tokens,
                               level_widths=tuple(level.shape[1] for level in levels),
                               block_reduction=block_reduction)
    inputs = (*tile_inputs(chunk, chunk_state, key), model.alpha.astype(jnp.float32),
              model.bhat_denominator, chunk_state.a_pairs, model.tree_total, *levels)
    return call_sampler(kernel, inputs, chunk, chunk_state, name="saber_sample",
                        num_warps=num_warps, num_stages=num_stages, interpret=interpret,
                        zero_doc_major=zero_doc_major, max_registers=max_registers or None,
                        tile_queues=tile_queues, queue_programs=queue_programs,
                        claim_tiles=claim_tiles)
