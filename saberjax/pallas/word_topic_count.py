"""The B count (word-topic counts of a chunk) as a Pallas (Triton) kernel; reference:
saberjax.esca.count_word_topic, XLA's scatter-add with one atomic per token.

A program takes block_tokens consecutive word-major tokens, which belong to one word or a few,
adds up its equal (word, topic) pairs (a block x block comparison) and does one relaxed integer
atomic per distinct pair, B[word, topic] += its count.  A word's tokens share few topics once
the model has formed, so this is several times fewer atomics than tokens, and fewer collisions
on the same B entry.  The E-step
kernel could do the same adds as it goes, but doing so made it slower: the atomics' B lines
pushed its A rows and B-hat rows out of L2 (NOTES.md).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from saberjax.esca import count_word_topic as count_word_topic_reference
from saberjax.layout import Chunk
from saberjax.pallas import default_interpret
from saberjax.pallas.atomics import atomic_add

__all__ = ["count_word_topic", "count_word_topic_reference"]


def _count_kernel(num_tokens_ref, word_ref, topics_ref, word_topic_in_ref, word_topic_ref, *,
                  block_tokens: int):
    """Add block program_id's tokens to B, one atomic per distinct (word, topic) pair."""
    del word_topic_in_ref  # aliased to word_topic_ref
    order = jnp.arange(block_tokens, dtype=jnp.int32)
    positions = pl.program_id(0) * block_tokens + order
    real = positions < num_tokens_ref[0]
    word = plgpu.load(word_ref.at[positions], mask=real, other=0)
    topic = plgpu.load(topics_ref.at[positions], mask=real, other=0).astype(jnp.int32)
    same = ((word[:, None] == word[None, :]) & (topic[:, None] == topic[None, :])
            & real[None, :])  # [token, other token]
    earlier_same = jnp.sum((same & (order[None, :] < order[:, None])).astype(jnp.int32), axis=1)
    atomic_add(word_topic_ref, (word, topic), jnp.sum(same.astype(jnp.int32), axis=1),
               mask=real & (earlier_same == 0), semantic="relaxed")


@functools.partial(jax.jit, static_argnames=("block_tokens", "num_warps", "interpret"),
                   donate_argnames=("word_topic",))
def count_word_topic(chunk: Chunk, topics: jax.Array, word_topic: jax.Array, *,
                     block_tokens: int = 32, num_warps: int = 1,
                     interpret: bool | None = None) -> jax.Array:
    """B plus the (word, topic) counts of the chunk's real tokens, counted in place.

    Same contract as saberjax.esca.count_word_topic.  block_tokens (a power of two) and
    num_warps (Triton's) default to the fastest measured on an H200 (NOTES.md).
    interpret=None: interpret unless on a GPU.
    """
    inputs = (jnp.reshape(chunk.num_tokens, (1,)).astype(jnp.int32), chunk.word, topics,
              word_topic)
    return pl.pallas_call(
        functools.partial(_count_kernel, block_tokens=block_tokens),
        out_shape=jax.ShapeDtypeStruct(word_topic.shape, word_topic.dtype),
        grid=(-(-chunk.padded_tokens // block_tokens),),
        input_output_aliases={len(inputs) - 1: 0},
        name="saber_word_topic_count",
        compiler_params=plgpu.CompilerParams(num_warps=num_warps, num_stages=1),
        interpret=default_interpret() if interpret is None else interpret,
    )(*inputs)
