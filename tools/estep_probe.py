"""Probe kernels for the E-step's roofline (docs/measurements/roofline.md, run 14): the
sampling kernel's memory accesses with as little arithmetic as will keep them, to time what
its access pattern allows apart from the sampling math.

    python tools/sampler_sweep.py --synth_preset=nytimes --num_topics=1000,10000 \
        --iterations=3 --full_run=false \
        --variants='a:file=tools/estep_probe.py,probe=a;ab:file=tools/estep_probe.py,probe=ab'

Each probe has saberjax.pallas.sampler.sample_and_shuffle's signature (a sampler_sweep
variant file) and runs over the same tiles, one warp a tile, through the library's own
sample_tile (token lists, doc metadata, the token's random state, both topic stores).  What a
probe reads per block of 32 nonzeros of each token's A row, `probe`:

    a      the packed pairs (masked to the row), summed as integers
    a2     a with the pairs of the next two blocks in flight instead of the next one
    ab     the pairs, and the tile word's B-hat at each pair's topic (masked to the row),
           each count times its B-hat summed per lane: the kernel's loads of its block loop
    abt    ab, then per token the kernel's after-loop loads (own topic's B-hat, alpha, the
           denominator, the tree's total) and its branch: the tokens the kernel would send to
           the dense part descend the word's tree (saberjax.pallas.sampler.tree_topic)
    ap     a in `programs` persistent programs (default: as many one-warp programs as an
           H100 holds), each taking every programs-th tile, the chain of loads before a
           tile's block loop issued over the three tiles before it: a with the tiles' chains
           of dependent loads overlapped by the block loops (no random state)

Every probe keeps the kernel's tree walk in its program, `a` and `ab` one no token takes (a row
shorter than 0): without any tree load Triton lays the whole program out differently, with
more instructions a block (docs/measurements/roofline.md, run 5).  The topics a probe stores
are not draws (the lane sums' low bits, or the tree's topic):
sampler_sweep reports them as mismatches.  What a probe leaves out is the kernel's
arithmetic: the own-topic test and count, the per-block uniform, the weighted reservoirs,
and the lane search.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from saberjax import rng
from saberjax.layout import Chunk
from saberjax.pallas import sampler, scatter, warp
from saberjax.sampler import dense_mass
from saberjax.state import ChunkState, Model, unpack_pairs
from saberjax.tree import WIDTH

PROBES = ("a", "a2", "ab", "abt", "ap")
PERSISTENT_PROGRAMS = 132 * 32  # one-warp programs an H100 holds at once


def probe_lanes(a_pairs_ref, bhat_ref, tile: sampler.Tile, gather: bool, ahead: int = 1):
    """Per lane: the sum of the pairs (gather False) or of count times B-hat at the topic
    (gather True) over the token's A row, one block of 32 nonzeros a loop step, the pairs of
    the `ahead` blocks after it in flight (loaded last in the step, as the kernel loads the
    next block's)."""
    lanes, tile_tokens = warp.lane_offsets(), tile.own.shape[0]

    def load_block(block):
        inside = lanes[None, :] < (tile.nnz - block * WIDTH)[:, None]
        pairs = plgpu.load(a_pairs_ref.at[(tile.start + block * WIDTH)[:, None]
                                          + lanes[None, :]], mask=inside, other=0)
        return inside, pairs

    def visit_block(block, carry):
        acc, blocks = carry
        inside, pairs = blocks[0]
        if gather:
            topics, counts = unpack_pairs(pairs, bhat_ref.shape[1])
            weights = plgpu.load(bhat_ref.at[tile.word, topics], mask=inside, other=0.0,
                                 eviction_policy="evict_last")
            acc = acc + counts.astype(jnp.float32) * weights.astype(jnp.float32)
        else:
            acc = acc + pairs.astype(jnp.int32)
        return acc, (*blocks[1:], load_block(block + ahead))

    acc, _ = jax.lax.fori_loop(
        0, jnp.max((tile.nnz + WIDTH - 1) // WIDTH), visit_block,
        (jnp.zeros((tile_tokens, WIDTH), jnp.float32 if gather else jnp.int32),
         tuple(load_block(block) for block in range(ahead))))
    return acc


def probe_topics(a_pairs_ref, alpha_ref, denominator_ref, tree_total_ref, level_refs,
                 level_widths: tuple[int, ...], probe: str, tile: sampler.Tile):
    """The probe's stored topic of each token of a tile (the module docstring)."""
    bhat_ref, word, own, real = level_refs[-1], tile.word, tile.own, tile.real
    acc = probe_lanes(a_pairs_ref, bhat_ref, tile, gather=probe.startswith("ab"),
                      ahead=2 if probe == "a2" else 1)
    total = jnp.sum(acc, axis=1)
    if probe.startswith("ab"):
        total_bits = jax.lax.bitcast_convert_type(total, jnp.int32)
    else:
        total_bits = total
    low_bits = total_bits & 1023
    if probe != "abt":  # a tree walk no token takes (nnz >= 0): the kernel's layout
        return jnp.where(tile.nnz < 0, sampler.tree_topic(
            level_refs, alpha_ref, level_widths, word, real & (tile.nnz < 0),
            lambda: total.astype(jnp.float32), own, lambda: jnp.zeros(own.shape, jnp.float32)),
            low_bits)
    own_bhat = plgpu.load(bhat_ref.at[word, own], mask=real, other=0.0).astype(jnp.float32)
    own_alpha = plgpu.load(alpha_ref.at[own], mask=real, other=0.0)
    total = total + own_alpha * own_bhat / plgpu.load(denominator_ref.at[own], mask=real,
                                                      other=1.0)
    dense_total = dense_mass(tree_total_ref[word], own_alpha, own_bhat)
    u_branch = rng.uniform(tile.state, rng.STREAM_BRANCH)
    take_sparse = u_branch * (total + dense_total) < total
    dense_topic = sampler.tree_topic(level_refs, alpha_ref, level_widths, word,
                                     real & ~take_sparse, lambda: u_branch * dense_total, own,
                                     lambda: own_bhat * own_alpha,
                                     eviction_policy="evict_last")
    return jnp.where(take_sparse, low_bits, dense_topic)


def _probe_kernel(*refs, tile_tokens: int, block_tokens: int, level_widths: tuple[int, ...],
                  probe: str):
    """The probe over tile program_id (refs as saberjax.pallas.sampler's kernel's)."""
    alpha_ref, denominator_ref, a_pairs_ref, tree_total_ref = refs[
        sampler.TILE_INPUTS:sampler.TILE_INPUTS + 4]
    level_refs = refs[sampler.TILE_INPUTS + 4:-4]
    sampler.sample_tile(refs[:sampler.TILE_INPUTS], refs[-2:], lambda tile: probe_topics(
        a_pairs_ref, alpha_ref, denominator_ref, tree_total_ref, level_refs, level_widths,
        probe, tile), tile_tokens=tile_tokens, block_tokens=block_tokens)


def _persistent_kernel(*refs, tile_tokens: int, level_widths: tuple[int, ...], programs: int):
    """Probe `ap` (the module docstring): program_id's tiles pid + k * programs, the chain of
    dependent loads before a tile's block loop spread over the three loop steps before its
    own (tile list, then token lists, then doc metadata), so each load has a tile's loop to
    land in."""
    (_, _, tile_start_ref, word_ref, doc_ref, doc_major_pos_ref, doc_start_ref, a_nnz_ref,
     _) = refs[:sampler.TILE_INPUTS]
    alpha_ref, _, a_pairs_ref = refs[sampler.TILE_INPUTS:sampler.TILE_INPUTS + 3]
    level_refs, (topics_ref, doc_major_topics_ref) = refs[sampler.TILE_INPUTS + 4:-4], refs[-2:]
    num_tiles, pid = tile_start_ref.shape[0] - 1, pl.program_id(0)

    def tile_list(k):
        """Where the program's k-th tile starts and ends (empty past the last tile)."""
        tile = pid + k * programs
        return (tile_start_ref[jnp.minimum(tile, num_tiles)],
                tile_start_ref[jnp.minimum(tile + 1, num_tiles)])

    def token_lists(first, end):
        """A tile's word, positions, real tokens, doc-major positions and documents."""
        positions = first + jnp.arange(tile_tokens, dtype=jnp.int32)
        real = positions < end
        return (word_ref[jnp.minimum(first, word_ref.shape[0] - 1)], positions, real,
                plgpu.load(doc_major_pos_ref.at[positions], mask=real, other=0),
                plgpu.load(doc_ref.at[positions], mask=real, other=0))

    def doc_metadata(word, positions, real, doc_major_pos, doc):
        """The tile with its A rows' starts and lengths."""
        return (word, positions, real, doc_major_pos,
                plgpu.load(doc_start_ref.at[doc], mask=real, other=0),
                plgpu.load(a_nnz_ref.at[doc], mask=real, other=0))

    def visit_tile(k, carry):
        third, second, current = carry  # tiles k + 2, k + 1 (two stages on), k (loaded)
        following = (tile_list(k + 3), token_lists(*third), doc_metadata(*second))
        word, positions, real, doc_major_pos, start, nnz = current
        zeros = jnp.zeros(tile_tokens, jnp.int32)
        total = jnp.sum(probe_lanes(a_pairs_ref, None, sampler.Tile(
            word=word, own=zeros, start=start, nnz=nnz, state=zeros, real=real),
            gather=False), axis=1)
        topic = jnp.where(nnz < 0, sampler.tree_topic(  # none taken: the kernel's layout
            level_refs, alpha_ref, level_widths, word, real & (nnz < 0),
            lambda: total.astype(jnp.float32), zeros, lambda: zeros.astype(jnp.float32)),
            total & 1023).astype(topics_ref.dtype)
        plgpu.store(topics_ref.at[positions], topic, mask=real)
        scatter(doc_major_topics_ref, doc_major_pos, topic, real)
        return following

    start = (tile_list(2), token_lists(*tile_list(1)), doc_metadata(*token_lists(*tile_list(0))))
    jax.lax.fori_loop(0, (num_tiles - pid + programs - 1) // programs, visit_tile, start)


@functools.partial(jax.jit, static_argnames=("probe", "num_warps", "programs", "interpret"))
def sample_and_shuffle(chunk: Chunk, chunk_state: ChunkState, model: Model, key, *,
                       probe: str = "ab", num_warps: int = 1,
                       programs: int = PERSISTENT_PROGRAMS, interpret: bool | None = None):
    """The probe `probe` over the chunk's tiles, called as the library's kernel is:
    (word-major topics, doc-major topics); programs: probe `ap`'s."""
    if probe not in PROBES:
        raise ValueError(f"probe {probe!r} is not one of {PROBES}")
    levels = tuple(model.tree) + (model.bhat,)
    if probe == "ap":
        kernel = functools.partial(_persistent_kernel, tile_tokens=chunk.tile_tokens,
                                   level_widths=tuple(level.shape[1] for level in levels),
                                   programs=programs)
    else:
        kernel = functools.partial(_probe_kernel, tile_tokens=chunk.tile_tokens,
                                   block_tokens=chunk.block_tokens,
                                   level_widths=tuple(level.shape[1] for level in levels),
                                   probe=probe)
    inputs = (*sampler.tile_inputs(chunk, chunk_state, key), model.alpha.astype(jnp.float32),
              model.bhat_denominator, chunk_state.a_pairs, model.tree_total, *levels)
    return sampler.call_sampler(kernel, inputs, chunk, chunk_state, name="estep_probe",
                                num_warps=num_warps, num_stages=1, interpret=interpret,
                                num_programs=programs if probe == "ap" else None)
