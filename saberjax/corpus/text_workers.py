"""What a reader's worker (thread or process: saberjax.corpus.worker_pools) does with the
pieces it tokenises: each piece's tokens become ids into its own dictionary of words
(tokenizing.token_id_dtype), kept in memory while the worker's share of the memory allowed
holds them and in the worker's spill file after that (Piece); its dictionary, with the
words' counts and document frequencies, waits for GROUP_PIECES of them to be added to the
worker's words at once (text_words.Words), which the worker hands over when every piece is
read (worker_words).

A document's frequency per piece is counted from the piece's tokens sorted by word (a stable
radix sort: each word's tokens in text order), where a new document begins a new count.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from saberjax import text
from saberjax.corpus.text_blocks import DocumentBlock
from saberjax.corpus.text_words import Dictionary, PieceWords, Words
from saberjax.corpus.tokenizing import BlockWords, block_words

GROUP_PIECES = 8  # pieces whose words a worker adds to its own at once


@dataclasses.dataclass
class Piece:
    """What the collecting process keeps of a tokenised piece until its ids are mapped: where
    its documents' tokens start; its tokens, ids into its own dictionary, in memory or None
    while they wait in a worker's spill file (`spill`: its path and the byte offset); its
    documents' ids."""

    doc_tokens: np.ndarray
    token_ids: np.ndarray | None
    spill: tuple[str, int] | None
    ids: np.ndarray | None


def tokenised(worker: dict, index: int, block: DocumentBlock, rules: text.TextRules,
              keeping: tuple[str, float]) -> tuple[Piece, int, int, int]:
    """(piece `index` of the input, `block` (parsed here, when it holds records), its tokens
    kept as `keeping` says (_kept_tokens); its documents not valid UTF-8, its tokens, its
    bytes).  Its dictionary waits in the worker's state for GROUP_PIECES of them to be
    added to the worker's words at once (_add_pending)."""
    size = len(block.data)
    block = block.parsed()
    words = block_words(block, rules)
    counts, doc_freq = frequencies(words)
    pending = worker.setdefault("pending", {})
    pending[index] = Dictionary(words.keys, words.strings, counts, doc_freq)
    if len(pending) == GROUP_PIECES:
        _add_pending(worker)
    piece = Piece(words.doc_tokens, words.token_ids, None, block.ids)
    _kept_tokens(worker, piece, *keeping)
    return piece, words.invalid_utf8_docs, words.token_ids.size, size


def _add_pending(worker: dict) -> None:
    """Adds the worker's pending dictionaries to its words (its state's "words"), keeping
    each piece's PieceWords (its state's "pieces", by the pieces' indices)."""
    pending = worker.pop("pending", {})
    if not pending:
        return
    words = worker.setdefault("words", Words())
    pieces = worker.setdefault("pieces", {})
    for (index, dictionary), entries in zip(pending.items(), words.add(list(pending.values()))):
        pieces[index] = PieceWords.of(entries, dictionary.counts)


def _kept_tokens(worker: dict, piece: Piece, folder: str, limit: float) -> None:
    """Keeps the piece's token ids in memory while the worker's so far and these fit `limit`
    bytes, else appends them to the worker's spill file in `folder` (piece.spill)."""
    size = piece.token_ids.nbytes
    held = worker.get("held bytes", 0)
    if held + size <= limit:
        worker["held bytes"] = held + size
        return
    path = os.path.join(folder, f"worker-{worker['worker']}.ids")
    with open(path, "ab") as file:
        piece.spill = (path, file.tell())
        file.write(piece.token_ids.data)
    piece.token_ids = None


def worker_words(worker: dict) -> tuple[Dictionary, dict[int, PieceWords]]:
    """(the words a worker numbered, its pieces' PieceWords by their indices), which it
    forgets."""
    _add_pending(worker)
    words = worker.pop("words", None) or Words()
    return words.dictionary(), worker.pop("pieces", {})


def frequencies(words: BlockWords) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, documents) of each word of a piece's dictionary: the tokens in word order
    (_word_order: each word's tokens in text order), where a word's first token and a token
    in another document than its word's previous token begin a new document of that word."""
    num_words = words.num_words
    counts = np.bincount(words.token_ids, minlength=num_words).astype(np.int64, copy=False)
    if words.token_ids.size == 0:
        return counts, np.zeros(num_words, np.int64)
    num_docs = words.doc_tokens.size - 1
    docs = np.repeat(np.arange(num_docs, dtype=np.min_scalar_type(num_docs)),  # fewest bytes
                     np.diff(words.doc_tokens))
    docs = docs.take(_word_order(words.token_ids, num_words))
    new_doc = np.empty(docs.size, bool)
    np.not_equal(docs[1:], docs[:-1], out=new_doc[1:])
    word_ends = np.empty(num_words + 1, np.int64)
    word_ends[0] = 0
    np.cumsum(counts, out=word_ends[1:])
    new_doc[word_ends[:-1]] = True  # every word of the dictionary has a token
    new_docs = np.empty(docs.size + 1, np.int64)  # new documents before each token
    new_docs[0] = 0
    np.cumsum(new_doc, out=new_docs[1:])
    return counts, np.diff(new_docs.take(word_ends))


def _word_order(token_ids: np.ndarray, num_words: int) -> np.ndarray:
    """The positions of `token_ids` (in [0, num_words)) sorted by id, stably: a radix sort by
    16-bit digits, each a stable argsort of uint16 (numpy's radix sort)."""
    order = None
    for shift in range(0, max(num_words - 1, 1).bit_length(), 16):
        shifted = token_ids >> shift if shift else token_ids
        digit = shifted.astype(np.uint16, copy=False)  # the low 16 bits of the shifted ids
        order = (np.argsort(digit, kind="stable") if order is None
                 else order[np.argsort(digit[order], kind="stable")])
    return order

