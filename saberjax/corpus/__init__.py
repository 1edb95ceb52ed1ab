"""Corpus I/O: the token layout the trainer consumes, its loaders, the native format and splits.

A :class:`Corpus` is a CSR-like token stream: ``doc_offsets`` (int64, D+1) delimits each
document's slice of ``word_ids`` (int32, T). Text loaders and :func:`from_count_matrix` drop
documents without tokens (with a warning and ``Corpus.dropped_empty_docs``); :func:`load_native`
restores a corpus exactly, empty documents included.

One module per concern; every public name is importable from here:

- ``core``: the Corpus (and CorpusPart, a process's part of its fingerprint and word counts),
  its builders :func:`from_entries` and :func:`from_doc_runs`,
  :func:`align_vocabulary`, CorpusFormatError and MAX_COUNT;
- ``reading``: files read in blocks (gunzipped when gzipped) and vocabulary files;
- ``parsing``: the parser of text bodies that UCI and LDA-C share (pieces of whole lines on a
  thread per core, whole-array passes, errors naming the file and line);
- ``uci``, ``ldac``: the two text formats of counts;
- ``matrix``: documents x words count matrices (dense or scipy.sparse);
- ``tokenizing``, ``text_corpus``, ``plain_text``: raw text under saberjax.text's rules (blocks
  of documents tokenised on every core, counted, written out of core), ``key_tables`` the
  numpy hash tables numbering their words;
- ``native``: the memory-mapped native format (save_native, load_native, NativeCorpusWriter);
- ``formats``: FORMATS, format detection, load_corpus, source_files, convert_to_native;
- ``splits``: train_test_split and split_document_halves;
- ``bundled``: the corpora shipped in ``saberjax.data``;
- ``cache``: native copies of corpora read from text formats (not imported here: it defines
  the launchers' flags and a load_corpus of its own; import ``saberjax.corpus.cache``).
"""

from saberjax.corpus.bundled import bundled_corpus_path, load_bundled
from saberjax.corpus.formats import (
    FORMATS,
    convert_to_native,
    detect_format,
    load_corpus,
    source_files,
)
from saberjax.corpus.ldac import load_ldac
from saberjax.corpus.matrix import count_matrix_entries, from_count_matrix
from saberjax.corpus.native import NativeCorpusWriter, load_native, save_native
from saberjax.corpus.plain_text import (
    corpus_from_documents,
    corpus_in_vocabulary,
    load_text,
    tokens_in_vocabulary,
)
from saberjax.corpus.splits import split_document_halves, train_test_split
from saberjax.corpus.core import (
    MAX_COUNT,
    WORD_COUNT_BLOCK,
    Corpus,
    CorpusPart,
    align_vocabulary,
    from_doc_runs,
    from_entries,
)
from saberjax.corpus.uci import load_uci
from saberjax.errors import CorpusFormatError

__all__ = [
    "FORMATS",
    "MAX_COUNT",
    "WORD_COUNT_BLOCK",
    "Corpus",
    "CorpusFormatError",
    "CorpusPart",
    "NativeCorpusWriter",
    "align_vocabulary",
    "bundled_corpus_path",
    "convert_to_native",
    "corpus_from_documents",
    "corpus_in_vocabulary",
    "count_matrix_entries",
    "detect_format",
    "from_count_matrix",
    "from_doc_runs",
    "from_entries",
    "load_bundled",
    "load_corpus",
    "load_ldac",
    "load_native",
    "load_text",
    "load_uci",
    "save_native",
    "source_files",
    "split_document_halves",
    "tokens_in_vocabulary",
    "train_test_split",
]
