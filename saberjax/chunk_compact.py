"""A chunk as the chunk store keeps it and puts it on the devices: a layout.Chunk whose
word-major `word` and `doc` arrays (8 bytes a token) are replaced by the chunk's word runs (8
bytes a distinct word), from which the devices recompute both (`expand`: a scatter and a
cumulative sum each, and a gather).  doc_major_pos, doc_start and the tile list stay as they
are.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from saberjax.layout import TILE_TOKENS, Chunk


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class CompactChunk:
    """A layout.Chunk as stored and put on the devices: `word` and `doc` replaced by the
    chunk's word runs (expand recomputes them)."""

    doc_major_pos: np.ndarray  # int32 [T_pad], as Chunk
    doc_start: np.ndarray  # int32 [D_pad + 1], as Chunk
    tile_start: np.ndarray  # int32, as Chunk
    run_word: np.ndarray  # int32 [R] the chunk's words in word-major order, then zeros (at
    # least one: padding tokens are word 0)
    run_tokens: np.ndarray  # int32 [R] tokens of each of those words, then zeros
    num_tokens: np.ndarray  # int32 scalar, as Chunk
    token_base: np.ndarray  # uint32 [1, 2], as Chunk
    tile_tokens: int = dataclasses.field(default=TILE_TOKENS, metadata=dict(static=True))
    block_tokens: int = dataclasses.field(default=1 << 31, metadata=dict(static=True))


COMPACT_FIELDS = tuple(field.name for field in dataclasses.fields(CompactChunk)
                      if not field.metadata.get("static"))


def compact(chunk: Chunk, num_runs: int) -> CompactChunk:
    """The compact form of a host chunk, with room for num_runs - 1 word runs."""
    num_tokens = int(chunk.num_tokens)
    words = np.asarray(chunk.word)[:num_tokens]
    starts = np.flatnonzero(np.diff(words, prepend=-1))
    run_word, run_tokens = np.zeros(num_runs, np.int32), np.zeros(num_runs, np.int32)
    run_word[: len(starts)] = words[starts]
    run_tokens[: len(starts)] = np.diff(starts, append=num_tokens)
    return CompactChunk(chunk.doc_major_pos, chunk.doc_start, chunk.tile_start, run_word,
                        run_tokens, chunk.num_tokens, chunk.token_base, chunk.tile_tokens,
                        chunk.block_tokens)


def compact_on_device(chunk: Chunk, num_runs: int) -> CompactChunk:
    """compact in jax, on the devices that hold the chunk: the same arrays."""
    padded_tokens = chunk.word.shape[0]
    position = jnp.arange(padded_tokens, dtype=jnp.int32)
    first = (position < chunk.num_tokens) & (
        (position == 0) | (chunk.word != jnp.roll(chunk.word, 1)))
    run = jnp.cumsum(first, dtype=jnp.int32) - 1
    # each run's first token, then num_tokens (the runs of no tokens)
    run_start = jnp.full(num_runs + 1, chunk.num_tokens, jnp.int32).at[
        jnp.where(first, run, num_runs + 1)].set(position, mode="drop")
    starts = run_start[:-1]
    run_word = jnp.where(starts < chunk.num_tokens,
                         chunk.word[jnp.minimum(starts, padded_tokens - 1)], 0)
    return CompactChunk(chunk.doc_major_pos, chunk.doc_start, chunk.tile_start, run_word,
                        jnp.diff(run_start), chunk.num_tokens, chunk.token_base,
                        chunk.tile_tokens, chunk.block_tokens)


def expand(chunk: CompactChunk) -> Chunk:
    """The layout.Chunk of a compact chunk (jax; the inverse of compact)."""
    padded_tokens = chunk.doc_major_pos.shape[0]
    run_start = jnp.cumsum(chunk.run_tokens) - chunk.run_tokens
    word_step = jnp.diff(chunk.run_word, prepend=0)  # padding runs start at num_tokens: word 0
    word = jnp.cumsum(jnp.zeros(padded_tokens + 1, jnp.int32).at[run_start].add(word_step)
                      [:padded_tokens], dtype=jnp.int32)
    # the document of each doc-major position: how many segments after the first start there
    doc_of_position = jnp.cumsum(jnp.zeros(padded_tokens + 1, jnp.int32)
                                 .at[chunk.doc_start[1:]].add(1)[:padded_tokens],
                                 dtype=jnp.int32)
    return Chunk(word=word, doc=doc_of_position[chunk.doc_major_pos],
                 doc_major_pos=chunk.doc_major_pos, doc_start=chunk.doc_start,
                 num_tokens=chunk.num_tokens, token_base=chunk.token_base,
                 tile_start=chunk.tile_start, tile_tokens=chunk.tile_tokens,
                 block_tokens=chunk.block_tokens)
