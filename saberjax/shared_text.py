"""A text input (files of plain text, JSON Lines, CSV, TSV, Parquet) read by the processes of a
run together, each tokenising only its share of the files, into the corpus one process reading
the whole input builds.

The input's bytes (its files', text_sources.source_files, in reading order) are cut into one
run per process, of equal length: a process reads the lines beginning in its run of the files
of lines (plain text, JSON Lines), the row groups of Parquet files beginning in it, and the
other files (CSV, compressed files, a folder of documents) beginning in it (file_shares); every process checks that the others see
the same files, of the same sizes, and reads only its share.  Each tokenises and
counts its share (text_corpus.build_corpus); the processes then exchange their words (each
one's text_words.Dictionary: word keys, long words' bytes, tokens, document frequencies; one
all-gather of bytes: processes.gathered_bytes), and each merges them in process order as a
reader merges its workers' (text_words.Words) and chooses the vocabulary from the merged
words by the input's rules (min_df, max_df, max_features on the whole input's counts:
text_corpus.chosen_vocabulary), the same on every process.  Each
maps its share's tokens to that vocabulary, and the processes exchange their documents'
lengths (and ids), so that each holds the whole corpus's outline (document offsets,
vocabulary, names) and its own share's tokens (Corpus.held_tokens): the document order, the
ids and the fingerprint those of the input read whole, whatever the number of processes.  The
trainer then gives each process the tokens its devices train on from the processes that read
them (processes.share_tokens) and combines the fingerprint from every process's part
(processes.combine_corpus_parts).

With a cache folder, each process keeps its share's corpus there (an entry of the corpus
cache like a whole input's, its share a source of its own: _cached_share) and the next run
of the same processes on the same input loads it instead of reading.

An error reading a share (a malformed record, a missing field) is exchanged at the next
exchange in place of the process's words or documents, so that every process stops with the
same one line naming the file, instead of waiting for the one that stopped.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np

from saberjax import processes
from saberjax.corpus import cache, native, plain_text
from saberjax.corpus.core import PACKAGE_DIR, Corpus, offsets_from_lengths
from saberjax.corpus.key_tables import Strings
from saberjax.corpus.text_corpus import SharedWords, TextCorpus, build_corpus
from saberjax.corpus.text_blocks import compression_of
from saberjax.corpus.text_words import Dictionary, Words
from saberjax.corpus.text_sources import (
    FORMATS,
    FileShare,
    detect_text_format,
    document_blocks,
    is_collection,
    source_files,
    source_name,
)
from saberjax.errors import CorpusFormatError

# the first byte of an exchanged message: what the rest holds
_DATA, _FORMAT_ERROR, _OTHER_ERROR = b"\0", b"\1", b"\2"


def is_text_input(path, format: str = "auto") -> bool:
    """Whether load_shared_text reads `path` in `format`: a raw text format (FORMATS), given
    or detected."""
    from saberjax.corpus.formats import detect_format  # noqa: PLC0415 (formats imports much)

    return (format if format != "auto" else detect_format(Path(path))) in FORMATS


def file_shares(files: list[Path], sizes: list[int], divisible: list[bool], count: int
                ) -> list[list[FileShare]]:
    """The share of each of `count` readers of `files` (of `sizes` bytes, in reading order):
    the input's bytes cut into `count` runs of equal length, each reader holds what begins
    in its run of the files that can be divided (`divisible`: the lines of plain text and
    JSON Lines, the row groups of Parquet, uncompressed: FileShare.span) and, whole, the
    other files whose first byte lies in its run.  Documents follow each other in the
    readers' order as in the input."""
    total = max(sum(sizes), 1)
    cuts = [total * reader // count for reader in range(count + 1)]
    shares: list[list[FileShare]] = [[] for _ in range(count)]
    start = 0
    for file, size, divided in zip(files, sizes, divisible):
        if divided:
            for reader, share in enumerate(shares):
                first, last = max(cuts[reader], start), min(cuts[reader + 1], start + size)
                if first < last:
                    share.append(FileShare(file, (first - start, last - start)))
        else:
            shares[min(bisect.bisect_right(cuts, start) - 1, count - 1)].append(FileShare(file))
        start += size
    return shares


def load_shared_text(path, format: str = "auto", log: Callable[[str], None] | None = None,
                     workers: int | None = None, memory_bytes: int | None = None,
                     cache_dir=None, **options) -> Corpus:
    """The corpus plain_text.load_text(path, ...) reads, of which this process holds only its
    share's tokens (see the module); every process of the run calls it with the same
    arguments.  `options`: the text and reading options (plain_text.text_rules).
    cache_dir: keep each process's share there, and load it from there when every process
    finds its own (held_share)."""
    path = Path(path)
    chosen = detect_text_format(path) if format == "auto" else format
    files = source_files(path, chosen)
    sizes = [file.stat().st_size for file in files]
    processes.check_agreement(f"the files of {path}", *(f"{file.name} {size}" for file, size
                                                        in zip(files, sizes)))
    divisible = chosen in ("jsonl", "parquet") or (chosen == "text" and not is_collection(path))
    spans = [divisible and compression_of(file) is None for file in files]
    exchange = Exchange()
    share = file_shares(files, sizes, spans, exchange.count)[exchange.index]
    held = held_share(path, chosen, share, exchange, cache_dir, log=log, workers=workers,
                      memory_bytes=memory_bytes, **options)
    return _held_corpus(held, source_name(path), str(path))


class CorpusShare(NamedTuple):
    """What a process of a run holds of a text input read in shares: the whole corpus's
    document offsets, vocabulary and document ids (None when the input names none), the word
    ids of its share's tokens, from token `first` on, and the whole input's dropped empty
    documents and documents not valid UTF-8."""

    doc_offsets: np.ndarray
    vocab: tuple[str, ...]
    doc_names: list[str] | None
    word_ids: np.ndarray
    first: int
    dropped: int
    invalid: int


def held_share(path: Path, format: str, share: list[FileShare],
               exchange: Exchange | None = None, cache_dir=None,
               log: Callable[[str], None] | None = None, workers: int | None = None,
               memory_bytes: int | None = None, processes: bool | None = None,
               **options) -> CorpusShare:
    """What this reader holds of the text input `path` in `format` (a detected one) when it
    reads `share` of it (file_shares) and the other readers the rest: its share's corpus,
    from its entry in cache_dir when every reader finds its own there (_cached_share), else
    tokenised and counted (build_corpus: on `workers` threads or, as `processes` says, worker
    processes; progress lines to `log`) with the words exchanged, and kept in its entry; then
    the documents exchanged (Exchange.share), through `exchange` (default: the processes of
    the run, Exchange()).  `options`: the text and reading options
    (plain_text.text_rules).  An error reading the share takes the place of this reader's
    data in the exchanges to come (Exchange.fail)."""
    exchange = Exchange() if exchange is None else exchange
    entry = built = None
    if cache_dir is not None:
        entry, built = _cached_share(Path(cache_dir), path, share, exchange,
                                     cache.reading_options(path, format, **options))
    if built is not None:
        return exchange.share(built)
    rules, vocabulary = plain_text.text_rules(**options)
    blocks = document_blocks(path, format=format, parsed=False, share=share,
                             **plain_text.reading_options(options))
    try:
        built = build_corpus(blocks, rules, vocabulary, name=source_name(path),
                             source=str(path), workers=workers, memory_bytes=memory_bytes,
                             total_bytes=_share_bytes(share), log=log, processes=processes,
                             shared_words=exchange.words)
        held = exchange.share(built)
    except Exception as error:
        exchange.fail(error)
        raise
    if entry is not None:
        entry.write(built)
    return held


class _ShareEntry(NamedTuple):
    """A reader's entry of its share in the corpus cache (cache.store_entry): its folder, the
    key of the share's contents (cache.SourceKey), its origin, the share's files, and the
    key of every reader's share, together (`input`)."""

    folder: Path
    source: cache.SourceKey
    origin: dict
    files: list[FileShare]
    input: str

    def write(self, built: TextCorpus) -> None:
        """Keeps the share's corpus (its documents, over the input's vocabulary) in the entry,
        with the input's key and its documents not valid UTF-8; a warning when it cannot."""

        def saved(folder: Path) -> Corpus:  # left to write-back, as text entries are
            native.save_native(built.corpus, folder, durable=False)
            return built.corpus

        try:
            cache.store_entry(self.folder, self.source, saved, self.origin, self.files, [],
                              input=self.input, invalid_utf8_docs=built.invalid_utf8_docs)
        except OSError as error:
            cache.cache_warning(f"corpus cache entry {self.folder} not written ({error}); the "
                                f"share is read from the source each time")


def _cached_share(cache_dir: Path, path: Path, share: list[FileShare], exchange: Exchange,
                  options: dict) -> tuple[_ShareEntry | None, TextCorpus | None]:
    """(this reader's entry in cache_dir, or None when a reader's share cannot be read; its
    share's corpus from there when every reader finds a valid entry of its own, else None).
    A reader's share is a source of the cache as a whole input is (cache.source_key: its
    spans' bytes, and its place among the readers, hashed, or the key taken from the entry's
    source record), and its entry holds the key of every reader's share together (`input`):
    an entry serves the same contents, options and shares only."""
    place = dict(process=exchange.index, processes=exchange.count)
    origin = dict(source=str(path.resolve()), options=options, **place)
    try:
        source = cache.source_key(cache_dir, origin, share, dict(options, **place))
    except OSError:  # an unreadable file: the read names it
        source = None
    keys = exchange.gathered(b"" if source is None else source.key.encode())
    entry = found = None
    if all(keys):
        entry = _ShareEntry(cache_dir / source.key[:32], source, origin, share,
                            hashlib.sha256(b"\0".join(keys)).hexdigest())
        found = cache.read_entry(entry.folder, source.key, input=entry.input)
    if found is not None:
        cache.record_source(entry.folder, source, origin, share)
    everywhere = all(exchange.gathered(b"\1" if found is not None else b""))
    if not everywhere:
        return entry, None
    corpus, manifest = found
    return entry, TextCorpus(corpus, int(manifest.get("invalid_utf8_docs", 0)))


def _held_corpus(share: CorpusShare, name: str, source: str) -> Corpus:
    """The corpus of which this process holds `share`'s tokens (Corpus.held_tokens); warnings
    naming `source` of the whole input's dropped and invalid documents, as reading it whole
    gives them."""
    num_tokens = int(share.doc_offsets[-1])
    if not num_tokens:
        raise CorpusFormatError(f"{source}: no documents (the input is empty)")
    word_ids = np.zeros(num_tokens, np.int32)  # pages untouched outside the share
    last = share.first + share.word_ids.size
    word_ids[share.first:last] = share.word_ids
    corpus = Corpus(share.doc_offsets, word_ids, share.vocab, name, share.dropped,
                    doc_names=None if share.doc_names is None
                    else np.array(share.doc_names, dtype=object),
                    checked=False, held_tokens=(share.first, last))
    for count, what in ((share.dropped, "dropped {} empty document(s)"),
                        (share.invalid, "{:,} document(s) are not valid UTF-8; read as "
                                        "Latin-1")):
        if count:
            warnings.warn(f"{source}: {what.format(count)}", stacklevel=3,
                          skip_file_prefixes=(PACKAGE_DIR,))
    return corpus


def _share_bytes(share: list[FileShare]) -> int:
    """The bytes of a share (its files', or their spans'), for the ETA of progress lines."""
    return sum(file.path.stat().st_size if file.span is None else file.span[1] - file.span[0]
               for file in share)


class Exchange:
    """The exchanges of the readers of an input's shares (read_share), in order: the words
    (words), then the documents (share); an error in their place (fail).  `gathered` gives
    every reader's bytes, in reader order, for this one's (default: every process's,
    processes.gathered_bytes); `index` and `count`: this reader's place among them and their
    number (default: the process's, and the processes')."""

    def __init__(self, gathered: Callable[[bytes], list[bytes]] = processes.gathered_bytes,
                 index: int | None = None, count: int | None = None):
        self.gathered = gathered
        self.index = jax.process_index() if index is None else index
        self.count = jax.process_count() if count is None else count
        self.done = 0  # exchanges made

    def words(self, dictionary: Dictionary, num_docs: int) -> SharedWords:
        """Every process's words merged, in process order, as a reader merges its workers'
        (text_words.Words), and every process's documents (build_corpus's shared_words)."""
        arrays = (dictionary.keys.astype("<u8"), dictionary.strings.offsets.astype("<i8"),
                  dictionary.strings.data, dictionary.counts.astype("<i8"),
                  dictionary.doc_freq.astype("<i8"))
        sizes = np.array([num_docs, *(array.size for array in arrays)], "<i8")
        words, places, docs = Words(), None, 0
        for process, message in enumerate(self._exchanged(
                b"".join([sizes.tobytes(), *(array.tobytes() for array in arrays)]))):
            process_docs, *counts = np.frombuffer(message, "<i8", sizes.size).tolist()
            at, fields = sizes.nbytes, []
            for array, count in zip(arrays, counts):
                fields.append(np.frombuffer(message, array.dtype, count, at))
                at += fields[-1].nbytes
            keys, offsets, data, word_counts, doc_freq = fields
            numbers = words.add([Dictionary(keys.copy(), Strings(data, offsets), word_counts,
                                            doc_freq)])[0]
            docs += process_docs
            if process == self.index:
                places = numbers
        return SharedWords(words, places, docs)

    def share(self, built: TextCorpus) -> CorpusShare:
        """This process's share of the corpus, with the whole corpus's outline from every
        process's documents (their lengths, ids, dropped and invalid documents); the
        documents have ids when every process holding documents names them."""
        share = built.corpus
        names = share.doc_names
        header = np.array([share.num_docs, share.dropped_empty_docs, built.invalid_utf8_docs,
                           names is not None], "<i8")
        data = b"".join([header.tobytes(), share.doc_lengths().astype("<i8").tobytes(),
                         "\n".join(names.tolist() if names is not None else []).encode(
                             "utf-8", "surrogateescape")])
        lengths, doc_names, dropped, invalid, first = [], [], 0, 0, 0
        for process, message in enumerate(self._exchanged(data)):
            docs, process_dropped, process_invalid, named = np.frombuffer(message, "<i8", 4)
            lengths.append(np.frombuffer(message, "<i8", docs, 32))
            text = message[32 + 8 * docs:].decode("utf-8", "surrogateescape")
            if docs:  # a process without documents (its share within a line) names none
                doc_names.append(text.split("\n") if named else None)
            dropped += int(process_dropped)
            invalid += int(process_invalid)
            if process < self.index:
                first += int(lengths[-1].sum())
        return CorpusShare(offsets_from_lengths(np.concatenate(lengths)), share.vocab,
                           None if any(part is None for part in doc_names)
                           else list(itertools.chain(*doc_names)),
                           np.asarray(share.word_ids), first, dropped, invalid)

    def fail(self, error: Exception) -> None:
        """Take part in the exchanges still to come with `error` in place of this process's
        data, so that the others stop with it too."""
        if self.done < 2:
            kind = _FORMAT_ERROR if isinstance(error, CorpusFormatError) else _OTHER_ERROR
            self.gathered(kind + str(error).encode("utf-8", "replace"))
            self.done = 2

    def _exchanged(self, data: bytes) -> list[bytes]:
        """Every process's data; the first error a process sent in its place raised here."""
        messages = self.gathered(_DATA + data)
        self.done += 1
        for process, message in enumerate(messages):
            if message[:1] != _DATA:
                self.done = 2  # every process stops here: no exchange follows
            if message[:1] == _FORMAT_ERROR:
                raise CorpusFormatError(message[1:].decode())
            if message[:1] == _OTHER_ERROR:
                raise RuntimeError(f"process {process} could not read its share of the "
                                   f"input: {message[1:].decode()}")
        return [message[1:] for message in messages]
