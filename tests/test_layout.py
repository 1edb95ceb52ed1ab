"""PDOW layout: chunks of whole documents, word-major order, pointers back to doc-major order."""

import numpy as np
import pytest
from helpers import random_corpus

from saberjax.layout import (bucket_size, build_layout, chunk_boundaries, plan_layout,
                             share_order)


@pytest.mark.parametrize("chunk_tokens", [None, 300, 1000])
def test_chunks_hold_word_major_tokens_with_pointers_to_document_order(chunk_tokens):
    corpus = random_corpus(num_docs=70, num_words=40, seed=9)
    layout = build_layout(corpus, chunk_tokens)
    rank = np.empty(corpus.num_words, np.int64)
    rank[layout.word_order] = np.arange(corpus.num_words)
    assert np.all(np.diff(corpus.word_counts()[layout.word_order]) <= 0)
    offsets = np.asarray(corpus.doc_offsets)
    for chunk, (first, last) in zip(layout.chunks, layout.chunk_docs):
        n = int(chunk.num_tokens)
        assert n == offsets[last] - offsets[first]
        words, docs, pointers = chunk.word[:n], chunk.doc[:n], chunk.doc_major_pos[:n]
        assert np.all(np.diff(rank[words]) >= 0)  # words by decreasing frequency
        # within a word: longer documents first, then in document order
        lengths = np.diff(chunk.doc_start)[docs]
        same_word = np.diff(rank[words]) == 0
        assert np.all(np.diff(lengths)[same_word] <= 0)
        same_length = same_word & (np.diff(lengths) == 0)
        assert np.all(np.diff(pointers)[same_length] > 0)
        assert sorted(chunk.doc_major_pos.tolist()) == list(range(chunk.padded_tokens))
        doc_major = np.empty(n, np.int32)
        doc_major[pointers] = words
        np.testing.assert_array_equal(doc_major, corpus.word_ids[offsets[first]:offsets[last]])
        starts = chunk.doc_start[: last - first + 1]
        np.testing.assert_array_equal(starts, offsets[first:last + 1] - offsets[first])
        assert np.all(starts[docs] <= pointers) and np.all(pointers < starts[docs + 1])
        assert np.all(chunk.doc[n:] == last - first)  # padding forms one extra document
        (low, high), = chunk.token_base
        assert chunk.block_tokens == chunk.padded_tokens
        assert int(low) + (int(high) << 32) == offsets[first]
    assert layout.chunk_docs[0][0] == 0 and layout.chunk_docs[-1][1] == corpus.num_docs


def test_chunk_count_is_the_fewest_under_the_budget_and_balanced():
    offsets = np.arange(0, 10_001, 10)  # 1,000 documents of 10 tokens
    cuts = chunk_boundaries(offsets, 3_000)
    assert len(cuts) - 1 == 4
    sizes = np.diff(offsets[cuts])
    assert sizes.max() - sizes.min() <= 10


def test_bucket_sizes_pad_by_at_most_an_eighth_and_are_few():
    sizes = [bucket_size(n) for n in range(1, 100_000, 37)]
    assert all(b >= n and b <= max(256, n * 1.125) for b, n in zip(sizes, range(1, 100_000, 37)))
    assert len(set(sizes)) < 80


def test_layout_build_is_linear_not_a_sort_of_tokens():
    """The layout of a bag-of-words corpus (2.2M tokens, a document's tokens grouped by word,
    as UCI files give them) costs well under the CPU time of one stable argsort of its tokens.

    Both sides are timed in CPU seconds of this process, fastest of five, and the layout is
    built on one thread (plan_layout, then each chunk with workers=1: the same arrays as
    build_layout's threads make): build threads that share the cores with whatever else runs
    (CI's second test worker) spend CPU time waiting on each other, not on the work this test
    bounds."""
    import time

    from saberjax.corpus import Corpus

    rng = np.random.default_rng(0)
    lengths = rng.integers(200, 2000, 2000)
    words = np.minimum(rng.zipf(1.3, lengths.sum()), 20_000) - 1
    docs = np.repeat(np.arange(lengths.size), lengths)
    corpus = Corpus(np.concatenate([[0], np.cumsum(lengths)]),
                    words[np.lexsort((words, docs))].astype(np.int32),
                    tuple(map(str, range(20_000))))
    keys = rng.integers(0, 2**40, corpus.num_tokens)

    def fewest_cpu_seconds_of_five(work) -> float:
        times = []
        for _ in range(5):
            start = time.process_time()
            work()
            times.append(time.process_time() - start)
        return min(times)

    sort_seconds = fewest_cpu_seconds_of_five(lambda: np.argsort(keys, kind="stable"))
    def layout_on_one_thread():
        plan = plan_layout(corpus)
        return [plan.build_chunk(corpus, index, workers=1)
                for index in range(len(plan.chunk_docs))]

    assert fewest_cpu_seconds_of_five(layout_on_one_thread) < 0.4 * sort_seconds


def _mixed_corpus(seed: int = 0):
    """About 500,000 tokens over a 200,000-word vocabulary (a Zipf-like and a uniform part:
    some 160,000 words occur, the others never): documents of random token order and documents
    grouped by word (UCI-like long runs), empty documents at the start, in the middle and at
    the end, and one long document."""
    from saberjax.corpus import Corpus

    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 1000, 1000)
    lengths[[0, 1, 500, 501, 502, 998, 999]] = 0
    lengths[700] = 20_000  # a long document
    words = (np.minimum(rng.zipf(1.1, lengths.sum()), 200_000) - 1
             + (rng.random(lengths.sum()) < 0.7) * rng.integers(0, 200_000, lengths.sum()))
    words %= 200_000
    docs = np.repeat(np.arange(lengths.size), lengths)
    grouped = np.isin(docs, np.flatnonzero(rng.random(lengths.size) < 0.5))
    by_word = np.lexsort((words, docs))
    words[grouped] = words[by_word][grouped[by_word]]
    return Corpus(np.concatenate([[0], np.cumsum(lengths)]), words.astype(np.int32),
                  tuple(f"w{i}" for i in range(200_000)))


def _reference_chunk_order(corpus, first: int, last: int, word_rank: np.ndarray):
    """(word, doc, doc-major position) of the word-major tokens by a comparison sort: word
    rank, then longer documents first, then doc-major position."""
    offsets = np.asarray(corpus.doc_offsets[first:last + 1], np.int64)
    words = np.asarray(corpus.word_ids[offsets[0]:offsets[-1]])
    lengths = np.diff(offsets)
    doc = np.repeat(np.arange(last - first), lengths)
    order = np.lexsort((np.arange(len(words)), -lengths[doc], word_rank[words]))
    return words[order], doc[order], order


@pytest.mark.parametrize("bucket_tokens", [None, 300])
def test_chunk_is_the_same_for_any_number_of_workers(monkeypatch, bucket_tokens):
    """build_chunk cut into 1, 2, 3 or 7 pieces (small pieces and blocks forced) gives the
    same arrays, and they are the PDOW order of a comparison sort: chunks of a corpus with
    empty documents, long runs, words absent from the chunk and more than 65,536 distinct
    ranks in a chunk, some beyond 2 x 65,535 (buckets cut at every 65,536 ranks), a chunk of
    one document, a chunk of empty documents only and a chunk of none; with a few buckets
    of ranks, and with small buckets, more than 256 of them (16-bit bucket keys)."""
    from saberjax import layout, layout_sort

    corpus = _mixed_corpus()
    if bucket_tokens:
        monkeypatch.setattr(layout_sort, "BUCKET_TOKENS", bucket_tokens)
    plan = layout.plan_layout(corpus, chunk_tokens=corpus.num_tokens // 2 + 1)
    (first, middle), (_, end) = plan.chunk_docs
    offsets = np.asarray(corpus.doc_offsets)
    ranks_in_first = plan.word_rank[corpus.word_ids[: offsets[middle]]]
    assert np.unique(ranks_in_first).size > 65_536 and ranks_in_first.max() >= 2 * 65_535
    assert np.unique(ranks_in_first).size < corpus.num_words - 10_000
    buckets = layout_sort.RankBuckets(corpus.word_ids[: offsets[middle]], plan.word_rank,
                                      int(offsets[middle]))
    assert buckets.count > 256 if bucket_tokens else buckets.count < 10
    pieces = []
    real_pieces = layout_sort.Pieces

    class CountedPieces(real_pieces):
        def __init__(self, count):
            pieces.append(count)
            super().__init__(count)

    monkeypatch.setattr(layout_sort, "Pieces", CountedPieces)
    spans = [(first, middle), (middle, end), (700, 701), (500, 503), (998, 1000), (400, 400)]
    pieces_of_span = []
    for span in spans:
        pieces.clear()
        chunks = [layout.build_chunk(corpus, *span, plan.word_rank, plan.padded_tokens,
                                     plan.padded_docs, workers=workers, piece_tokens=1_000)
                  for workers in (1, 2, 3, 7)]
        pieces_of_span.append(pieces[:])
        n = int(chunks[0].num_tokens)
        words, docs, positions = _reference_chunk_order(corpus, *span, plan.word_rank)
        np.testing.assert_array_equal(chunks[0].word[:n], words)
        np.testing.assert_array_equal(chunks[0].doc[:n], docs)
        np.testing.assert_array_equal(chunks[0].doc_major_pos[:n], positions)
        np.testing.assert_array_equal(chunks[0].tile_start, layout.word_tile_start(
            words, corpus.num_words, plan.padded_tokens))
        for chunk in chunks[1:]:
            for field in ("word", "doc", "doc_major_pos", "doc_start", "num_tokens",
                          "token_base", "tile_start"):
                expected, actual = getattr(chunks[0], field), getattr(chunk, field)
                assert actual.dtype == expected.dtype, field
                np.testing.assert_array_equal(actual, expected, err_msg=field)
            assert (chunk.tile_tokens, chunk.block_tokens) == (
                chunks[0].tile_tokens, chunks[0].block_tokens)
    # the pieces were used: all but the chunks of under 1,000 tokens
    assert pieces_of_span == [[1, 2, 3, 7]] * 3 + [[1, 1, 1, 1]] * 3


def test_rank_buckets_are_runs_of_ranks_with_16_bit_keys(monkeypatch):
    """Buckets cover the ranks in order, each at most 65,536 ranks (a word's key is its rank
    within its bucket), about BUCKET_TOKENS sampled tokens each, a word of more tokens
    alone."""
    from saberjax import layout, layout_sort

    corpus = _mixed_corpus()
    plan = layout.plan_layout(corpus)
    monkeypatch.setattr(layout_sort, "BUCKET_TOKENS", 5_000)
    monkeypatch.setattr(layout_sort, "RANK_SAMPLE", 100_000)  # every 5th token
    buckets = layout_sort.RankBuckets(corpus.word_ids, plan.word_rank, corpus.num_tokens)
    first = buckets.first_rank
    assert first[0] == 0 and first[-1] == corpus.num_words and np.all(np.diff(first) >= 1)
    assert np.all(np.diff(first) <= 65_536) and buckets.count == len(first) - 1
    rank_of_word = plan.word_rank
    bucket_of_rank = np.searchsorted(first, np.arange(corpus.num_words), side="right") - 1
    np.testing.assert_array_equal(buckets.of_word, bucket_of_rank[rank_of_word])
    np.testing.assert_array_equal(buckets.key_of_word,
                                  rank_of_word - first[bucket_of_rank[rank_of_word]])
    assert buckets.of_word.dtype == buckets.key_of_word.dtype == np.uint16
    np.testing.assert_array_equal(buckets.single, np.diff(first) == 1)
    # about the share of tokens each (by the sample), the words of more tokens alone
    sampled = np.bincount(plan.word_rank[corpus.word_ids[::5]], minlength=corpus.num_words)
    per_bucket = np.add.reduceat(sampled, first[:-1])
    share = sampled.sum() / -(-corpus.num_tokens // 5_000)
    assert np.all(per_bucket[~buckets.single] < 2 * share)
    assert np.all(buckets.single[bucket_of_rank[sampled >= share]])
    assert buckets.count < 3 * corpus.num_tokens / 5_000


def test_build_chunk_allocates_little_besides_its_arrays():
    """The chunk's arrays hold the tokens between build_chunk's passes: its peak host
    memory is the three token arrays and the corpus slice's worth, whatever the chunk size
    (a 4M-token chunk here, of about one run per token as in a synthetic corpus)."""
    import tracemalloc

    from saberjax import layout
    from saberjax.corpus import Corpus

    rng = np.random.default_rng(5)
    lengths = rng.integers(50, 600, 12_000)
    words = (np.minimum(rng.zipf(1.2, lengths.sum()), 50_000) - 1).astype(np.int32)
    corpus = Corpus(np.concatenate([[0], np.cumsum(lengths)]), words,
                    tuple(map(str, range(50_000))))
    plan = layout.plan_layout(corpus)
    tracemalloc.start()
    try:
        chunk = plan.build_chunk(corpus, 0, workers=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    arrays = sum(getattr(chunk, field).nbytes for field in ("word", "doc", "doc_major_pos"))
    assert arrays == 12 * plan.padded_tokens
    assert peak < arrays + 4 * corpus.num_tokens


def test_build_layout_shares_the_cores_between_its_chunks(monkeypatch):
    from saberjax import layout

    corpus = random_corpus(num_docs=80, num_words=30, seed=4)
    asked = []
    real_build_chunk = layout.LayoutPlan.build_chunk

    def recording_build_chunk(plan, corpus, index, workers=None):
        asked.append(workers)
        return real_build_chunk(plan, corpus, index, workers)

    monkeypatch.setattr(layout.os, "cpu_count", lambda: 8)
    monkeypatch.setattr(layout.LayoutPlan, "build_chunk", recording_build_chunk)
    layout.build_layout(corpus, chunk_tokens=corpus.num_tokens // 2 + 1)
    assert asked == [4, 4]
    asked.clear()
    layout.build_layout(corpus, chunk_tokens=corpus.num_tokens // 4 + 1, num_parts=4,
                        parts=[1, 2])
    assert asked == [4, 4]
    asked.clear()
    layout.build_layout(corpus)
    assert asked == [8]


def test_word_shares_split_a_zipfian_vocabulary_into_near_equal_tokens():
    """share_order: equal rows, tokens within 1% of each other, rows in falling frequency
    within a share.  Dealt round robin, the share of the most frequent word of these counts
    holds 25% more tokens than the share of the fourth."""
    counts = np.floor(100_000 / np.arange(1, 1004) ** 1.1).astype(np.int64)
    word_order = np.random.default_rng(3).permutation(len(counts))
    counts = counts[np.argsort(word_order)]  # word word_order[r] has the r-th largest count
    round_robin = np.bincount(np.arange(len(counts)) % 4, counts[word_order])
    assert round_robin.max() > 1.25 * round_robin.min()
    order = share_order(counts, word_order, 4)
    assert sorted(order.tolist()) == list(range(len(counts)))
    shares = np.bincount(np.arange(len(counts)) % 4, counts[order])
    assert shares.max() < 1.01 * shares.min()
    for part in range(4):
        assert np.all(np.diff(counts[order[part::4]]) <= 0)
    np.testing.assert_array_equal(share_order(counts, word_order, 1), word_order)
