"""Topic coherence in a reference corpus: UMass and NPMI from document co-occurrence, c_v from
sliding windows; and topic diversity.

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

- c_v (Röder et al. 2015), as gensim's CoherenceModel(coherence="c_v") computes it: the
  reference's token order cut into boolean sliding windows of CV_WINDOW tokens (each window a
  virtual document; a document shorter than the window is one), NPMI of every pair of top words
  i, j (i = j included) over the windows, each word's context vector u_i = (NPMI(w_i, w_j))_j,
  the topic's v = sum_i u_i, and the topic's score the mean over i of cos(u_i, v).  The windows
  are gensim's: it slides a window by dropping the token that leaves and adding the one that
  enters, so a word whose earlier occurrence leaves the window counts as absent until it
  enters again even where another occurrence is still inside (sliding_windows follows it, so
  figures compare with gensim's).  It needs a corpus that keeps token order (plain text): a
  bag-of-words format (UCI, LDA-C) has lost it (keeps_token_order).
- Topic diversity (Dieng et al. 2020): the share of distinct words among every topic's top 25.

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

from saberjax import compilation
from saberjax.corpus import (Corpus, align_vocabulary, detect_format, load_bundled, load_corpus,
                             train_test_split)
from saberjax.corpus.text_sources import FORMATS as TEXT_FORMATS
from saberjax.inference import load_in_model_vocabulary
from saberjax.model import TopicModel, top_ids
from saberjax.relevance import relevant_ids

MEASURES = ("umass", "npmi")
NPMI_EPSILON = 1e-12
CV_WINDOW = 110  # tokens of a c_v sliding window (gensim's default for c_v)
DIVERSITY_TOP_N = 25  # top words per topic of topic diversity
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
        """Coherence of every topic by `measure` ("umass" or "npmi"; "c_v" where the counts
        are of sliding windows: cv_cooccurrence; see the module doc)."""
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
            elif measure == "c_v":
                per_topic = _cv_scores(pair, word_docs, self.num_docs)
            else:
                raise ValueError(f"unknown coherence measure {measure!r}; expected one of "
                                 f"{(*MEASURES, 'c_v')}")
        per_topic[(word_docs == 0).any(axis=1)] = np.nan
        scored = per_topic[~np.isnan(per_topic)]
        mean = float(scored.mean()) if scored.size else float("nan")
        return CoherenceScores(measure, pair.shape[1], per_topic, mean)


def _cv_scores(pair: np.ndarray, word_docs: np.ndarray, num_windows: int) -> np.ndarray:
    """c_v of every topic from its window counts pair [K, N, N] (diagonal: word_docs [K, N]):
    gensim's nlr context vectors (NPMI with NPMI_EPSILON, i = j included) and the mean cosine
    of each word's vector with their sum."""
    joint = pair / num_windows + NPMI_EPSILON
    independent = word_docs[:, :, None] * word_docs[:, None, :] / num_windows ** 2
    vectors = np.log(joint / independent) / -np.log(joint)  # row i: u_i over the topic's words
    total = vectors.sum(axis=1, keepdims=True)
    cosines = (vectors * total).sum(axis=2) / (np.linalg.norm(vectors, axis=2)
                                               * np.linalg.norm(total, axis=2))
    return cosines.mean(axis=1)


def sliding_windows(reference: Corpus, words, window: int = CV_WINDOW) -> Corpus:
    """The boolean sliding windows of the reference's documents as a corpus of virtual
    documents, one per window (a document of at most `window` tokens, an empty one included,
    is one window), each holding once every one of `words` (ids) the window counts, as
    gensim's sliding-window accumulator counts them (see the module doc).

    A window starting at t holds tokens t .. t + window - 1 of its document.  Word v of an
    occurrence at position p is counted from window max(0, p - window + 1) until the window
    after its first occurrence at or after that start leaves (gensim drops the token that
    leaves a window without asking whether it occurs again inside), so each occurrence gives
    one run of windows; the runs of a (document, word) are merged before they are expanded.
    """
    lengths = reference.doc_lengths()
    windows_of_doc = np.maximum(lengths - window + 1, 1)
    first_window = np.concatenate([[0], np.cumsum(windows_of_doc)])
    wanted = np.zeros(reference.num_words, bool)
    wanted[np.asarray(words)] = True
    positions = np.flatnonzero(wanted[reference.word_ids])
    docs = np.searchsorted(reference.doc_offsets, positions, side="right") - 1
    order = np.lexsort((positions, reference.word_ids[positions], docs))
    positions, docs = positions[order], docs[order]
    word = reference.word_ids[positions]
    position = positions - reference.doc_offsets[docs]
    new_group = np.ones(position.size, bool)
    new_group[1:] = (docs[1:] != docs[:-1]) | (word[1:] != word[:-1])
    group = np.cumsum(new_group) - 1
    start = np.maximum(position - window + 1, 0)
    key_scale = int(lengths.max(initial=0)) + 1
    keys = group * key_scale + position  # increasing
    first_at_start = np.searchsorted(keys, group * key_scale + start)
    end = np.minimum(position[first_at_start] + 1, windows_of_doc[docs])
    previous_end = np.concatenate([[0], end[:-1]])
    start = np.where(new_group, start, np.maximum(start, previous_end))
    runs = np.maximum(end - start, 0)
    run_first = np.repeat(first_window[docs] + start, runs)
    step = np.arange(runs.sum()) - np.repeat(np.cumsum(runs) - runs, runs)
    window_ids = run_first + step
    by_window = np.argsort(window_ids, kind="stable")
    offsets = np.concatenate([[0], np.cumsum(np.bincount(window_ids,
                                                         minlength=int(first_window[-1])))])
    return Corpus(offsets, np.repeat(word, runs)[by_window], reference.vocab,
                  name=f"{reference.name or 'reference'} windows of {window}")


def cv_cooccurrence(topics: TopicModel | np.ndarray, reference: Corpus, top_n: int = 10,
                    vocab: Sequence[str] | None = None, window: int = CV_WINDOW,
                    batch_docs: int | None = None,
                    relevance: float | None = None) -> TopicCooccurrence:
    """Counts of every topic's top_n words and their pairs in the reference's sliding windows
    (sliding_windows), which score("c_v") scores; arguments as in cooccurrence.  The reference
    must keep its documents' token order (keeps_token_order)."""
    top, vocab = _top_and_vocab(topics, reference, vocab, top_n, relevance)
    reference = align_vocabulary(reference, vocab)
    windows = sliding_windows(reference, np.unique(top), window)
    return TopicCooccurrence(top, pair_document_counts(top, windows, batch_docs),
                             windows.num_docs)


def cv_coherence(topics: TopicModel | np.ndarray, reference: Corpus, top_n: int = 10,
                 vocab: Sequence[str] | None = None, window: int = CV_WINDOW) -> CoherenceScores:
    """c_v of every topic's top_n words in the reference's token order (see the module doc);
    arguments as in cv_cooccurrence."""
    return cv_cooccurrence(topics, reference, top_n, vocab, window).score("c_v")


def keeps_token_order(path) -> bool:
    """Whether the corpus at path holds its documents' tokens in order (c_v needs it): plain
    text formats do; bag-of-words formats (UCI, LDA-C) and native copies of them do not."""
    return detect_format(path) in TEXT_FORMATS


def cv_unavailable(model: TopicModel, path=None) -> str | None:
    """Why c_v cannot be measured on the reference of a model's coherence (the documents at
    `path`, else its recorded training corpus), one line, or None when it keeps token order."""
    if path is None and not records_training_corpus(model):
        return None  # the caller's reference: a Corpus from Python, taken as it is
    source = path if path is not None else model.config.get("corpus_path")
    if source and keeps_token_order(source):
        return None
    return (f"c_v not measured: {source or 'the bundled kos corpus'} is a bag-of-words corpus "
            f"with no token order for its sliding windows; give plain text with "
            f"--coherence_corpus")


def topic_diversity(topics: TopicModel | np.ndarray, top_n: int = DIVERSITY_TOP_N) -> float:
    """The share of distinct words among every topic's top_n words (1: no topic shares a top
    word with another; Dieng et al. 2020 use the top 25)."""
    if isinstance(topics, TopicModel):
        top = topics.top_word_ids(top_n)
    else:
        top = top_ids(topics, min(top_n, np.shape(topics)[1]))
    return float(np.unique(top).size / top.size)


def _top_and_vocab(topics, reference: Corpus, vocab, top_n: int, relevance: float | None):
    """(every topic's top_n word ids [K, top_n], their vocabulary) of a TopicModel (ranked by
    relevance when given: TopicModel.top_words) or of K x V topic-word weights over vocab
    (default: the reference's)."""
    if isinstance(topics, TopicModel):
        check_top_n(top_n, topics.num_words)
        if relevance is not None:
            return relevant_ids(topics.dense_word_topic_counts(), topics.beta,
                                topics.seed_prior, top_n, relevance), topics.vocab
        return topics.top_word_ids(top_n), topics.vocab
    weights, vocab = np.asarray(topics), reference.vocab if vocab is None else vocab
    if weights.shape[1] != len(vocab):
        raise ValueError(f"topics have {weights.shape[1]} words but the vocabulary {len(vocab)}")
    return top_word_ids(weights, top_n), vocab


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
                 vocab: Sequence[str] | None = None, batch_docs: int | None = None,
                 relevance: float | None = None) -> TopicCooccurrence:
    """Counts of every topic's top_n words and their pairs in the reference documents.

    topics: a TopicModel, or a K x V array of topic-word weights over `vocab` (default: the
    reference's vocabulary). The reference is matched to the topics' vocabulary by word string.
    batch_docs: documents per device batch (default: as many as BATCH_ELEMENTS allows); results
    do not depend on it.  relevance: a model's top words ranked by relevance at this lambda
    (TopicModel.top_words), else by probability.
    """
    top, vocab = _top_and_vocab(topics, reference, vocab, top_n, relevance)
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


@compilation.jit
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
