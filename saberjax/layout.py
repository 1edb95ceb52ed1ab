"""PDOW: partition by document, order by word (paper section 3.1).

The corpus is cut into chunks of whole documents under a token budget.  Inside a chunk the
tokens are stored twice over, once in each order the algorithm needs::

    documents of the chunk   d0: [a b a]   d1: [c a]   d2: [b]         (doc-major, T = 6)
    doc-major position        0 1 2         3 4         5
    doc_start                 0             3           5   6 (pad doc) ...

    word-major order (words by decreasing corpus frequency: a, b, c; within a word, longer
    documents first, then by doc-major position)
    word                      a a a b b c
    doc                       0 0 1 0 2 1
    doc_major_pos             0 2 4 1 5 3      <- the shuffle pointers

The sampler walks the word-major arrays (one word's B-hat row and tree stay hot while its
tokens are sampled); the doc-topic matrix A lives in doc-major order, where document d owns the
segment doc_start[d] .. doc_start[d+1] and keeps its (topic, count) pairs compacted at the front;
`doc_major_pos` moves each token's new topic from word-major to doc-major position when A is
rebuilt (shuffle and segmented count).  A token's global id, which keys its random numbers, is
`token_base + doc_major_pos`: the position of the token in the corpus, whatever the chunking.

All chunks of a layout are padded to one size bucket (the largest chunk's), so a run compiles
one shape and the chunks of a mesh's devices are equal shards.  Padding tokens sit at the end
of the word-major arrays (word 0) and form one padding document at the end of the doc-major
arrays; every count masks them out.  The word-major order itself is layout_sort's.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import heapq
import os
from collections.abc import Collection

import jax
import numpy as np

from saberjax import layout_sort, timing
from saberjax.corpus import Corpus
from saberjax.rng import global_token_ids, split_token_id

# slots of word shares built at once at most (word_share_slots_at_once)
WORD_SHARE_SLOTS_AT_ONCE = 4

DEFAULT_CHUNK_TOKENS = 1 << 26
TILE_TOKENS = 8  # tokens of one word per E-step program (saberjax.pallas.sampler)


def bucket_size(n: int, minimum: int = 256) -> int:
    """n rounded up to one of 8 sizes per power of two (at most 1/8 padding)."""
    n = max(int(n), minimum)
    step = 1 << max(n.bit_length() - 4, 0)
    return -(-n // step) * step


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Chunk:
    """One PDOW chunk as arrays (numpy on the host, jax on a device); see the module docstring."""

    word: np.ndarray  # int32 [T_pad] word id of each word-major token
    doc: np.ndarray  # int32 [T_pad] chunk-local document of each word-major token
    doc_major_pos: np.ndarray  # int32 [T_pad] doc-major position of each word-major token
    doc_start: np.ndarray  # int32 [D_pad + 1] start of each document's doc-major segment
    num_tokens: np.ndarray  # int32 scalar: real tokens (the rest is padding)
    # uint32 [blocks, 2]: (low, high) words of the global id of the token at doc-major
    # position block * block_tokens (one block for a chunk of consecutive documents)
    token_base: np.ndarray
    # int32 [max_tiles(T_pad, V, tile_tokens) + 1]: the E-step kernel's work list, tiles of up
    # to tile_tokens consecutive word-major tokens of one word; tile i is tile_start[i] ..
    # tile_start[i + 1] - 1, and entries past the last tile hold num_tokens (empty tiles)
    tile_start: np.ndarray
    # static (part of the pytree's structure, so a jitted kernel knows it)
    tile_tokens: int = dataclasses.field(default=TILE_TOKENS, metadata=dict(static=True))
    # doc-major positions per token_base entry (a chunk's padded tokens: one entry)
    block_tokens: int = dataclasses.field(default=1 << 31, metadata=dict(static=True))

    @property
    def padded_tokens(self) -> int:
        return self.word.shape[0]

    @property
    def padded_docs(self) -> int:
        return self.doc_start.shape[0] - 1

    def token_ids(self, doc_major_pos):
        """(low, high) uint32 words of the global ids (corpus positions) of the tokens at
        doc-major positions: what every random draw of a token is keyed by."""
        return block_token_ids(self.token_base, self.block_tokens, doc_major_pos)


def block_token_ids(token_base, block_tokens: int, doc_major_pos):
    """Chunk.token_ids of a token_base table (also read inside kernels)."""
    block = doc_major_pos // block_tokens
    return global_token_ids(token_base[block, 0], token_base[block, 1],
                            doc_major_pos - block * block_tokens)


@dataclasses.dataclass(frozen=True, eq=False)
class Layout:
    """The whole corpus in PDOW chunks, plus what was used to build them."""

    chunks: tuple[Chunk, ...]
    chunk_docs: tuple[tuple[int, int], ...]  # [first, last) corpus documents of each chunk
    num_words: int
    num_docs: int
    num_tokens: int
    word_order: np.ndarray  # int32 [V] word ids by decreasing corpus frequency


def max_tiles(padded_tokens: int, num_words: int, tile_tokens: int) -> int:
    """Most word tiles a chunk can need: full tiles plus one partial tile per distinct word.
    A bound from sizes alone, so chunks of one size bucket keep one shape."""
    return -(-padded_tokens // tile_tokens) + min(num_words, padded_tokens)


def word_tile_start(words: np.ndarray, num_words: int, padded_tokens: int,
                    tile_tokens: int = TILE_TOKENS) -> np.ndarray:
    """Chunk.tile_start for word-major words (real tokens only)."""
    words = np.asarray(words)
    run_starts = np.flatnonzero(np.diff(words, prepend=-1) != 0)  # each word's first token
    return _tile_start(run_starts, np.diff(run_starts, append=len(words)), num_words,
                       padded_tokens, tile_tokens)


def _tile_start(run_starts: np.ndarray, run_lengths: np.ndarray, num_words: int,
                padded_tokens: int, tile_tokens: int,
                pieces: layout_sort.Pieces | None = None) -> np.ndarray:
    """Chunk.tile_start of word-major runs of one word each (lengths >= 1): every run cut
    into tiles of tile_tokens tokens, in O(tiles) (the heads expanded in `pieces`)."""
    run_tiles = -(-np.asarray(run_lengths, np.int64) // tile_tokens)
    tile_offsets = np.concatenate([[0], np.cumsum(run_tiles)])
    num_tiles = int(tile_offsets[-1])
    tile_start = np.empty(max_tiles(padded_tokens, num_words, tile_tokens) + 1, np.int32)
    (pieces or layout_sort.Pieces(1)).expand(run_starts, tile_offsets, tile_tokens, tile_start)
    tile_start[num_tiles:] = int(np.sum(run_lengths))
    return tile_start


def with_tile_tokens(chunk: Chunk, num_words: int, tile_tokens: int) -> Chunk:
    """The chunk with the E-step work list for tiles of tile_tokens tokens (the layout builds
    TILE_TOKENS; other sizes are for tuning the kernel)."""
    words = np.asarray(chunk.word)[: int(chunk.num_tokens)]
    return dataclasses.replace(chunk, tile_tokens=tile_tokens, tile_start=word_tile_start(
        words, num_words, chunk.padded_tokens, tile_tokens))


def chunk_boundaries(doc_offsets: np.ndarray, chunk_tokens: int,
                     multiple_of: int = 1) -> np.ndarray:
    """Document indices cutting the corpus into the fewest chunks of about chunk_tokens each.

    The number of chunks is ceil(T / chunk_tokens) rounded up to a multiple of `multiple_of`
    (one share per device); cuts are placed at the document boundaries nearest to equal token
    shares, so chunks are balanced.  With fewer documents than chunks some chunks are empty.
    """
    num_docs = len(doc_offsets) - 1
    total = int(doc_offsets[-1])
    num_chunks = max(1, -(-total // max(int(chunk_tokens), 1)))
    num_chunks = -(-num_chunks // multiple_of) * multiple_of
    targets = np.arange(1, num_chunks, dtype=np.float64) * total / num_chunks
    cuts = np.searchsorted(doc_offsets, targets, side="left")
    return np.concatenate([[0], np.clip(cuts, 0, num_docs), [num_docs]]).astype(np.int64)


def padded_shape(doc_offsets: np.ndarray, spans) -> tuple[int, int]:
    """(padded tokens, padded documents) that every chunk of the spans is laid out with: the
    largest chunk's size buckets, so all chunks share one shape (one compiled step, and equal
    shards on a mesh), with room for the padding document."""
    offsets = np.asarray(doc_offsets, np.int64)
    tokens = max(int(offsets[last] - offsets[first]) for first, last in spans)
    docs = max(last - first for first, last in spans)
    return bucket_size(tokens), bucket_size(docs + 1)


def padded_doc_start(offsets: np.ndarray, padded_tokens: int, padded_docs: int) -> np.ndarray:
    """Chunk.doc_start of a chunk whose documents have corpus offsets `offsets` (one more than
    its documents): each document's segment start, then the padding document's (at the
    chunk's real tokens, its segment the padding tokens) and padded_tokens for the rest."""
    doc_start = np.full(padded_docs + 1, padded_tokens, dtype=np.int32)
    doc_start[: len(offsets)] = offsets - offsets[0]
    return doc_start


def build_chunk(corpus: Corpus, first_doc: int, last_doc: int, word_rank: np.ndarray,
                padded_tokens: int, padded_docs: int, workers: int | None = None,
                piece_tokens: int = layout_sort.PIECE_TOKENS) -> Chunk:
    """The PDOW arrays of documents [first_doc, last_doc) of the corpus, padded to
    padded_tokens tokens and padded_docs documents (see padded_shape).

    Linear in tokens, with no comparison sort: the word-major order is a stable bucket sort by
    word rank (layout_sort.word_major_order).  Its passes and the work list are cut into
    `workers` contiguous pieces (default: one per core; fewer for a chunk of under
    piece_tokens tokens a piece, one below that) that run at once on the build threads.  The
    arrays are the same for any workers.
    """
    offsets = np.asarray(corpus.doc_offsets[first_doc : last_doc + 1], dtype=np.int64)
    token_base = int(offsets[0])
    words = np.asarray(corpus.word_ids[offsets[0] : offsets[-1]], dtype=np.int32)
    num_tokens = len(words)
    pieces = layout_sort.Pieces(
        max(1, min(workers or os.cpu_count() or 1, num_tokens // piece_tokens)))
    order = layout_sort.word_major_order(words, offsets - token_base, word_rank, padded_tokens,
                                         pieces, piece_tokens)
    return Chunk(
        word=order.word,
        doc=order.doc,
        doc_major_pos=order.doc_major_pos,
        doc_start=padded_doc_start(offsets, padded_tokens, padded_docs),
        num_tokens=np.int32(num_tokens),
        token_base=np.array([split_token_id(token_base)], dtype=np.uint32),
        tile_start=_tile_start(order.word_starts, np.diff(order.word_starts, append=num_tokens),
                               corpus.num_words, padded_tokens, TILE_TOKENS, pieces),
        block_tokens=padded_tokens,
    )


@dataclasses.dataclass(frozen=True, eq=False)
class LayoutPlan:
    """Where a corpus is cut into chunks and the one shape they are padded to, decided before
    any chunk is built (build_layout builds them in memory, saberjax.chunk_store on disk)."""

    chunk_docs: tuple[tuple[int, int], ...]  # [first, last) corpus documents of each chunk
    padded_tokens: int
    padded_docs: int
    word_order: np.ndarray  # int32 [V] word ids by decreasing corpus frequency
    word_rank: np.ndarray  # int32 [V] rank of each word id in word_order

    def build_chunk(self, corpus: Corpus, index: int, workers: int | None = None) -> Chunk:
        """The PDOW arrays of chunk `index` (build_chunk, cut into `workers` pieces)."""
        return build_chunk(corpus, *self.chunk_docs[index], self.word_rank,
                           self.padded_tokens, self.padded_docs, workers=workers)


def plan_layout(corpus: Corpus, chunk_tokens: int | None = None,
                num_parts: int = 1) -> LayoutPlan:
    """The chunks of at most about chunk_tokens tokens that build_layout cuts the corpus into,
    all of one shape; the number of chunks is a multiple of num_parts (see build_layout)."""
    spans = chunk_spans(corpus, chunk_tokens, num_parts)
    word_order = np.argsort(-corpus.word_counts(), kind="stable").astype(np.int32)
    word_rank = np.empty_like(word_order)
    word_rank[word_order] = np.arange(len(word_order), dtype=np.int32)
    return LayoutPlan(spans, *padded_shape(corpus.doc_offsets, spans), word_order, word_rank)


def chunk_spans(corpus: Corpus, chunk_tokens: int | None = None,
                num_parts: int = 1) -> tuple[tuple[int, int], ...]:
    """[first, last) documents of each chunk of plan_layout (from the document offsets
    alone: no token is read)."""
    if corpus.num_tokens == 0:
        raise ValueError(f"corpus {corpus.name!r} has no tokens to train on")
    if corpus.num_tokens >= 2**31 and chunk_tokens is None:
        chunk_tokens = DEFAULT_CHUNK_TOKENS
    chunk_tokens = int(chunk_tokens or corpus.num_tokens)
    if not 0 < chunk_tokens < 2**31 - 2**20:
        raise ValueError(f"chunk_tokens must be in [1, 2**31 - 2**20), got {chunk_tokens}")
    cuts = chunk_boundaries(np.asarray(corpus.doc_offsets), chunk_tokens, num_parts)
    return tuple((int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]))


@timing.in_phase("layout")
def build_layout(corpus: Corpus, chunk_tokens: int | None = None, num_parts: int = 1,
                 parts: Collection[int] | None = None) -> Layout:
    """Cut the corpus into PDOW chunks of at most about chunk_tokens tokens, all of one shape.

    num_parts: the number of chunks is a multiple of it, part p holding the p-th run of
    n / num_parts consecutive chunks (one equal share per device of a mesh).  parts: the parts
    whose chunks are built (None: all); the others are None in Layout.chunks, for a process
    that holds only its own devices' share.
    """
    plan = plan_layout(corpus, chunk_tokens, num_parts)
    spans = plan.chunk_docs
    chunks_per_part = len(spans) // num_parts
    built = [index for index in range(len(spans))
             if parts is None or index // chunks_per_part in parts]
    cores = os.cpu_count() or 1
    threads = max(1, min(len(built), cores))

    def build_one(index: int) -> Chunk | None:
        if index not in built:
            return None
        return plan.build_chunk(corpus, index, workers=max(1, cores // threads))

    # one thread per chunk, each chunk's pieces on its share of the cores (build_chunk)
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        chunks = tuple(pool.map(build_one, range(len(spans))))
    return Layout(
        chunks=chunks,
        chunk_docs=spans,
        num_words=corpus.num_words,
        num_docs=corpus.num_docs,
        num_tokens=corpus.num_tokens,
        word_order=plan.word_order,
    )


def group_spans(layout: Layout, num_parts: int, group: int, slot: int = 0,
                num_slots: int = 1) -> list[tuple[int, int]]:
    """[first, last) documents of the num_parts chunks of a words group in a slot: the slot's
    chunk of each of the group's devices g * n ... (g + 1) * n - 1 (n = num_parts), device d's
    chunk in slot s being layout chunk d * num_slots + s (consecutive chunks with one slot)."""
    return [layout.chunk_docs[(group * num_parts + part) * num_slots + slot]
            for part in range(num_parts)]


class _WordGroup:
    """The tokens of one words group's chunks in a slot (group_spans: all devices' on a
    one-axis mesh, a host's on the two-axis mesh), with what word_shares needs of each: its
    word's rank, its part of the vocabulary, its document's index and its position in the
    group's doc-major space (chunk e of the group at e * padded tokens and e * padded
    documents).  Only the group's documents are read."""

    def __init__(self, corpus: Corpus, layout: Layout, num_parts: int, group: int,
                 word_rank: np.ndarray, slot: int = 0, num_slots: int = 1):
        offsets = np.asarray(corpus.doc_offsets, np.int64)
        self.padded_tokens, self.padded_docs = padded_shape(offsets, layout.chunk_docs)
        spans = group_spans(layout, num_parts, group, slot, num_slots)
        self.lengths = np.concatenate([np.diff(offsets[first:last + 1])
                                       for first, last in spans]).astype(np.int64)
        self.ranks = word_rank[_group_word_ids(corpus, spans)]
        self.part_of = self.ranks % num_parts
        docs = np.array([last - first for first, last in spans])
        firsts = np.concatenate([[0], np.cumsum(docs)[:-1]])  # each chunk's first document
        num_docs = int(docs.sum())
        local = np.concatenate([[0], np.cumsum(self.lengths)])  # in the group's token order
        chunk_of_doc = np.repeat(np.arange(num_parts), docs)
        self.doc_index = (chunk_of_doc * self.padded_docs + np.arange(num_docs)
                          - firsts[chunk_of_doc]).astype(np.int32)
        doc_base = chunk_of_doc * self.padded_tokens + local[:-1] - local[firsts[chunk_of_doc]]
        self.doc_of_token = np.repeat(np.arange(num_docs, dtype=np.int32), self.lengths)
        self.doc_major_pos = (doc_base[self.doc_of_token] + np.arange(len(self.ranks))
                              - local[self.doc_of_token]).astype(np.int32)
        self.doc_start = np.concatenate(  # the chunks' segment starts, chunk e's at e * padded
            [padded_doc_start(offsets[first:last + 1], self.padded_tokens,
                              self.padded_docs)[:-1] + e * self.padded_tokens
             for e, (first, last) in enumerate(spans)]
            + [[num_parts * self.padded_tokens]]).astype(np.int32)
        self.token_base = np.array([split_token_id(int(offsets[first])) for first, _ in spans],
                                   np.uint32)


def _group_word_ids(corpus: Corpus, spans) -> np.ndarray:
    """The word ids of the documents of spans, span after span."""
    offsets = np.asarray(corpus.doc_offsets, np.int64)
    return np.concatenate([np.asarray(corpus.word_ids[offsets[first]:offsets[last]])
                           for first, last in spans])


def share_order(word_counts: np.ndarray, word_order: np.ndarray, num_parts: int) -> np.ndarray:
    """The words in share order for num_parts shares of the vocabulary (partition by word):
    position r holds the word of row r // num_parts of share r % num_parts.

    The words are dealt out in falling frequency (word_order), each to the share holding the
    fewest tokens so far among those with a row left, so the shares' tokens are near-equal
    (dealt round robin, the share of the most frequent words holds several percent more than
    the others on a Zipfian corpus, and every device samples as many tokens as the largest
    share holds).  A share's rows keep falling frequency; share s has V // num_parts rows, one
    more for s < V % num_parts.  One share keeps word_order."""
    num_words = len(word_order)
    if num_parts == 1:
        return np.asarray(word_order)
    counts = np.asarray(word_counts)[word_order].tolist()
    rows_left = [num_words // num_parts + (part < num_words % num_parts)
                 for part in range(num_parts)]
    lightest = [(0, part) for part in range(num_parts) if rows_left[part]]
    positions, next_row = [], [0] * num_parts
    for count in counts:
        tokens, part = heapq.heappop(lightest)
        positions.append(next_row[part] * num_parts + part)
        next_row[part] += 1
        if next_row[part] < rows_left[part]:
            heapq.heappush(lightest, (tokens + count, part))
    order = np.empty(num_words, np.int64)
    order[positions] = word_order
    return order


def _share_rank(corpus: Corpus, layout: Layout, num_parts: int,
                order: np.ndarray | None) -> np.ndarray:
    """Each word's position in the share order (row rank // num_parts of share rank %
    num_parts): `order`, or None for share_order of the corpus's word counts."""
    if order is None:
        order = share_order(corpus.word_counts(), layout.word_order, num_parts)
    word_rank = np.empty(corpus.num_words, np.int32)
    word_rank[order] = np.arange(corpus.num_words, dtype=np.int32)
    return word_rank


def largest_word_share(corpus: Corpus, layout: Layout, num_parts: int,
                       groups: Collection[int], order: np.ndarray | None = None,
                       num_slots: int = 1) -> int:
    """The most tokens of one share of word_shares among the given groups' in any of
    num_slots slots (reading only their documents); order as word_shares'."""
    word_rank = _share_rank(corpus, layout, num_parts, order)

    def largest(group: int, slot: int) -> int:
        spans = group_spans(layout, num_parts, group, slot, num_slots)
        ranks = word_rank[_group_word_ids(corpus, spans)]
        return int(np.bincount(ranks % num_parts, minlength=num_parts).max(initial=0))

    return max(largest(group, slot) for group in groups for slot in range(num_slots))


def word_share_slots_at_once(num_slots: int, own_devices: int) -> int:
    """Slots whose word shares are built at once: each slot's build runs one thread a device
    (word_shares), so the cores allow cores // devices slots; at most
    WORD_SHARE_SLOTS_AT_ONCE, since each slot being built holds its temporaries (several
    times its shares' bytes) in host memory until it is done."""
    return max(1, min(num_slots, WORD_SHARE_SLOTS_AT_ONCE,
                      (os.cpu_count() or 1) // max(1, own_devices)))


def word_shares(corpus: Corpus, layout: Layout, num_parts: int, parts: Collection[int],
                share_tokens: int | None = None, order: np.ndarray | None = None,
                slot: int = 0, num_slots: int = 1) -> dict[int, Chunk]:
    """The tokens of each of `parts`' shares of the vocabulary, over the doc-major space of
    its group's chunks in a slot, for a layout of num_slots chunks per part (partition by
    word, saberjax.execution; streamed, one call a slot).

    Parts come in groups of num_parts, group g holding the slot's chunk of parts g * n ...
    (g + 1) * n - 1 (n = num_parts; one group on a one-axis mesh, one per host on the
    two-axis mesh; group_spans).  Part p
    holds the words at positions p % n, p % n + n, p % n + 2n, ... of the share order
    (`order`, None: share_order of the whole corpus's word counts, so every group has the
    same shares: rows equal, tokens near-equal) of its group's documents, as rows
    position // n of its share of B.  Its tokens come from every chunk of the group, chunk
    e's doc-major positions and documents offset by e * (padded tokens) and e * (padded
    documents), so a document's segment, its A pairs and its tokens' global ids are those of
    the by-document layout.  Word-major order as in build_chunk: by row, then longer
    documents first, then position.  Padding tokens point past the doc-major space (their
    topics are never stored) and at the last chunk's padding document.  Shares are padded to
    share_tokens (None: bucket_size of the largest share of the parts' groups), so that
    every part's arrays have one shape; processes holding different groups agree on it
    (largest_word_share).  Only the parts' groups' documents are read.
    """
    padded_tokens, _ = padded_shape(np.asarray(corpus.doc_offsets), layout.chunk_docs)
    if num_parts * padded_tokens + padded_tokens >= 2**31:
        raise ValueError(f"partition by word spans {num_parts} x {padded_tokens:,} doc-major "
                         f"positions, more than int32 indexes; partition by document")
    word_rank = _share_rank(corpus, layout, num_parts, order)
    groups = {group: _WordGroup(corpus, layout, num_parts, group, word_rank, slot, num_slots)
              for group in sorted({part // num_parts for part in parts})}
    share_tokens = share_tokens or bucket_size(max(
        np.bincount(group.part_of, minlength=num_parts).max(initial=0)
        for group in groups.values()))
    num_rows = -(-corpus.num_words // num_parts)

    def share(part: int) -> Chunk:
        group = groups[part // num_parts]
        # sort key: row, then longer documents first (positions are increasing already)
        longest = group.lengths.max(initial=0)
        position = np.flatnonzero(group.part_of == part % num_parts)
        key = ((group.ranks[position] // num_parts).astype(np.int64) * (longest + 1)
               + (longest - group.lengths)[group.doc_of_token[position]])
        order = position[np.argsort(key, kind="stable")]
        num_tokens, pad = len(order), share_tokens - len(order)
        rows = (group.ranks[order] // num_parts).astype(np.int32)
        return Chunk(
            word=np.concatenate([rows, np.zeros(pad, np.int32)]),
            doc=np.concatenate([group.doc_index[group.doc_of_token[order]],
                                np.full(pad, num_parts * group.padded_docs - 1, np.int32)]),
            doc_major_pos=np.concatenate([group.doc_major_pos[order],
                                          num_parts * padded_tokens
                                          + np.arange(pad, dtype=np.int32)]),
            doc_start=group.doc_start,
            num_tokens=np.int32(num_tokens),
            token_base=group.token_base,
            tile_start=word_tile_start(rows, num_rows, share_tokens),
            block_tokens=padded_tokens,
        )

    with concurrent.futures.ThreadPoolExecutor(min(len(parts), os.cpu_count() or 1)) as pool:
        return dict(zip(parts, pool.map(share, parts)))
