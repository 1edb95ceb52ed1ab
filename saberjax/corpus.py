"""Corpus I/O: the token layout the trainer consumes, loaders, the native format and splits.

A :class:`Corpus` is a CSR-like token stream: ``doc_offsets`` (int64, D+1) delimits each
document's slice of ``word_ids`` (int32, T). Text formats (UCI bag-of-words, LDA-C) are read in
blocks and parsed in pieces of whole lines, on a thread per core while the file is still being
read and decompressed, by whole-array numpy passes, and validated in bulk; only when something is
wrong is the first bad line located and described, so errors name the file and line without
slowing valid loads.
The native format is a folder of ``.npy`` files that loads memory-mapped, written atomically.

Text loaders and :func:`from_count_matrix` drop documents without tokens (with a warning and
``Corpus.dropped_empty_docs``); :func:`load_native` restores a corpus exactly, empty documents
included, so that aligned corpora such as the halves of :func:`split_document_halves` survive a
save/load round trip.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import importlib.resources
import itertools
import json
import os
import re
import shutil
import sys
import warnings
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from saberjax import outputs, platform, text
from saberjax.errors import CorpusFormatError

__all__ = [
    "FORMATS",
    "MAX_COUNT",
    "Corpus",
    "CorpusFormatError",
    "NativeCorpusWriter",
    "bundled_corpus_path",
    "convert_to_native",
    "corpus_from_documents",
    "corpus_in_vocabulary",
    "count_matrix_entries",
    "detect_format",
    "from_count_matrix",
    "load_bundled",
    "load_corpus",
    "load_ldac",
    "load_native",
    "load_text",
    "load_uci",
    "save_native",
    "source_files",
    "split_document_halves",
    "train_test_split",
]

FORMATS = ("uci", "ldac", "native", "text")
MAX_COUNT = 2**31 - 1  # largest accepted count of one word in one document
WORD_COUNT_BLOCK = 1 << 24  # tokens per np.bincount in Corpus.word_counts

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_GZIP_MAGIC = b"\x1f\x8b"

_NATIVE_FORMAT = "saberjax-native"
_NATIVE_VERSION = 1
_META_FILE = "corpus.json"
_OFFSETS_FILE = "doc_offsets.npy"
_WORD_IDS_FILE = "word_ids.npy"
_VOCAB_FILE = "vocab.txt"
_NATIVE_FILES = (_META_FILE, _OFFSETS_FILE, _WORD_IDS_FILE, _VOCAB_FILE)

_UCI_DOCWORD_FILES = ("docword.txt", "docword.txt.gz")
_UCI_DOCWORD_NAME = re.compile(r"docword(?:\.(?P<tag>.+))?\.txt(?:\.gz)?")
_LDAC_START = re.compile(rb"[ \t]*[0-9]+[ \t]+[0-9]+:[0-9]+")

_READ_BYTES = 1 << 19  # bytes of a text file read (and decompressed) at a time
_PIECE_BYTES = 1 << 21  # bytes of text parsed as one task
_SLACK = 8  # bytes readable after a piece's text (see _TextPiece)
_SEPARATORS = b" \t\r"  # between the fields of a UCI or LDA-C line
_LINE_END = -1  # parsed where each line ends
_PAIR_COLON = -2  # parsed where an LDA-C ``id:count`` colon was
_INTEGER = re.compile(r"-?[0-9]{1,18}")
_LDAC_PAIR = re.compile(r"(-?[0-9]{1,18}):(-?[0-9]{1,18})")
_FIELD = re.compile(r"[^ \t\r]+")


# ----------------------------------------------------------------------------- the Corpus


@dataclasses.dataclass(frozen=True, eq=False)
class Corpus:
    """Documents as one token stream: doc d is ``word_ids[doc_offsets[d]:doc_offsets[d + 1]]``.

    doc_offsets: int64 [D+1]; word_ids: int32 [T], each document's tokens in file order;
    vocab: word id i is vocab[i]; dropped_empty_docs: documents a loader dropped for having no
    tokens; unknown_tokens: tokens skipped for a word outside the vocabulary the documents
    were matched to (corpus_in_vocabulary, align_vocabulary). Arrays are validated, converted to int64 / int32 (memory maps are not copied) and
    exposed read-only, so a corpus cannot change after its fingerprint is taken.
    """

    doc_offsets: np.ndarray
    word_ids: np.ndarray
    vocab: tuple[str, ...]
    name: str = ""
    dropped_empty_docs: int = 0
    unknown_tokens: int = 0

    def __post_init__(self):
        offsets = _int_vector(self.doc_offsets, "doc_offsets")
        word_ids = _int_vector(self.word_ids, "word_ids")
        vocab = tuple(self.vocab)
        if offsets.size == 0:
            raise CorpusFormatError("doc_offsets is empty; it needs num_docs + 1 entries")
        if offsets[0] != 0:
            raise CorpusFormatError(f"doc_offsets[0] is {offsets[0]}, expected 0")
        if offsets[-1] != word_ids.size:
            raise CorpusFormatError(
                f"doc_offsets[-1] is {offsets[-1]}, expected num_tokens = {word_ids.size}")
        steps = np.diff(offsets)
        if np.any(steps < 0):
            i = int(np.argmax(steps < 0))
            raise CorpusFormatError(
                f"doc_offsets decrease at index {i + 1} ({offsets[i]} -> {offsets[i + 1]})")
        _check_word_ids(word_ids, len(vocab))
        object.__setattr__(self, "doc_offsets", _read_only(offsets.astype(np.int64, copy=False)))
        object.__setattr__(self, "word_ids", _read_only(word_ids.astype(np.int32, copy=False)))
        object.__setattr__(self, "vocab", vocab)

    def __repr__(self) -> str:
        return (f"Corpus(name={self.name!r}, num_docs={self.num_docs}, "
                f"num_tokens={self.num_tokens}, num_words={self.num_words})")

    @property
    def num_docs(self) -> int:
        return self.doc_offsets.size - 1

    @property
    def num_tokens(self) -> int:
        return self.word_ids.size

    @property
    def num_words(self) -> int:
        return len(self.vocab)

    def doc_lengths(self) -> np.ndarray:
        """Tokens per document, int64 [D]."""
        return np.diff(self.doc_offsets)

    def word_counts(self) -> np.ndarray:
        """Tokens per word id, int64 [V], counted WORD_COUNT_BLOCK tokens at a time
        (np.bincount copies what it counts to int64: 8 bytes a token at once otherwise)."""
        counts = np.zeros(self.num_words, np.int64)
        for start in range(0, self.num_tokens, WORD_COUNT_BLOCK):
            counts += np.bincount(self.word_ids[start: start + WORD_COUNT_BLOCK],
                                  minlength=self.num_words)
        return counts

    def fingerprint(self) -> str:
        """SHA-256 hex of the token layout and vocabulary (not the name), stable across processes.

        Identifies a corpus in caches and run records; computed once per object.
        """
        return self._fingerprint

    @functools.cached_property
    def _fingerprint(self) -> str:
        digest = hashlib.sha256(b"saberjax-corpus-v1\0")
        digest.update(f"{self.num_docs} {self.num_tokens} {self.num_words}\n".encode())
        digest.update(np.ascontiguousarray(self.doc_offsets, dtype="<i8"))
        digest.update(np.ascontiguousarray(self.word_ids, dtype="<i4"))
        digest.update(json.dumps(self.vocab, ensure_ascii=False).encode())
        return digest.hexdigest()

    def subset(self, doc_indices) -> Corpus:
        """The given documents, in the given order, with the same vocabulary and name.

        Each run of consecutive documents is copied as one slice, so the tokens cost no
        memory beyond the result (a train/test split of the corpus is a few thousand runs).
        """
        docs = _int_vector(doc_indices, "doc_indices")
        if docs.size and (docs.min() < 0 or docs.max() >= self.num_docs):
            raise IndexError(f"doc_indices must lie in [0, {self.num_docs}), "
                             f"got values from {docs.min()} to {docs.max()}")
        heads = docs[np.diff(docs, prepend=-2) != 1]  # first and last document of each run
        tails = docs[np.diff(docs, append=-2) != 1]
        starts, ends = self.doc_offsets[heads].tolist(), self.doc_offsets[tails + 1].tolist()
        word_ids = np.concatenate([self.word_ids[:0]] + [
            self.word_ids[start:end] for start, end in zip(starts, ends)])
        return Corpus(_offsets_from_lengths(self.doc_lengths()[docs]), word_ids, self.vocab,
                      name=self.name)

    def doc_word_counts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(doc int64, word int32, count int32) per distinct (doc, word) pair, by doc then word.

        The sparse document-word count matrix, for count-based initialisation and evaluation.
        """
        docs = np.repeat(np.arange(self.num_docs, dtype=np.int64), self.doc_lengths())
        keys, counts = np.unique(docs * self.num_words + self.word_ids, return_counts=True)
        doc, word = np.divmod(keys, max(self.num_words, 1))
        return doc, word.astype(np.int32), counts.astype(np.int32)


def align_vocabulary(corpus: Corpus, vocab: Sequence[str]) -> Corpus:
    """The corpus re-expressed in another vocabulary, matching words by their strings.

    Tokens of words missing from `vocab` are dropped (with a warning saying how many), and
    documents keep their order, so that test documents with their own vocabulary file can be
    scored against a trained model.  A corpus none of whose tokens is left is an error
    (CorpusFormatError naming both vocabularies' sizes), since scoring nothing would look like
    a perfect score.  Returns the corpus itself when the vocabularies are equal.
    """
    vocab = tuple(vocab)
    if corpus.vocab == vocab:
        return corpus
    index = {word: i for i, word in enumerate(vocab)}
    mapping = np.array([index.get(word, -1) for word in corpus.vocab], dtype=np.int64)
    mapped = mapping[corpus.word_ids]
    known = mapped >= 0
    shared = (f"{int((mapping >= 0).sum())} of its {len(corpus.vocab)} words are in the model "
              f"vocabulary of {len(vocab)} words")
    if corpus.num_tokens and not known.any():
        raise CorpusFormatError(f"{corpus.name or 'corpus'}: {shared}, so none of its "
                                f"{corpus.num_tokens} tokens can be scored; is it in the model's "
                                f"language and vocabulary?")
    if not known.all():
        warnings.warn(f"{corpus.name or 'corpus'}: {shared}; dropped {int((~known).sum())} of "
                      f"{corpus.num_tokens} tokens whose words are not in the model vocabulary",
                      stacklevel=2)
    docs = np.repeat(np.arange(corpus.num_docs), corpus.doc_lengths())[known]
    lengths = np.bincount(docs, minlength=corpus.num_docs)
    return Corpus(_offsets_from_lengths(lengths), mapped[known].astype(np.int32), vocab,
                  name=corpus.name, dropped_empty_docs=corpus.dropped_empty_docs,
                  unknown_tokens=corpus.unknown_tokens + int((~known).sum()))


def _int_vector(values, what: str) -> np.ndarray:
    """values as a 1-D integer array (an empty sequence counts as integer)."""
    array = np.asarray(values)
    if array.size == 0 and not np.issubdtype(array.dtype, np.integer):
        array = array.astype(np.int64)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise CorpusFormatError(
            f"{what} must be a 1-D integer array, got dtype {array.dtype} and shape {array.shape}")
    return array


def _check_word_ids(word_ids: np.ndarray, num_words: int) -> None:
    if word_ids.size and (word_ids.min() < 0 or word_ids.max() >= num_words):
        i = int(np.argmax((word_ids < 0) | (word_ids >= num_words)))
        raise CorpusFormatError(
            f"word_ids[{i}] is {word_ids[i]}, outside the vocabulary range [0, {num_words})")


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


def _offsets_from_lengths(lengths: np.ndarray) -> np.ndarray:
    return np.concatenate((np.zeros(1, np.int64), np.cumsum(lengths, dtype=np.int64)))


# ----------------------------------------------------------------------------- reading text


def _read_bytes(path: Path) -> bytes:
    """The file's content, gunzipped when it starts with the gzip magic number."""
    return b"".join(_text_blocks(path))


def _text_blocks(path: Path) -> Iterator[bytes]:
    """The file's content in blocks as it is read (_READ_BYTES of the file at a time), gunzipped
    when it starts with the gzip magic number (a .gz file may hold several concatenated gzip
    members), so that a loader parses early blocks while later ones are read and decompressed.
    Read errors are CorpusFormatErrors naming the file."""
    try:
        file = open(path, "rb")
    except FileNotFoundError:
        raise CorpusFormatError(f"{path}: file not found") from None
    except OSError as error:
        raise CorpusFormatError(f"{path}: cannot read: {error.strerror}") from error
    with file:
        def read() -> bytes:
            try:
                return file.read(_READ_BYTES)
            except OSError as error:
                raise CorpusFormatError(f"{path}: cannot read: {error.strerror}") from error

        data = read()
        if not data.startswith(_GZIP_MAGIC):
            while data:
                yield data
                data = read()
            return
        decompressor = zlib.decompressobj(wbits=31)
        while data:
            try:
                block = decompressor.decompress(data)
            except zlib.error as error:
                raise CorpusFormatError(f"{path}: corrupt gzip data ({error})") from error
            if block:
                yield block
            if decompressor.eof:  # another member starts in what follows, if anything does
                data = decompressor.unused_data or read()
                if data:
                    decompressor = zlib.decompressobj(wbits=31)
            else:
                data = read()
        if not decompressor.eof:
            raise CorpusFormatError(f"{path}: truncated gzip data")


def _read_vocab(path: Path) -> tuple[str, ...]:
    """One word per line (UTF-8, LF or CRLF): 1-based line i holds word id i - 1."""
    data = _read_bytes(path)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise CorpusFormatError(f"{path}, line {line}: not valid UTF-8") from error
    words = text.split("\n")
    if words[-1] == "":
        words.pop()
    return tuple(word.removesuffix("\r") for word in words)


def _check_not_empty(path: Path, data: bytes) -> None:
    if not data or data.isspace():
        raise CorpusFormatError(f"{path}: file is empty")


@dataclasses.dataclass(frozen=True)
class _TextPiece:
    """Whole lines of a text, ``buffer[:size]``, the last one ending with a newline.

    At least _SLACK more bytes of buffer follow the text, so that 8 bytes can be read from
    every position of the text at once (windows).
    """

    buffer: bytes
    size: int

    def array(self) -> np.ndarray:
        return np.frombuffer(self.buffer, np.uint8, count=self.size)

    def windows(self) -> np.ndarray:
        """uint64 of the 8 bytes from each position of the text on, little-endian (a view)."""
        return np.ndarray((self.size,), "<u8", self.buffer, strides=(1,))

    def text(self) -> bytes:
        return self.buffer[:self.size]

    def line_text(self, line: int) -> str:
        """Line `line` (0-based in the piece) without its line break, for error messages."""
        newlines = np.flatnonzero(self.array() == ord("\n"))
        start = newlines[line - 1] + 1 if line else 0
        return self.buffer[start:newlines[line]].decode("utf-8", "replace").rstrip("\r")


def _line_pieces(blocks: Iterable[bytes], piece_bytes: int) -> Iterator[_TextPiece]:
    """The text of blocks as pieces of whole lines, each of piece_bytes or more but the last.

    A piece ends at the last newline that leaves _SLACK bytes of the following text in its
    buffer, so the text is copied once (the blocks' join); the last piece gets a newline if the
    text does not end with one, and zeros as slack.
    """
    pending, size = [], 0
    for block in blocks:
        pending.append(block)
        size += len(block)
        if size < piece_bytes + _SLACK:
            continue
        buffer = b"".join(pending)
        stop = buffer.rfind(b"\n", 0, len(buffer) - _SLACK) + 1
        if stop:
            yield _TextPiece(buffer, stop)
            buffer = buffer[stop:]
        pending, size = [buffer], len(buffer)
    rest = b"".join(pending)
    if rest:
        if not rest.endswith(b"\n"):
            rest += b"\n"
        yield _TextPiece(rest + bytes(_SLACK), len(rest))


def _parse_pieces(blocks: Iterable[bytes], parse_piece: Callable[[_TextPiece], _PieceEntries]
                  ) -> list[_PieceEntries]:
    """parse_piece of each piece of whole lines of the text in blocks (_line_pieces), in order.

    The pieces are parsed on a thread per core while the following blocks are read and
    decompressed on this one; numpy's whole-array passes and zlib release the GIL, so a large
    gzipped file takes about as long as its decompression.
    """
    pool = ThreadPoolExecutor(platform.cpu_cores())
    try:
        futures = [pool.submit(parse_piece, piece)
                   for piece in _line_pieces(blocks, _PIECE_BYTES)]
        return [future.result() for future in futures]
    finally:
        pool.shutdown(cancel_futures=True)


@dataclasses.dataclass(frozen=True)
class _ParsedLines:
    """Every integer field of a piece of text in file order, parsed by whole-array passes.

    ``values`` holds ``_LINE_END`` after each line's fields (and ``_PAIR_COLON`` where an LDA-C
    colon is); ``line_ends[i]`` indexes line i's end marker. A field of more than 18 digits
    parses as the largest int64, outside every valid range. Bytes outside the format's
    alphabet (digits, _SEPARATORS and the markers) separate fields so that the pass completes;
    the first line holding one is ``first_foreign_line`` and gets reported like any other bad
    line.
    """

    values: np.ndarray
    line_ends: np.ndarray
    first_foreign_line: int | None

    @classmethod
    def parse(cls, piece: _TextPiece, markers: bytes) -> _ParsedLines:
        """Parses piece, whose markers are b"\\n" (UCI) or b"\\n:" (LDA-C).

        A field is a run of digits; the fields' first bytes and the marker bytes are the
        tokens, in order, and each field's value comes from 8 bytes read at its start.
        """
        raw = piece.array()
        digit = np.zeros(raw.size + 2, bool)  # digit[i + 1]: raw[i] is a digit
        np.less(raw - ord("0"), 10, out=digit[1:-1])
        token = digit[1:-1] > digit[:-2]  # a field starts
        for marker in markers:
            token |= raw == marker
        tokens = np.flatnonzero(token)
        kinds = raw[tokens]
        is_field = kinds - ord("0") < 10
        starts = tokens[is_field]
        lengths = np.flatnonzero(digit[1:] < digit[:-1]) - starts  # ends minus starts
        values = np.full(tokens.size, _LINE_END, np.int64)
        values[is_field] = _decimal_values(piece.windows(), starts, lengths)
        if b":" in markers:
            values[kinds == ord(":")] = _PAIR_COLON
        known = (lengths.sum() + tokens.size - starts.size
                 + sum(np.count_nonzero(raw == byte) for byte in _SEPARATORS))
        first_foreign_line = None
        if known != raw.size:
            alphabet = np.frombuffer(b"0123456789" + _SEPARATORS + markers, np.uint8)
            first = int(np.argmax(~np.isin(raw, alphabet)))
            first_foreign_line = int(np.count_nonzero(raw[:first] == ord("\n")))
        return cls(values, np.flatnonzero(kinds == ord("\n")), first_foreign_line)

    def line_lengths(self) -> np.ndarray:
        """Fields (colon markers included) on each line."""
        return np.diff(self.line_ends, prepend=-1) - 1


def _decimal_values(windows: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """int64 values of the runs of lengths[i] digits at starts[i] (windows: _TextPiece.windows).

    Up to 8 digits are read at once, longer runs 8 digits at a time; a run of more than 18
    digits gets the largest int64.
    """
    values = _leading_digits(windows, starts, np.minimum(lengths, 8))
    longest = int(lengths.max(initial=0))
    for done in range(8, min(longest, 19), 8):
        longer = np.flatnonzero(lengths > done)
        digits = np.minimum(lengths[longer] - done, 8)
        values[longer] = (values[longer] * 10 ** digits
                          + _leading_digits(windows, starts[longer] + done, digits))
    if longest > 18:
        values[lengths > 18] = np.iinfo(np.int64).max
    return values


_UNUSED_BITS = np.array([64 - 8 * digits for digits in range(9)], np.uint64)


def _leading_digits(windows: np.ndarray, starts: np.ndarray, digits: np.ndarray) -> np.ndarray:
    """int64 values of the digits[i] (1 to 8) digits at starts[i], by SWAR on 8-byte windows.

    Shifting out the bytes after the digits leaves an 8-digit number with leading zeros,
    first digit in the low byte; three multiply-shifts combine neighbouring digits, pairs
    and quadruples.
    """
    x = windows[starts]
    x <<= _UNUSED_BITS[digits]
    x &= 0x0F0F0F0F0F0F0F0F
    x *= 1 + (10 << 8)
    x >>= 8
    x &= 0x00FF00FF00FF00FF
    x *= 1 + (100 << 16)
    x >>= 16
    x &= 0x0000FFFF0000FFFF
    x *= 1 + (10000 << 32)
    x >>= 32
    return x.view(np.int64)


@dataclasses.dataclass(frozen=True)
class _PieceEntries:
    """The entries of a piece of a text body: its tokens, or the first line that is bad.

    word_ids: the tokens in file order; run_docs / run_tokens: the 0-based document of each
    run of entries of one document and its number of tokens (LDA-C documents are numbered
    from the piece's first document line); num_lines: lines in the piece; num_records: entry
    lines (UCI) or document lines (LDA-C); blank: the piece is whitespace only; bad_line: the
    first line (0-based in the piece) that is not valid, with its text; then the arrays are
    empty.
    """

    num_lines: int
    num_records: int
    blank: bool
    bad_line: int | None = None
    bad_text: str = ""
    word_ids: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.int32))
    run_docs: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.int64))
    run_tokens: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.int64))

    @classmethod
    def of(cls, piece: _TextPiece, lines: _ParsedLines, num_records: int,
           bad_lines: Iterable[int | None], doc, word, count) -> _PieceEntries:
        """The entries (doc, word, count: 0-based ids, in file order) of a parsed piece, or the
        earliest of bad_lines (None: no bad line of a kind)."""
        num_lines = lines.line_ends.size
        blank = lines.values.size == num_lines and piece.text().isspace()
        found = [line for line in bad_lines if line is not None]
        if found:
            line = min(found)
            return cls(num_lines, num_records, blank, line, piece.line_text(line))
        run_starts = np.flatnonzero(np.diff(doc, prepend=-1))
        run_tokens = (np.add.reduceat(count, run_starts) if run_starts.size
                      else np.empty(0, np.int64))
        return cls(num_lines, num_records, blank,
                   word_ids=np.repeat(word.astype(np.int32), count),
                   run_docs=doc[run_starts], run_tokens=run_tokens)


def _raise_first_bad_line(path: Path, first_line_number: int, pieces: Sequence[_PieceEntries],
                          describe: Callable[[str], str | None]) -> None:
    """Raises for the first bad line of the pieces, if any, naming the file and line (the
    pieces' text starts at line first_line_number)."""
    line_number = first_line_number
    for piece in pieces:
        if piece.bad_line is not None:
            problem = describe(piece.bad_text) or "malformed line"
            raise CorpusFormatError(f"{path}, line {line_number + piece.bad_line}: {problem} "
                                    f"(line: {piece.bad_text[:80]!r})")
        line_number += piece.num_lines


def _corpus_from_pieces(pieces: Sequence[_PieceEntries], num_docs: int,
                        vocab: tuple[str, ...], name: str, source: str,
                        doc_bases: Sequence[int] | None = None) -> Corpus:
    """The corpus of valid pieces' tokens; doc_bases[i] is added to piece i's documents."""
    bases = [0] * len(pieces) if doc_bases is None else doc_bases
    word_ids = np.concatenate([np.empty(0, np.int32)] + [p.word_ids for p in pieces])
    run_docs = np.concatenate(
        [np.empty(0, np.int64)] + [p.run_docs + base for p, base in zip(pieces, bases)])
    run_tokens = np.concatenate([np.empty(0, np.int64)] + [p.run_tokens for p in pieces])
    if np.any(run_docs[1:] < run_docs[:-1]):  # documents interleave: tokens sorted by document
        return _corpus_from_entries(np.repeat(run_docs, run_tokens), word_ids,
                                    np.ones(word_ids.size, np.int64), num_docs, vocab, name, source)
    return _corpus_from_doc_runs(run_docs, run_tokens, word_ids, num_docs, vocab, name, source)


def _first_true(mask: np.ndarray) -> int | None:
    return int(np.argmax(mask)) if mask.any() else None


def _range_problem(label: str, value: int, low: int, high: int) -> str | None:
    return None if low <= value <= high else f"{label} {value} is out of range {low}..{high}"


def _count_problem(count: int) -> str | None:
    return None if 1 <= count <= MAX_COUNT else f"count {count} must be in 1..{MAX_COUNT}"


def _integer_problem(label: str, field: str) -> str | None:
    if _INTEGER.fullmatch(field):
        return None
    return f"{label} {field!r} is not a decimal integer (at most 18 digits)"


# ----------------------------------------------------------------------------- UCI


def load_uci(docword_path, vocab_path=None) -> Corpus:
    """Loads a UCI bag-of-words corpus: ``docword.txt[.gz]`` plus a vocabulary file.

    The docword file has header lines D, W, NNZ, then NNZ lines ``docID wordID count``
    (1-based ids; any order, a document's tokens keep file order; blank lines are ignored).
    docword_path may also be a folder holding ``docword.txt`` or ``docword.txt.gz``. Without
    vocab_path, the vocabulary must sit beside it as ``vocab.<tag>.txt`` (for
    ``docword.<tag>.txt``, the UCI naming) or ``vocab.txt``. Documents without entries are dropped.
    """
    docword = Path(docword_path)
    if docword.is_dir():
        docword = _uci_docword_in(docword)
    vocab_file = _uci_vocab_beside(docword) if vocab_path is None else Path(vocab_path)
    num_docs, num_words, num_entries, body = _read_uci_header(docword)
    pieces = _parse_pieces(body, functools.partial(
        _uci_piece_entries, num_docs=num_docs, num_words=num_words))
    vocab = _read_vocab(vocab_file)
    if len(vocab) != num_words:
        raise CorpusFormatError(
            f"vocabulary size mismatch: {docword} declares W={num_words} (line 2) but "
            f"{vocab_file} has {len(vocab)} words")
    _raise_first_bad_line(docword, 4, pieces,
                          lambda text: _uci_line_problem(text, num_docs, num_words))
    entry_lines = sum(piece.num_records for piece in pieces)
    if entry_lines != num_entries:
        raise CorpusFormatError(
            f"{docword}, line 3: header declares NNZ={num_entries} but "
            f"{entry_lines} entry lines follow")
    tag = _UCI_DOCWORD_NAME.fullmatch(docword.name)
    name = tag["tag"] if tag and tag["tag"] else docword.resolve().parent.name
    return _corpus_from_pieces(pieces, num_docs, vocab, name, str(docword))


def _uci_docwords(directory: Path) -> list[Path]:
    """The UCI docword files (docword.txt, docword.txt.gz) present in a folder."""
    return [directory / name for name in _UCI_DOCWORD_FILES if (directory / name).is_file()]


def _uci_docword_in(directory: Path) -> Path:
    found = _uci_docwords(directory)
    if len(found) != 1:
        raise CorpusFormatError(
            f"{directory}: expected exactly one of {', '.join(_UCI_DOCWORD_FILES)}, "
            f"found {len(found)}")
    return found[0]


def _uci_vocab_beside(docword: Path) -> Path:
    tag = _UCI_DOCWORD_NAME.fullmatch(docword.name)
    names = [f"vocab.{tag['tag']}.txt"] if tag and tag["tag"] else []
    candidates = [docword.with_name(name) for name in names + ["vocab.txt"]]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise CorpusFormatError(
        f"{docword}: no vocabulary file beside it (looked for "
        f"{', '.join(str(c) for c in candidates)}); pass vocab_path")


def _read_uci_header(path: Path) -> tuple[int, int, int, Iterator[bytes]]:
    """(D, W, NNZ, the body's blocks) of a docword file, read only as far as the header.

    A bad header is reported as _split_uci_header reports it for the whole file (gzip faults
    and emptiness first).
    """
    blocks = _text_blocks(path)
    head = b""
    for block in blocks:
        head += block
        if head.count(b"\n") >= 3:
            break
    try:
        *header, rest = _split_uci_header(path, head)
    except CorpusFormatError:
        _split_uci_header(path, head + b"".join(blocks))
        raise
    return *header, itertools.chain([rest], blocks)


def _split_uci_header(path: Path, data: bytes) -> tuple[int, int, int, bytes]:
    """(D, W, NNZ, body) from a docword file; the header is lines 1-3, one integer each."""
    _check_not_empty(path, data)
    lines = data.split(b"\n", 3)
    labels = ("D (number of documents)", "W (vocabulary size)", "NNZ (number of entries)")
    header = []
    for number, label in enumerate(labels, start=1):
        if number > len(lines):
            raise CorpusFormatError(
                f"{path}, line {number}: header ended early; expected {label} on line {number}")
        text = lines[number - 1].decode("utf-8", "replace").strip(" \t\r")
        if not re.fullmatch("[0-9]{1,18}", text):
            raise CorpusFormatError(
                f"{path}, line {number}: expected the header integer {label}, found {text!r}")
        header.append(int(text))
    body = lines[3] if len(lines) > 3 else b""
    return *header, body


def _uci_piece_entries(piece: _TextPiece, num_docs: int, num_words: int) -> _PieceEntries:
    """The validated entries of a piece of a docword body (see _PieceEntries)."""
    lines = _ParsedLines.parse(piece, b"\n")
    lengths = lines.line_lengths()
    entry_lines = np.flatnonzero(lengths == 3)
    if entry_lines.size == lengths.size:  # no blank or malformed lines: a free strided view
        entries = lines.values.reshape(-1, 4)[:, :3]
    else:
        entries = lines.values[lines.line_ends[entry_lines, None] + np.arange(-3, 0)]
    doc, word, count = entries.T
    bad_entry = ((doc < 1) | (doc > num_docs) | (word < 1) | (word > num_words)
                 | (count < 1) | (count > MAX_COUNT))
    first_bad_entry = _first_true(bad_entry)
    bad_lines = [lines.first_foreign_line,
                 _first_true((lengths != 0) & (lengths != 3)),
                 None if first_bad_entry is None else int(entry_lines[first_bad_entry])]
    return _PieceEntries.of(piece, lines, entry_lines.size, bad_lines, doc - 1, word - 1, count)


def _uci_line_problem(text: str, num_docs: int, num_words: int) -> str | None:
    fields = _FIELD.findall(text)
    if len(fields) != 3:
        return f"expected 3 fields 'docID wordID count', found {len(fields)}"
    labels = ("docID", "wordID", "count")
    for label, field in zip(labels, fields):
        if problem := _integer_problem(label, field):
            return problem
    doc, word, count = map(int, fields)
    return (_range_problem("docID", doc, 1, num_docs)
            or _range_problem("wordID", word, 1, num_words)
            or _count_problem(count))


# ----------------------------------------------------------------------------- LDA-C


def load_ldac(path, vocab_path) -> Corpus:
    """Loads Blei's LDA-C format: one document per line, ``N id:count id:count ...``.

    Ids are 0-based into the vocabulary file (one word per line); N is the number of pairs.
    A line ``0`` is an empty document (dropped); blank lines are ignored. Gzip is detected.
    """
    path, vocab_file = Path(path), Path(vocab_path)
    try:
        vocab = _read_vocab(vocab_file)
    except CorpusFormatError:
        _check_not_empty(path, _read_bytes(path))  # faults of the file itself come first
        raise
    pieces = _parse_pieces(_text_blocks(path),
                           functools.partial(_ldac_piece_entries, num_words=len(vocab)))
    if all(piece.blank for piece in pieces):
        raise CorpusFormatError(f"{path}: file is empty")
    _raise_first_bad_line(path, 1, pieces, lambda text: _ldac_line_problem(text, len(vocab)))
    first_docs = np.cumsum([0] + [piece.num_records for piece in pieces])
    name = Path(path.name.removesuffix(".gz")).stem
    return _corpus_from_pieces(pieces, int(first_docs[-1]), vocab, name, str(path),
                               doc_bases=first_docs[:-1])


def _ldac_piece_entries(piece: _TextPiece, num_words: int) -> _PieceEntries:
    """The validated pairs of a piece of an LDA-C file (see _PieceEntries)."""
    lines = _ParsedLines.parse(piece, b"\n:")
    lengths = lines.line_lengths()
    doc_lines = np.flatnonzero(lengths > 0)
    starts = lines.line_ends[doc_lines] - lengths[doc_lines]
    num_pairs = lines.values[starts]
    first_missized = _first_true(lengths[doc_lines] != 1 + 3 * num_pairs)
    # Lines before the first mis-sized one hold exactly N pairs each: without each line's N and
    # end marker, their fields form an [id, colon, count] table.
    num_sized = doc_lines.size if first_missized is None else first_missized
    sized_end = lines.values.size if first_missized is None else starts[first_missized]
    is_pair_field = np.ones(sized_end, bool)
    is_pair_field[starts[:num_sized]] = False
    is_pair_field[lines.line_ends[:np.searchsorted(lines.line_ends, sized_end)]] = False
    word, colon, count = lines.values[:sized_end][is_pair_field].reshape(-1, 3).T
    bad_pair = ((colon != _PAIR_COLON) | (word < 0) | (word >= num_words)
                | (count < 1) | (count > MAX_COUNT))
    first_bad_pair = _first_true(bad_pair)
    pair_doc = np.repeat(np.arange(num_sized), num_pairs[:num_sized])
    bad_lines = [lines.first_foreign_line,
                 _first_line_with_loose_colon(piece.array()),
                 None if first_missized is None else int(doc_lines[first_missized]),
                 None if first_bad_pair is None else int(doc_lines[pair_doc[first_bad_pair]])]
    return _PieceEntries.of(piece, lines, doc_lines.size, bad_lines, pair_doc, word, count)


def _first_line_with_loose_colon(raw: np.ndarray) -> int | None:
    """First line (0-based) with a colon not between two digits, as in ``3 :4`` or ``3:``."""
    colons = np.flatnonzero(raw == ord(":"))
    before = raw[np.maximum(colons - 1, 0)]
    after = raw[np.minimum(colons + 1, raw.size - 1)]
    loose = ((colons == 0) | (colons == raw.size - 1)
             | (before < ord("0")) | (before > ord("9")) | (after < ord("0")) | (after > ord("9")))
    first = _first_true(loose)
    return None if first is None else int(np.count_nonzero(raw[:colons[first]] == ord("\n")))


def _ldac_line_problem(text: str, num_words: int) -> str | None:
    head, *pairs = _FIELD.findall(text)
    if problem := _integer_problem("pair count N", head):
        return problem
    for pair in pairs:
        match = _LDAC_PAIR.fullmatch(pair)
        if not match:
            return f"malformed pair {pair!r}, expected id:count"
        word, count = int(match[1]), int(match[2])
        if problem := _range_problem("word id", word, 0, num_words - 1) or _count_problem(count):
            return problem
    if int(head) != len(pairs):
        return f"N is {head} but the line has {len(pairs)} id:count pairs"
    return None


# ----------------------------------------------------------------------------- count matrices


def from_count_matrix(X, vocab=None, name: str = "", keep_empty: bool = False) -> Corpus:
    """A corpus from a documents x words count matrix: dense array or any scipy.sparse format.

    Counts must be non-negative integers (integer, bool or integral float dtype); a document's
    tokens are ordered by word id. vocab defaults to ("w0", "w1", ...). Empty rows are dropped
    (with a warning) unless keep_empty, which keeps one document per row (inference).
    """
    rows, cols, values, (num_docs, num_words) = count_matrix_entries(X)
    _check_counts(rows, cols, values)
    vocab = tuple(f"w{i}" for i in range(num_words)) if vocab is None else tuple(vocab)
    if len(vocab) != num_words:
        raise CorpusFormatError(
            f"vocab has {len(vocab)} words but the count matrix has {num_words} columns")
    nonzero = values != 0
    return _corpus_from_entries(rows[nonzero].astype(np.int64), cols[nonzero],
                                values[nonzero].astype(np.int64), num_docs, vocab, name,
                                "count matrix", keep_empty)


def count_matrix_entries(X) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int]]:
    """(rows, columns, values, shape) of the entries of a documents x words matrix, dense array
    (its nonzeros; NaN and negative entries count as nonzero) or any scipy.sparse format (its
    stored entries), in row-major order."""
    sparse = sys.modules.get("scipy.sparse")  # a sparse matrix implies scipy is imported
    if sparse is not None and sparse.issparse(X):
        entries = X.tocoo()
        order = np.lexsort((entries.col, entries.row))
        return entries.row[order], entries.col[order], entries.data[order], entries.shape
    entries = np.asarray(X)
    if entries.ndim != 2:
        raise CorpusFormatError(
            f"count matrix must be 2-D (documents x words), got shape {entries.shape}")
    rows, cols = np.nonzero(entries)
    return rows, cols, entries[rows, cols], entries.shape


def _check_counts(rows: np.ndarray, cols: np.ndarray, values: np.ndarray) -> None:
    """Rejects any stored entry that is not an integer in 0..MAX_COUNT, naming the first."""
    kind = values.dtype.kind
    if kind not in "biuf":
        raise CorpusFormatError(
            f"count matrix dtype {values.dtype} is not integer, bool or float")
    if kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~(np.isfinite(values) & (values >= 0) & (values <= MAX_COUNT)
                    & (values == np.floor(values)))
    else:
        bad = (values < 0) | (values > MAX_COUNT)
    if bad.any():
        first = np.flatnonzero(bad)[np.lexsort((cols[bad], rows[bad]))[0]]
        raise CorpusFormatError(
            f"count matrix entry at row {rows[first]}, column {cols[first]} (0-based) is "
            f"{values[first]!r}; counts must be integers in 0..{MAX_COUNT}")


# ----------------------------------------------------------------------------- shared assembly


def _corpus_from_entries(doc, word, count, num_docs: int, vocab: tuple[str, ...], name: str,
                         source: str, keep_empty: bool = False) -> Corpus:
    """Expands validated entries (doc in [0, num_docs), count >= 1) into a token stream.

    Entries are grouped by document stably, so each document keeps its entries' order;
    documents without entries are dropped (and counted), so the cost never depends on num_docs,
    unless keep_empty.
    """
    if np.any(doc[1:] < doc[:-1]):
        order = np.argsort(doc, kind="stable")
        doc, word, count = doc[order], word[order], count[order]
    return _corpus_from_doc_runs(doc, count, np.repeat(word.astype(np.int32), count), num_docs,
                                 vocab, name, source, keep_empty)


def _corpus_from_doc_runs(doc, tokens, word_ids, num_docs: int, vocab: tuple[str, ...],
                          name: str, source: str, keep_empty: bool = False) -> Corpus:
    """The corpus of word_ids, made of runs of tokens[i] >= 1 tokens of document doc[i]
    (non-decreasing in [0, num_docs)); documents without tokens are dropped (with a warning)
    unless keep_empty."""
    if keep_empty:  # document d starts where the runs of documents >= d start
        first_run = np.searchsorted(doc, np.arange(num_docs + 1))
        return Corpus(_offsets_from_lengths(tokens)[first_run], word_ids, vocab, name=name)
    doc_starts = np.flatnonzero(np.diff(doc, prepend=-1))  # tokens >= 1: no empty docs here
    doc_offsets = _offsets_from_lengths(tokens)[np.append(doc_starts, doc.size)]
    dropped = num_docs - doc_starts.size
    if dropped:
        warnings.warn(f"{source}: dropped {dropped} empty document(s)", stacklevel=2,
                      skip_file_prefixes=(_PACKAGE_DIR,))
    return Corpus(doc_offsets, word_ids, vocab, name=name, dropped_empty_docs=dropped)


# ----------------------------------------------------------------------------- plain text


def load_text(path, min_df: int = text.DEFAULT_MIN_DF, max_df: float = text.DEFAULT_MAX_DF,
              max_vocab: int = text.DEFAULT_MAX_VOCAB) -> Corpus:
    """A corpus from plain text (text.read_documents) under saberjax.text's tokenising rules."""
    path = Path(path)
    name = path.name if path.is_dir() else path.stem
    return corpus_from_documents(text.read_documents(path), min_df, max_df, max_vocab,
                                 name=name, source=str(path))


def corpus_from_documents(documents: Iterable[str], min_df: int = text.DEFAULT_MIN_DF,
                          max_df: float = text.DEFAULT_MAX_DF,
                          max_vocab: int = text.DEFAULT_MAX_VOCAB, name: str = "",
                          source: str = "text") -> Corpus:
    """A corpus from document strings: tokens in text order, vocabulary by saberjax.text's df
    rules; documents left without a vocabulary word are dropped (counted, as for files).
    `source` names the input in warnings and errors."""
    entries = text.token_entries(documents, min_df, max_df, max_vocab, source)
    return _corpus_from_entries(entries.doc_ids, entries.word_ids,
                                np.ones(entries.word_ids.size, np.int64), entries.num_docs,
                                entries.vocab, name, source)


def corpus_in_vocabulary(documents: Iterable[str], vocab: Sequence[str], name: str = "",
                         source: str = "text") -> Corpus:
    """One document per string, its tokens (saberjax.text's rules) matched to a model's
    vocabulary: no document-frequency rule, documents without a known word kept (empty), so
    that row d is document d.  Tokens of other words are skipped and counted: a warning says
    how many of all, and CorpusFormatError is raised when no token at all is known (scoring
    or inferring nothing would look like an answer)."""
    tokens = text.tokens_in_vocabulary(documents, vocab)
    entries = tokens.entries
    corpus = _corpus_from_entries(entries.doc_ids, entries.word_ids,
                                  np.ones(entries.word_ids.size, np.int64), entries.num_docs,
                                  entries.vocab, name, source, keep_empty=True)
    vocabulary = f"the model's vocabulary of {len(entries.vocab):,} words"
    if corpus.num_docs and not corpus.num_tokens:
        raise CorpusFormatError(f"{source}: none of the {tokens.tokens:,} tokens of its "
                                f"{entries.num_docs:,} document(s) is a word of {vocabulary}; "
                                f"is the text in the model's language?")
    if tokens.unknown:
        warnings.warn(f"{source}: {tokens.unknown:,} of {tokens.tokens:,} tokens "
                      f"({tokens.unknown / tokens.tokens:.1%}) are words outside {vocabulary}; "
                      f"they are skipped", stacklevel=2, skip_file_prefixes=(_PACKAGE_DIR,))
    return dataclasses.replace(corpus, unknown_tokens=tokens.unknown)


# ----------------------------------------------------------------------------- native format


class _NpyAppender:
    """A 1-D little-endian .npy file written in pieces, its header fixed up on close.

    NumPy pads 1-D headers to a size that does not depend on the length, so the header is
    rewritten in place once the length is known and the data is written exactly once.
    """

    def __init__(self, path: Path, dtype):
        self._dtype = np.dtype(dtype).newbyteorder("<")
        self._length = 0
        self._file = open(path, "wb")
        self._write_header()
        self._data_start = self._file.tell()

    def _write_header(self) -> None:
        np.lib.format.write_array_header_1_0(self._file, {
            "descr": np.lib.format.dtype_to_descr(self._dtype),
            "fortran_order": False,
            "shape": (self._length,),
        })

    def append(self, values: np.ndarray) -> None:
        data = np.ascontiguousarray(values, dtype=self._dtype)
        self._file.write(data.data)
        self._length += data.size

    def finish(self) -> None:
        """Writes the final header and flushes the file to disk."""
        self._file.seek(0)
        self._write_header()
        if self._file.tell() != self._data_start:
            raise RuntimeError(f"{self._file.name}: .npy header size changed; cannot finish")
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()

    def abandon(self) -> None:
        self._file.close()


class NativeCorpusWriter:
    """Streams whole documents into a native corpus folder that appears atomically on close().

    Tokens go straight to disk as they are appended, so corpora larger than memory can be
    written. Everything is staged in a hidden sibling folder that close() moves into place,
    replacing a previous native corpus there (saberjax.outputs.replace_directory); a folder
    holding anything but a native corpus's files is never replaced. Used as a context manager, an escaping exception deletes the staging folder.
    """

    def __init__(self, directory, vocab: Sequence[str], name: str = ""):
        self.directory = Path(directory)
        self.vocab = tuple(vocab)
        self.name = name
        self.num_docs = 0
        self.num_tokens = 0
        bad_words = [w for w in self.vocab if not isinstance(w, str) or "\n" in w or "\r" in w]
        if bad_words:
            raise ValueError(f"vocabulary words must be strings without line breaks, "
                             f"got {bad_words[0]!r}")
        outputs.check_replaceable(self.directory, _NATIVE_FILES, f"a {_NATIVE_FORMAT} corpus")
        self.directory.parent.mkdir(parents=True, exist_ok=True)
        # A plain mkdir (unlike mkdtemp's 0700) gives the finished folder the usual permissions.
        self._staging = outputs.hidden_sibling(self.directory, "partial")
        self._staging.mkdir()
        try:
            self._offsets = _NpyAppender(self._staging / _OFFSETS_FILE, np.int64)
            self._word_ids = _NpyAppender(self._staging / _WORD_IDS_FILE, np.int32)
        except BaseException:
            shutil.rmtree(self._staging, ignore_errors=True)
            raise
        self._offsets.append(np.zeros(1, np.int64))

    def append(self, doc_lengths, word_ids) -> None:
        """Adds documents: doc_lengths[i] tokens each, taken in order from word_ids."""
        if self._staging is None:
            raise ValueError(f"NativeCorpusWriter for {self.directory} is already closed")
        lengths = _int_vector(doc_lengths, "doc_lengths")
        ids = _int_vector(word_ids, "word_ids")
        if lengths.size and lengths.min() < 0:
            raise CorpusFormatError(f"doc_lengths has a negative entry ({lengths.min()})")
        if lengths.sum() != ids.size:
            raise CorpusFormatError(
                f"doc_lengths sum to {lengths.sum()} but {ids.size} word ids were given")
        _check_word_ids(ids, len(self.vocab))
        self._offsets.append(self.num_tokens + np.cumsum(lengths, dtype=np.int64))
        self._word_ids.append(ids)
        self.num_docs += lengths.size
        self.num_tokens += ids.size

    def close(self) -> None:
        """Finishes the files and renames the staging folder to ``directory``."""
        if self._staging is None:
            return
        try:
            self._offsets.finish()
            self._word_ids.finish()
            vocab_text = "".join(word + "\n" for word in self.vocab)
            (self._staging / _VOCAB_FILE).write_text(vocab_text, encoding="utf-8", newline="\n")
            meta = {"format": _NATIVE_FORMAT, "version": _NATIVE_VERSION, "name": self.name,
                    "num_docs": self.num_docs, "num_tokens": self.num_tokens,
                    "num_words": len(self.vocab)}
            (self._staging / _META_FILE).write_text(json.dumps(meta, indent=1) + "\n",
                                                    encoding="utf-8")
            outputs.replace_directory(self._staging, self.directory)
        except BaseException:
            self._discard()
            raise
        self._staging = None

    def _discard(self) -> None:
        self._offsets.abandon()
        self._word_ids.abandon()
        shutil.rmtree(self._staging, ignore_errors=True)
        self._staging = None

    def __enter__(self) -> NativeCorpusWriter:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is None:
            self.close()
        elif self._staging is not None:
            self._discard()


def save_native(corpus: Corpus, directory) -> None:
    """Writes corpus as a native folder (atomically; see NativeCorpusWriter)."""
    with NativeCorpusWriter(directory, corpus.vocab, name=corpus.name) as writer:
        writer.append(corpus.doc_lengths(), corpus.word_ids)


def load_native(directory, mmap: bool = True) -> Corpus:
    """Loads a native corpus folder exactly as saved; arrays are memory-mapped when mmap."""
    directory = Path(directory)
    meta = _read_native_meta(directory / _META_FILE)
    mmap_mode = "r" if mmap else None
    doc_offsets = _load_vector(directory / _OFFSETS_FILE, np.int64, mmap_mode)
    word_ids = _load_vector(directory / _WORD_IDS_FILE, np.int32, mmap_mode)
    vocab = _read_vocab(directory / _VOCAB_FILE)
    for key, actual, source in (("num_docs", doc_offsets.size - 1, _OFFSETS_FILE),
                                ("num_tokens", word_ids.size, _WORD_IDS_FILE),
                                ("num_words", len(vocab), _VOCAB_FILE)):
        if meta[key] != actual:
            raise CorpusFormatError(f"{directory / _META_FILE}: {key} is {meta[key]} but "
                                    f"{directory / source} holds {actual}")
    try:
        return Corpus(doc_offsets, word_ids, vocab, name=meta["name"])
    except CorpusFormatError as error:
        raise CorpusFormatError(f"{directory}: {error}") from error


def _read_native_meta(path: Path) -> dict:
    try:
        meta = json.loads(_read_bytes(path))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CorpusFormatError(f"{path}: not valid JSON ({error})") from error
    if not isinstance(meta, dict) or meta.get("format") != _NATIVE_FORMAT:
        raise CorpusFormatError(f"{path}: not a {_NATIVE_FORMAT} corpus description")
    if meta.get("version") != _NATIVE_VERSION:
        raise CorpusFormatError(f"{path}: unsupported version {meta.get('version')!r}, "
                                f"this saberjax reads version {_NATIVE_VERSION}")
    for key in ("num_docs", "num_tokens", "num_words"):
        if not isinstance(meta.get(key), int):
            raise CorpusFormatError(f"{path}: {key} must be an integer, got {meta.get(key)!r}")
    if not isinstance(meta.get("name"), str):
        raise CorpusFormatError(f"{path}: name must be a string, got {meta.get('name')!r}")
    return meta


def _load_vector(path: Path, dtype, mmap_mode: str | None) -> np.ndarray:
    try:
        array = np.load(path, mmap_mode=mmap_mode, allow_pickle=False)
    except FileNotFoundError:
        raise CorpusFormatError(f"{path}: file not found") from None
    except (OSError, ValueError) as error:
        raise CorpusFormatError(f"{path}: not a readable .npy file ({error})") from error
    if array.ndim != 1 or array.dtype != np.dtype(dtype):
        raise CorpusFormatError(f"{path}: expected a 1-D {np.dtype(dtype)} array, "
                                f"found {array.dtype} with shape {array.shape}")
    return array


# ----------------------------------------------------------------------------- any format


def load_corpus(path, format: str = "auto", **text_options) -> Corpus:
    """Loads a corpus in any supported format; format is "auto" or one of FORMATS.

    "auto" picks: a folder with corpus.json -> native; a folder with docword.txt[.gz] or a
    file named docword*.txt[.gz] -> uci; a file starting ``N id:count`` -> ldac, with the
    vocabulary in ``vocab.txt`` beside it; any other folder of .txt files or .txt file ->
    text (plain text, tokenised by load_text with `text_options`: min_df,
    max_df, max_vocab).
    """
    path = Path(path)
    chosen = _chosen_format(path, format)
    if chosen == "text":
        return load_text(path, **text_options)
    if text_options:
        raise ValueError(f"{', '.join(text_options)} only apply to text input; {path} is {chosen}")
    if chosen == "native":
        return load_native(path)
    if chosen == "uci":
        return load_uci(path)
    return load_ldac(path, path.with_name(_VOCAB_FILE))


def source_files(path, format: str = "auto") -> list[Path]:
    """The files load_corpus(path, format) reads, in a fixed order (what a copy of the corpus,
    such as saberjax.corpus_cache's, depends on)."""
    path = Path(path)
    chosen = _chosen_format(path, format)
    if chosen == "text":
        return text.document_files(path)
    if chosen == "native":
        return [path / name for name in _NATIVE_FILES]
    if chosen == "uci":
        docword = _uci_docword_in(path) if path.is_dir() else path
        return [docword, _uci_vocab_beside(docword)]
    return [path, path.with_name(_VOCAB_FILE)]


def _chosen_format(path: Path, format: str) -> str:
    """format, or the detected one for "auto"; ValueError for an unknown format name."""
    if format != "auto" and format not in FORMATS:
        raise ValueError(f"unknown corpus format {format!r}; expected 'auto' or one of {FORMATS}")
    return detect_format(path) if format == "auto" else format


def detect_format(path) -> str:
    """The format load_corpus(path) reads path in: one of FORMATS (CorpusFormatError when
    none or several match; see load_corpus)."""
    path = Path(path)
    if path.is_dir():
        matches = [fmt for fmt, present in (
            ("native", (path / _META_FILE).is_file()),
            ("uci", bool(_uci_docwords(path))),
        ) if present]
        if not matches and any(file.suffix == ".txt" for file in path.iterdir()):
            matches = ["text"]
    elif path.is_file():
        if _UCI_DOCWORD_NAME.fullmatch(path.name):
            matches = ["uci"]
        elif _starts_like_ldac(path):
            matches = ["ldac"]
        else:
            matches = ["text"] if path.suffix == ".txt" else []
    else:
        raise CorpusFormatError(f"{path}: no such file or directory")
    if len(matches) == 1:
        return matches[0]
    verdict = f"matches several formats ({', '.join(matches)})" if matches else "format unknown"
    raise CorpusFormatError(
        f"{path}: {verdict}; tried native (folder with {_META_FILE}), uci (folder with "
        f"docword.txt[.gz] or file docword*.txt[.gz]), ldac (file starting 'N id:count') and "
        f"text (folder of .txt files or .txt file); pass format= to choose")


def _starts_like_ldac(path: Path) -> bool:
    try:
        with open(path, "rb") as raw:
            gzipped = raw.read(2) == _GZIP_MAGIC
            raw.seek(0)
            stream = gzip.GzipFile(fileobj=raw) if gzipped else raw
            head = stream.readline(4096)
    except (OSError, EOFError):
        return False
    return _LDAC_START.match(head) is not None


def convert_to_native(source, directory, format: str = "auto") -> Corpus:
    """Loads source (see load_corpus) and saves it as a native folder; returns the corpus."""
    corpus = load_corpus(source, format)
    save_native(corpus, directory)
    return corpus


# ----------------------------------------------------------------------------- splits


def _random_keys(seed: int, size: int) -> np.ndarray:
    """Raw PCG64 output: unlike Generator methods, its stream is fixed across numpy versions."""
    return np.random.Generator(np.random.PCG64(seed)).bit_generator.random_raw(size)


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
    doc_of_token = np.repeat(np.arange(corpus.num_docs, dtype=np.uint64), lengths)
    # Sorting by (document, random key) shuffles tokens within each document.
    token_keys = _random_keys(seed, corpus.num_tokens) >> np.uint64(32)
    keys = (doc_of_token << np.uint64(32)) | token_keys
    dealt = np.argsort(keys, kind="stable")
    rank_in_doc = np.arange(corpus.num_tokens) - np.repeat(corpus.doc_offsets[:-1], lengths)
    observed = np.empty(corpus.num_tokens, bool)
    observed[dealt] = rank_in_doc % 2 == 0
    return (
        Corpus(_offsets_from_lengths((lengths + 1) // 2), corpus.word_ids[observed], corpus.vocab,
               name=corpus.name),
        Corpus(_offsets_from_lengths(lengths // 2), corpus.word_ids[~observed], corpus.vocab,
               name=corpus.name),
    )


# ----------------------------------------------------------------------------- bundled data


def bundled_corpus_path(name: str = "kos") -> Path:
    """Folder of a corpus shipped in ``saberjax/data`` (UCI format)."""
    root = Path(os.fspath(importlib.resources.files("saberjax.data")))
    available = sorted(p.name for p in root.iterdir() if p.is_dir() and _uci_docwords(p))
    if name not in available:
        raise ValueError(f"no bundled corpus {name!r}; available: {', '.join(available)}")
    return root / name


def load_bundled(name: str = "kos") -> Corpus:
    """Loads a bundled corpus (see bundled_corpus_path)."""
    return load_uci(bundled_corpus_path(name))
