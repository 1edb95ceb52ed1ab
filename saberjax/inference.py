"""Topic proportions of new documents with the topics fixed ("fold-in"), by EM on the device.

With B-hat (the model's topic_word) fixed, each document's theta_d is fitted by EM,

    theta_dk  <-  (n_dk + alpha_k) / (n_d + sum_k alpha_k),
    n_dk       =  sum over words v of d:  count_dv * theta_dk B-hat_vk / sum_j theta_dj B-hat_vj,

from the uniform theta, for a fixed number of rounds; the result is the final EM estimate.
EM rather than ESCA sampling: it is deterministic by construction (no seed), needs no burn-in
or averaging of noisy samples, is what `evaluate` scores with, and each round streams the
documents' B-hat rows twice, O(word slots x K) of coalesced reads, which a GPU does at memory
bandwidth (the sparse sampler's O(tokens x nnz) random reads win only when K is far larger
than a document's length).

B-hat is read as a table of rows, one per word, indexed by the slots' words: for a dense model
the whole V x K table, put on each device once; for a sparse model (model.is_sparse) the rows
of a batch's distinct words alone, formed on the device from their nonzeros (BatchWordRows),
so no K x V exists anywhere; the values, and so the results, are the same.

Layout: each document is a list of (word, count) slots, consecutive equal tokens merged into
one slot (a count matrix gives its nonzeros directly), laid out in rows of one width chosen
per run (row_width: a power of two fitted to the documents' lengths), a long document over
several consecutive rows.  A round sums each row's slots, then each document's rows by a
segmented scan (document_totals: a fixed order of additions, so results never vary from run
to run).  Batches hold whole documents in a fixed number of rows, so a run compiles one
program, and batches go round-robin to the devices.  A document's result depends only on it
and the row width: the batching and the width change it by float rounding at most (about
1e-7), the device count not at all.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from collections.abc import Iterator
from typing import Protocol

import jax
import jax.numpy as jnp
import numpy as np

from saberjax import compilation, esca, rng, text
from saberjax.config import DEFAULT_EM_ITERATIONS, Hyperparams
from saberjax.corpus import (Corpus, align_vocabulary, corpus_in_vocabulary, count_matrix_entries,
                             detect_format, from_count_matrix, load_corpus)
from saberjax.corpus import text_sources
from saberjax.corpus.columnar_sources import is_document_column
from saberjax.corpus.plain_text import text_in_vocabulary, tokenizing_rules
from saberjax.execution import memory
from saberjax.layout import build_layout
from saberjax.seeding import SeedPrior
from saberjax.segmented_count import store_distinct
from saberjax.state import check_document_lengths, needs_wide_pairs, unpack_pairs


class ModelTopics(Protocol):
    """What inference reads of a model: saberjax.model.TopicModel's fields (a protocol, as
    model imports this module)."""

    topic_word: np.ndarray  # float32 [K, V]
    is_sparse: bool  # whether B is held by its nonzeros: read it by word, never as K x V
    alpha: np.ndarray  # float [K]
    beta: float
    seed_prior: SeedPrior | None  # the seed words' topic-word prior (saberjax.seeding)
    vocab: tuple[str, ...]
    has_words: bool  # whether vocab holds words, not the placeholders of unnamed columns
    num_topics: int
    num_words: int

    bhat_floor: np.ndarray  # float32 [K]: B-hat where B is 0

    def bhat_entries(self, words) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    def word_topic_rows(self, words) -> np.ndarray: ...  # int32 [len(words), K]


# Upper bound on word slots x topics held at once in a batch (floats), whatever K is.
BATCH_ELEMENTS = 1 << 26
MIN_WIDTH, MAX_WIDTH = 8, 1024  # row widths a run chooses from (row_width)
ROW_COST = 8  # slots a row's own work is worth, in row_width's choice


@dataclasses.dataclass(frozen=True)
class DocumentWords:
    """Documents as (word, count) slots, CSR: document d owns slots offsets[d]:offsets[d + 1]."""

    offsets: np.ndarray  # int64 [D + 1]
    words: np.ndarray  # int32 [slots]
    counts: np.ndarray  # float32 [slots]

    @classmethod
    def from_corpus(cls, corpus: Corpus) -> DocumentWords:
        """One slot per run of equal consecutive tokens of a document.

        Costs one pass, no sort: corpora read from count files list a document's copies of a
        word together, so runs are its distinct words there, and elsewhere a word split over
        several slots gives the same EM result.
        """
        tokens = corpus.word_ids
        run_start = np.ones(tokens.size, bool)
        np.not_equal(tokens[1:], tokens[:-1], out=run_start[1:])
        run_start[corpus.doc_offsets[:-1][corpus.doc_lengths() > 0]] = True
        starts = np.flatnonzero(run_start)
        counts = np.diff(starts, append=tokens.size).astype(np.float32)
        return cls(np.searchsorted(starts, corpus.doc_offsets), tokens[starts], counts)

    @classmethod
    def from_matrix(cls, matrix) -> DocumentWords:
        """The nonzeros of a documents x words matrix (dense or scipy.sparse); rows stay rows."""
        doc, words, counts, (num_docs, _) = count_matrix_entries(matrix)
        offsets = np.append(0, np.cumsum(np.bincount(doc, minlength=num_docs)))
        counts = np.asarray(counts, np.float32)
        if not np.all(np.isfinite(counts) & (counts >= 0)):
            raise ValueError("count matrix entries must be finite and non-negative")
        return cls(np.asarray(offsets, np.int64), np.asarray(words, np.int32), counts)

    @property
    def num_docs(self) -> int:
        return self.offsets.size - 1

    def lengths(self) -> np.ndarray:
        """Slots per document."""
        return np.diff(self.offsets)

    def padded(self, batch: Batch) -> tuple[np.ndarray, np.ndarray]:
        """(words int32, counts float32) [rows, width] of the batch's documents: each
        document's slots fill its rows in order, padding slots have count 0."""
        rows, width = batch.shape
        lengths = self.offsets[batch.docs + 1] - self.offsets[batch.docs]
        owner = np.repeat(np.arange(batch.docs.size), lengths)  # batch document of each slot
        within = np.arange(owner.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        target = batch.first_row[owner].astype(np.int64) * width + within
        source = np.repeat(self.offsets[batch.docs], lengths) + within
        words = np.zeros(rows * width, np.int32)
        counts = np.zeros(rows * width, np.float32)
        words[target], counts[target] = self.words[source], self.counts[source]
        return words.reshape(rows, width), counts.reshape(rows, width)


def row_width(lengths: np.ndarray) -> int:
    """The one row width of a run over documents of `lengths` slots: the power of two from
    MIN_WIDTH to MAX_WIDTH that costs the fewest padded slots, a row counted ROW_COST slots
    more (a row's own work: its theta and its share of the segmented sums)."""
    lengths = lengths[lengths > 0]
    widths = MIN_WIDTH << np.arange((MAX_WIDTH // MIN_WIDTH).bit_length())
    costs = [np.sum(-(-lengths // width)) * (width + ROW_COST) for width in widths]
    return int(widths[np.argmin(costs)])


@dataclasses.dataclass(frozen=True)
class Batch:
    """Documents laid out in rows of one width, each document in consecutive rows."""

    docs: np.ndarray  # int64 [n] documents of the batch, in row order
    first_row: np.ndarray  # int64 [n] each document's first row
    row_start: np.ndarray  # bool [rows]: the row starts a document (padding rows: each one)
    row_end: np.ndarray  # int32 [rows]: the last row of the row's document
    shape: tuple[int, int]  # (rows, width)


def plan_batches(lengths: np.ndarray, batch_slots: int, width: int) -> Iterator[Batch]:
    """Batches of one shape holding the documents with lengths > 0, in order: as many rows
    of `width` as fit batch_slots, or as one document needs, or, when all documents fit in
    fewer, their rows rounded up to a power of two, so a run compiles one program."""
    docs = np.flatnonzero(lengths > 0)
    doc_rows = -(-lengths[docs] // width)
    ends = np.cumsum(doc_rows)
    total = int(ends[-1]) if docs.size else 0
    rows = max(batch_slots // width, int(doc_rows.max(initial=1)))
    rows = min(rows, 1 << max(total - 1, 0).bit_length())
    first = 0
    while first < docs.size:
        done = int(ends[first - 1]) if first else 0
        last = int(np.searchsorted(ends, done + rows, side="right"))
        first_row = ends[first:last] - doc_rows[first:last] - done
        row_start = np.ones(rows, bool)
        row_start[: int(ends[last - 1]) - done] = False
        row_start[first_row] = True
        row_end = np.arange(rows, dtype=np.int32)
        row_end[: int(ends[last - 1]) - done] = np.repeat(
            ends[first:last] - done - 1, doc_rows[first:last]).astype(np.int32)
        yield Batch(docs[first:last], first_row, row_start, row_end, (rows, width))
        first = last


def document_totals(values, row_start, row_end):
    """Each row's document's total of `values` [rows, ...] over the document's rows: a
    segmented scan (a fixed order of additions, so results never vary run to run) read at
    the document's last row."""
    def add_unless_started(earlier, later):
        (earlier_sum, earlier_started), (later_sum, later_started) = earlier, later
        started = later_started.reshape(later_started.shape + (1,) * (later_sum.ndim - 1))
        return (jnp.where(started, later_sum, earlier_sum + later_sum),
                earlier_started | later_started)

    sums, _ = jax.lax.associative_scan(add_unless_started, (values, row_start))
    return sums[row_end]


def em_fold_in(topics_of_word, words, counts, row_start, row_end, alpha, iterations: int):
    """theta [rows, K] fitted by `iterations` EM rounds to the documents of a batch's rows of
    (word, count) slots, every row of a document holding its theta (traced inside the
    program that calls it; `fold_in` is it compiled as a program of its own).

    topics_of_word: B-hat [V, K]; words, counts: [rows, width], padding slots have count 0
    (a document without counts keeps the uniform theta); row_start, row_end: the rows'
    documents (Batch); alpha: the prior, [K] or one number for every topic.
    """
    num_topics = topics_of_word.shape[1]
    phi = topics_of_word[words]  # [rows, width, K]
    alpha = jnp.broadcast_to(jnp.asarray(alpha, jnp.float32), (num_topics,))
    normaliser = (document_totals(jnp.sum(counts, axis=1), row_start, row_end)[:, None]
                  + jnp.sum(alpha))

    def em_round(_, theta):
        mixture = jnp.sum(phi * theta[:, None, :], axis=2)
        weight = counts / jnp.maximum(mixture, 1e-30)
        expected = theta * document_totals(jnp.sum(phi * weight[:, :, None], axis=1),
                                           row_start, row_end)
        return (expected + alpha) / normaliser

    uniform = jnp.full((words.shape[0], num_topics), 1.0 / num_topics, jnp.float32)
    theta = jax.lax.fori_loop(0, iterations, em_round, uniform)
    return theta / jnp.sum(theta, axis=1, keepdims=True)  # rows sum to 1 to float precision


fold_in = compilation.jit(em_fold_in, static_argnames="iterations")


METHODS = ("em", "esca")


def infer_topics(model: ModelTopics, documents, iterations: int = DEFAULT_EM_ITERATIONS,
                 batch_slots: int | None = None, num_devices: int = 0, method: str = "em",
                 seed: int = 0) -> np.ndarray:
    """Topic proportions theta [D, K] (float32, rows sum to 1) of new documents.

    documents: a Corpus (its words matched to the model's by string; unknown words are dropped),
    a list of document strings (tokenised by saberjax.text's rules against the model's
    vocabulary, unknown words counted in a warning; in_model_vocabulary) or a documents x
    words count matrix, dense or scipy.sparse, whose columns are the model's vocabulary.
    Documents without (known) words get the prior mean, the uniform theta.
    method "em" (default): EM fold-in, see the module docstring; batch_slots: padded word
    slots per batch (default: BATCH_ELEMENTS // K); num_devices: local devices to spread
    batches over (0: all).  Neither changes the result.  method "esca": ESCA iterations with
    the topics fixed (`sample_topics`), keyed by `seed`.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method == "esca":
        return sample_topics(model, documents, iterations, seed)
    documents = in_model_vocabulary(model, documents)
    slots = (DocumentWords.from_corpus(documents) if isinstance(documents, Corpus)
             else DocumentWords.from_matrix(documents))
    return _fold_in_batches(model, slots, iterations, batch_slots, num_devices)


def in_model_vocabulary(model: ModelTopics, documents):
    """New documents over the model's words: a Corpus re-expressed in its vocabulary (words
    matched by string), document strings tokenised against it (corpus_in_vocabulary: words
    it lacks are skipped and counted in a warning), or a count matrix as it is, once its
    columns are checked to be the model's words.  Matching words needs a model that has
    them (check_has_words)."""
    if isinstance(documents, str):
        raise TypeError("documents is one string; pass a list of document strings")
    if isinstance(documents, Corpus):
        if documents.vocab != model.vocab:
            check_has_words(model, f"{documents.name or 'the corpus'}'s words")
        return align_vocabulary(documents, model.vocab)
    if is_text_documents(documents):
        check_has_words(model, "text")
        return corpus_in_vocabulary(documents, model.vocab, source="documents",
                                    rules=model_text_rules(model))
    if np.shape(documents)[1:] != (model.num_words,):
        raise ValueError(f"count matrix has shape {np.shape(documents)}, but its columns "
                         f"must be the model's {model.num_words} words; pass a Corpus or "
                         f"document strings to match words by string")
    return documents


def load_in_vocabulary(path, vocab, format: str = "auto", load=load_corpus,
                       rules: text.TextRules = text.DEFAULT_RULES, **reading) -> Corpus:
    """The documents at `path` over a vocabulary fixed by training (a model's, or the
    training corpus's for its test documents): raw text (text_sources.FORMATS, `reading`
    naming the fields of records) tokenised against it under the training's tokenising
    `rules` (plain_text.text_in_vocabulary: no document-frequency rule, since the vocabulary
    is already chosen, and a document without a known word stays, empty), any other format
    read by load(path, format) and its words matched by string (align_vocabulary)."""
    chosen = detect_format(path) if format == "auto" else format
    if chosen in text_sources.FORMATS:
        return text_in_vocabulary(path, vocab, rules, chosen, **reading)
    return align_vocabulary(load(path, chosen, **reading), vocab)


def load_in_model_vocabulary(model: ModelTopics, path, format: str = "auto",
                             load=load_corpus, **reading) -> Corpus:
    """The documents at `path` over the model's words (load_in_vocabulary), for a model that
    has words to match them by (check_has_words)."""
    check_has_words(model, str(path))
    return load_in_vocabulary(path, model.vocab, format, load, model_text_rules(model),
                              **reading)


def model_text_rules(model: ModelTopics) -> text.TextRules:
    """The tokenising rules of the text a model was trained on (its recorded text_options;
    the defaults for a model that has none): how it reads new text."""
    options = (getattr(model, "config", None) or {}).get("text_options") or {}
    return tokenizing_rules(options)


def check_has_words(model: ModelTopics, matched: str) -> None:
    """ValueError, saying how to give the words, when `matched` (documents to be matched to the
    model by their words) meets a model without words: one fitted on a count matrix whose
    columns were not named, which knows its words only as column numbers."""
    if not model.has_words:
        raise ValueError(f"{matched} cannot be matched to a model without words: it was fitted on "
                         f"a count matrix whose {model.num_words:,} columns were not named (its "
                         f"vocabulary is w0, w1, ...); fit it with vocabulary= the words or the "
                         f"fitted CountVectorizer")


def is_text_documents(documents) -> bool:
    """Whether documents are raw strings (text_sources.is_document_column: a list or tuple
    holding strings, a 1-D array of strings or objects, an Arrow, pandas or datasets column)."""
    return is_document_column(documents)


def _check_device_room(what: str, needed: int, device) -> None:
    """MemoryError naming the GB needed when the device says it has less free, before
    anything is allocated."""
    free = memory.free_device_memory(device)
    if free is not None and needed > free:
        raise MemoryError(f"{what} of this model needs {needed / 1e9:.1f} GB on the device, "
                          f"{free / 1e9:.1f} GB are free; use a device with more memory")


@dataclasses.dataclass(frozen=True)
class BatchWordRows:
    """B-hat rows of a sparse model's batch, as the device forms them: the batch's distinct
    words' nonzero cells (model.bhat_entries), set over rows of model.bhat_floor.
    The host sends the nonzeros, not K values a word; the table has a fixed number of rows
    and the entries a power-of-two length (padding entries point past the table and are
    dropped), so a run compiles few programs. The batch's words are renumbered to index it."""

    rows: np.ndarray  # int32 [entries]: the entry's table row (table_rows: padding)
    topics: np.ndarray  # int32 [entries]
    values: np.ndarray  # float32 [entries]
    words: tuple[np.ndarray, ...]  # each word array given, as row numbers of the table
    table_rows: int

    @classmethod
    def of(cls, model: ModelTopics, table_rows: int, *words: np.ndarray) -> BatchWordRows:
        """The rows of the distinct words of `words` (arrays of word ids, any shapes), at most
        table_rows of them."""
        distinct, inverse = np.unique(np.concatenate([w.ravel() for w in words]),
                                      return_inverse=True)
        entries = model.bhat_entries(distinct)
        size = 1 << max(entries[0].size - 1, 0).bit_length()

        def padded(array, dtype, fill):
            out = np.full(size, fill, dtype)
            out[: array.size] = array
            return out

        local = np.split(inverse.astype(np.int32), np.cumsum([w.size for w in words])[:-1])
        return cls(*(padded(array, dtype, fill) for array, dtype, fill in zip(
                       entries, (np.int32, np.int32, np.float32), (table_rows, 0, 0))),
                   tuple(part.reshape(w.shape) for part, w in zip(local, words)), table_rows)

    def table(self, floor: jax.Array, device) -> jax.Array:
        """float32 [table_rows, K] on `device`: B-hat's rows of the batch's words (floor, the
        model's bhat_floor, already there), then padding rows."""
        entries = jax.device_put((self.rows, self.topics, self.values), device)
        return _word_rows_table(floor, *entries, table_rows=self.table_rows)


@functools.partial(compilation.jit, static_argnames="table_rows")
def _word_rows_table(floor, rows, topics, values, table_rows: int):
    """[table_rows, K]: floor in every row, values set at (rows, topics) (distinct cells, a
    store of unique indices: segmented_count.store_distinct); rows past the table (padding)
    are dropped."""
    table = jnp.broadcast_to(floor, (table_rows, floor.shape[0]))
    return store_distinct(table, rows, rows < table_rows, values, topics)


def _fold_in_batches(model: ModelTopics, documents: DocumentWords, iterations: int,
                     batch_slots: int | None, num_devices: int) -> np.ndarray:
    """theta [D, K] of `documents` under the model's topics, batches spread over devices
    with one batch per device queued while the host pads the next (and, for a sparse model,
    forms its words' rows: BatchWordRows)."""
    num_topics = model.num_topics
    devices = jax.local_devices()[: num_devices or None]
    lengths = documents.lengths()
    batch_slots = batch_slots or max(1, BATCH_ELEMENTS // num_topics)
    table_bytes = 4 * num_topics * (batch_slots if model.is_sparse else model.num_words)
    _check_device_room("EM fold-in", table_bytes + BATCH_ELEMENTS * 8, devices[0])
    if model.is_sparse:
        floors = [jax.device_put(model.bhat_floor, device) for device in devices]
    else:
        replicas = [jax.device_put(np.ascontiguousarray(model.topic_word.T, np.float32), device)
                    for device in devices]
    alphas = [jax.device_put(np.asarray(model.alpha, np.float32), device) for device in devices]
    theta = np.full((documents.num_docs, num_topics), 1.0 / num_topics, np.float32)
    in_flight = collections.deque()  # (batch, theta of its rows on its device)
    for index, batch in enumerate(plan_batches(lengths, batch_slots, row_width(lengths))):
        device = index % len(devices)
        words, counts = documents.padded(batch)
        if model.is_sparse:
            gathered = BatchWordRows.of(model, words.size, words)
            table, words = gathered.table(floors[device], devices[device]), gathered.words[0]
        else:
            table = replicas[device]
        arrays = jax.device_put((words, counts, batch.row_start, batch.row_end), devices[device])
        in_flight.append((batch, fold_in(table, *arrays, alphas[device], iterations)))
        if len(in_flight) > len(devices):
            done, result = in_flight.popleft()
            theta[done.docs] = np.asarray(result)[done.first_row]
    for done, result in in_flight:
        theta[done.docs] = np.asarray(result)[done.first_row]
    return theta


def sample_topics(model: ModelTopics, documents, iterations: int = DEFAULT_EM_ITERATIONS,
                  seed: int = 0, backend: str = "auto") -> np.ndarray:
    """theta [D, K] by ESCA fold-in: the training sampler with B-hat fixed.

    Every token of the new documents starts from a random topic and is resampled from
    (A_dk + alpha_k) B-hat_vk for `iterations` rounds (counter-based random numbers keyed by
    seed, round and token, so the result is reproducible and independent of chunking); theta
    is (A_dk + alpha_k) / (n_d + sum_k alpha_k) averaged over the second half of the rounds.
    """
    documents = in_model_vocabulary(model, documents)
    corpus = (documents if isinstance(documents, Corpus)
              else from_count_matrix(documents, model.vocab, keep_empty=True))
    if corpus.num_tokens == 0:
        return np.full((corpus.num_docs, model.num_topics), 1.0 / model.num_topics, np.float32)
    hyper = dataclasses.replace(
        Hyperparams.create(model.num_topics, alpha=float(np.mean(model.alpha)), beta=model.beta,
                           backend=backend), seeds=model.seed_prior,
        wide_pairs=needs_wide_pairs(corpus.doc_lengths().max(initial=0), model.num_topics))
    alpha = np.zeros(hyper.padded_topics, np.float32)
    alpha[: model.num_topics] = model.alpha
    check_document_lengths(corpus.doc_lengths())
    _check_device_room("ESCA fold-in", memory.model_bytes(model.num_words,
                                                          hyper.padded_topics),
                       jax.local_devices()[0])
    counts = np.zeros((model.num_words, hyper.padded_topics), np.int32)
    counts[:, : model.num_topics] = model.word_topic_rows(np.arange(model.num_words))
    topics_fixed = _esca_model(counts, alpha, hyper=hyper)
    theta_sum = np.zeros((corpus.num_docs, model.num_topics), np.float32)
    layout = build_layout(corpus)
    chunks = jax.device_put(layout.chunks)
    chunk_states = _esca_init(chunks, model.num_words, hyper, seed).chunks
    for round_ in range(1, iterations + 1):
        chunk_states = tuple(_esca_round(chunk, chunk_state, topics_fixed, seed, round_,
                                         hyper=hyper)
                             for chunk, chunk_state in zip(chunks, chunk_states))
        if round_ > iterations // 2:  # averaged over the second half of the rounds
            for chunk, chunk_state, (first, last) in zip(chunks, chunk_states, layout.chunk_docs):
                _add_doc_topic(theta_sum[first:last], chunk, chunk_state)
    averaged = iterations - iterations // 2
    lengths = corpus.doc_lengths()[:, None]
    theta = (theta_sum / averaged + model.alpha) / (lengths + np.sum(model.alpha))
    return (theta / theta.sum(axis=1, keepdims=True)).astype(np.float32)



@functools.partial(compilation.jit, static_argnames="hyper")
def _esca_round(chunk, chunk_state, topics_fixed, seed, round_, hyper):
    """A chunk's state after ESCA fold-in round `round_` (esca.resample_chunk, keyed as
    training keys its iterations)."""
    return esca.resample_chunk(chunk, chunk_state, topics_fixed,
                               rng.iteration_key(seed, round_), hyper)


# the ESCA fold-in's other steps, each compiled as a program of its own (esca's jitted steps
# are traced inside the training programs, so they take no compiler options themselves)
_esca_model = compilation.jit(esca.model_from_counts, static_argnames="hyper")
_esca_init = compilation.jit(esca.init, static_argnames=("num_words", "hyper"))
def _add_doc_topic(doc_topic: np.ndarray, chunk, chunk_state) -> None:
    """Add the chunk's sparse A (its documents' (topic, count) pairs) into doc_topic [D, K]."""
    num_docs = doc_topic.shape[0]
    starts = np.asarray(chunk.doc_start)[:num_docs]
    nnz = np.asarray(chunk_state.a_nnz)[:num_docs]
    docs = np.repeat(np.arange(num_docs), nnz)
    slots = np.repeat(starts, nnz) + (np.arange(nnz.sum()) - np.repeat(np.cumsum(nnz) - nnz, nnz))
    topics, counts = map(np.asarray, unpack_pairs(np.asarray(chunk_state.a_pairs)[slots],
                                                  doc_topic.shape[1]))
    # (document, topic) pairs are distinct, so a plain indexed add is exact
    doc_topic[docs, topics] += counts
