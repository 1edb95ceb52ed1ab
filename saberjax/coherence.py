"""Topic coherence from document co-occurrence in a reference corpus: UMass and NPMI.

With D(w) the number of reference documents containing word w, D(w_i, w_j) those containing
both, D the number of documents and a topic's top words w_1..w_N by decreasing probability:

- UMass (Mimno et al. 2011): the mean over the N(N-1)/2 pairs i > j of
  log((D(w_i, w_j) + 1) / D(w_j)), each word conditioned on a more probable one. At most
  about 0 (log(1 + 1/D(w_j)) for a pair always together); higher is more coherent; usually
  between about -0.5 and -3 for N = 10. Mimno et al. define the sum; the mean is what gensim's
  CoherenceModel(coherence="u_mass") reports (its log_conditional_probability averaged over
  the s_one_pre pairs, then over topics), so figures compare across N and with gensim's. The
  smoothing stays Mimno's + 1 where gensim adds epsilon = 1e-12 to the document fraction,
  log((D(w_i, w_j) / D + 1e-12) / (D(w_j) / D)): the two agree closely for pairs seen
  together in many documents, but a pair never seen together scores log(1 / D(w_j)) here and
  about log(1e-12 D / D(w_j)), near -28 + log(D / D(w_j)), in gensim, so on topics with such
  pairs gensim's figures are lower.
- NPMI (Bouma 2009): the mean over pairs i < j of log(P(w_i, w_j) / (P(w_i) P(w_j)))
  / -log P(w_i, w_j), with P the fraction of documents. In [-1, 1]: 1 for words that always
  occur together, about -1 for words never seen together. P(w_i, w_j) gets NPMI_EPSILON
  added (as in Röder et al. 2015 and gensim), so a pair that never co-occurs scores
  log(eps / (P(w_i) P(w_j))) / -log(eps) instead of dividing by infinity.

A topic with a top word that no reference document contains has no score (NaN; gensim scores
its pairs 0); means are over the topics with a score.

The module is also callable as its function coherence: saberjax.coherence(model, reference) is
coherence.coherence(model, reference), while saberjax.coherence.cooccurrence and the other
names stay reachable (see _CallableModule).

Only top words matter, so counting touches only the union U of all topics' top words: per batch
of documents, the binary document x U incidence is built on the host and sent to the default
device, where every topic's N x N block of co-document counts is one batched matrix product
X_k^T X_k (X_k: the batch's columns of topic k's words; the diagonal holds D(w)). That is
D K N^2 multiply-adds, where the full U x U product (D x U)^T (D x U) would take D U^2, about
K times more (1,000 times for K = 1,000 topics of 10 distinct words).
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import types
import warnings
from collections.abc import Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from saberjax.corpus import (Corpus, align_vocabulary, load_bundled, load_corpus,
                             train_test_split)
from saberjax.inference import load_in_model_vocabulary
from saberjax.model import TopicModel, top_ids

MEASURES = ("umass", "npmi")
NPMI_EPSILON = 1e-12
# Incidence entries per device batch (of the wider of the U and K x N layouts), which bounds
# device memory to a few hundred MB whatever the corpus size.
BATCH_ELEMENTS = 1 << 25
# Largest batch: float32 sums of 0/1 products stay exact far below 2^24 documents.
MAX_BATCH_DOCS = 1 << 16


@dataclasses.dataclass(frozen=True)
class CoherenceScores:
    """One measure's coherence of every topic, and their mean over the topics with a score."""

    measure: str
    top_n: int
    per_topic: np.ndarray  # float64 [K]; NaN where a top word is absent from the reference
    mean: float


@dataclasses.dataclass(frozen=True)
class TopicCooccurrence:
    """Reference document counts of every topic's top words and top-word pairs.

    The expensive part of coherence, computed once and scored by any measure.
    """

    top_word_ids: np.ndarray  # int [K, N]: each topic's words, most probable first
    pair_docs: np.ndarray  # int64 [K, N, N]: documents holding words i and j (diagonal: word i)
    num_docs: int

    def score(self, measure: str = "npmi") -> CoherenceScores:
        """Coherence of every topic by `measure` ("umass" or "npmi"; see the module doc)."""
        pair = self.pair_docs.astype(np.float64)
        word_docs = np.diagonal(pair, axis1=1, axis2=2)
        later, earlier = np.tril_indices(pair.shape[1], -1)
        together = pair[:, later, earlier]
        with np.errstate(divide="ignore", invalid="ignore"):
            if measure == "umass":
                per_topic = np.log((together + 1) / word_docs[:, earlier]).mean(axis=1)
            elif measure == "npmi":
                joint = together / self.num_docs + NPMI_EPSILON
                independent = word_docs[:, later] * word_docs[:, earlier] / self.num_docs ** 2
                npmi = np.log(joint / independent) / -np.log(joint)
                # Pairs in every document: NPMI is 1 (complete co-occurrence), not 0 / 0.
                per_topic = np.where(together == self.num_docs, 1.0, npmi).mean(axis=1)
            else:
                raise ValueError(f"unknown coherence measure {measure!r}; expected one of "
                                 f"{MEASURES}")
        per_topic[(word_docs == 0).any(axis=1)] = np.nan
        scored = per_topic[~np.isnan(per_topic)]
        mean = float(scored.mean()) if scored.size else float("nan")
        return CoherenceScores(measure, pair.shape[1], per_topic, mean)


def top_word_ids(weights, top_n: int) -> np.ndarray:
    """Ids of the top_n largest entries of every row of `weights` (K x V), largest first.

    Ties go to the lower id, as in TopicModel.top_words (both are model.top_ids).
    """
    check_top_n(top_n, weights.shape[1])
    return top_ids(weights, top_n)


def check_top_n(top_n: int, num_words: int) -> None:
    """ValueError unless top_n words of `num_words` make pairs to score."""
    if not 2 <= top_n <= num_words:
        raise ValueError(f"top_n must be in [2, {num_words}] (pairs of vocabulary words), "
                         f"got {top_n}")


def cooccurrence(topics: TopicModel | np.ndarray, reference: Corpus, top_n: int = 10,
                 vocab: Sequence[str] | None = None,
                 batch_docs: int | None = None) -> TopicCooccurrence:
    """Counts of every topic's top_n words and their pairs in the reference documents.

    topics: a TopicModel, or a K x V array of topic-word weights over `vocab` (default: the
    reference's vocabulary). The reference is matched to the topics' vocabulary by word string.
    batch_docs: documents per device batch (default: as many as BATCH_ELEMENTS allows); results
    do not depend on it.
    """
    if isinstance(topics, TopicModel):
        check_top_n(top_n, topics.num_words)
        top, vocab = topics.top_word_ids(top_n), topics.vocab
    else:
        weights, vocab = np.asarray(topics), reference.vocab if vocab is None else vocab
        if weights.shape[1] != len(vocab):
            raise ValueError(f"topics have {weights.shape[1]} words but the vocabulary "
                             f"{len(vocab)}")
        top = top_word_ids(weights, top_n)
    reference = align_vocabulary(reference, vocab)
    return TopicCooccurrence(top, pair_document_counts(top, reference, batch_docs),
                             reference.num_docs)


def coherence(topics: TopicModel | np.ndarray, reference: Corpus, top_n: int = 10,
              measure: str = "npmi", vocab: Sequence[str] | None = None,
              batch_docs: int | None = None) -> CoherenceScores:
    """Coherence of every topic's top_n words in the reference corpus (arguments: cooccurrence).

    To score several measures, call cooccurrence once and its score() per measure.
    """
    return cooccurrence(topics, reference, top_n, vocab, batch_docs).score(measure)


def pair_document_counts(top_ids: np.ndarray, reference: Corpus,
                         batch_docs: int | None = None) -> np.ndarray:
    """int64 [K, N, N]: reference documents containing top_ids[k, i] and top_ids[k, j]."""
    words, slots = np.unique(top_ids, return_inverse=True)
    slots = slots.reshape(top_ids.shape)
    column_of_word = np.full(reference.num_words, -1, np.int32)
    column_of_word[words] = np.arange(words.size)
    token_columns = column_of_word[reference.word_ids]
    is_top = token_columns >= 0
    token_docs = np.repeat(np.arange(reference.num_docs, dtype=np.int32),
                           reference.doc_lengths())[is_top]
    token_columns = token_columns[is_top]

    widest = max(words.size, top_ids.size)
    batch = batch_docs or int(np.clip(BATCH_ELEMENTS // widest, 1, MAX_BATCH_DOCS))
    batch = min(batch, max(reference.num_docs, 1))
    device_slots = jnp.asarray(slots)
    totals = jnp.zeros(top_ids.shape + top_ids.shape[1:], jnp.int32)
    for start in range(0, reference.num_docs, batch):
        first, stop = np.searchsorted(token_docs, (start, start + batch))
        incidence = np.zeros((batch, words.size), np.bool_)  # the last batch is zero-padded
        incidence[token_docs[first:stop] - start, token_columns[first:stop]] = True
        totals = _add_batch_pair_counts(totals, incidence, device_slots)
    return np.asarray(totals).astype(np.int64)


@jax.jit
def _add_batch_pair_counts(totals, incidence, slots):
    """totals + every topic's N x N co-document counts in one batch (B x U incidence).

    bfloat16 holds 0 and 1 exactly and the float32 sums of a batch are exact integers.
    """
    topic_incidence = incidence.astype(jnp.bfloat16)[:, slots]  # B x K x N
    blocks = jnp.einsum("bki,bkj->kij", topic_incidence, topic_incidence,
                        preferred_element_type=jnp.float32)
    return totals + blocks.astype(jnp.int32)


def recorded_split(model: TopicModel) -> tuple[Corpus, Corpus]:
    """(training documents, held-out documents) of a model, rebuilt from its config.

    The corpus at config["corpus_path"] (the bundled KOS corpus when it is None), read with
    the recorded plain-text options, split by test_fraction and seed as launch/train.py did (an
    empty held-out part when there was no split).  A model whose config records no corpus_path
    (saved from Python) is a ValueError saying what to pass instead.
    """
    config = model.config
    if not records_training_corpus(model):
        raise ValueError(
            f"the model's config.json records no training corpus path (a model saved from "
            f"Python, trained on {config.get('corpus_name') or 'an unnamed corpus'}); pass the "
            f"documents to use: --coherence_corpus for coherence, --corpus for scoring")
    path = config["corpus_path"]
    corpus = (load_corpus(path, **config.get("text_options", {})) if path
              else load_bundled("kos"))
    return train_test_split(corpus, config.get("test_fraction") or 0, config.get("seed", 0))


def records_training_corpus(model: TopicModel) -> bool:
    """Whether the model's config says where its training documents are (launch/train.py
    records corpus_path, None for the bundled corpus; a model saved from Python does not)."""
    return "corpus_path" in model.config


def reference_corpus(model: TopicModel, path=None, training: Corpus | None = None) -> Corpus:
    """The coherence reference of the launchers: the documents at `path` over the model's
    words (inference.load_in_model_vocabulary: plain text without a document-frequency rule,
    so that every top word is counted), else default_reference."""
    return load_in_model_vocabulary(model, path) if path else default_reference(model, training)


def default_reference(model: TopicModel, training: Corpus | None = None) -> Corpus:
    """The reference corpus for a model's coherence by default: its training documents
    (`training`, when the caller has already rebuilt them, else `recorded_split`); warns when
    they do not match the recorded corpus fingerprint (Corpus.has_fingerprint: a model saved
    before fingerprints were hashed in blocks records the legacy one)."""
    corpus = recorded_split(model)[0] if training is None else training
    recorded = model.config.get("corpus_fingerprint")
    if recorded and not corpus.has_fingerprint(recorded):
        warnings.warn(f"{model.config.get('corpus_path') or 'the bundled kos corpus'} (less its "
                      f"test split) is not the corpus the model was trained on (fingerprints "
                      f"differ); coherence is measured on it anyway", stacklevel=2,
                      skip_file_prefixes=(str(Path(__file__).parent),))  # the caller's line
    return corpus


class _CallableModule(types.ModuleType):
    """This module's type: calling the module calls its function coherence.

    saberjax exports coherence at the top level, where saberjax.coherence is also this
    module's name. A function bound there would shadow the module: `import saberjax.coherence
    as m` and `saberjax.coherence.cooccurrence` read the package attribute and would get the
    function. A callable module keeps both: `saberjax.coherence(model, reference)` scores, and
    every module attribute and import form works as before.
    """

    def __call__(self, *args, **kwargs) -> CoherenceScores:
        return coherence(*args, **kwargs)


__signature__ = inspect.signature(coherence)  # what inspect and help show for the call
sys.modules[__name__].__class__ = _CallableModule
