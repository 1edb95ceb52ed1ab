"""saberjax: SaberLDA in JAX, sparsity-aware LDA topic models on GPUs.

Data flows one way: files -> Corpus (corpus) -> PDOW chunks (layout) -> TrainState (state,
esca) -> TopicModel (model); `trainer.train` runs that chain, `evaluate.heldout_loglik` scores
a model on held-out documents, `coherence(model, reference)` its topics' coherence (the
module saberjax.coherence, callable as its function), `inference.infer_topics`
(TopicModel.transform) gives new documents' topic proportions, and `LDA` wraps it all as a
scikit-learn style estimator.

The names below are imported on first use, so that `import saberjax.model` (loading and using
a trained model) does not load the training engine.
"""

import importlib

__version__ = "0.1.0"

# Each public name and the module that defines it (coherence is the module itself).
_EXPORTS = {
    "Corpus": "saberjax.corpus", "load_bundled": "saberjax.corpus",
    "load_corpus": "saberjax.corpus", "split_document_halves": "saberjax.corpus",
    "train_test_split": "saberjax.corpus", "Hyperparams": "saberjax.config",
    "TrainConfig": "saberjax.config", "init": "saberjax.esca", "step": "saberjax.esca",
    "LDA": "saberjax.estimator", "heldout_loglik": "saberjax.evaluate",
    "infer_topics": "saberjax.inference", "build_layout": "saberjax.layout",
    "TopicModel": "saberjax.model", "TrainState": "saberjax.state", "train": "saberjax.trainer",
    "coherence": "saberjax.coherence",
}

__all__ = sorted(_EXPORTS, key=lambda name: (not name[0].isupper(), name))


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'saberjax' has no attribute {name!r}")
    module = importlib.import_module(_EXPORTS[name])
    value = module if name == "coherence" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
