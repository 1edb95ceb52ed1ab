"""Splits of a corpus for evaluation: train/test by document and the halves of every
document, both pinned per seed across numpy versions."""

from __future__ import annotations

import numpy as np

from saberjax.background import on_threads, thread_count
from saberjax.corpus.core import Corpus, offsets_from_lengths

MIN_PIECE_TOKENS = 1 << 18  # tokens a thread deals at least in split_document_halves


def _random_keys(seed: int, size: int, first: int = 0) -> np.ndarray:
    """Draws first .. first + size - 1 of the seed's raw PCG64 output: unlike Generator
    methods, its stream is fixed across numpy versions."""
    bit_generator = np.random.PCG64(seed)
    bit_generator.advance(first)
    return bit_generator.random_raw(size)


def train_test_split(corpus: Corpus, test_fraction: float, seed: int = 0
                     ) -> tuple[Corpus, Corpus]:
    """(train, test) by document: round(test_fraction * D) random documents go to test.

    Both keep the original document order; the split depends only on D, the fraction and seed.
    """
    if not 0 <= test_fraction < 1:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction}")
    num_test = round(test_fraction * corpus.num_docs)
    is_test = np.zeros(corpus.num_docs, bool)
    is_test[np.argsort(_random_keys(seed, corpus.num_docs), kind="stable")[:num_test]] = True
    return corpus.subset(np.flatnonzero(~is_test)), corpus.subset(np.flatnonzero(is_test))


def split_document_halves(corpus: Corpus, seed: int = 0) -> tuple[Corpus, Corpus]:
    """(observed, held_out) halves of every document, for document-completion evaluation.

    Each document's tokens are shuffled and dealt alternately, observed first, so observed
    gets ceil(n/2) tokens and held_out floor(n/2); within a half tokens keep document order.
    Both halves keep all D documents in order (a one-token document has an empty held-out half).
    """
    lengths = corpus.doc_lengths()
    offsets = np.asarray(corpus.doc_offsets)
    observed_offsets = offsets_from_lengths((lengths + 1) // 2)
    held_out_offsets = offsets_from_lengths(lengths // 2)
    observed_ids = np.empty(int(observed_offsets[-1]), corpus.word_ids.dtype)
    held_out_ids = np.empty(int(held_out_offsets[-1]), corpus.word_ids.dtype)

    def deal(documents: tuple[int, int]) -> None:
        """Deal documents first_doc .. last_doc - 1: sorting their tokens by (document, random
        key) shuffles each document's tokens, and alternate ranks go to observed.  The keys
        are the tokens' own draws of the seed's one stream (advanced to the first token)."""
        first_doc, last_doc = documents
        start, stop = int(offsets[first_doc]), int(offsets[last_doc])
        doc_of_token = np.repeat(np.arange(last_doc - first_doc, dtype=np.uint64),
                                 lengths[first_doc:last_doc])
        keys = (doc_of_token << np.uint64(32)) | (_random_keys(seed, stop - start, start)
                                                 >> np.uint64(32))
        dealt = np.argsort(keys, kind="stable")
        rank_in_doc = np.arange(start, stop) - np.repeat(offsets[first_doc:last_doc],
                                                        lengths[first_doc:last_doc])
        observed = np.empty(stop - start, bool)
        observed[dealt] = rank_in_doc % 2 == 0
        word_ids = np.asarray(corpus.word_ids[start:stop])
        observed_ids[observed_offsets[first_doc]:observed_offsets[last_doc]] = word_ids[observed]
        held_out_ids[held_out_offsets[first_doc]:held_out_offsets[last_doc]] = \
            word_ids[~observed]

    # documents cut into pieces of about equal tokens, dealt on threads (numpy's sort releases
    # the GIL); each document lies in one piece, so the halves do not depend on the cut
    pieces = thread_count(corpus.num_tokens // MIN_PIECE_TOKENS)
    inner = np.searchsorted(offsets, np.linspace(0, corpus.num_tokens, pieces + 1)[1:-1])
    cuts = np.unique(np.concatenate([[0], inner, [corpus.num_docs]])).tolist()
    on_threads(deal, list(zip(cuts[:-1], cuts[1:])), len(cuts) - 1)
    return (Corpus(observed_offsets, observed_ids, corpus.vocab, name=corpus.name),
            Corpus(held_out_offsets, held_out_ids, corpus.vocab, name=corpus.name))
