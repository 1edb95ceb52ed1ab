"""The PDOW layout of one chunk built on a JAX device: the arrays of layout.build_chunk, bit
for bit, from the chunk's doc-major word ids and document lengths.

On an accelerator the word-major order is one stable sort of the chunk's tokens (a key sort
with an iota payload, which XLA runs as CUB's radix sort of pairs on a GPU), where the host
builds it with a blocked bucket sort over its cores.  The order is the same (see
layout.build_chunk)::

    stream     the chunk's documents, longest first (ties in document order), each one's
               tokens in doc-major order; padding tokens after them, in position order
    key        each stream token's word rank (padding: V, after every word)
    word-major the stream sorted stably by key

so a token's place depends on (rank, decreasing length of its document, doc-major position),
as in the host builder.  The stream needs no sort of tokens: the documents are sorted by
length (padded_docs keys), and a stream position finds its document by a cumulative count of
the documents' stream starts.  The word runs and the E-step's tiles follow from the sorted
keys; chunk_compact.compact_on_device turns the chunk into the store's compact form on the
device as well, so the host receives only what the store writes.

Shapes depend only on the plan (padded tokens and documents, V), never on a chunk: every
chunk of a plan runs one compiled program, its real tokens and documents being values
(num_docs, and the lengths' sum).  Everything is int32, as chunks hold fewer than 2**31
tokens.

Device memory of one build: the input (4 bytes a padded token), the compact chunk it gives
(about 4.5), and temporaries that peak during the sort, where the stream's positions,
documents and keys, the sorted keys and permutation and the sort's own scratch are alive:
about 32 bytes a padded token in XLA's memory analysis of the program on a CPU (the radix
sort of a GPU adds its double buffers, 8 more), so about 40-50 bytes a padded token in all,
less than the training step needs for the same chunk
(execution.memory.device_bytes_per_token).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from saberjax import compilation
from saberjax.corpus import Corpus
from saberjax.layout import TILE_TOKENS, Chunk, max_tiles
from saberjax.rng import split_token_id
from saberjax.segmented_count import store_distinct


class ChunkInputs(NamedTuple):
    """What the device needs of one chunk of a plan, padded to the plan's shape (numpy on the
    host, jax on a device; a leading axis of devices where a mesh builds a slot at once)."""

    words: np.ndarray  # int32 [padded_tokens] doc-major word ids, then anything (padding)
    lengths: np.ndarray  # int32 [padded_docs] the chunk's document lengths, then zeros
    num_docs: np.ndarray  # int32 scalar: the chunk's documents (the padding document's index)
    token_base: np.ndarray  # uint32 [1, 2] (low, high) words of the first token's corpus id


def chunk_inputs(corpus: Corpus, first_doc: int, last_doc: int, padded_tokens: int,
                 padded_docs: int, words: np.ndarray | None = None) -> ChunkInputs:
    """ChunkInputs of documents [first_doc, last_doc) of the corpus.  words: an int32 buffer
    of padded_tokens to copy the word ids into (a pinned one, say); its padding is left as
    it is, since the build never reads it.  None: a new one, zeros after the chunk."""
    offsets = np.asarray(corpus.doc_offsets[first_doc : last_doc + 1], dtype=np.int64)
    num_tokens, num_docs = int(offsets[-1] - offsets[0]), last_doc - first_doc
    if num_tokens > padded_tokens or num_docs >= padded_docs:
        raise ValueError(f"documents {first_doc}..{last_doc} ({num_tokens:,} tokens) do not fit "
                         f"{padded_tokens:,} tokens and {padded_docs:,} documents with the "
                         f"padding document")
    if words is None:
        words = np.zeros(padded_tokens, np.int32)
    elif words.shape != (padded_tokens,) or words.dtype != np.int32:
        raise ValueError(f"words must be int32 [{padded_tokens}], got {words.dtype} "
                         f"{list(words.shape)}")
    np.copyto(words[:num_tokens], corpus.word_ids[offsets[0] : offsets[-1]], casting="unsafe")
    lengths = np.zeros(padded_docs, np.int32)
    lengths[:num_docs] = np.diff(offsets)
    return ChunkInputs(words, lengths, np.int32(num_docs),
                       np.array([split_token_id(int(offsets[0]))], np.uint32))


def build_chunk(inputs: ChunkInputs, word_rank: jax.Array,
                tile_tokens: int = TILE_TOKENS) -> Chunk:
    """The layout.Chunk of one chunk (jax, to run jitted on a device): layout.build_chunk's
    arrays for the same documents, word ranks and padded shape (padded tokens and documents
    from the inputs' shapes, V from word_rank's: a permutation of the word ids), tiles of
    tile_tokens."""
    padded_tokens, = inputs.words.shape
    padded_docs, = inputs.lengths.shape
    num_words, = word_rank.shape
    lengths = inputs.lengths.astype(jnp.int32)
    num_docs = jnp.asarray(inputs.num_docs, jnp.int32)

    ends = jnp.cumsum(lengths, dtype=jnp.int32)
    num_tokens = ends[-1]
    # layout.padded_doc_start: the documents' starts, the padding document's at num_tokens,
    # padded_tokens for the rest
    starts = jnp.concatenate([jnp.zeros(1, jnp.int32), ends])
    doc_start = jnp.where(jnp.arange(padded_docs + 1) > num_docs, padded_tokens, starts)

    # the stream: documents longest first, ties in document order (empty ones last, with
    # the padding documents: they hold no tokens)
    doc_order = jnp.argsort(-lengths, stable=True).astype(jnp.int32)
    stream_lengths = lengths[doc_order]
    stream_start = jnp.cumsum(stream_lengths, dtype=jnp.int32) - stream_lengths
    # each stream position's document: the documents whose stream starts are at or before it
    step = jnp.zeros(padded_tokens + 1, jnp.int32).at[stream_start[1:]].add(1)
    nth = jnp.cumsum(step[:padded_tokens], dtype=jnp.int32)
    position = jnp.arange(padded_tokens, dtype=jnp.int32)
    real = position < num_tokens
    stream_doc = jnp.where(real, doc_order[nth], num_docs)
    stream_pos = jnp.where(real, doc_start[stream_doc] + position - stream_start[nth], position)
    key = jnp.where(real, word_rank[inputs.words[jnp.where(real, stream_pos, 0)]], num_words)

    # the word-major order: the stream sorted stably by key (a key sort with an iota payload,
    # which XLA runs as a radix sort of pairs on a GPU)
    sorted_key, order = jax.lax.sort((key, position), num_keys=1, is_stable=True)
    word_of_rank = jnp.zeros(num_words + 1, jnp.int32).at[word_rank].set(
        jnp.arange(num_words, dtype=jnp.int32), unique_indices=True)  # rank V (padding): word 0

    # tiles: each word run cut into tiles of tile_tokens tokens, in word-major order
    run_head = jax.lax.cummax(jnp.where(
        (position == 0) | (sorted_key != jnp.roll(sorted_key, 1)), position, 0))
    head = real & ((position - run_head) % tile_tokens == 0)
    tile = jnp.cumsum(head, dtype=jnp.int32) - 1
    num_entries = max_tiles(padded_tokens, num_words, tile_tokens) + 1
    tile_start = store_distinct(jnp.full(num_entries, num_tokens, jnp.int32), tile, head,
                                position)

    return Chunk(
        word=word_of_rank[sorted_key],
        doc=stream_doc[order],
        doc_major_pos=stream_pos[order],
        doc_start=doc_start,
        num_tokens=num_tokens,
        token_base=jnp.asarray(inputs.token_base, jnp.uint32),
        tile_start=tile_start,
        tile_tokens=tile_tokens,
        block_tokens=padded_tokens,
    )


def slot_builder(sharding: jax.sharding.NamedSharding,
                 finish: Callable[[Chunk], object] = lambda chunk: chunk):
    """build(inputs, word_rank) -> finish(chunk) of every device's chunk of a slot, [devices,
    ...] laid out by `sharding`, each device building its own (build_chunk): one compiled
    program for every slot of a plan, whose shapes the arguments carry.  inputs: ChunkInputs
    [devices, ...] laid out by `sharding`; word_rank [V] replicated.  A shard_map, so each
    device's program is the unbatched build (its sort a key sort with an iota payload, which
    XLA gives to CUB on a GPU), not a vmapped one."""

    def one_device(inputs: ChunkInputs, word_rank: jax.Array):
        chunk = build_chunk(jax.tree.map(lambda x: x[0], inputs), word_rank)
        return jax.tree.map(lambda x: x[None], finish(chunk))

    return compilation.jit(jax.shard_map(one_device, mesh=sharding.mesh,
                                         in_specs=(sharding.spec, jax.sharding.PartitionSpec()),
                                         out_specs=sharding.spec))
