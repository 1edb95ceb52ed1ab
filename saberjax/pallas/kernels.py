"""The "pallas" backend of saberjax.esca: Pallas kernels where they beat XLA, XLA elsewhere.

- sample_and_shuffle: the E-step kernel, which also stores each new topic at its doc-major
  position (saberjax.pallas.sampler).
- rebuild_doc_topic: sort-free segmented count (saberjax.pallas.segmented_count).
- count_word_topic: the B count, one integer atomic per distinct (word, topic) pair of 32
  word-major tokens (saberjax.pallas.word_topic_count) instead of XLA's one per token.
- model_arrays: topic totals in one pass over B, B-hat and the tree level above it in another,
  the upper levels by XLA (saberjax.pallas.bhat_tree).
"""

from saberjax import esca
from saberjax.pallas import bhat_tree, sampler, segmented_count, word_topic_count

BACKEND = esca.Backend(
    sample_and_shuffle=sampler.sample_and_shuffle,
    rebuild_doc_topic=segmented_count.rebuild_doc_topic,
    count_word_topic=word_topic_count.count_word_topic,
    model_arrays=bhat_tree.model_arrays,
)
