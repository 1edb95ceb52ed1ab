"""What a reader's worker (thread or process: saberjax.corpus.worker_pools) does with the
pieces it tokenises, from their text to their ids in the corpus, keeping all of it in its own
state so that no token passes through the collecting process:

- tokenised (tokenised_pieces: several at a call): a piece's tokens become ids into its
  own dictionary of words (tokenizing.token_id_dtype), kept in memory while the worker's
  share of the memory allowed holds them and in the worker's spill file after that; its dictionary, with the
  words' counts and document frequencies, waits for GROUP_PIECES of them to be added to the
  worker's words at once (text_words.Words);
- tokenised_pieces reports the words the worker numbered since its last call, which the
  collecting process numbers among the corpus's as they come (text_words.CorpusWords);
- worker_words: once every piece is read, the worker hands over its last new words and
  every word's counts;
- worker_places: given its words' vocabulary ids, the worker finds each of its pieces'
  words' ids and hands over how many tokens of vocabulary words each piece holds (the
  collecting process places the pieces in the corpus from these);
- worker_mapped: given where each piece's tokens begin in the corpus, the worker maps its
  pieces' ids and writes them into the corpus's word ids' parts (files of their own, which
  the workers write at once, each starting at another place of the corpus:
  _writing_order), and hands over the lengths of each piece's documents (text_ids).

A document's frequency per piece is counted from the piece's tokens sorted by word (a stable
radix sort: each word's tokens in text order), where a new document begins a new count.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from saberjax import text
from saberjax.corpus.text_blocks import DocumentBlock, LineRange
from saberjax.corpus.text_words import Dictionary, PieceWords, Words, WordsReport
from saberjax.corpus.tokenizing import BlockWords, block_words, token_id_dtype
from saberjax.corpus.word_id_parts import WordIdParts

GROUP_PIECES = 8  # pieces whose words a worker adds to its own at once


@dataclasses.dataclass
class HeldPiece:
    """What a worker keeps of a piece it tokenised until it writes its ids: where its
    documents' tokens start; its tokens, ids into its own dictionary (of
    tokenizing.token_id_dtype), in memory or None while they wait in the worker's spill file
    (`spill`: its path and the byte offset); its words among the worker's (PieceWords, once
    added), then their vocabulary ids (`lookup`)."""

    doc_tokens: np.ndarray
    token_ids: np.ndarray | None
    spill: tuple[str, int] | None = None
    words: PieceWords | None = None
    lookup: np.ndarray | None = None


def tokenised(worker: dict, index: int, block: DocumentBlock | LineRange,
              rules: text.TextRules, keeping: tuple[str, float]
              ) -> tuple[int, np.ndarray | None, int, int, int]:
    """(the documents of piece `index` of the input, `block` (read and parsed here, when it
    is a range of a file or holds records), and their ids; its documents not valid UTF-8,
    its tokens, its bytes).  The worker keeps its tokens as `keeping` says (_kept_tokens)
    and its dictionary waits in the worker's state for GROUP_PIECES of them to be added to
    the worker's words at once (_add_pending)."""
    size = block.size
    block = block.parsed()
    words = block_words(block, rules)
    counts, doc_freq = frequencies(words)
    pending = worker.setdefault("pending", {})
    pending[index] = Dictionary(words.keys, words.strings, counts, doc_freq)
    piece = HeldPiece(words.doc_tokens, words.token_ids)
    _kept_tokens(worker, piece, *keeping)
    worker.setdefault("pieces", {})[index] = piece
    if len(pending) == GROUP_PIECES:
        _add_pending(worker)
    return (words.doc_tokens.size - 1, block.ids, words.invalid_utf8_docs,
            words.token_ids.size, size)


def tokenised_pieces(worker: dict, first: int, blocks: list[DocumentBlock | LineRange],
                     rules: text.TextRules, keeping: tuple[str, float]
                     ) -> tuple[list[tuple], WordsReport | None]:
    """(tokenised of consecutive pieces of the input, `first` the first's index; the words
    the worker numbered meanwhile, or None): a worker process takes several pieces a call,
    so that the collecting process's share of a call (its arguments pickled, the pipes, the
    threads' hand-overs) is paid once for them."""
    results = [tokenised(worker, first + offset, block, rules, keeping)
               for offset, block in enumerate(blocks)]
    return results, _new_words(worker)


def _new_words(worker: dict) -> WordsReport | None:
    """The words the worker numbered since its last report, or None for none."""
    words = worker.get("words")
    if words is None:
        return None
    first, dictionary = words.new_words()
    return WordsReport(worker["worker"], first, dictionary) if dictionary.keys.size else None


def _add_pending(worker: dict) -> None:
    """Adds the worker's pending dictionaries to its words (its state's "words"), keeping
    each piece's PieceWords."""
    pending = worker.pop("pending", {})
    if not pending:
        return
    words = worker.setdefault("words", Words())
    pieces = worker["pieces"]
    for (index, dictionary), entries in zip(pending.items(), words.add(list(pending.values()))):
        pieces[index].words = PieceWords.of(entries, dictionary.counts)


def _kept_tokens(worker: dict, piece: HeldPiece, folder: str, limit: float) -> None:
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


def worker_words(worker: dict) -> tuple[int, WordsReport | None, np.ndarray, np.ndarray]:
    """(the worker's index; its words not yet reported, or None; the tokens and documents of
    each of its words, by their numbers): what a worker hands over once every piece is read,
    its words then forgotten (its pieces keep their numbers)."""
    _add_pending(worker)
    report = _new_words(worker)
    words = worker.pop("words", None) or Words()
    size = words.keys.size
    return worker["worker"], report, words.counts[:size], words.doc_freq[:size]


def worker_places(worker: dict, vocabulary_ids: np.ndarray) -> dict[int, int]:
    """The tokens of vocabulary words of each of the worker's pieces, by their indices, given
    the vocabulary ids of its words (-1 for none), which it keeps for each piece's words."""
    kept = {}
    for index, piece in worker.get("pieces", {}).items():
        piece.lookup = vocabulary_ids[piece.words.entries]
        kept[index] = piece.words.tokens(piece.lookup >= 0)
        piece.words = None
    return kept


def worker_mapped(worker: dict, starts: np.ndarray, parts: WordIdParts, write_back: bool
                  ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """(tokens of each document kept, which documents are kept) of each of the worker's
    pieces, by their indices, whose vocabulary ids it writes into the corpus's word ids'
    `parts`, piece i's at id starts[i] (_mapped, in _writing_order), and forgets, its spill
    file deleted (by every worker at once, rather than by the collecting process)."""
    pieces = worker.pop("pieces", {})
    worker.pop("held bytes", None)
    spills = {piece.spill[0] for piece in pieces.values() if piece.spill is not None}
    mapped = {index: _mapped(pieces.pop(index), parts, int(starts[index]), write_back)
              for index in _writing_order(worker["worker"], sorted(pieces), starts)}
    for path in spills:
        os.unlink(path)
    return mapped


def _writing_order(worker: int, indices: list[int], starts: np.ndarray) -> list[int]:
    """The pieces `indices` (in order), rotated to begin with the first whose tokens begin
    at or after the worker's own place in the corpus: the fraction (worker x the golden
    ratio) mod 1, so that the workers, whatever their number, begin writing far apart, each
    in parts of the word ids that few others write (a file takes one writer at a time)."""
    place = (worker * 0.6180339887498949) % 1.0 * starts[-1]
    first = int(np.searchsorted(starts[indices], place)) if indices else 0
    return indices[first:] + indices[:first]


def _mapped(piece: HeldPiece, parts: WordIdParts, start: int, write_back: bool
            ) -> tuple[np.ndarray, np.ndarray]:
    """(tokens of each document kept, which documents are kept) of a piece, its vocabulary ids
    written into the word ids' `parts` as ids start, start + 1, ..., by write(), their
    write-back to disk started at once where `write_back` says (files.start_write_back: the
    writer's fsync then waits for little); documents without a vocabulary word are left
    out."""
    token_ids, doc_tokens = piece.token_ids, piece.doc_tokens
    if token_ids is None:
        path, offset = piece.spill
        dtype = token_id_dtype(piece.lookup.size)  # the lookup: one per word of the piece
        with open(path, "rb") as file:
            token_ids = np.frombuffer(
                os.pread(file.fileno(), int(doc_tokens[-1]) * dtype.itemsize, offset), dtype)
    ids = piece.lookup.take(token_ids)
    kept = ids >= 0
    lengths = np.diff(doc_tokens)
    if not kept.all():
        ends = np.zeros(kept.size + 1, np.int64)
        np.cumsum(kept, out=ends[1:])
        lengths = np.diff(ends[doc_tokens])
        ids = ids.take(np.flatnonzero(kept))  # numpy's boolean index branches on each
    parts.write(ids, start, write_back)
    nonempty = lengths > 0
    return lengths[nonempty], nonempty


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

