"""The implementations of ESCA's hot operations: "xla" (plain JAX, runs anywhere) or "pallas".

Each operation has a plain-JAX reference (saberjax.sampler, saberjax.segmented_count,
saberjax.mstep) and a Pallas kernel of the same contract (saberjax.pallas.kernels); a run picks
one set by name (Hyperparams.backend).  The Pallas kernels are imported only when asked for.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax

from saberjax import mstep, sampler, segmented_count, tree


class Backend(NamedTuple):
    """The hot operations of one backend; the XLA set is the reference for every other."""

    # (chunk, chunk_state, model, key, *, zero_doc_major=True) -> (word-major topics,
    # doc-major topics: 0, or with zero_doc_major=False maybe unset, where no token is)
    sample_and_shuffle: Callable
    # (chunk, doc-major topics, num_topics) -> (a_pairs, a_nnz), padding tokens not counted
    rebuild_doc_topic: Callable
    count_word_topic: Callable  # (chunk, word-major topics, word_topic) -> B plus the chunk
    topic_totals: Callable  # (B) -> column sums of B
    # (rows of B, totals, alpha, num_topics, beta, num_words, seeds, first_row) -> (B-hat, the
    # levels of its trees over alpha_k B-hat_vk, top first)
    bhat_and_tree: Callable
    # (rows [V, K_pad], weights [K_pad]) -> the level above the leaves of their trees over
    # weights * rows (the sparse model's dense rows)
    leaf_level: Callable


XLA = Backend(sampler.sample_and_shuffle, segmented_count.rebuild_doc_topic,
              mstep.count_word_topic, mstep.topic_totals, mstep.bhat_and_tree, tree.leaf_level)


def backend_ops(name: str) -> Backend:
    """The operations of backend "xla" or "pallas"."""
    if name == "pallas":
        from saberjax.pallas import kernels  # noqa: PLC0415 (GPU kernels, imported on demand)

        return Backend(kernels.sample_and_shuffle, kernels.rebuild_doc_topic,
                       kernels.count_word_topic, kernels.topic_totals, kernels.bhat_and_tree,
                       kernels.leaf_level)
    return XLA


def pallas_unavailable_reason() -> str | None:
    """Why the Pallas kernels cannot run here (not importable, or no GPU), or None."""
    try:
        from saberjax.pallas import kernels  # noqa: F401, PLC0415
    except ImportError as error:
        return f"ImportError: {error}"
    if jax.default_backend() != "gpu":
        return f"the pallas kernels need a GPU; this platform is {jax.default_backend()}"
    return None


def pallas_available() -> bool:
    """Whether the Pallas kernels are importable and a GPU is present."""
    return pallas_unavailable_reason() is None


def resolve_backend(name: str) -> str:
    """'auto' becomes 'pallas' on a GPU with the kernels available, else 'xla'."""
    if name == "auto":
        return "pallas" if pallas_available() else "xla"
    if name == "pallas" and not pallas_available():
        raise ValueError("backend 'pallas' is not yet available here (needs a GPU and the "
                         "saberjax.pallas kernels); use --backend=xla or auto")
    if name not in ("xla", "pallas"):
        raise ValueError(f"backend must be 'auto', 'xla' or 'pallas', got {name!r}")
    return name
