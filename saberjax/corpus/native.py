"""The native corpus format: a folder of ``.npy`` files and a vocabulary that loads
memory-mapped, written atomically, and restores a corpus exactly (empty documents included,
so that aligned corpora such as the halves of split_document_halves survive a round trip).
The word ids whose writing is left to others (NativeCorpusWriter.reserve_word_ids: the text
reader's worker processes) are one file cut into parts (word_id_parts), which load as one
array; corpus.json then records the parts."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from saberjax import files, outputs
from saberjax.corpus.reading import read_bytes, read_vocab
from saberjax.corpus.core import Corpus, int_vector
import saberjax.corpus.word_id_parts as word_id_parts
from saberjax.corpus.word_id_parts import WordIdParts, found_parts, sized_parts
from saberjax.corpus.word_ids import check_word_ids
from saberjax.errors import CorpusFormatError

_NATIVE_FORMAT = "saberjax-native"
_NATIVE_VERSION = 1
META_FILE = "corpus.json"
_OFFSETS_FILE = "doc_offsets.npy"
_WORD_IDS_FILE = "word_ids.npy"
_VOCAB_FILE = "vocab.txt"
NATIVE_FILES = (META_FILE, _OFFSETS_FILE, _WORD_IDS_FILE, _VOCAB_FILE)
DOC_NAMES_FILE = "doc_names.txt"  # optional: Corpus.doc_names, one a line
_WORD_ID_PART = re.compile(re.escape(_WORD_IDS_FILE) + r"\.[1-9][0-9]*")  # word_ids.npy.1, ...


class _NpyAppender:
    """A 1-D little-endian .npy file written in pieces, its header fixed up on close.

    NumPy pads 1-D headers to a size that does not depend on the length, so the header is
    rewritten in place once the length is known and the data is written exactly once.
    """

    def __init__(self, path: Path, dtype):
        self._dtype = np.dtype(dtype).newbyteorder("<")
        self._length = 0
        self.parts = None  # the parts that others write (reserve)
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

    def reserve(self, length: int, part_bytes: int) -> WordIdParts:
        """The file, for `length` int32 entries, cut into parts of `part_bytes` (word_id_parts),
        sized and their blocks allocated, for others to write (never appended to after)."""
        self._length = length
        self.parts = sized_parts(self._file.name, self._data_start, length, part_bytes)
        return self.parts

    def finish(self, durable: bool = True) -> None:
        """Writes the final header and flushes the file, to disk where `durable` says (fsync)."""
        self._file.seek(0)
        self._write_header()
        if self._file.tell() != self._data_start:
            raise RuntimeError(f"{self._file.name}: .npy header size changed; cannot finish")
        self._file.flush()
        if durable:
            os.fsync(self._file.fileno())
            for path in self.parts.paths[1:] if self.parts is not None else ():
                files.fsync_path(path)
        self._file.close()

    def abandon(self) -> None:
        self._file.close()


class NativeCorpusWriter:
    """Streams whole documents into a native corpus folder that appears atomically on close().

    Tokens go straight to disk as they are appended, so corpora larger than memory can be
    written. Everything is staged in a hidden sibling folder that close() moves into place,
    replacing a previous native corpus there (saberjax.outputs.replace_directory); a folder
    holding anything but a native corpus's files is never replaced. Used as a context manager,
    an escaping exception deletes the staging folder.

    durable=False leaves the files' bytes to the operating system's write-back instead of
    waiting for them to reach the disk (fsync) on close: for copies whose every load checks
    their contents (the corpus cache's entries, checked against their fingerprint), which a
    crash can then cost but never corrupt unseen.
    """

    def __init__(self, directory, vocab: Sequence[str], name: str = "", durable: bool = True):
        self.directory = Path(directory)
        self.vocab = tuple(vocab)
        self.name = name
        self.durable = durable
        self.num_docs = 0
        self.num_tokens = 0
        bad_words = [w for w in self.vocab if not isinstance(w, str) or "\n" in w or "\r" in w]
        if bad_words:
            raise ValueError(f"vocabulary words must be strings without line breaks, "
                             f"got {bad_words[0]!r}")
        outputs.check_replaceable(self.directory, _own_names(self.directory),
                                  f"a {_NATIVE_FORMAT} corpus")
        self.directory.parent.mkdir(parents=True, exist_ok=True)
        # A plain mkdir (unlike mkdtemp's 0700) gives the finished folder the usual permissions.
        self._staging = outputs.hidden_sibling(self.directory, "partial")
        self._staging.mkdir()
        try:
            self._offsets = _NpyAppender(self._staging / _OFFSETS_FILE, np.int64)
            self._word_ids = _NpyAppender(self._staging / _WORD_IDS_FILE, np.int32)
            self._names = None  # the doc_names file, opened by the first append giving names
            self._named = None  # whether appends give doc_names, set by the first
            self._reserved = None  # tokens whose word ids others write (reserve_word_ids)
        except BaseException:
            shutil.rmtree(self._staging, ignore_errors=True)
            raise
        self._offsets.append(np.zeros(1, np.int64))

    def append(self, doc_lengths, word_ids, doc_names=None) -> None:
        """Adds documents: doc_lengths[i] tokens each, taken in order from word_ids (None:
        written in the reserved file, reserve_word_ids), named doc_names[i] (strings without
        line breaks) when the corpus has doc_names (given to every append, or to none)."""
        if self._staging is None:
            raise ValueError(f"NativeCorpusWriter for {self.directory} is already closed")
        lengths = int_vector(doc_lengths, "doc_lengths")
        if lengths.size and lengths.min() < 0:
            raise CorpusFormatError(f"doc_lengths has a negative entry ({lengths.min()})")
        if (word_ids is None) != (self._reserved is not None):
            raise ValueError("word ids are given to append unless reserve_word_ids was "
                             "called, and only then left out")
        tokens = int(lengths.sum())
        if word_ids is not None:
            ids = int_vector(word_ids, "word_ids")
            if tokens != ids.size:
                raise CorpusFormatError(
                    f"doc_lengths sum to {tokens} but {ids.size} word ids were given")
            check_word_ids(ids, len(self.vocab))
            self._word_ids.append(ids)
        self._append_names(doc_names, lengths.size)
        self._offsets.append(self.num_tokens + np.cumsum(lengths, dtype=np.int64))
        self.num_docs += lengths.size
        self.num_tokens += tokens

    def reserve_word_ids(self, num_tokens: int) -> WordIdParts:
        """The word ids' file for the corpus's `num_tokens`, in parts of
        word_id_parts.PART_BYTES (each sized, for threads or processes to write the ids into
        at once: WordIdParts.write) before the documents holding them are appended (append
        with word_ids None).  Called before any append; close checks that the documents hold
        num_tokens tokens.  The ids written are the caller's to check against the
        vocabulary."""
        if self.num_docs or self._reserved is not None:
            raise ValueError("reserve_word_ids comes once, before any append")
        self._reserved = num_tokens
        return self._word_ids.reserve(num_tokens, word_id_parts.PART_BYTES)

    def _append_names(self, doc_names, count: int) -> None:
        if self._named is None:
            self._named = doc_names is not None
        if self._named != (doc_names is not None):
            raise ValueError("doc_names must be given to every append of a corpus, or to none")
        if doc_names is None:
            return
        names = [str(name) for name in doc_names]
        if len(names) != count or any("\n" in name or "\r" in name for name in names):
            raise ValueError(f"doc_names must be {count} strings without line breaks")
        if self._names is None:
            self._names = open(self._staging / DOC_NAMES_FILE, "w", encoding="utf-8",
                               newline="\n")
        self._names.writelines(name + "\n" for name in names)

    def close(self) -> None:
        """Finishes the files and renames the staging folder to ``directory``."""
        if self._staging is None:
            return
        try:
            if self._reserved is not None and self._reserved != self.num_tokens:
                raise CorpusFormatError(f"{self._reserved} word ids were reserved for documents "
                                        f"of {self.num_tokens} tokens")
            self._offsets.finish(self.durable)
            self._word_ids.finish(self.durable)
            if self._names is not None:
                self._names.close()
            vocab_text = "".join(word + "\n" for word in self.vocab)
            (self._staging / _VOCAB_FILE).write_text(vocab_text, encoding="utf-8", newline="\n")
            meta = {"format": _NATIVE_FORMAT, "version": _NATIVE_VERSION, "name": self.name,
                    "num_docs": self.num_docs, "num_tokens": self.num_tokens,
                    "num_words": len(self.vocab)}
            parts = self._word_ids.parts
            if parts is not None and len(parts.paths) > 1:
                meta.update(word_ids_parts=len(parts.paths), word_ids_part_bytes=parts.part_bytes)
            (self._staging / META_FILE).write_text(json.dumps(meta, indent=1) + "\n",
                                                   encoding="utf-8")
            outputs.replace_directory(self._staging, self.directory)
        except BaseException:
            self._discard()
            raise
        self._staging = None

    def _discard(self) -> None:
        self._offsets.abandon()
        self._word_ids.abandon()
        if self._names is not None:
            self._names.close()
        shutil.rmtree(self._staging, ignore_errors=True)
        self._staging = None

    def __enter__(self) -> NativeCorpusWriter:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is None:
            self.close()
        elif self._staging is not None:
            self._discard()


def save_native(corpus: Corpus, directory, durable: bool = True) -> None:
    """Writes corpus as a native folder (atomically; `durable`: see NativeCorpusWriter)."""
    with NativeCorpusWriter(directory, corpus.vocab, name=corpus.name,
                            durable=durable) as writer:
        writer.append(corpus.doc_lengths(), corpus.word_ids, corpus.doc_names)


def load_native(directory, mmap: bool = True, checked: bool = True) -> Corpus:
    """Loads a native corpus folder exactly as saved; arrays are memory-mapped when mmap.
    checked=False leaves the word ids unread, to be validated by whoever counts them
    (Corpus.checked): each process of a run reads only its own documents' tokens."""
    directory = Path(directory)
    meta = _read_native_meta(directory / META_FILE)
    mmap_mode = "r" if mmap else None
    doc_offsets = _load_vector(directory / _OFFSETS_FILE, np.int64, mmap_mode)
    if "word_ids_parts" in meta:
        parts = found_parts(directory / _WORD_IDS_FILE, meta["word_ids_parts"],
                            meta["word_ids_part_bytes"])
        word_ids = parts.mapped() if mmap else parts.read()
    else:
        word_ids = _load_vector(directory / _WORD_IDS_FILE, np.int32, mmap_mode)
    vocab = read_vocab(directory / _VOCAB_FILE)
    for key, actual, source in (("num_docs", doc_offsets.size - 1, _OFFSETS_FILE),
                                ("num_tokens", word_ids.size, _WORD_IDS_FILE),
                                ("num_words", len(vocab), _VOCAB_FILE)):
        if meta[key] != actual:
            raise CorpusFormatError(f"{directory / META_FILE}: {key} is {meta[key]} but "
                                    f"{directory / source} holds {actual}")
    names = None
    if (directory / DOC_NAMES_FILE).exists():
        names = read_vocab(directory / DOC_NAMES_FILE)
        if len(names) != doc_offsets.size - 1:
            raise CorpusFormatError(f"{directory / DOC_NAMES_FILE}: {len(names)} names for "
                                    f"{doc_offsets.size - 1} documents")
    try:
        return Corpus(doc_offsets, word_ids, vocab, name=meta["name"], doc_names=names,
                      checked=checked)
    except CorpusFormatError as error:
        raise CorpusFormatError(f"{directory}: {error}") from error


def _read_native_meta(path: Path) -> dict:
    try:
        meta = json.loads(read_bytes(path))
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
    if "word_ids_parts" in meta or "word_ids_part_bytes" in meta:
        count, part_bytes = meta.get("word_ids_parts"), meta.get("word_ids_part_bytes")
        if not (isinstance(count, int) and count >= 2 and isinstance(part_bytes, int)
                and part_bytes > 0 and part_bytes % word_id_parts.LARGEST_PAGE == 0):
            raise CorpusFormatError(
                f"{path}: word_ids_parts must be an integer of at least 2 and "
                f"word_ids_part_bytes a positive multiple of {word_id_parts.LARGEST_PAGE}, "
                f"got {count!r} and {part_bytes!r}")
    if not isinstance(meta.get("name"), str):
        raise CorpusFormatError(f"{path}: name must be a string, got {meta.get('name')!r}")
    return meta


def native_files(directory) -> list[Path]:
    """The files of the native corpus in `directory` (its word ids' parts included, as its
    corpus.json records them), doc_names.txt aside."""
    directory = Path(directory)
    count = 1
    try:
        count = _read_native_meta(directory / META_FILE).get("word_ids_parts", 1)
    except (CorpusFormatError, OSError):
        pass  # the loader names what is wrong
    return ([directory / name for name in NATIVE_FILES]
            + word_id_parts.part_paths(directory / _WORD_IDS_FILE, count)[1:])


def _own_names(directory: Path) -> set[str]:
    """The names a native corpus's folder may hold: its files, doc_names.txt and the word
    ids' parts beyond the first."""
    names = {*NATIVE_FILES, DOC_NAMES_FILE}
    if directory.is_dir():
        names.update(entry.name for entry in directory.iterdir()
                     if _WORD_ID_PART.fullmatch(entry.name))
    return names


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
