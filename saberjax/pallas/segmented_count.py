"""Shuffle and segmented count (SSC) as a Pallas (Triton) kernel; reference:
saberjax.segmented_count.rebuild_doc_topic, which sorts the whole chunk by (document, topic).

Shuffle: the word-major topics go to their doc-major positions through the pointers (one XLA
scatter, at the bandwidth floor).  Segmented count: one program per document sorts the topics
of its own segment and run-length encodes them, so there is no global sort:

    radix passes   least-significant digit first (digit_bits bits a pass, as many passes as the
                   largest topic of the chunk needs): histogram the segment's digits, then place
                   each topic at  segment start + digit start + earlier equal digits  (a cumsum
                   of one-hot digits along the block), ping-ponging between two halves of a
                   scratch buffer; stable, so after the last pass the segment is sorted
    runs           topic != its left neighbour starts a run; the run's rank (cumsum) is its pair
                   slot; record each run's first position at that slot
    pairs          pair j of the document: topic = sorted[first_j], count = first_{j+1} - first_j

A kernel has no shared memory here, so the passes exchange data through the scratch buffer in
global memory (L1/L2-resident for a document) with a CTA barrier between them; the document's
program is the only reader and writer of its segment.  Interpret mode runs programs one after
another, so there the barrier is left out.

Unlike the reference, tokens past chunk.num_tokens are not counted: the padding document (one
segment up to an eighth of the chunk) would otherwise be a single, serial program.  Its A row is
empty; no real token ever reads it.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from saberjax.layout import Chunk
from saberjax.pallas import default_interpret
from saberjax.segmented_count import rebuild_doc_topic as rebuild_doc_topic_reference
from saberjax.segmented_count import shuffle_to_doc_major

__all__ = ["rebuild_doc_topic", "rebuild_doc_topic_reference"]


def _scatter(ref, index, values, mask):
    """ref[index] = values where mask; masked lanes are pointed past the end of ref.

    On a GPU masked lanes touch no memory anyway; interpret mode writes the old value back at
    every masked lane, and with repeated indices that write-back can win over a real store.
    """
    plgpu.store(ref.at[jnp.where(mask, index, ref.shape[0])], values, mask=mask)


def _segmented_count_kernel(num_tokens_ref, num_passes_ref, doc_start_ref, scratch_in_ref,
                            zero_topics_ref, zero_counts_ref, scratch_ref, a_topics_ref,
                            a_counts_ref, a_nnz_ref, *, block: int, digit_bits: int,
                            interpret: bool):
    """Sort and count the segment of document program_id (see the module docstring)."""
    del scratch_in_ref, zero_topics_ref, zero_counts_ref  # aliased to scratch, a_topics, a_counts
    doc = pl.program_id(0)
    half = scratch_ref.shape[0] // 2
    start = doc_start_ref[doc]
    length = jnp.maximum(jnp.minimum(doc_start_ref[doc + 1], num_tokens_ref[0]) - start, 0)
    num_blocks = (length + block - 1) // block
    offsets = jnp.arange(block, dtype=jnp.int32)
    radix = 1 << digit_bits
    digits = jnp.arange(radix, dtype=jnp.int32)

    def barrier():
        if not interpret:
            plgpu.debug_barrier()

    def load_segment(base, index, valid):
        """scratch[base + start + index] where valid (index: a block of segment positions)."""
        return plgpu.load(scratch_ref.at[base + start + index], mask=valid, other=0)

    def radix_pass(pass_index, carry):
        """Stable sort of the segment by digit pass_index, from one scratch half to the other."""
        source, target = (pass_index & 1) * half, ((pass_index + 1) & 1) * half
        shift = pass_index * digit_bits

        def one_hot(block_index):
            index = block_index * block + offsets
            valid = index < length
            values = load_segment(source, index, valid)
            hot = (((values >> shift) & (radix - 1))[:, None] == digits[None, :]) & valid[:, None]
            return values, valid, hot.astype(jnp.int32)

        def add_histogram(block_index, histogram):
            return histogram + jnp.sum(one_hot(block_index)[2], axis=0)

        histogram = jax.lax.fori_loop(0, num_blocks, add_histogram, jnp.zeros(radix, jnp.int32))
        digit_start = jnp.cumsum(histogram) - histogram

        def place(block_index, earlier):
            """Put a block at digit start + equal digits of earlier blocks + of this block."""
            values, valid, hot = one_hot(block_index)
            slot = jnp.cumsum(hot, axis=0) - 1 + (digit_start + earlier)[None, :]
            slot = jnp.sum(jnp.where(hot > 0, slot, 0), axis=1)
            _scatter(scratch_ref, target + start + slot, values, valid)
            return earlier + jnp.sum(hot, axis=0)

        jax.lax.fori_loop(0, num_blocks, place, jnp.zeros(radix, jnp.int32))
        barrier()
        return carry

    num_passes = num_passes_ref[0]
    jax.lax.fori_loop(0, num_passes, radix_pass, None)
    sorted_base, firsts_base = (num_passes & 1) * half, ((num_passes + 1) & 1) * half

    def mark_runs(block_index, num_runs):
        """Record the position of every run's first element at the run's pair slot."""
        index = block_index * block + offsets
        valid = index < length
        values = load_segment(sorted_base, index, valid)
        left = load_segment(sorted_base, index - 1, valid & (index > 0))
        first = valid & ((index == 0) | (values != left))
        run = num_runs + jnp.cumsum(first.astype(jnp.int32)) - 1
        _scatter(scratch_ref, firsts_base + start + run, index, first)
        return num_runs + jnp.sum(first.astype(jnp.int32))

    nnz = jax.lax.fori_loop(0, num_blocks, mark_runs, jnp.int32(0))
    barrier()

    def write_pairs(block_index, carry):
        """Pair j: the topic at the run's first position, count to the next run's first."""
        slot = block_index * block + offsets
        valid, has_following = slot < nnz, slot + 1 < nnz
        first = load_segment(firsts_base, slot, valid)
        following = jnp.where(has_following, load_segment(firsts_base, slot + 1, has_following),
                              length)
        topic = load_segment(sorted_base, first, valid)
        _scatter(a_topics_ref, start + slot, topic.astype(a_topics_ref.dtype), valid)
        _scatter(a_counts_ref, start + slot, following - first, valid)
        return carry

    jax.lax.fori_loop(0, (nnz + block - 1) // block, write_pairs, None)
    a_nnz_ref[doc] = nnz


@functools.partial(jax.jit, static_argnames=("block_tokens", "digit_bits", "num_warps",
                                             "interpret"))
def rebuild_doc_topic(chunk: Chunk, topics: jax.Array, *, block_tokens: int = 128,
                      digit_bits: int = 5, num_warps: int = 4, interpret: bool | None = None):
    """The chunk's A (a_topics, a_counts, a_nnz) from its word-major topics, sort-free.

    Same contract as saberjax.segmented_count.rebuild_doc_topic except that padding tokens are
    not counted.  block_tokens (a power of two) is the segment slice a program handles at once,
    digit_bits the radix digit (5: two passes up to K = 1,024; the fastest of 4 to 7 bits and
    32 to 256 tokens on an H200, NOTES.md); num_warps is Triton's.  interpret=None: interpret
    unless on a GPU.
    """
    size = chunk.padded_tokens
    interpret = default_interpret() if interpret is None else interpret
    doc_major = shuffle_to_doc_major(topics.astype(jnp.int32), chunk.doc_major_pos)
    top_bits = 32 - jax.lax.clz(jnp.maximum(jnp.max(doc_major), 1))
    num_passes = (top_bits + digit_bits - 1) // digit_bits
    kernel = functools.partial(
        _segmented_count_kernel, block=block_tokens, digit_bits=digit_bits, interpret=interpret)
    _, a_topics, a_counts, a_nnz = pl.pallas_call(
        kernel,
        out_shape=(jax.ShapeDtypeStruct((2 * size,), jnp.int32),
                   jax.ShapeDtypeStruct((size,), topics.dtype),
                   jax.ShapeDtypeStruct((size,), jnp.int32),
                   jax.ShapeDtypeStruct((chunk.padded_docs,), jnp.int32)),
        grid=(chunk.padded_docs,),
        name="saber_segmented_count",
        input_output_aliases={3: 0, 4: 1, 5: 2},
        compiler_params=plgpu.CompilerParams(num_warps=num_warps, num_stages=1),
        interpret=interpret,
    )(jnp.reshape(chunk.num_tokens, (1,)).astype(jnp.int32),
      jnp.reshape(num_passes, (1,)),
      chunk.doc_start,
      jnp.pad(doc_major, (0, size)),
      jnp.zeros((size,), topics.dtype),
      jnp.zeros((size,), jnp.int32))
    return a_topics, a_counts, a_nnz
