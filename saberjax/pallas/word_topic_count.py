"""The B count (word-topic counts of a chunk) as a Pallas (Triton) kernel; reference:
saberjax.mstep.count_word_topic, XLA's scatter-add with one atomic per token.

A program takes block_tokens consecutive word-major tokens, which belong to one word or a few,
adds up its equal (word, topic) pairs (a block x block comparison) and does one relaxed integer
atomic per distinct pair, B[word, topic] += its count.  A word's tokens share few topics once
the model has formed, so this is several times fewer atomics than tokens, and fewer collisions
on the same B entry.  Programs run in launch order, so consecutive programs would take
consecutive blocks, the same frequent word, and collide on its row of B; program p instead
takes block (p mod G) * (blocks / G) + p // G (G = `spread`, 512), so the programs running at
once are spread over G stretches of the word-major order (at K = 1,000, NYTimes shape, H200:
4.97 -> 2.43 ms two iterations in, 3.77 -> 2.75 after 100; NOTES.md).  The E-step
kernel could do the same adds as it goes, but doing so made it slower: the atomics' B lines
pushed its A rows and B-hat rows out of L2 (NOTES.md).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from saberjax.mstep import count_word_topic as count_word_topic_reference
from saberjax.layout import Chunk
from saberjax.pallas import default_interpret
from saberjax.pallas.atomics import atomic_add

__all__ = ["count_word_topic", "count_word_topic_reference"]


def _count_kernel(num_tokens_ref, word_ref, topics_ref, word_topic_in_ref, word_topic_ref, *,
                  block_tokens: int, groups: int):
    """Add block program_id's tokens to B, one atomic per distinct (word, topic) pair."""
    del word_topic_in_ref  # aliased to word_topic_ref
    order = jnp.arange(block_tokens, dtype=jnp.int32)
    program, per_group = pl.program_id(0), pl.num_programs(0) // groups
    block = (program % groups) * per_group + program // groups
    positions = block * block_tokens + order
    real = positions < num_tokens_ref[0]
    word = plgpu.load(word_ref.at[positions], mask=real, other=0)
    topic = plgpu.load(topics_ref.at[positions], mask=real, other=0).astype(jnp.int32)
    same = ((word[:, None] == word[None, :]) & (topic[:, None] == topic[None, :])
            & real[None, :])  # [token, other token]
    earlier_same = jnp.sum((same & (order[None, :] < order[:, None])).astype(jnp.int32), axis=1)
    atomic_add(word_topic_ref, (word, topic), jnp.sum(same.astype(jnp.int32), axis=1),
               mask=real & (earlier_same == 0), semantic="relaxed")


@functools.partial(jax.jit, static_argnames=("block_tokens", "num_warps", "spread",
                                             "interpret"),
                   donate_argnames=("word_topic",))
def count_word_topic(chunk: Chunk, topics: jax.Array, word_topic: jax.Array, *,
                     block_tokens: int = 32, num_warps: int = 1, spread: int = 512,
                     interpret: bool | None = None) -> jax.Array:
    """B plus the (word, topic) counts of the chunk's real tokens, counted in place.

    Same contract as saberjax.mstep.count_word_topic.  block_tokens (a power of two), spread
    (the stretches consecutive programs are spread over, 1: blocks in order; its greatest
    common divisor with the number of blocks is used, so the stretches are equal) and
    num_warps (Triton's) default to the fastest measured on an H200 (NOTES.md).
    interpret=None: interpret unless on a GPU.
    """
    inputs = (jnp.reshape(chunk.num_tokens, (1,)).astype(jnp.int32), chunk.word, topics,
              word_topic)
    num_blocks = -(-chunk.padded_tokens // block_tokens)
    return pl.pallas_call(
        functools.partial(_count_kernel, block_tokens=block_tokens,
                          groups=math.gcd(num_blocks, spread)),
        out_shape=jax.ShapeDtypeStruct(word_topic.shape, word_topic.dtype),
        grid=(num_blocks,),
        input_output_aliases={len(inputs) - 1: 0},
        name="saber_word_topic_count",
        compiler_params=plgpu.CompilerParams(num_warps=num_warps, num_stages=1),
        interpret=default_interpret() if interpret is None else interpret,
    )(*inputs)
