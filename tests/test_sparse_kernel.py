"""The sparse E-step's Pallas kernel draws the reference's topics (interpret mode on a CPU,
compiled on a GPU) and its distribution, and lowers to Triton for an H100."""

import functools
import types

import jax
import numpy as np
import pytest
from jax.experimental import pallas as pl
import test_sparse_sampler
from test_pallas import doc_major, lower_for_h100, ragged_corpus
from test_sparse_sampler import compiled

from saberjax import esca, rng, sparse_rows, sparse_sampler
from saberjax.config import Hyperparams
from saberjax.execution.placement import place
from saberjax.layout import with_tile_tokens
from saberjax.pallas import sparse_sampler as kernel


@functools.partial(jax.jit, static_argnames=("hyper",))
def initial_state(share, chunk, seed, hyper):
    """The state a placement's init gives a device's word share of its chunk (compiling only
    the draw and A's rebuild, not the whole initialisation)."""
    topics, doc_major = esca.initial_topics(share, seed, hyper, chunk.padded_tokens)
    return esca.chunk_state_from_topics(chunk, topics, doc_major, hyper)


def random_sparse_state(num_topics: int, seed: int, dense_rows: int = 1,
                        dense_dtype=sparse_rows.DENSE_ROW_DTYPE,
                        row_table_bytes: int = sparse_rows.ROW_TABLE_BYTES):
    """(chunk, chunk state, sparse model, key) with random topics and random, skewed rows of B,
    the first dense_rows of them also dense (in dense_dtype), the row tables within
    row_table_bytes."""
    corpus = ragged_corpus(seed=seed)
    hyper = Hyperparams.create(num_topics, backend="xla", model_format="sparse")
    placed = place(corpus, hyper, 1, partition="words")
    # one device's part as plain arrays (off the placement's mesh)
    share, chunk = jax.tree.map(lambda x: jax.device_put(np.asarray(x)[0]),
                                (placed.word_shares, placed.slots[0]))
    chunk_state = initial_state(share, chunk, seed, hyper)
    rng_np = np.random.default_rng(seed)
    counts = np.zeros((corpus.num_words, hyper.padded_topics), np.int32)
    counts[:, :num_topics] = (rng_np.geometric(0.3, (corpus.num_words, num_topics)) - 1) * (
        rng_np.random((corpus.num_words, num_topics)) < 0.2)
    alpha = np.zeros(hyper.padded_topics, np.float32)
    alpha[:num_topics] = rng_np.gamma(0.5, 2 * hyper.alpha, num_topics)
    rows = test_sparse_sampler.rows_of_dense(counts, int(np.count_nonzero(counts)) + 32)
    model = test_sparse_sampler.sparse_model(
        rows, jax.numpy.asarray(alpha), num_topics=num_topics, beta=hyper.beta,
        num_words=corpus.num_words,
        dense_row_bytes=np.dtype(dense_dtype).itemsize * hyper.padded_topics * dense_rows,
        dense_dtype=dense_dtype, row_table_bytes=row_table_bytes)
    return share, chunk_state, model, rng.iteration_key(seed, 3)


@pytest.mark.parametrize("num_topics,tile_tokens,dense_rows,dense_dtype,tables", [
    (1000, 8, 10, "float32", "default"), (37, 1, 1, "float32", "none"),
    (300, 8, 5, "bfloat16", "some")])
def test_sparse_kernel_draws_the_reference_topics(num_topics, tile_tokens, dense_rows,
                                                  dense_dtype, tables):
    """The kernel's topics are the reference's (up to the rounding of the lane sums) with
    the sparse rows' lookups in their tables, in none, and some in tables and the others in
    their buckets (the tables' bytes holding only the first rows), there with the tiles
    claimed from three queues (saberjax.pallas.tile_queues; test_pallas checks that the
    queues draw one program a tile's topics bit for bit)."""
    table_bytes = {"default": sparse_rows.ROW_TABLE_BYTES, "none": 0, "some": 4 * 2_000}[tables]
    share, chunk_state, model, key = random_sparse_state(num_topics, seed=num_topics % 7,
                                                         dense_rows=dense_rows,
                                                         dense_dtype=jax.numpy.dtype(dense_dtype),
                                                         row_table_bytes=table_bytes)
    assert model.dense_bhat.shape[0] == dense_rows
    assert model.dense_bhat.dtype == dense_dtype
    tabled = np.asarray(model.tables.window)[dense_rows:] > 0
    assert {"default": tabled.mean() > 0.9, "none": not tabled.any(),
            "some": tabled.any() and not tabled.all()}[tables], tabled
    expected = jax.jit(sparse_sampler.sample_chunk)(share, chunk_state, model, key)
    tiled = with_tile_tokens(share, model.row_mass.shape[0], tile_tokens)
    got, got_doc_major = kernel.sample_and_shuffle(
        tiled, chunk_state, model, key, tile_queues=3 if tables == "some" else 0,
        queue_programs=2)
    np.testing.assert_array_equal(got_doc_major[:share.padded_tokens],
                                  doc_major(share, got)[:share.padded_tokens])
    assert got.dtype == expected.dtype
    assert np.mean(np.asarray(got) != np.asarray(expected)) < 1e-3
    assert np.all(np.asarray(got)[int(share.num_tokens):] == 0)


@pytest.fixture
def kernel_sampler(monkeypatch):
    """Makes test_sparse_sampler draw its tokens with the kernel instead of the reference."""
    monkeypatch.setattr(test_sparse_sampler, "sparse_sampler", types.SimpleNamespace(
        sample_chunk=lambda *args: kernel.sample_and_shuffle(*args)[0]))


@pytest.mark.parametrize("word", [0, 2])  # a dense row, a sparse row
@pytest.mark.parametrize("num_topics,nonzeros,word_nonzeros,alpha,asymmetric", [
    (2000, 40, 100, 0.05, True)])
def test_sparse_kernel_matches_the_dense_distribution(kernel_sampler, num_topics, nonzeros,
                                                      word_nonzeros, alpha, asymmetric, word):
    test_sparse_sampler.test_sparse_sampler_matches_the_dense_distribution(
        num_topics, nonzeros, word_nonzeros, alpha, asymmetric, word)


@pytest.mark.parametrize("word", [0, 2])
def test_sparse_kernel_draws_the_word_row_term_alone(kernel_sampler, word):
    test_sparse_sampler.test_sparse_sampler_draws_the_word_row_term_alone(word)


@pytest.mark.parametrize("padded_topics", [64, 96])
def test_sparse_kernel_lookup_finds_what_the_reference_search_finds(padded_topics):
    """The kernel's lookups of B_row,topic give what the reference's give for every row of
    test_sparse_sampler's directory_rows (crowded buckets among them) and every topic: a
    search of the topic's bucket the count and position of sparse_rows.find_in_bucket, a read
    of the row's table (rows with one) the count of sparse_rows.find_in_table; masked
    elements none."""
    counts, rows = test_sparse_sampler.directory_rows(padded_topics)
    row_of_entry = compiled.nonzero_rows(rows)
    buckets = compiled.row_buckets(rows, row_of_entry, padded_topics)
    tables = compiled.row_tables(rows, row_of_entry, padded_topics, num_dense=1)
    num_rows = counts.shape[0]
    topics = np.arange(-(-(padded_topics + 1) // 32) * 32, dtype=np.int32).reshape(-1, 32)
    masked = topics > padded_topics  # K_pad itself is looked up (no topic), past it masked

    def lookup(row_start, row_topics, row_counts, base, shift, steps, start, table_base,
               table_shift, table_window, table_slots, topics_ref, mask_ref, positions_ref,
               counts_ref, table_counts_ref):
        refs = types.SimpleNamespace(row_start=row_start, row_topics=row_topics,
                                     row_counts=row_counts, bucket_base=base,
                                     bucket_shift=shift, bucket_steps=steps,
                                     bucket_start=start, table_base=table_base,
                                     table_shift=table_shift, table_window=table_window,
                                     table_slots=table_slots)
        row = kernel._word_row(refs, pl.program_id(0))
        positions_ref[pl.program_id(0)], counts_ref[pl.program_id(0)] = kernel._word_count(
            refs, row, topics_ref[...], ~mask_ref[...])
        table_counts_ref[pl.program_id(0)] = kernel._table_count(
            refs, row, topics_ref[...], ~mask_ref[...], sparse_rows.ROW_TABLE_WINDOW)

    shape = jax.ShapeDtypeStruct((num_rows, *topics.shape), np.int32)
    positions, found, found_in_table = pl.pallas_call(
        lookup, out_shape=(shape, shape, shape), grid=(num_rows,), interpret=True)(
        rows.row_start, rows.topics, rows.counts, *buckets, *tables, topics, masked)
    row = np.broadcast_to(np.arange(num_rows)[:, None, None], positions.shape)
    topic = np.broadcast_to(np.minimum(topics, padded_topics), positions.shape)
    want_position, want_count = compiled.find_in_bucket(rows, buckets, row, topic)
    looked_up = ~np.broadcast_to(masked, positions.shape)
    np.testing.assert_array_equal(np.asarray(found)[looked_up],
                                  np.asarray(want_count)[looked_up])
    np.testing.assert_array_equal(np.asarray(positions)[looked_up],
                                  np.asarray(want_position)[looked_up])
    assert np.all(np.asarray(found)[~looked_up] == 0)
    tabled = np.asarray(tables.window)[row] > 0
    assert tabled.any() and not tabled.all()
    np.testing.assert_array_equal(
        np.asarray(found_in_table)[looked_up & tabled],
        np.asarray(compiled.find_in_table(tables, row, topic))[looked_up & tabled])
    np.testing.assert_array_equal(np.asarray(found_in_table)[looked_up & tabled],
                                  np.asarray(want_count)[looked_up & tabled])
    assert np.all(np.asarray(found_in_table)[~looked_up] == 0)


@pytest.mark.parametrize("tile_queues", [0, 132])
def test_sparse_kernel_lowers_to_triton_for_h100(tile_queues):
    share, chunk_state, model, key = random_sparse_state(1000, seed=1)
    sample = functools.partial(kernel.sample_and_shuffle, tile_queues=tile_queues,
                               interpret=False)
    assert "triton" in lower_for_h100(sample, share, chunk_state, model, key).lower()
