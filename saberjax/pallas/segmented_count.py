"""Shuffle and segmented count (SSC) as a Pallas (Triton) kernel; reference:
saberjax.segmented_count.rebuild_doc_topic, which sorts the whole chunk by (document, topic).

Shuffle: the E-step kernel already stores each new topic at its doc-major position too
(saberjax.pallas.sampler.sample_and_shuffle), which saves XLA's scatter, as long as the
segmented count itself (docs/measurements/kernels.md).  Segmented count: a fixed number of
programs each take every num_programs-th document and count its segment in a private scratch
row, with no sort at all:

    count     per token, an atomic add of 1 at counts[topic]; the lane that finds 0 there is
              its topic's first and sets the topic's bit in a bitmap of K bits (an atomic add
              of 1 << (topic % 32) to word topic // 32: each bit is added once, so add is or)
    ranks     swap the bitmap's K/32 words for zeros (clearing it for the next document):
              population counts and their exclusive prefix sum give each word's first pair
              slot; the total is nnz.  The words and prefixes go to a snapshot
    pairs     per token, swap counts[topic] for 0 (clearing it for the program's next
              document): the one copy of the topic that gets its count back, not 0, writes
              the packed (topic, count) at pair slot rank = prefix[word] + population count of
              the word's bits below its topic, so pairs come out in increasing topic order

At large K the ranks phase's scan of K/32 words a document is the kernel's cost, so there
the bitmap has a summary above it (`levels` 2): one bit per bitmap word, set by the token that
makes its word nonzero.  The ranks phase then scans the K/1024 summary words, which number the
nonzero bitmap words in topic order (their prefix of population counts); each summary word's
lane swaps its nonzero bitmap words out in order into a compact list, and a scan of that list
(as long as the document's distinct words) gives each nonzero word's first pair slot.  A token
finds its word's entry in the list through its summary word:

    summary word s = topic / 1024   list entry = first[s] + population count of s's bits below
                                                 bit (topic / 32) % 32

, so the scratch rows live in global memory (L2-resident
while the programs' rows together stay under `scratch_bytes`) and phases are separated by a CTA
barrier.  Counts and bitmap are only ever changed by atomics, which are done in L2: a plain
store of the clearing zeros would be made visible to the CTA by the barrier but may reach L2
after the next document's atomics, losing topics once the rows outgrow L2 (NOTES.md).  With
every access to them an atomic, the barrier orders them, so relaxed atomics suffice, and they
are as fast as acquire-release ones or faster (NOTES.md).  Reading each count by the swap that
clears it saves the separate clear pass over the tokens of a plain (volatile) read followed by
a swap (docs/measurements/roofline.md).  Interpret mode runs programs one after another, so
there the barrier is left out; its atomics (saberjax.pallas.atomics) are exact with repeated
indices.

Per token: three atomics (two when its topic's bit is already set; one more for the summary at
two levels), two loads of its topic (L1 after the first), two gathers from the snapshot (four
at two levels), at most one store, plus K/32 words scanned per document (K/1024 and the
nonzero words at two levels).  Tokens past chunk.num_tokens are not counted (the padding document's A row is
empty), as in the reference.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from saberjax.layout import Chunk
from saberjax.pallas import default_interpret, scatter
from saberjax.pallas.atomics import atomic_add, atomic_swap
from saberjax.segmented_count import rebuild_doc_topic as rebuild_doc_topic_reference
from saberjax.state import pack_pairs

__all__ = ["rebuild_doc_topic", "rebuild_doc_topic_reference"]

BITS = 32  # topics per bitmap word
WORD_BLOCK = 1024  # bitmap words a ranks phase's scan takes at once


def _segmented_count_kernel(num_tokens_ref, doc_start_ref, doc_major_ref, counts_in_ref,
                            bitmap_in_ref, summary_in_ref, zero_pairs_ref, counts_ref,
                            bitmap_ref, summary_ref, snapshot_ref, summary_snapshot_ref,
                            a_pairs_ref, a_nnz_ref, *, block: int, word_block: int, levels: int,
                            semantic: str, interpret: bool):
    """Count the segments of documents program_id, + num_programs, ... (module docstring)."""
    del counts_in_ref, bitmap_in_ref, summary_in_ref, zero_pairs_ref  # aliased to outputs
    program, num_programs = pl.program_id(0), pl.num_programs(0)
    num_topics = counts_ref.shape[1]
    offsets = jnp.arange(block, dtype=jnp.int32)
    word_offsets = jnp.arange(word_block, dtype=jnp.int32)

    def barrier():
        if not interpret:
            plgpu.debug_barrier()

    def count_document(index, carry):
        doc = program + index * num_programs
        start = doc_start_ref[doc]
        length = jnp.maximum(jnp.minimum(doc_start_ref[doc + 1], num_tokens_ref[0]) - start, 0)

        def over_tokens(visit):
            _over_tokens(doc_major_ref, start, length, offsets, visit)

        def count(valid, topics):
            before = atomic_add(counts_ref, (program, topics), jnp.ones_like(topics), mask=valid,
                                semantic=semantic)
            first = valid & (before == 0)
            word = topics // BITS
            word_before = atomic_add(bitmap_ref, (program, word), jnp.left_shift(1, topics % BITS),
                                     mask=first, semantic=semantic)
            if levels == 2:  # the word's first topic marks it in the summary
                atomic_add(summary_ref, (program, word // BITS), jnp.left_shift(1, word % BITS),
                           mask=first & (word_before == 0), semantic=semantic)

        over_tokens(count)
        barrier()

        if levels == 1:
            nnz = _rank_words(bitmap_ref, snapshot_ref, program, word_offsets, semantic)
        else:
            _list_words(summary_ref, bitmap_ref, summary_snapshot_ref, snapshot_ref, program,
                        word_offsets, semantic)
            barrier()
            nnz = _rank_listed_words(snapshot_ref, summary_snapshot_ref, program, word_offsets)
        barrier()

        def snapshot_entry(word, valid):
            """The word's entry in the snapshot: the word itself at one level, its place in
            the list of nonzero words at two."""
            if levels == 1:
                return word
            summary_word = word // BITS
            marks = plgpu.load(summary_snapshot_ref.at[program, 0, summary_word], mask=valid,
                               other=0)
            first = plgpu.load(summary_snapshot_ref.at[program, 1, summary_word], mask=valid,
                               other=0)
            return first + jax.lax.population_count(
                marks & (jnp.left_shift(1, word % BITS) - 1))

        def write_pairs(valid, topics):
            counts = atomic_swap(counts_ref, (program, topics), jnp.zeros_like(topics),
                                 mask=valid, semantic=semantic)
            entry = snapshot_entry(topics // BITS, valid)
            bits = plgpu.load(snapshot_ref.at[program, 0, entry], mask=valid, other=0)
            below = bits & (jnp.left_shift(1, topics % BITS) - 1)  # wraps to 0x7fffffff at 31
            rank = (plgpu.load(snapshot_ref.at[program, 1, entry], mask=valid, other=0)
                    + jax.lax.population_count(below))
            scatter(a_pairs_ref, start + rank, pack_pairs(topics, counts, num_topics),
                    valid & (counts > 0))

        over_tokens(write_pairs)
        barrier()
        a_nnz_ref[doc] = nnz
        return carry

    num_docs = a_nnz_ref.shape[0]
    jax.lax.fori_loop(0, (num_docs - program + num_programs - 1) // num_programs,
                      count_document, None)


def _over_tokens(doc_major_ref, start, length, offsets, visit) -> None:
    """visit(valid, topics) for each block (of len(offsets) tokens) of the doc-major topics of
    the document whose segment starts at `start` and holds `length` tokens."""
    block = offsets.shape[0]

    def body(block_index, carry):
        index = block_index * block + offsets
        valid = index < length
        topics = plgpu.load(doc_major_ref.at[start + index], mask=valid, other=0)
        visit(valid, topics.astype(jnp.int32))
        return carry

    jax.lax.fori_loop(0, (length + block - 1) // block, body, None)


def _rank_words(bitmap_ref, snapshot_ref, program, word_offsets, semantic: str):
    """The ranks phase of a program's document: snapshot each bitmap word and the pairs before
    it, clearing the bitmap (len(word_offsets) words at a time); returns the pairs, nnz."""
    num_words, word_block = bitmap_ref.shape[1], word_offsets.shape[0]

    def rank_words(block_index, total):
        word = block_index * word_block + word_offsets
        inside = word < num_words
        bits = atomic_swap(bitmap_ref, (program, word), jnp.zeros_like(word), mask=inside,
                           semantic=semantic)
        ones = jax.lax.population_count(bits)
        plgpu.store(snapshot_ref.at[program, 0, word], bits, mask=inside)
        plgpu.store(snapshot_ref.at[program, 1, word], total + jnp.cumsum(ones) - ones,
                    mask=inside)
        return total + jnp.sum(ones)

    return jax.lax.fori_loop(0, (num_words + word_block - 1) // word_block, rank_words,
                             jnp.int32(0))


def _list_words(summary_ref, bitmap_ref, summary_snapshot_ref, snapshot_ref, program,
                word_offsets, semantic: str) -> None:
    """The first ranks phase at two levels: snapshot each summary word and the nonzero bitmap
    words before it, and swap its nonzero bitmap words, in order, into the list
    (snapshot_ref[program, 0]), clearing summary and bitmap (len(word_offsets) summary words
    at a time, each lane taking its word's marks lowest first)."""
    num_summary, word_block = summary_ref.shape[1], word_offsets.shape[0]

    def list_words(block_index, total):
        summary_word = block_index * word_block + word_offsets
        inside = summary_word < num_summary
        marks = atomic_swap(summary_ref, (program, summary_word), jnp.zeros_like(summary_word),
                            mask=inside, semantic=semantic)
        ones = jax.lax.population_count(marks)
        first = total + jnp.cumsum(ones) - ones
        plgpu.store(summary_snapshot_ref.at[program, 0, summary_word], marks, mask=inside)
        plgpu.store(summary_snapshot_ref.at[program, 1, summary_word], first, mask=inside)

        def take_lowest(_, carry):
            left, entry = carry
            lowest = left & -left
            marked = left != 0
            word = summary_word * BITS + jax.lax.population_count(lowest - 1)
            bits = atomic_swap(bitmap_ref, (program, word), jnp.zeros_like(word), mask=marked,
                               semantic=semantic)
            plgpu.store(snapshot_ref.at[program, 0, entry], bits, mask=marked)
            return left ^ lowest, entry + marked.astype(jnp.int32)

        jax.lax.fori_loop(0, jnp.max(ones), take_lowest, (marks, first))
        return total + jnp.sum(ones)

    jax.lax.fori_loop(0, (num_summary + word_block - 1) // word_block, list_words,
                      jnp.int32(0))


def _rank_listed_words(snapshot_ref, summary_snapshot_ref, program, word_offsets):
    """The second ranks phase at two levels: the pairs before each listed word
    (snapshot_ref[program, 1]), len(word_offsets) at a time; returns the pairs, nnz."""
    num_summary, word_block = summary_snapshot_ref.shape[2], word_offsets.shape[0]
    last = num_summary - 1
    listed = (summary_snapshot_ref[program, 1, last]
              + jax.lax.population_count(summary_snapshot_ref[program, 0, last]))

    def rank_words(block_index, total):
        entry = block_index * word_block + word_offsets
        inside = entry < listed
        ones = jax.lax.population_count(
            plgpu.load(snapshot_ref.at[program, 0, entry], mask=inside, other=0))
        plgpu.store(snapshot_ref.at[program, 1, entry], total + jnp.cumsum(ones) - ones,
                    mask=inside)
        return total + jnp.sum(ones)

    return jax.lax.fori_loop(0, (listed + word_block - 1) // word_block, rank_words,
                             jnp.int32(0))


def scratch_row_bytes(num_topics: int) -> int:
    """Bytes of a program's scratch row: counts (K), bitmap and its summary (K/32 and
    K/1024 words) and their snapshots (two of each)."""
    num_words = -(-num_topics // BITS)
    return 4 * (num_topics + 3 * num_words + 3 * -(-num_words // BITS))


def program_count(num_topics: int, num_docs: int, *, num_programs: int = 2048,
                  scratch_bytes: int = 24 << 20, min_programs: int = 512,
                  wide_programs: int = 1024, wide_scratch_bytes: int = 1 << 30) -> int:
    """The kernel's programs for num_docs documents (at most num_programs, at most one a
    document): as many as keep their scratch rows within scratch_bytes (about the L2), at
    least min_programs; where the rows outgrow the L2 even so (the first rule gives fewer than
    min_programs), wide_programs as long as their rows fit wide_scratch_bytes: the rows are
    then read from memory either way, and more programs, more documents at once, hide more
    of the atomics' latency."""
    row = scratch_row_bytes(num_topics)
    programs = max(min_programs, scratch_bytes // row)
    if scratch_bytes // row < min_programs and wide_programs * row <= wide_scratch_bytes:
        programs = max(programs, wide_programs)
    return max(1, min(num_programs, num_docs, programs))


def scratch_bytes_of(num_topics: int, num_docs: int, **programs) -> int:
    """Device bytes of the kernel's scratch rows for num_docs documents (programs:
    program_count's knobs), zeros allocated at each call."""
    return program_count(num_topics, num_docs, **programs) * scratch_row_bytes(num_topics)


@functools.partial(jax.jit, static_argnames=("num_topics", "block_tokens", "num_programs",
                                             "scratch_bytes", "min_programs", "wide_programs",
                                             "wide_scratch_bytes", "num_warps", "levels",
                                             "semantic", "interpret"))
def rebuild_doc_topic(chunk: Chunk, doc_major_topics: jax.Array, num_topics: int, *,
                      block_tokens: int = 128, num_programs: int = 2048,
                      scratch_bytes: int = 24 << 20, min_programs: int = 512,
                      wide_programs: int = 1024, wide_scratch_bytes: int = 1 << 30,
                      num_warps: int = 4, levels: int | None = None,
                      semantic: str = "relaxed", interpret: bool | None = None):
    """The chunk's A (a_pairs, a_nnz) from its doc-major topics (< num_topics).

    Same contract as saberjax.segmented_count.rebuild_doc_topic.  block_tokens (a power of
    two) is the segment slice a program handles at once; num_programs, scratch_bytes,
    min_programs, wide_programs, wide_scratch_bytes: the programs' (program_count), each
    with a scratch row (scratch_row_bytes); num_warps is Triton's; levels the bitmap's (1,
    or 2 with the summary; None: 2 where K/32 words take more than one scan of WORD_BLOCK
    lanes); semantic that of the scratch atomics (saberjax.pallas.atomics).  Defaults: the
    fastest measured on an H200 (NOTES.md, docs/measurements/kernels.md,
    docs/measurements/sparse_model.md).  interpret=None: interpret unless on a GPU.
    """
    size = chunk.padded_tokens
    interpret = default_interpret() if interpret is None else interpret
    num_words = -(-num_topics // BITS)
    num_summary = -(-num_words // BITS)
    levels = (2 if num_words > WORD_BLOCK else 1) if levels is None else levels
    if levels not in (1, 2):
        raise ValueError(f"levels must be 1 or 2, got {levels}")
    num_programs = program_count(num_topics, chunk.padded_docs, num_programs=num_programs,
                                 scratch_bytes=scratch_bytes, min_programs=min_programs,
                                 wide_programs=wide_programs,
                                 wide_scratch_bytes=wide_scratch_bytes)
    word_block = min(pl.next_power_of_2(num_words if levels == 1 else num_summary), WORD_BLOCK)
    kernel = functools.partial(_segmented_count_kernel, block=block_tokens,
                               word_block=word_block, levels=levels, semantic=semantic,
                               interpret=interpret)
    *_, a_pairs, a_nnz = pl.pallas_call(
        kernel,
        out_shape=(jax.ShapeDtypeStruct((num_programs, num_topics), jnp.int32),
                   jax.ShapeDtypeStruct((num_programs, num_words), jnp.int32),
                   jax.ShapeDtypeStruct((num_programs, num_summary), jnp.int32),
                   jax.ShapeDtypeStruct((num_programs, 2, num_words), jnp.int32),
                   jax.ShapeDtypeStruct((num_programs, 2, num_summary), jnp.int32),
                   jax.ShapeDtypeStruct((size,), jnp.uint32),
                   jax.ShapeDtypeStruct((chunk.padded_docs,), jnp.int32)),
        grid=(num_programs,),
        name="saber_segmented_count",
        input_output_aliases={3: 0, 4: 1, 5: 2, 6: 5},
        compiler_params=plgpu.CompilerParams(num_warps=num_warps, num_stages=1),
        interpret=interpret,
    )(jnp.reshape(chunk.num_tokens, (1,)).astype(jnp.int32),
      chunk.doc_start,
      doc_major_topics,
      jnp.zeros((num_programs, num_topics), jnp.int32),
      jnp.zeros((num_programs, num_words), jnp.int32),
      jnp.zeros((num_programs, num_summary), jnp.int32),
      jnp.zeros((size,), jnp.uint32))
    return a_pairs, a_nnz
