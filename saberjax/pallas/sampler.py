"""The sparsity-aware E-step as a Pallas (Triton) kernel; reference: saberjax.sampler.

One program samples a tile of consecutive word-major tokens (mostly of one word, so its B-hat
row and tree stay in L1/L2, loaded with eviction_policy="evict_last").  Token t of the tile is
row t of [tile, 32] arrays: the nonzeros of its document row A_d are visited 32 lanes at a time,
in one pass, as in the reference:

    per block   products A_dk * B-hat_vk, block mass m (a 32-lane sum), running total S += m,
                and the block replaces the kept one when u_block * S < m (weighted reservoir);
                the next block's A entries are loaded before this block's B-hat gathers
    branch      sparse part with probability S / (S + alpha * tree_total_v)
    sparse      search the kept block's 32 products for u_position * (its mass)
    dense       descend word v's W-ary tree, 32 children per level (only if a token needs it)

The uniforms are the reference's (rng.token_hash of token_base + doc_major_pos, one stream per
block) and the floats are added in the reference's butterfly order (warp.py; see sample_chunk's
block_reduction for the block mass), so on the same inputs a token gets the same topic, up to
float rounding differences between compilers.  Tiles follow the word-major order, which puts
the most frequent words (the hottest rows) first; all tiles have the same number of tokens; the
block loop runs to the tile's longest row, shorter rows masked (no memory traffic).

Bandwidth floor (H200, ~3.0-3.3 TB/s device copy): per token the kernel must read its 3
word-major ints (12 B), 2 ints of doc metadata (8 B, scattered) and its A row once (6 B per
nonzero: int16 topic, int32 count), and write its topic (2 B); B-hat and tree rows come from
cache.  With nnz nonzeros in the token's document that is about 22 + 6 * nnz bytes, e.g.
nnz = 100 -> 622 B -> 5 Gtoken/s; nnz = 230 (NYTimes shape, K = 1,000, two iterations after the
random start) -> 1.4 KB -> 2.2 Gtoken/s.  What limits the kernel instead is L1: every B-hat
gather of 32 lanes touches 15-32 different 32-byte sectors of the row (NOTES.md).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from saberjax import rng
from saberjax.layout import Chunk
from saberjax.pallas import default_interpret, warp
from saberjax.sampler import sample_chunk as sample_chunk_reference
from saberjax.state import ChunkState, Model
from saberjax.tree import WIDTH

__all__ = ["sample_chunk", "sample_chunk_reference"]


def _sample_kernel(num_tokens_ref, token_base_ref, key_ref, alpha_ref, word_ref, doc_ref,
                   doc_major_pos_ref, doc_start_ref, a_nnz_ref, a_topics_ref, a_counts_ref,
                   tree_total_ref, *refs, tile: int, level_widths: tuple[int, ...],
                   block_reduction: str):
    """Sample the tokens program_id * tile .. + tile - 1 (see the module docstring)."""
    level_refs, topics_ref = refs[:-1], refs[-1]
    bhat_ref, padded_topics = level_refs[-1], level_widths[-1]
    lanes = warp.lane_offsets()
    positions = pl.program_id(0) * tile + jnp.arange(tile, dtype=jnp.int32)
    real = positions < num_tokens_ref[0]

    def load_tokens(ref):
        return plgpu.load(ref.at[positions], mask=real, other=0)

    word, doc, doc_major_pos = map(load_tokens, (word_ref, doc_ref, doc_major_pos_ref))
    start = plgpu.load(doc_start_ref.at[doc], mask=real, other=0)
    nnz = plgpu.load(a_nnz_ref.at[doc], mask=real, other=0)
    tree_total = plgpu.load(tree_total_ref.at[word], mask=real, other=0.0,
                            eviction_policy="evict_last")
    lo, hi = rng.global_token_ids(token_base_ref[0], token_base_ref[1], doc_major_pos)
    state = rng.token_hash(key_ref[0], lo, hi)

    def inside_block(block):
        """Which lanes of block (nonzeros 32*block .. 32*block+31) each token has."""
        return (block * WIDTH + lanes)[None, :] < nnz[:, None]

    def load_block(block):
        """Topics and counts of every token's nonzeros in block (masked lanes: 0)."""
        inside, index = inside_block(block), start[:, None] + block * WIDTH + lanes[None, :]
        topics = plgpu.load(a_topics_ref.at[index], mask=inside, other=0).astype(jnp.int32)
        counts = plgpu.load(a_counts_ref.at[index], mask=inside, other=0).astype(jnp.float32)
        return topics, counts

    def visit_block(block, carry):
        """Add block's mass to the total; keep the block with probability mass / total.

        The next block's A entries are loaded first (they do not depend on this block), so
        their DRAM latency overlaps this block's B-hat gathers and sums.
        """
        total, kept_products, kept_topics, kept_mass, topics, counts = carry
        next_topics, next_counts = load_block(block + 1)
        inside = inside_block(block)
        weights = plgpu.load(bhat_ref.at[word[:, None] * padded_topics + topics], mask=inside,
                             other=0.0, eviction_policy="evict_last")
        products = jnp.where(inside, counts * weights, 0.0)
        mass = (warp.lane_total(products) if block_reduction == "butterfly"
                else jnp.sum(products, axis=1))
        total = total + mass
        keep = rng.uniform(state, rng.STREAM_BLOCK + block) * total < mass
        return (total, jnp.where(keep[:, None], products, kept_products),
                jnp.where(keep[:, None], topics, kept_topics), jnp.where(keep, mass, kept_mass),
                next_topics, next_counts)

    zeros = jnp.zeros((tile,), jnp.float32)
    total, products, topics, mass, *_ = jax.lax.fori_loop(
        0, jnp.max((nnz + WIDTH - 1) // WIDTH), visit_block,
        (zeros, jnp.zeros((tile, WIDTH), jnp.float32), jnp.zeros((tile, WIDTH), jnp.int32), zeros,
         *load_block(0)))
    dense_total = alpha_ref[0] * tree_total
    take_sparse = rng.uniform(state, rng.STREAM_BRANCH) * (total + dense_total) < total
    u_position = rng.uniform(state, rng.STREAM_POSITION)
    lane, _ = warp.search_block(products, u_position * mass)
    sparse_topic = warp.pick_lane(topics, lane)
    dense = real & ~take_sparse

    def tree_walk():
        """Leaf of every dense token's tree, top level to B-hat."""
        mass = u_position * tree_total
        node = jnp.zeros((tile,), jnp.int32)
        for level_ref, width in zip(level_refs, level_widths):
            children = node[:, None] * WIDTH + lanes[None, :]
            inside = dense[:, None] & (children < width)
            values = plgpu.load(level_ref.at[word[:, None] * width + children], mask=inside,
                                other=0.0, eviction_policy="evict_last")
            lane, before = warp.search_block(values, mass)
            mass = mass - before
            node = node * WIDTH + lane
        return node

    dense_topic = jax.lax.cond(jnp.max(dense.astype(jnp.int32)) > 0, tree_walk,
                               lambda: jnp.zeros((tile,), jnp.int32))
    topic = jnp.where(real, jnp.where(take_sparse, sparse_topic, dense_topic), 0)
    plgpu.store(topics_ref.at[positions], topic.astype(topics_ref.dtype),
                mask=positions < topics_ref.shape[0])


@functools.partial(jax.jit, static_argnames=("tokens_per_program", "num_warps", "num_stages",
                                             "block_reduction", "interpret"))
def sample_chunk(chunk: Chunk, chunk_state: ChunkState, model: Model, key, alpha, *,
                 tokens_per_program: int = 32, num_warps: int = 4, num_stages: int = 1,
                 block_reduction: str = "sum", interpret: bool | None = None):
    """New topic of every word-major token of a chunk (padding tokens get topic 0).

    Same contract as saberjax.sampler.sample_chunk.  tokens_per_program (a power of two) is the
    tile; num_warps and num_stages are Triton's.  block_reduction: "sum" adds a block's 32
    products with Triton's reduction, which for a row held one lane per thread of a warp is the
    xor-shuffle butterfly of the reference (other layouts change only the rounding); "butterfly"
    spells that order out with splits, exact whatever the layout, but its layout changes go
    through shared memory.  interpret=None: interpret unless on a GPU.
    """
    num_words, padded_topics = model.bhat.shape
    if num_words * padded_topics >= 2**31:
        raise ValueError(f"B-hat of {num_words} x {padded_topics} is too large for int32 offsets")
    levels = tuple(model.tree) + (model.bhat,)
    kernel = functools.partial(_sample_kernel, tile=tokens_per_program,
                               level_widths=tuple(level.shape[1] for level in levels),
                               block_reduction=block_reduction)
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(chunk_state.topics.shape, chunk_state.topics.dtype),
        grid=(pl.cdiv(chunk.padded_tokens, tokens_per_program),),
        name="saber_sample",
        compiler_params=plgpu.CompilerParams(num_warps=num_warps, num_stages=num_stages),
        interpret=default_interpret() if interpret is None else interpret,
    )(jnp.reshape(chunk.num_tokens, (1,)).astype(jnp.int32),
      jnp.asarray(chunk.token_base, jnp.uint32),
      jnp.reshape(key, (1,)).astype(jnp.uint32),
      jnp.reshape(alpha, (1,)).astype(jnp.float32),
      chunk.word, chunk.doc, chunk.doc_major_pos, chunk.doc_start, chunk_state.a_nnz,
      chunk_state.a_topics, chunk_state.a_counts, model.tree_total,
      *(level.reshape(-1) for level in levels))
