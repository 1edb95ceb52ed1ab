"""Held-out log-likelihood by document completion (Wallach et al. 2009), batched and vectorised.

Each test document is split into an observed and a held-out half (corpus.split_document_halves).
With the topics B-hat fixed, theta_d is fitted to the observed half by the EM fold-in of
`inference` (`em_iterations` rounds from the uniform theta, 50 by default, as in the reference
measurements in BASELINES.md), and the held-out half is scored by log sum_k theta_dk B-hat_vk
per token.  Both halves of a document share its rows (inference.Batch: one row width and
batch shape per run), so fitting and scoring every batch is one compiled function and theta
never leaves the device.  A sparse model (model.is_sparse) is scored the same way over each
batch's words' B-hat rows (inference.BatchWordRows) instead of the whole topic_word.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from saberjax import compilation, timing
from saberjax.background import in_background
from saberjax.coherence import recorded_split
from saberjax.config import DEFAULT_EM_ITERATIONS
from saberjax.corpus import Corpus, load_corpus, plain_text
from saberjax.inference import (Batch, BatchWordRows, DocumentWords, ModelTopics, em_fold_in,
                                load_in_model_vocabulary, load_in_vocabulary, model_text_rules,
                                plan_batches, row_width)

# Upper bound on word slots x topics held at once in a batch (floats); smaller than inference's
# because evaluation runs beside the training state.
BATCH_ELEMENTS = 1 << 24
# Slots of the batches padded at once on the host (their temporaries: about 40 bytes a slot).
PADDING_SLOTS = 1 << 22


@dataclasses.dataclass(frozen=True)
class HeldOutScore:
    loglik_per_token: float
    perplexity: float
    tokens: int
    documents: int


def _batch_loglik(topic_word, observed_words, observed_counts, heldout_words, heldout_counts,
                  row_start, row_end, alpha, em_iterations: int):
    """Sum of held-out log-likelihoods of one batch of rows (padding has count 0) under topics
    topic_word [K, V]."""
    topics_of_word = topic_word.T
    theta = em_fold_in(topics_of_word, observed_words, observed_counts, row_start, row_end,
                       alpha, em_iterations)
    mixture = jnp.sum(topics_of_word[heldout_words] * theta[:, None, :], axis=2)
    return jnp.sum(heldout_counts * jnp.log(jnp.maximum(mixture, 1e-30)))


def check_scorable(observed: Corpus, heldout: Corpus) -> None:
    """ValueError unless the (observed, held-out) halves are of the same documents and the
    held-out half has a token: scoring none would read as a perfect 0.0 (perplexity 1)."""
    if observed.num_docs != heldout.num_docs:
        raise ValueError("observed and held-out halves must hold the same documents")
    if heldout.num_tokens == 0:
        raise ValueError(f"{heldout.name or 'the test documents'}: no held-out token to score "
                         f"({heldout.num_docs} documents, none with 2 tokens or more)")


def _scoring_mesh(sharding) -> Mesh:
    """The devices that score: the mesh of a one-axis NamedSharding (the trainer's), else the
    sharding's devices (None: the default device) as a mesh of their own."""
    if isinstance(sharding, NamedSharding) and len(sharding.mesh.axis_names) == 1:
        return sharding.mesh
    devices = [jax.devices()[0]] if sharding is None else sorted(sharding.device_set,
                                                                key=lambda device: device.id)
    return Mesh(np.array(devices), ("batches",))


class _Batches(NamedTuple):
    """Every batch of a scorer's documents, stacked: [batches, rows, width] slots of both
    halves and [batches, rows] of the rows' documents (inference.Batch); `count` real
    batches, then empty ones up to a multiple of the scoring devices."""

    observed_words: np.ndarray
    observed_counts: np.ndarray
    heldout_words: np.ndarray
    heldout_counts: np.ndarray
    row_start: np.ndarray
    row_end: np.ndarray
    count: int


def _stacked_batches(observed: DocumentWords, heldout: DocumentWords, batch_slots: int,
                     multiple: int) -> _Batches:
    """The batches of plan_batches over both halves' slots, padded a group of batches at a
    time (laid end to end as the rows of one batch, about PADDING_SLOTS slots: one pass each,
    temporaries of a group's size)."""
    lengths = np.maximum(observed.lengths(), heldout.lengths())
    batches = list(plan_batches(lengths, batch_slots, row_width(lengths)))
    rows, width = batches[0].shape
    count = -(-len(batches) // multiple) * multiple
    stacked = [np.zeros((count, rows, width), dtype) for _ in (observed, heldout)
               for dtype in (np.int32, np.float32)]  # empty batches: no slots
    row_start = np.ones((count, rows), bool)  # and every row a document of its own
    row_end = np.tile(np.arange(rows, dtype=np.int32), (count, 1))
    group = max(1, PADDING_SLOTS // (rows * width))
    for first in range(0, len(batches), group):
        part = batches[first:first + group]
        whole = Batch(np.concatenate([batch.docs for batch in part]),
                      np.concatenate([batch.first_row + index * rows
                                      for index, batch in enumerate(part)]),
                      None, None, (len(part) * rows, width))
        padded = [array for words in (observed, heldout) for array in words.padded(whole)]
        for target, array in zip(stacked, padded):
            target[first:first + len(part)] = array.reshape(len(part), rows, width)
        for index, batch in enumerate(part, first):
            row_start[index], row_end[index] = batch.row_start, batch.row_end
    return _Batches(*stacked, row_start, row_end, len(batches))


def _scoring_program(mesh: Mesh, em_iterations: int):
    """score(topic_word, alpha, *batches) -> the held-out log-likelihood of every batch
    (float32 [batches], whole on every device): each device of the mesh scores its
    consecutive share of the batches one after the other (_batch_loglik each), so that all
    batches are one call, with no wait on the host between them."""
    axis = mesh.axis_names[0]

    def one_device(topic_word, alpha, *batches):
        sums = jax.lax.map(lambda batch: _batch_loglik(topic_word, *batch, alpha,
                                                       em_iterations), batches)
        return jax.lax.all_gather(sums, axis, tiled=True)

    spec = PartitionSpec(axis)
    return compilation.jit(jax.shard_map(one_device, mesh=mesh,
                                         in_specs=(PartitionSpec(), PartitionSpec(), *[spec] * 6),
                                         out_specs=PartitionSpec(), check_vma=False))


class HeldoutScorer:
    """Document completion of fixed (observed, held-out) halves, for topics of one shape and
    layout scored any number of times.

    A thread started by the constructor pads the batches' rows on the host and compiles the
    program: a trainer makes its scorer before it trains, and both are ready by the first
    evaluation.  topic_word_sharding: where the topics scored will live (a
    jax.sharding.Sharding; None: the default device).  The batches go onto the devices of its
    mesh, each device its consecutive share, and one call scores them all
    (_scoring_program).  num_words None: the scorer of a sparse model (score_model), whose
    program scores a batch a call over that batch's words' columns alone.
    """

    def __init__(self, observed: Corpus, heldout: Corpus, num_topics: int,
                 num_words: int | None, em_iterations: int = DEFAULT_EM_ITERATIONS,
                 topic_word_sharding=None):
        check_scorable(observed, heldout)
        self.tokens, self.documents = heldout.num_tokens, heldout.num_docs
        mesh = _scoring_mesh(topic_word_sharding)
        self._whole = NamedSharding(mesh, PartitionSpec())
        self._prepared = in_background(self._prepare, observed, heldout, num_topics, num_words,
                                       mesh, em_iterations, name="saberjax-scorer")

    def _prepare(self, observed: Corpus, heldout: Corpus, num_topics: int,
                 num_words: int | None, mesh: Mesh, em_iterations: int):
        """(the batches: on the devices, or on the host for a sparse model; how many are
        real; the compiled program)."""
        batches = _stacked_batches(DocumentWords.from_corpus(observed),
                                   DocumentWords.from_corpus(heldout),
                                   max(1, BATCH_ELEMENTS // num_topics),
                                   1 if num_words is None else mesh.size)
        alpha = jax.ShapeDtypeStruct((num_topics,), jnp.float32, sharding=self._whole)
        if num_words is None:  # a batch's observed and held-out slots are its columns
            topic_word = jax.ShapeDtypeStruct((num_topics, 2 * batches.observed_words[0].size),
                                              jnp.float32, sharding=self._whole)
            program = compilation.jit(_batch_loglik, static_argnames="em_iterations").lower(
                topic_word, *(array[0] for array in batches[:-1]), alpha,
                em_iterations=em_iterations).compile()
            return batches[:-1], batches.count, program
        by_batch = NamedSharding(mesh, PartitionSpec(mesh.axis_names[0]))
        placed = [jax.make_array_from_callback(array.shape, by_batch,
                                               lambda index, array=array: array[index])
                  for array in batches[:-1]]
        topic_word = jax.ShapeDtypeStruct((num_topics, num_words), jnp.float32,
                                          sharding=self._whole)
        program = _scoring_program(mesh, em_iterations).lower(topic_word, alpha,
                                                              *placed).compile()
        return placed, batches.count, program

    @timing.in_phase("evaluation")
    def score(self, topic_word: jax.Array, alpha) -> HeldOutScore:
        """The score of topics `topic_word` [K, V] (float32, rows sum to 1, laid out as the
        scorer was told) under the document-topic prior alpha ([K], or one number)."""
        placed, count, program = self._prepared.result()
        alpha = np.broadcast_to(np.asarray(alpha, np.float32), (topic_word.shape[0],))
        sums = program(jax.device_put(topic_word, self._whole),
                       jax.device_put(alpha, self._whole), *placed)
        return self._score(sum(float(value)
                               for value in np.asarray(sums.addressable_data(0))[:count]))

    @timing.in_phase("evaluation")
    def score_model(self, model: ModelTopics) -> HeldOutScore:
        """The score of a sparse model's topics under its prior (a scorer made with num_words
        None): each batch over the B-hat rows of its words (BatchWordRows), transposed to the
        columns the program reads; the values, and so the score, are score(topic_word)'s."""
        batches, count, program = self._prepared.result()
        device = jax.devices()[0]
        alpha = np.asarray(model.alpha, np.float32)
        floor = jax.device_put(model.bhat_floor, device)
        total = 0.0
        for observed_words, observed_counts, heldout_words, heldout_counts, *rows in zip(
                *(array[:count] for array in batches)):
            gathered = BatchWordRows.of(model, 2 * observed_words.size, observed_words,
                                        heldout_words)
            observed_local, heldout_local = gathered.words
            total += float(program(gathered.table(floor, device).T, observed_local,
                                   observed_counts, heldout_local, heldout_counts, *rows, alpha))
        return self._score(total)

    def _score(self, total: float) -> HeldOutScore:
        per_token = total / max(self.tokens, 1)
        return HeldOutScore(per_token, math.exp(-per_token), self.tokens, self.documents)


def heldout_loglik(topic_word: jax.Array | np.ndarray, observed: Corpus, heldout: Corpus,
                   alpha, em_iterations: int = DEFAULT_EM_ITERATIONS) -> HeldOutScore:
    """Document-completion score of topics `topic_word` [K, V] (rows sum to 1) under the
    document-topic prior alpha ([K], or one number for every topic)."""
    topic_word = jnp.asarray(topic_word, jnp.float32)
    return HeldoutScorer(observed, heldout, *topic_word.shape, em_iterations,
                         topic_word.sharding).score(topic_word, alpha)


def model_heldout_loglik(model: ModelTopics, observed: Corpus, heldout: Corpus,
                        em_iterations: int = DEFAULT_EM_ITERATIONS) -> HeldOutScore:
    """Document-completion score of a model's topics under its prior: heldout_loglik of its
    topic_word, or for a sparse model the same score from each batch's words' rows
    (HeldoutScorer.score_model), never K x V."""
    if not model.is_sparse:
        return heldout_loglik(model.topic_word, observed, heldout, model.alpha, em_iterations)
    return HeldoutScorer(observed, heldout, model.num_topics, None,
                         em_iterations).score_model(model)


def test_documents(model: ModelTopics, path=None, format: str = "auto", load=load_corpus,
                   **reading) -> tuple[Corpus, Corpus | None]:
    """(the documents to score a model on, over its vocabulary; its training documents when
    they were read to find them, so that coherence need not read them again).

    The documents at `path` (inference.load_in_model_vocabulary: raw text tokenised against
    the model's words, `reading` naming the fields of records, other formats matched by
    word; read by load(path, format)); else the
    ones its training run held out, as its config.json records them: the --test_corpus, or
    the --test_fraction split of the training corpus (coherence.recorded_split).  ValueError
    for a model trained without held-out documents.
    """
    if path is not None:
        return load_in_model_vocabulary(model, path, format, load, **reading), None
    config = model.config
    if config.get("test_corpus"):
        # read as training read it: its tokenising rules, its fields of records
        reading = plain_text.reading_options(config.get("text_options") or {})
        return load_in_vocabulary(config["test_corpus"], model.vocab, load=load,
                                  rules=model_text_rules(model), **reading), None
    if not config.get("test_fraction"):
        raise ValueError("the model was trained without held-out documents (no --test_corpus, "
                         "--test_fraction=0); pass the documents to score: --corpus")
    training, test = recorded_split(model)
    return test, training
