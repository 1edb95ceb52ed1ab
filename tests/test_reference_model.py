"""The model a seed gives stays the model it gave: training now against a small model saved by
the code of 2026-11-27, alpha learned (first saved at commit 1180931, before the engine became
a package; saved again when the learned prior's sums took pairwise_sum's order, and again
when the fixed point took the histograms' tail counts: each moved alpha by its last bits and
left the counts as they were)."""

import numpy as np
import pytest

from helpers import ROOT, random_corpus
from saberjax import trainer

REFERENCE = ROOT / "tests" / "data" / "reference_model.npz"


@pytest.mark.parametrize("devices,partition", [(1, "auto"), (2, "documents"), (2, "words")])
def test_training_gives_the_model_saved_before(devices, partition):
    corpus = random_corpus(num_docs=40, num_words=30, mean_length=30, seed=3)
    config = trainer.TrainConfig(num_topics=6, iterations=7, optimize_alpha_every=2, burn_in=2,
                                 seed=11, backend="xla", num_devices=devices,
                                 partition=partition)
    model = trainer.train(corpus, config).model
    reference = np.load(REFERENCE)
    np.testing.assert_array_equal(model.word_topic_counts, reference["word_topic_counts"])
    np.testing.assert_array_equal(model.alpha, reference["alpha"])
