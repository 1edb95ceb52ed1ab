"""The "pallas" backend's operations (saberjax.backend): Pallas kernels where they beat XLA.

- sample_and_shuffle: the E-step kernel, which also stores each new topic at its doc-major
  position (saberjax.pallas.sampler).
- rebuild_doc_topic: sort-free segmented count (saberjax.pallas.segmented_count).
- count_word_topic: the B count, one integer atomic per distinct (word, topic) pair of 32
  word-major tokens (saberjax.pallas.word_topic_count) instead of XLA's one per token.
- topic_totals: one pass over B; bhat_and_tree: B-hat and the tree level above it in another,
  the upper levels by XLA (saberjax.pallas.bhat_tree).
- leaf_level: the sparse model's dense rows' trees' lowest level, loaded coalesced
  (saberjax.pallas.bhat_tree).
"""

from saberjax.pallas.bhat_tree import bhat_and_tree, leaf_level, topic_totals
from saberjax.pallas.sampler import sample_and_shuffle
from saberjax.pallas.segmented_count import rebuild_doc_topic
from saberjax.pallas.word_topic_count import count_word_topic

__all__ = ["bhat_and_tree", "count_word_topic", "leaf_level", "rebuild_doc_topic",
           "sample_and_shuffle", "topic_totals"]
