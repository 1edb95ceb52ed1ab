"""Held-out log-likelihood by document completion (Wallach et al. 2009), batched and vectorised.

Each test document is split into an observed and a held-out half (corpus.split_document_halves).
With the topics B-hat fixed, theta_d is fitted to the observed half by the EM fold-in of
`inference` (`em_iterations` rounds from the uniform theta, 50 by default, as in the reference
measurements in BASELINES.md), and the held-out half is scored by log sum_k theta_dk B-hat_vk
per token.  Both halves of a document share its rows (inference.Batch: one row width and
batch shape per run), so fitting and scoring every batch is one compiled function and theta
never leaves the device.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from saberjax import timing
from saberjax.background import in_background
from saberjax.coherence import recorded_split
from saberjax.config import DEFAULT_EM_ITERATIONS
from saberjax.corpus import Corpus, load_corpus
from saberjax.inference import (DocumentWords, ModelTopics, fold_in, load_in_model_vocabulary,
                                load_in_vocabulary, plan_batches, row_width)

# Upper bound on word slots x topics held at once in a batch (floats); smaller than inference's
# because evaluation runs beside the training state.
BATCH_ELEMENTS = 1 << 24


@dataclasses.dataclass(frozen=True)
class HeldOutScore:
    loglik_per_token: float
    perplexity: float
    tokens: int
    documents: int


@functools.partial(jax.jit, static_argnames="em_iterations")
def _batch_loglik(topic_word, observed_words, observed_counts, heldout_words, heldout_counts,
                  row_start, row_end, alpha, em_iterations: int):
    """Sum of held-out log-likelihoods of one batch of rows (padding has count 0) under topics
    topic_word [K, V]."""
    topics_of_word = topic_word.T
    theta = fold_in(topics_of_word, observed_words, observed_counts, row_start, row_end, alpha,
                    em_iterations)
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


class HeldoutScorer:
    """Document completion of fixed (observed, held-out) halves, for topics of one shape and
    layout scored any number of times.

    The batches' rows are padded on the host and the program is compiled once, in a thread
    started by the constructor: a trainer makes its scorer before it trains, and both are
    ready by the first evaluation.  topic_word_sharding: where the topics scored will live
    (a jax.sharding.Sharding; None: the default device).
    """

    def __init__(self, observed: Corpus, heldout: Corpus, num_topics: int, num_words: int,
                 em_iterations: int = DEFAULT_EM_ITERATIONS, topic_word_sharding=None):
        check_scorable(observed, heldout)
        self.tokens, self.documents = heldout.num_tokens, heldout.num_docs
        topic_word = jax.ShapeDtypeStruct((num_topics, num_words), jnp.float32,
                                          sharding=topic_word_sharding)
        self._prepared = in_background(self._prepare, observed, heldout, topic_word,
                                       em_iterations, name="saberjax-scorer")

    @staticmethod
    def _prepare(observed: Corpus, heldout: Corpus, topic_word: jax.ShapeDtypeStruct,
                 em_iterations: int):
        """(the batches' padded arrays, the compiled program scoring one batch)."""
        observed_words = DocumentWords.from_corpus(observed)
        heldout_words = DocumentWords.from_corpus(heldout)
        lengths = np.maximum(observed_words.lengths(), heldout_words.lengths())
        batches = [(*observed_words.padded(batch), *heldout_words.padded(batch),
                    batch.row_start, batch.row_end)
                   for batch in plan_batches(lengths, max(1, BATCH_ELEMENTS // topic_word.shape[0]),
                                             row_width(lengths))]
        alpha = jax.ShapeDtypeStruct((topic_word.shape[0],), jnp.float32)
        program = _batch_loglik.lower(topic_word, *batches[0], alpha,
                                      em_iterations=em_iterations).compile()
        return batches, program

    @timing.in_phase("evaluation")
    def score(self, topic_word: jax.Array, alpha) -> HeldOutScore:
        """The score of topics `topic_word` [K, V] (float32, rows sum to 1, laid out as the
        scorer was told) under the document-topic prior alpha ([K], or one number)."""
        batches, program = self._prepared.result()
        alpha = np.broadcast_to(np.asarray(alpha, np.float32), (topic_word.shape[0],))
        total = sum(float(program(topic_word, *batch, alpha)) for batch in batches)
        per_token = total / max(self.tokens, 1)
        return HeldOutScore(per_token, math.exp(-per_token), self.tokens, self.documents)


def heldout_loglik(topic_word: jax.Array | np.ndarray, observed: Corpus, heldout: Corpus,
                   alpha, em_iterations: int = DEFAULT_EM_ITERATIONS) -> HeldOutScore:
    """Document-completion score of topics `topic_word` [K, V] (rows sum to 1) under the
    document-topic prior alpha ([K], or one number for every topic)."""
    topic_word = jnp.asarray(topic_word, jnp.float32)
    return HeldoutScorer(observed, heldout, *topic_word.shape, em_iterations,
                         topic_word.sharding).score(topic_word, alpha)


def test_documents(model: ModelTopics, path=None, format: str = "auto", load=load_corpus
                   ) -> tuple[Corpus, Corpus | None]:
    """(the documents to score a model on, over its vocabulary; its training documents when
    they were read to find them, so that coherence need not read them again).

    The documents at `path` (inference.load_in_model_vocabulary: plain text tokenised against
    the model's words, other formats matched by word; read by load(path, format)); else the
    ones its training run held out, as its config.json records them: the --test_corpus, or
    the --test_fraction split of the training corpus (coherence.recorded_split).  ValueError
    for a model trained without held-out documents.
    """
    if path is not None:
        return load_in_model_vocabulary(model, path, format, load), None
    config = model.config
    if config.get("test_corpus"):
        return load_in_vocabulary(config["test_corpus"], model.vocab, load=load), None
    if not config.get("test_fraction"):
        raise ValueError("the model was trained without held-out documents (no --test_corpus, "
                         "--test_fraction=0); pass the documents to score: --corpus")
    training, test = recorded_split(model)
    return test, training
