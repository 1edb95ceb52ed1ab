"""The dense-row B-hat sectors an E-step tile's tokens share.

roofline.sparse_floor counts each block of a dense-row token's gathers as the 32 B sectors it
spans in the word's bfloat16 B-hat row, token by token.  A tile's tokens (one word) gather
from the same row at their documents' topics, and documents share topics, so a sector one
token of the tile brought into L1 may serve another.  tile_sectors counts, on a sample of
tiles on dense rows, both the model's sectors a token and the distinct sectors the tile's
tokens touch together, a token.
"""

from __future__ import annotations

import jax
import numpy as np

from saberjax import roofline
from saberjax.state import unpack_pairs


def tile_sectors(chunk, chunk_state, num_dense_rows: int, padded_topics: int,
                 sample_tiles: int = 20000, seed: int = 0) -> dict:
    """On up to sample_tiles random tiles of chunk whose word has a dense row (word <
    num_dense_rows): the tokens, the model's sectors a token (sparse_floor's count), the
    distinct 32 B sectors of the bfloat16 row (topic * 2 // 32) the tile's tokens gather
    together a token, their ratio, and the dense lookups' L2 bytes a token if each distinct
    sector of a tile comes from L2 once (the model's: SECTOR times its sectors)."""
    word, doc, tile_start, num_tokens = map(np.asarray, jax.device_get(
        (chunk.word, chunk.doc, chunk.tile_start, chunk.num_tokens)))
    pairs, a_nnz, doc_start = map(np.asarray, jax.device_get(
        (chunk_state.a_pairs, chunk_state.a_nnz, chunk.doc_start)))
    topics = np.asarray(unpack_pairs(pairs, padded_topics)[0])
    value_bytes = np.dtype(roofline.BHAT_DTYPE).itemsize
    starts = tile_start[:-1]
    ends = tile_start[1:]
    real = starts < np.minimum(ends, int(num_tokens))
    dense = real & (word[np.minimum(starts, len(word) - 1)] < num_dense_rows)
    tiles = np.flatnonzero(dense)
    rng = np.random.default_rng(seed)
    if len(tiles) > sample_tiles:
        tiles = np.sort(rng.choice(tiles, sample_tiles, replace=False))
    tokens = model = distinct = 0.0
    for tile in tiles:
        docs = doc[starts[tile]:min(ends[tile], int(num_tokens))]
        nnz = a_nnz[docs]
        sectors = [topics[doc_start[d]:doc_start[d] + n] * value_bytes // roofline.SECTOR
                   for d, n in zip(docs, nnz)]
        tokens += len(docs)
        model += float(np.sum(roofline.row_lookup_sectors(
            nnz.astype(np.float64), padded_topics, value_bytes, past_row=True)))
        distinct += len(np.unique(np.concatenate(sectors))) if len(sectors) else 0
    per_token = max(tokens, 1.0)
    return dict(tiles=len(tiles), dense_tiles=int(np.sum(dense)), tokens=int(tokens),
                model_sectors_per_token=model / per_token,
                distinct_sectors_per_token=distinct / per_token,
                distinct_over_model=distinct / max(model, 1.0),
                model_l2_bytes_per_token=roofline.SECTOR * model / per_token,
                distinct_l2_bytes_per_token=roofline.SECTOR * distinct / per_token)
