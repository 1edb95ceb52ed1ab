"""The sparsity-aware E-step as a Pallas (Triton) kernel; reference: saberjax.sampler.

One program (one warp) samples a tile: up to `tile_tokens` consecutive word-major tokens of one
word (Chunk.tile_start, built by the layout; word_tiles for other sizes), so the word's B-hat
row (bfloat16, state.BHAT_DTYPE) and tree stay hot in L1 while its tiles run (gathers with
eviction_policy="evict_last"; reading the row through shared memory with tt.gather was
slower, NOTES.md).  B-hat and the tree levels are 2-D refs indexed (word, column), so Pallas
computes 64-bit offsets once an array exceeds 4 GiB (e.g. K = 30,000 at V = 102,660).  Token
t of the tile is row t of [tile, 32] arrays: the nonzeros of its document row A_d (packed
pairs, state.pack_pairs: one load each) are visited 32 lanes at a time, in one pass, as in the
reference:

    per block   products A_dk * B-hat_vk, block mass m (a 32-lane sum), running total S += m,
                and the block replaces the kept one when u_block * S < m (weighted reservoir);
                the next block's A entries are loaded before this block's B-hat gathers
    branch      sparse part with probability S / (S + alpha * tree_total_v)
    sparse      reload the kept block (or carry it, at large K: CARRY_KEPT_FROM), search its
                32 products for u_position * (its mass)
    dense       descend word v's W-ary tree, 32 children per level (only if a token needs it)

The uniforms are the reference's (rng.token_hash of token_base + doc_major_pos, one stream per
block), block masses are added in the reference's butterfly order (see sample_and_shuffle's
block_reduction) and the searches are the reference's own tree.search_block, so on the same
inputs a token gets the same topic, up to the order in which Triton and XLA add a prefix sum
(a few tokens in a million differ, NOTES.md).  The block loop runs to the tile's longest row
(shorter rows masked); the layout puts a word's tokens of longer documents first, so a tile's
rows have similar lengths.  Tiles follow the word-major order, most frequent words first.
Each new topic is stored twice: at its word-major position (the state's z) and at its
doc-major position, where the A rebuild reads it (the shuffle, folded in here).

Bandwidth floor: per token the kernel reads its 3 word-major ints (12 B), 2 ints of doc
metadata (8 B) and its A row (4 B per nonzero: a packed (topic, count) pair), and writes its
topic (2 B; the doc-major copy, scattered, is the shuffle's): 22 + 4 * nnz bytes, e.g. 0.9 KB
at nnz = 230 (NYTimes shape, K = 1,000, two iterations after the random start), 3.2 Gtoken/s
at 3 TB/s.  A rows are shared by all tokens of a document
and mostly come from L2, so the kernel is bound by issue and latency, not DRAM (NOTES.md).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from saberjax import rng
from saberjax.layout import TILE_TOKENS, Chunk, max_tiles
from saberjax.pallas import default_interpret, scatter, warp
from saberjax.sampler import sample_chunk as sample_chunk_reference
from saberjax.state import ChunkState, Model, unpack_pairs
from saberjax.tree import WIDTH, descend, search_block

__all__ = ["sample_and_shuffle", "sample_chunk_reference"]

# From this many (padded) topics the kept block's products and topics ride along in registers;
# below it the kernel reloads the block after the loop.  Reloading costs a B-hat gather that
# hits L1 while the row is small, carrying costs registers: E-step 30 iterations in, reload vs
# carry, H200: K = 1,000 11.2 vs 12.5 ms, 4,000 12.9 vs 13.4, 6,000 14.1 vs 13.7, 10,000 16.2
# vs 14.6 (NOTES.md).
CARRY_KEPT_FROM = 5_000


def _sample_kernel(token_base_ref, key_ref, alpha_ref, tile_start_ref, word_ref,
                   doc_ref, doc_major_pos_ref, doc_start_ref, a_nnz_ref, a_pairs_ref,
                   tree_total_ref, *refs, tile_tokens: int,
                   level_widths: tuple[int, ...], block_reduction: str, carry_kept: bool):
    """Sample the tokens of tile program_id (see the module docstring)."""
    # refs: tree levels and B-hat, two zeroed arrays aliased to the two outputs, the outputs
    level_refs, (topics_ref, doc_major_topics_ref) = refs[:-4], refs[-2:]
    bhat_ref = level_refs[-1]
    lanes = warp.lane_offsets()
    first, end = tile_start_ref[pl.program_id(0)], tile_start_ref[pl.program_id(0) + 1]

    @pl.when(first < end)  # tiles past the last are empty
    def _():
        positions = first + jnp.arange(tile_tokens, dtype=jnp.int32)
        real = positions < end
        word = word_ref[first]
        doc = plgpu.load(doc_ref.at[positions], mask=real, other=0)
        doc_major_pos = plgpu.load(doc_major_pos_ref.at[positions], mask=real, other=0)
        start = plgpu.load(doc_start_ref.at[doc], mask=real, other=0)
        nnz = plgpu.load(a_nnz_ref.at[doc], mask=real, other=0)
        lo, hi = rng.global_token_ids(token_base_ref[0], token_base_ref[1], doc_major_pos)
        state = rng.token_hash(key_ref[0], lo, hi)

        def load_block(block):
            """Lanes inside, topics, counts of block (nonzeros 32*block ..; one or per token)."""
            offsets = jnp.reshape(block, (-1, 1)) * WIDTH + lanes[None, :]
            inside = offsets < nnz[:, None]
            pairs = plgpu.load(a_pairs_ref.at[start[:, None] + offsets], mask=inside, other=0)
            topics, counts = unpack_pairs(pairs, bhat_ref.shape[1])
            return inside, topics, counts.astype(jnp.float32)

        def products_of(inside, topics, counts):
            """A_dk * B-hat_vk; lanes outside the row are 0 (both factors load as 0 there)."""
            weights = plgpu.load(bhat_ref.at[word, topics], mask=inside, other=0.0,
                                 eviction_policy="evict_last")
            return counts * weights.astype(jnp.float32)

        def visit_block(block, carry):
            """Add block's mass to each token's total; keep the block w.p. mass / total (and,
            if carry_kept, its products and topics).

            The next block's A entries are loaded first (they do not depend on this block), so
            their latency overlaps this block's gathers and sums.
            """
            total, kept_block, kept_mass, loaded, kept_values = carry
            following = load_block(block + 1)
            products = products_of(*loaded)
            mass = (warp.lane_total(products) if block_reduction == "butterfly"
                    else jnp.sum(products, axis=1))
            total = total + mass
            keep = rng.uniform(state, rng.STREAM_BLOCK + block) * total < mass
            if kept_values is not None:
                kept_values = (jnp.where(keep[:, None], products, kept_values[0]),
                               jnp.where(keep[:, None], loaded[1], kept_values[1]))
            return (total, jnp.where(keep, block, kept_block), jnp.where(keep, mass, kept_mass),
                    following, kept_values)

        zeros = jnp.zeros((tile_tokens,), jnp.float32)
        kept_values = (jnp.zeros((tile_tokens, WIDTH), jnp.float32),
                       jnp.zeros((tile_tokens, WIDTH), jnp.int32)) if carry_kept else None
        total, kept_block, kept_mass, _, kept_values = jax.lax.fori_loop(
            0, jnp.max((nnz + WIDTH - 1) // WIDTH), visit_block,
            (zeros, jnp.zeros((tile_tokens,), jnp.int32), zeros, load_block(0), kept_values))
        tree_total = tree_total_ref[word]
        take_sparse = (rng.uniform(state, rng.STREAM_BRANCH)
                       * (total + alpha_ref[0] * tree_total) < total)
        u_position = rng.uniform(state, rng.STREAM_POSITION)
        if kept_values is None:  # the kept block again (recomputed products, bit-identical)
            kept = load_block(kept_block)
            kept_values = (products_of(*kept), kept[1])
        lane, _ = search_block(kept_values[0], u_position * kept_mass)
        sparse_topic = warp.pick_lane(kept_values[1], lane)
        dense = real & ~take_sparse

        def load_children(level, children, inside):
            """Children of word's tree nodes; only dense tokens' rows touch memory."""
            return plgpu.load(level_refs[level].at[word, children],
                              mask=dense[:, None] & inside, other=0.0,
                              eviction_policy="evict_last").astype(jnp.float32)

        dense_topic = jax.lax.cond(
            jnp.max(dense.astype(jnp.int32)) > 0,
            lambda: descend(level_widths, load_children, u_position * tree_total),
            lambda: jnp.zeros((tile_tokens,), jnp.int32))
        topic = jnp.where(take_sparse, sparse_topic, dense_topic)
        plgpu.store(topics_ref.at[positions], topic.astype(topics_ref.dtype), mask=real)
        scatter(doc_major_topics_ref, doc_major_pos, topic.astype(topics_ref.dtype), real)


def word_tiles(chunk: Chunk, num_words: int, tile_tokens: int) -> jax.Array:
    """The kernel's work list (as Chunk.tile_start) for tiles of tile_tokens tokens.

    The layout stores it for TILE_TOKENS; this computes it for any size (tuning) with XLA, in a
    few passes over the word array (about 1 ms for 30M tokens on an H200, each call).
    """
    size = chunk.padded_tokens
    positions = jnp.arange(size, dtype=jnp.int32)
    new_word = jnp.concatenate([jnp.ones((1,), bool), chunk.word[1:] != chunk.word[:-1]])
    word_first = jax.lax.cummax(jnp.where(new_word, positions, 0))
    head = (positions < chunk.num_tokens) & ((positions - word_first) % tile_tokens == 0)
    tiles = max_tiles(size, num_words, tile_tokens)
    tile_index = jnp.where(head, jnp.cumsum(head) - 1, tiles + 1)
    return jnp.full((tiles + 1,), chunk.num_tokens, jnp.int32).at[tile_index].set(
        positions, mode="drop")


@functools.partial(jax.jit, static_argnames=("tile_tokens", "num_warps", "num_stages",
                                             "block_reduction", "carry_kept", "interpret"))
def sample_and_shuffle(chunk: Chunk, chunk_state: ChunkState, model: Model, key, alpha, *,
                       tile_tokens: int = TILE_TOKENS, num_warps: int = 1, num_stages: int = 1,
                       block_reduction: str = "sum", carry_kept: bool | None = None,
                       interpret: bool | None = None):
    """New topic of every word-major token of a chunk (padding tokens get topic 0), and the same
    topics at their doc-major positions (what the A rebuild reads; stored by the kernel as it
    goes, instead of a separate scatter).

    Same contract as saberjax.esca.sample_and_shuffle.  tile_tokens (a power of two) and
    num_warps and num_stages (Triton's) default to the fastest measured on an H200 (NOTES.md).
    block_reduction: "sum" adds a block's 32 products with Triton's reduction, which for a row
    held one lane per thread of a warp is the xor-shuffle butterfly of the reference (other
    layouts change only the rounding); "butterfly" spells that order out with splits, exact
    whatever the layout.  carry_kept: keep the chosen block's products in registers rather
    than reload it (None: from CARRY_KEPT_FROM topics).  interpret=None: interpret unless on a
    GPU.
    """
    num_words = model.bhat.shape[0]
    levels = tuple(model.tree) + (model.bhat,)
    tile_start = (chunk.tile_start if tile_tokens == TILE_TOKENS
                  else word_tiles(chunk, num_words, tile_tokens))
    kernel = functools.partial(_sample_kernel, tile_tokens=tile_tokens,
                               level_widths=tuple(level.shape[1] for level in levels),
                               block_reduction=block_reduction,
                               carry_kept=(model.bhat.shape[1] >= CARRY_KEPT_FROM
                                           if carry_kept is None else carry_kept))
    inputs = (jnp.asarray(chunk.token_base, jnp.uint32),
              jnp.reshape(key, (1,)).astype(jnp.uint32),
              jnp.reshape(alpha, (1,)).astype(jnp.float32), tile_start, chunk.word, chunk.doc,
              chunk.doc_major_pos, chunk.doc_start, chunk_state.a_nnz, chunk_state.a_pairs,
              model.tree_total, *levels)
    topics = jax.ShapeDtypeStruct(chunk_state.topics.shape, chunk_state.topics.dtype)
    return pl.pallas_call(
        kernel,
        out_shape=(topics, topics),
        grid=(tile_start.shape[0] - 1,),
        input_output_aliases={len(inputs): 0, len(inputs) + 1: 1},  # padding keeps the zeros
        name="saber_sample",
        compiler_params=plgpu.CompilerParams(num_warps=num_warps, num_stages=num_stages),
        interpret=default_interpret() if interpret is None else interpret,
    )(*inputs, jnp.zeros_like(chunk_state.topics), jnp.zeros_like(chunk_state.topics))
