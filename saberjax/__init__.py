"""saberjax: SaberLDA in JAX, sparsity-aware LDA topic models on GPUs.

Data flows one way: files -> Corpus (corpus) -> PDOW chunks (layout) -> TrainState (state,
esca) -> TopicModel (model); `trainer.train` runs that chain, `evaluate.heldout_loglik` scores
a model on held-out documents, `coherence(model, reference)` its topics' coherence (the
module saberjax.coherence, callable as its function), `inference.infer_topics`
(TopicModel.transform) gives new documents' topic proportions, and `LDA` wraps it all as a
scikit-learn style estimator.
"""

from saberjax import coherence  # the module, callable: coherence(model, reference)
from saberjax.config import Hyperparams, TrainConfig
from saberjax.corpus import (Corpus, load_bundled, load_corpus, split_document_halves,
                             train_test_split)
from saberjax.esca import init, step
from saberjax.estimator import LDA
from saberjax.evaluate import heldout_loglik
from saberjax.inference import infer_topics
from saberjax.layout import build_layout
from saberjax.model import TopicModel
from saberjax.state import TrainState
from saberjax.trainer import train

__version__ = "0.1.0"

__all__ = ["LDA", "Corpus", "Hyperparams", "TopicModel", "TrainConfig", "TrainState",
           "build_layout", "coherence", "heldout_loglik", "infer_topics", "init", "load_bundled",
           "load_corpus", "split_document_halves", "step", "train", "train_test_split"]
