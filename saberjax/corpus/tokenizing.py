"""Blocks of documents -> their tokens, as ids into the block's own dictionary of words.

A `DocumentBlock` (saberjax.corpus.text_blocks) holds the UTF-8 bytes of consecutive documents
concatenated, with offsets.
`block_words` tokenises one under `text.TextRules` and returns `BlockWords`: each token as an
id into the block's dictionary, where each document's tokens start, and how many documents
were not valid UTF-8 (those are read as Latin-1, as saberjax always read such text).

The default rules (text.DEFAULT_RULES: ASCII folding, lowercase, maximal runs of at least three
letters) run as whole-array numpy passes over the bytes, never a Python object per token or per
document:

1. A byte is a letter when ``(byte | 0x20) - 0x61 < 26`` (ASCII; ``| 0x20`` lowercases).  Runs
   of letters and non-ASCII bytes are found as the rising and falling edges of that mask, cut
   at document boundaries.
2. Runs without a non-ASCII byte are tokens when at least three letters long.  Runs holding
   non-ASCII bytes (an accented word, a word of another script) are gathered into a small
   buffer, decoded (UTF-8 checked per document; a document that is not valid UTF-8 is read as
   Latin-1) and each character replaced by its own NFKD ASCII folding (text.ascii_folding, a
   Python call per distinct character of the block): ASCII characters never reorder under NFKD,
   so folding characters one at a time gives what folding the document whole gives.  The
   folded runs are cut into letter runs again, in place among the others.
3. A word of at most 8 letters is keyed by its 8 bytes (the two aligned uint64 of the buffer
   holding them, shifted together); one of 9 to 12 letters by its first 8 letters' low 5
   bits with the last 4 letters' 5 bits in the 3 bits above them, and the top bit set.
   Either key is exact.  Longer words (about 2% of English tokens) are copied out as bytes.
4. The distinct long words are numbered by their bytes (key_tables.number_runs), each then
   keyed LONG_KEY + its number, then every token's key (key_tables.number_keys): the block's
   dictionary.

Other rules take the general path: each document decoded and tokenised by TextRules.tokenize (a
Python list per document), the block's words numbered by a Python dictionary, each keyed as a
long word.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from saberjax import text
from saberjax.corpus.key_tables import Runs, Strings, byte_ranges, number_keys, number_runs
from saberjax.corpus.text_blocks import DocumentBlock, line_offsets

MAX_KEY_LETTERS = 12  # longest word keyed by a uint64; longer words are kept as bytes
_RAW_KEY_LETTERS = 8  # longest word keyed by its bytes as they are
PACKED_FLAG = np.uint64(1 << 63)  # set on keys of 9 to 12 packed letters, never on raw keys
# LONG_KEY + n keys the block's n-th long word: bit 55 is clear in every other key
LONG_KEY = np.uint64((1 << 63) | (1 << 55))
_LOW5 = np.uint64(0x1F1F1F1F1F1F1F1F)
_U3, _U63, _U64 = np.uint64(3), np.uint64(63), np.uint64(64)
_PAD_WORDS = 2  # zero uint64 after the one holding a buffer's last byte (see _padded)
# _BYTE_MASKS[k]: the low k bytes of a uint64 (k >= 8: all of them, by take's mode "clip")
_BYTE_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [2**64 - 1], np.uint64)
# UTF-8: bytes in a character after its lead byte (-1: not a lead byte; continuation bytes
# 0x80-0xBF, and 0xC0, 0xC1, 0xF5-0xFF, which no valid UTF-8 holds)
_CONTINUATIONS = np.full(256, -1, np.int8)
_CONTINUATIONS[:0x80] = 0
_CONTINUATIONS[0xC2:0xE0] = 1
_CONTINUATIONS[0xE0:0xF0] = 2
_CONTINUATIONS[0xF0:0xF5] = 3
_LEAD_BITS = np.array([0x7F, 0x1F, 0x0F, 0x07], np.int64)  # payload of a lead byte, by length


class BlockWords(NamedTuple):
    """The tokens of a DocumentBlock as ids into the block's dictionary `keys`: a key is a
    word (see word_strings) or, at LONG_KEY + n and up, the n-th of the block's `strings`
    (UTF-8 bytes); document i's tokens are token_ids[doc_tokens[i]:doc_tokens[i + 1]], in
    text order, of token_id_dtype(keys.size)."""

    keys: np.ndarray
    strings: Strings
    token_ids: np.ndarray
    doc_tokens: np.ndarray
    invalid_utf8_docs: int

    @property
    def num_words(self) -> int:
        return self.keys.size


def block_words(block: DocumentBlock, rules: text.TextRules = text.DEFAULT_RULES) -> BlockWords:
    """The tokens of `block` under `rules` (see the module)."""
    data = np.asarray(block.data, np.uint8)
    offsets = line_offsets(data) if block.offsets is None else np.asarray(block.offsets, np.int64)
    if rules.is_default():
        return _default_rule_words(data, offsets)
    return _general_words(data, offsets, rules)


def token_id_dtype(num_words: int) -> np.dtype:
    """The dtype of the token ids of a block of `num_words` words: uint16 while they fit (half
    the bytes to keep, spill and read back), else int32."""
    return np.dtype(np.uint16 if num_words <= 1 << 16 else np.int32)


def word_strings(keys: np.ndarray) -> list[str]:
    """The words keyed by `keys` (block_words' key encoding; not LONG_KEY ones)."""
    keys = np.asarray(keys, np.uint64)
    packed = (keys & PACKED_FLAG) != 0
    letters = np.zeros((keys.size, MAX_KEY_LETTERS), np.uint8)
    letters[~packed, :8] = keys[~packed].astype("<u8").view(np.uint8).reshape(-1, 8)
    codes = keys[packed]
    head = ((codes & _LOW5).astype("<u8").view(np.uint8).reshape(-1, 8)) + 0x60
    tail = np.stack([((codes >> np.uint64(8 * j + 5)) & np.uint64(7))
                     | (((codes >> np.uint64(8 * j + 37)) & np.uint64(3)) << np.uint64(3))
                     for j in range(4)], axis=1).reshape(-1, 4).astype(np.uint8)
    letters[packed] = np.concatenate([head, np.where(tail > 0, tail + 0x60, 0)], axis=1)
    return letters.view(f"S{MAX_KEY_LETTERS}").ravel().astype(f"U{MAX_KEY_LETTERS}").tolist()


def is_long_key(keys: np.ndarray) -> np.ndarray:
    """Which keys stand for long words (LONG_KEY + n)."""
    return (keys & LONG_KEY) == LONG_KEY


def dictionary_words(words: BlockWords) -> list[str]:
    """Every word of a block's dictionary, in order (long words decoded from UTF-8, bytes that
    are not as surrogate escapes)."""
    long = is_long_key(words.keys)
    entries = np.zeros(words.keys.size, object)
    entries[~long] = word_strings(words.keys[~long])
    entries[long] = [word.decode("utf-8", "surrogateescape") for word in
                     words.strings.take(words.keys[long] - LONG_KEY).tolist()]
    return entries.tolist()


def _padded(size: int) -> np.ndarray:
    """A buffer for `size` bytes, for the caller to fill, then zero bytes: a whole number of
    uint64, _PAD_WORDS of them after the one holding byte size - 1, so that 16 bytes can be
    read from any of the first `size` positions as two aligned uint64 each (_word_keys)."""
    buffer = np.empty((size // 8 + 1 + _PAD_WORDS) * 8, np.uint8)
    buffer[size:] = 0
    return buffer


def _word_keys(buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """(exact uint64 keys of the lowercase words at `starts` of a _padded buffer, where of
    them are longer than 8 letters).  A key is the word's bytes for at most 8 letters; for 9
    to 12, the first 8 letters' low 5 bits with the last 4 letters' 5 bits (never 0 for a
    letter) in the 3 bits above them, and PACKED_FLAG; longer words get their first 12
    letters' key (for the caller to replace).  The 8 bytes from a position are read as the
    two aligned uint64 holding them, shifted together (unsigned arithmetic and `take`
    throughout: numpy's fastest paths)."""
    words = buffer.view(np.uint64)
    positions = starts.view(np.uint64)  # starts are never negative
    index = (positions >> _U3).view(np.int64)
    shift = positions << _U3
    shift &= _U63
    back = _U64 - shift  # a shift by 64 gives 0 in numpy
    keys = words.take(index)
    keys >>= shift
    index += 1
    high = words.take(index)
    high <<= back
    keys |= high
    keys &= _BYTE_MASKS.take(lengths, mode="clip")
    longer = np.flatnonzero(lengths > _RAW_KEY_LETTERS)
    if longer.size:
        after = index.take(longer)
        rest = words.take(after)
        rest >>= shift.take(longer)
        after += 1
        high = words.take(after)
        high <<= back.take(longer)
        rest |= high
        rest &= _BYTE_MASKS.take(lengths.take(longer) - 8, mode="clip")
        packed = keys.take(longer)
        packed &= _LOW5
        packed |= (rest & np.uint64(0x07070707)) << np.uint64(5)
        packed |= (rest & np.uint64(0x18181818)) << np.uint64(34)
        packed |= PACKED_FLAG
        keys[longer] = packed
    return keys, longer


def _runs(mask: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the maximal runs of True in mask[1:-1] (mask is padded with False at
    both ends), cut at the document offsets."""
    edges = np.flatnonzero(mask[1:] != mask[:-1])  # a start, an end, a start, ...
    starts, ends = edges[0::2], edges[1::2]
    inner = offsets[1:-1]
    joins = inner[mask[inner] & mask[inner + 1]]  # a run across a document boundary
    if joins.size:
        joins = np.unique(joins)
        starts = np.insert(starts, np.searchsorted(starts, joins), joins)
        ends = np.insert(ends, np.searchsorted(ends, joins), joins)
    return starts, ends


def _token_runs(mask: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, lengths) of the maximal runs of at least three True in mask[1:-1] (mask padded
    as _runs takes it), cut at the document offsets: the runs of `triple`, true at byte i
    when bytes i, i + 1 and i + 2 are, which begin where their runs of mask do and end two
    bytes before them, so that shorter runs are never found (nor dropped by a pass over
    every run).  A triple across a document offset is cleared, which cuts its run there."""
    size = mask.size - 2
    triple = np.logical_and(mask[:-2], mask[1:-1])  # triple[i]: bytes i - 1 to i + 1 (padded)
    triple &= mask[2:]
    inner = offsets[1:-1]
    inner = inner[(inner > 0) & (inner < size)]
    triple[inner - 1] = False
    triple[inner] = False
    edges = np.flatnonzero(triple[1:] != triple[:-1])  # a start, an end - 2, a start, ...
    starts = edges[0::2].copy()  # contiguous: every later pass over them is faster
    lengths = edges[1::2] - starts
    lengths += 2
    return starts, lengths


def _lowered(data: np.ndarray) -> np.ndarray:
    """data | 0x20 (ASCII letters lowercased), _padded."""
    low = _padded(data.size)
    np.bitwise_or(data, np.uint8(0x20), out=low[:data.size])
    return low


def _letter_mask(low: np.ndarray, size: int, data: np.ndarray | None = None) -> np.ndarray:
    """[size + 2] bool, entry i + 1 true where byte i is an ASCII letter (or, given data, any
    byte of data at or above 0x80), False at both ends."""
    mask = np.empty(size + 2, bool)
    mask[0] = mask[-1] = False
    shifted = np.subtract(low[:size], np.uint8(0x61))
    np.less(shifted, np.uint8(26), out=mask[1:-1])
    if data is not None:
        mask[1:-1] |= data >= 0x80
    return mask


def _default_rule_words(data: np.ndarray, offsets: np.ndarray) -> BlockWords:
    """block_words under the default rules (see the module)."""
    size = data.size
    low = _lowered(data)
    non_ascii = size > 0 and int(data.max()) >= 0x80
    if non_ascii:
        starts, ends = _runs(_letter_mask(low, size, data), offsets)
        return _with_folded_runs(data, offsets, low, starts, ends)
    starts, lengths = _token_runs(_letter_mask(low, size), offsets)
    return _numbered(low, starts, lengths, starts, offsets, 0)


def _with_folded_runs(data: np.ndarray, offsets: np.ndarray, low: np.ndarray,
                      starts: np.ndarray, ends: np.ndarray) -> BlockWords:
    """_default_rule_words of a block holding non-ASCII bytes, whose runs of letters and
    non-ASCII bytes are (starts, ends): the runs without non-ASCII bytes are tokens as they
    are, the others are folded to ASCII (_folded) and cut into tokens again, which take their
    run's place among the others."""
    high = np.flatnonzero(data >= 0x80)
    folding = np.zeros(starts.size, bool)
    folding[np.searchsorted(starts, high, "right") - 1] = True
    run_starts, run_ends = starts[folding], ends[folding]
    run_docs = np.searchsorted(offsets, run_starts, "right") - 1
    folded, folded_offsets, invalid_docs = _folded(data, run_starts, run_ends, run_docs,
                                                   offsets.size - 1)
    folded_low = _lowered(folded)
    f_starts, f_lengths = _token_runs(_letter_mask(folded_low, folded.size), folded_offsets)
    f_positions = run_starts[np.searchsorted(folded_offsets, f_starts, "right") - 1]
    lengths = ends - starts
    simple = np.flatnonzero(~folding & (lengths >= 3))  # a boolean index branches on each
    starts, lengths = starts.take(simple), lengths.take(simple)
    where = np.searchsorted(starts, f_positions)
    buffer = _padded(data.size + folded.size)
    buffer[:data.size] = low[:data.size]
    buffer[data.size:data.size + folded.size] = folded_low[:folded.size]
    return _numbered(buffer, np.insert(starts, where, data.size + f_starts),
                     np.insert(lengths, where, f_lengths), np.insert(starts, where, f_positions),
                     offsets, invalid_docs)


def _folded(data: np.ndarray, starts: np.ndarray, ends: np.ndarray, run_docs: np.ndarray,
            num_docs: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(the runs data[starts[i]:ends[i]] with every non-ASCII character replaced by its ASCII
    folding, concatenated; where each folded run begins, [R + 1]; how many documents are not
    valid UTF-8).  run_docs: the document of each run.  A document is valid UTF-8 when every
    non-ASCII byte of it (all lie in these runs) belongs to a well-formed character (Python's
    strict decoder: no overlong forms, surrogates or code points above U+10FFFF); the runs of
    other documents are read as Latin-1, a character a byte."""
    lengths = ends - starts
    run_bytes = np.concatenate([data[byte_ranges(starts, lengths)], np.zeros(4, np.uint8)])
    size = int(lengths.sum())
    run_offsets = np.zeros(starts.size + 1, np.int64)
    np.cumsum(lengths, out=run_offsets[1:])
    high = np.flatnonzero(run_bytes[:size] >= 0x80)
    high_runs = np.searchsorted(run_offsets, high, "right") - 1
    continuations = _CONTINUATIONS[run_bytes[high]].astype(np.int64)
    lead_index = np.flatnonzero(continuations > 0)
    leads, lead_runs, needs = high[lead_index], high_runs[lead_index], continuations[lead_index]
    well_formed = leads + needs < run_offsets[lead_runs + 1]
    for j in (1, 2, 3):
        following = run_bytes[leads + j]
        well_formed &= (needs < j) | ((following & 0xC0) == 0x80)
    first, second = run_bytes[leads], run_bytes[leads + 1]
    well_formed &= ~(((first == 0xE0) & (second < 0xA0)) | ((first == 0xED) & (second > 0x9F))
                     | ((first == 0xF0) & (second < 0x90)) | ((first == 0xF4) & (second > 0x8F)))
    is_continuation = (run_bytes[high] & 0xC0) == 0x80
    runs = starts.size
    bad_runs = (np.bincount(high_runs[(continuations < 0) & ~is_continuation], minlength=runs)
                + np.bincount(lead_runs[~well_formed], minlength=runs)) > 0
    bad_runs |= (np.bincount(high_runs[is_continuation], minlength=runs)
                 != np.bincount(lead_runs, weights=needs, minlength=runs))
    invalid = np.zeros(num_docs, bool)
    invalid[run_docs[bad_runs]] = True
    latin1 = invalid[run_docs][high_runs]  # per non-ASCII byte: its document is Latin-1
    # characters: every non-ASCII byte of a Latin-1 document, every lead byte of the others
    utf8_leads = ~latin1[lead_index]
    chars = np.concatenate([high[latin1], leads[utf8_leads]])
    char_bytes = np.concatenate([np.ones(int(latin1.sum()), np.int64), needs[utf8_leads] + 1])
    code_points = np.concatenate([run_bytes[high[latin1]].astype(np.int64),
                                  _code_points(run_bytes, leads[utf8_leads], needs[utf8_leads])])
    distinct, which = np.unique(code_points, return_inverse=True)
    foldings = [text.ascii_folding(int(code_point)) for code_point in distinct]
    fold_lengths = np.array([len(folding) for folding in foldings], np.int64)
    fold_starts = np.concatenate([[0], np.cumsum(fold_lengths)[:-1]])
    out_lengths = np.ones(size, np.int64)
    out_lengths[high] = 0
    out_lengths[chars] = fold_lengths[which]
    source = np.arange(size, dtype=np.int64)
    source[chars] = size + 4 + fold_starts[which]
    out_offsets = np.zeros(size + 1, np.int64)
    np.cumsum(out_lengths, out=out_offsets[1:])
    total = int(out_offsets[-1])
    table = np.concatenate([run_bytes, np.frombuffer(b"".join(foldings), np.uint8)])
    index = np.repeat(source - out_offsets[:-1], out_lengths) + np.arange(total)
    return table[index], out_offsets[run_offsets], int(invalid.sum())


def _code_points(buffer: np.ndarray, leads: np.ndarray, continuations: np.ndarray) -> np.ndarray:
    """The code points of the well-formed UTF-8 characters whose lead bytes are at `leads`."""
    points = buffer[leads].astype(np.int64) & _LEAD_BITS[continuations]
    for j in (1, 2, 3):
        more = continuations >= j
        points[more] = (points[more] << 6) | (buffer[leads[more] + j] & 0x3F)
    return points


def _numbered(buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
              positions: np.ndarray, offsets: np.ndarray, invalid_docs: int) -> BlockWords:
    """BlockWords of the lowercase words buffer[starts[i]:starts[i] + lengths[i]] (in text
    order, their text beginning at data position positions[i]).  A word longer than
    MAX_KEY_LETTERS is numbered among the long words first and keyed by LONG_KEY + its
    number, so that one dictionary_encode numbers every token."""
    keys, longer = _word_keys(buffer, starts, lengths)
    long = longer[lengths.take(longer) > MAX_KEY_LETTERS]
    strings = Strings.empty()
    if long.size:
        long_words = Runs(buffer, starts.take(long), lengths.take(long))
        firsts, numbers = number_runs(long_words)
        keys[long] = LONG_KEY + numbers.astype(np.uint64)
        strings = long_words.strings(firsts)
    distinct, token_ids = number_keys(keys)
    doc_tokens = np.searchsorted(positions, offsets)
    return BlockWords(distinct, strings, token_ids.astype(token_id_dtype(distinct.size),
                                                          copy=False), doc_tokens, invalid_docs)


def _general_words(data: np.ndarray, offsets: np.ndarray, rules: text.TextRules) -> BlockWords:
    """block_words under rules other than the default: a document at a time (rules.tokenize)."""
    raw = data.tobytes()
    token_ids, counts, invalid = [], np.zeros(offsets.size, np.int64), 0
    numbers: dict[str, int] = {}
    for i in range(offsets.size - 1):
        document = raw[offsets[i]:offsets[i + 1]]
        try:
            decoded = document.decode("utf-8")
        except UnicodeDecodeError:
            decoded, invalid = document.decode("latin-1"), invalid + 1
        words = rules.tokenize(decoded)
        counts[i + 1] = len(words)
        token_ids.extend(numbers.setdefault(word, len(numbers)) for word in words)
    strings = Strings.of([word.encode("utf-8", "surrogateescape") for word in numbers])
    return BlockWords(LONG_KEY + np.arange(len(numbers), dtype=np.uint64), strings,
                      np.array(token_ids, token_id_dtype(len(numbers))), np.cumsum(counts),
                      invalid)
