"""Tests of the E-step roofline (saberjax.roofline): its sums against a count done token by
token, and which level the A rows come from as the chunk's resident set meets the L2."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from helpers import random_corpus
from saberjax import esca, roofline
from saberjax.config import Hyperparams
from saberjax.layout import build_layout


def _state(chunk_tokens=None, num_topics=64):
    corpus = random_corpus(num_docs=50, num_words=40, mean_length=30, seed=3)
    layout = build_layout(corpus, chunk_tokens)
    hyper = Hyperparams.create(num_topics)
    return layout, esca.init(layout.chunks, corpus.num_words, hyper, 7)


def test_chunk_sums_match_a_token_by_token_count():
    layout, state = _state()
    chunk, chunk_state = layout.chunks[0], state.chunks[0]
    sums = jax.device_get(roofline.chunk_traffic(chunk, chunk_state, layout.num_words))
    tokens = int(chunk.num_tokens)
    doc_start, nnz = np.asarray(chunk.doc_start), np.asarray(chunk_state.a_nnz)
    word, doc = np.asarray(chunk.word)[:tokens], np.asarray(chunk.doc)[:tokens]

    def sectors(d):  # the 32-byte sectors holding document d's packed pairs
        first, end = 4 * doc_start[d], 4 * (doc_start[d] + nnz[d])
        return len({byte // 32 for byte in range(first, end)})

    runs = [i for i in range(tokens) if i == 0 or (word[i], doc[i]) != (word[i - 1], doc[i - 1])]
    first_doc, last_doc = layout.chunk_docs[0]
    docs = range(last_doc - first_doc)
    assert sums["tokens"] == tokens
    assert sums["run_sectors"] == sum(sectors(doc[i]) for i in runs)
    assert sums["footprint"] == 32 * sum(sectors(d) for d in docs)
    assert np.isclose(sums["nnz_per_token"], np.mean(nnz[doc]))
    assert np.array_equal(sums["word_tokens"], np.bincount(word, minlength=layout.num_words))
    tile_start = np.asarray(chunk.tile_start)
    tiles = [s for s, e in zip(tile_start[:-1], tile_start[1:]) if s < e]
    assert sums["tiles"] == len(tiles)
    # the kernel's block steps: each tile runs to its longest row's 32-blocks
    assert sums["block_steps"] == sum(max(-(-int(nnz[doc[i]]) // 32) for i in range(s, e))
                                      for s, e in zip(tile_start[:-1], tile_start[1:]) if s < e)
    assert np.array_equal(sums["word_tiles"],
                          np.bincount(word[tiles], minlength=layout.num_words))


def test_a_rows_come_from_hbm_once_when_the_chunk_fits_the_l2():
    layout, state = _state()
    shape = state.model.bhat.shape
    card = dict(hbm_bytes_per_s=2e12, l2_bytes_per_s=6e12, num_sms=132, clock_hz=2e9)
    fits = roofline.floor(layout.chunks, state.chunks, shape, roofline.Card(l2_bytes=1 << 30,
                                                                             **card))
    spills = roofline.floor(layout.chunks, state.chunks, shape, roofline.Card(l2_bytes=1,
                                                                              **card))
    sums = jax.device_get(roofline.chunk_traffic(layout.chunks[0], state.chunks[0],
                                                 layout.num_words))
    tokens = float(sums["tokens"])
    assert fits["a_l2_share"] == 1.0 and spills["a_l2_share"] < 1e-3
    # spilling adds every run's A sectors and a sector per scattered topic, nearly in full
    extra = (spills["hbm_bytes_per_token"] - fits["hbm_bytes_per_token"]) * tokens
    assert np.isclose(extra, 32 * float(sums["run_sectors"]) + 32 * tokens, rtol=1e-3)
    assert fits["l2_bytes_per_token"] == spills["l2_bytes_per_token"]
    assert fits["floor_seconds"] == max(fits["hbm_seconds"], fits["l2_seconds"],
                                        fits["l1_seconds"])
    assert fits["floor_bound"] in ("hbm", "l2", "l1")
    for result in (fits, spills):  # the arrays add up to the levels' totals
        arrays = result["arrays"]
        assert sum(a["hbm"] for a in arrays.values()) == pytest.approx(
            result["hbm_bytes_per_token"], rel=1e-3)
        assert sum(a["l1"] for a in arrays.values()) == pytest.approx(
            result["l1_sectors_per_token"], rel=1e-3)
    assert fits["arrays"]["a_rows"]["l2"] == pytest.approx(
        32 * float(sums["run_sectors"]) / tokens, rel=1e-3)
    assert fits["arrays"]["a_rows"]["hbm"] == pytest.approx(
        float(sums["footprint"]) / tokens, rel=1e-3)  # fits: each A sector read once
    assert spills["arrays"]["token_lists"] == fits["arrays"]["token_lists"]


def test_smaller_chunks_shrink_the_footprint_and_keep_the_token_count():
    whole, whole_state = _state()
    cut, cut_state = _state(chunk_tokens=400)
    card = roofline.Card(2e12, 6e12, 1 << 30, 132, 2e9)
    one = roofline.floor(whole.chunks, whole_state.chunks, whole_state.model.bhat.shape, card)
    many = roofline.floor(cut.chunks, cut_state.chunks, cut_state.model.bhat.shape, card)
    assert len(cut.chunks) > 1
    assert many["chunk_a_footprint_bytes"] < one["chunk_a_footprint_bytes"]


def test_sparse_floor_counts_term_one_lookups_token_by_token():
    layout, state = _state(chunk_tokens=400)
    shape = state.model.bhat.shape
    num_dense = layout.num_words // 3
    card = roofline.Card(2e12, 6e12, 1 << 30, 132, 2e9)
    base = roofline.floor(layout.chunks, state.chunks, shape, card)
    result = roofline.sparse_floor(layout.chunks, state.chunks, num_dense, shape, card)
    tokens = dense_tokens = dense_sectors = sparse_sectors = 0
    for chunk, chunk_state in zip(layout.chunks, state.chunks):
        real = int(chunk.num_tokens)
        nnz = np.asarray(chunk_state.a_nnz)[np.asarray(chunk.doc)[:real]]
        for word, count in zip(np.asarray(chunk.word)[:real], nnz):
            tokens += 1
            value_bytes = 2 if word < num_dense else 4  # a bfloat16 B-hat, a float32 D_k
            # each block's lanes: sorted topics shape[1] / count columns apart, 32 B sectors
            for block in range(-(-int(count) // 32)):
                lanes = min(32, int(count) - 32 * block)
                span = min(lanes, lanes * shape[1] / count * value_bytes / 32 + 1)
                if word < num_dense:
                    dense_sectors += span + (lanes < 32)  # the lanes past the row: a sector
                else:
                    sparse_sectors += span
            if word < num_dense:
                dense_tokens += 1
            else:  # a 4-slot window of int32 a nonzero: 1 + 12/32 sectors
                sparse_sectors += 1.375 * count
    assert 0 < dense_tokens < tokens
    assert result["dense_share"] == pytest.approx(dense_tokens / tokens)
    arrays = result["arrays"]
    assert arrays["dense_lookups"]["l1"] == pytest.approx(dense_sectors / tokens, rel=1e-5)
    assert arrays["sparse_lookups"]["l1"] == pytest.approx(sparse_sectors / tokens, rel=1e-5)
    for name in ("dense_lookups", "sparse_lookups"):  # each gathered sector from L2
        assert arrays[name]["l2"] == pytest.approx(32 * arrays[name]["l1"])
    assert "bhat_rows" not in arrays and arrays["a_rows"] == base["arrays"]["a_rows"]
    assert result["l2_bytes_per_token"] == pytest.approx(
        sum(a["l2"] for a in arrays.values()))
    assert result["floor_seconds"] == max(result["hbm_seconds"], result["l2_seconds"],
                                          result["l1_seconds"])
    assert result["nnz_per_token"] == base["nnz_per_token"]
