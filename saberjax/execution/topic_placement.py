"""The topics of a placement's chunks between the devices and the host (checkpoints,
resuming, models and tests): every chunk's topics in corpus order from a state, the part of it
that depends on no mesh (A is a function of them), and the slot states of given topics.  The
placement is execution.placement.Placement; this module does not import it.
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from saberjax import compilation, esca
from saberjax.state import ChunkState, TrainState


def chunk_topics(placement, state: TrainState) -> dict[int, np.ndarray]:
    """This process's chunks' topics in corpus order (chunk i: the tokens chunking[i]) on
    the host, by layout chunk index: the part of the state that depends on no mesh (A is
    a function of them).  By word, every process takes part (each device's topics come
    from every device's share)."""
    if placement.word_shares is None:
        chunks, states = placement.host_chunks(), placement.chunk_states(state)
        return {index: esca.chunk_corpus_topics(chunks[index], states[index])
                for index in chunks}
    if placement.streamed:  # a slot at a time on the devices, its topics back in host memory
        source, doc_major = placement.stream_source, []
        for slot in range(placement.num_slots):
            (chunk, share), chunk_state = source.to_device((source[slot], state.chunks[slot]))
            doc_major.append(source.to_host(placement.programs.chunk_topics(
                (chunk,), share, (chunk_state,))))
        doc_major = tuple(doc_major)
    else:
        doc_major = (placement.programs.chunk_topics(placement.slots, placement.word_shares,
                                                     state.chunks),)
    return {index: topics[:placement.chunking[index][1]]
            for index, topics in placement.by_chunk(doc_major).items()}


def place_topics(placement, corpus_topics) -> tuple:
    """Slot states (as place_chunk_states places them) of the topics in corpus order that
    corpus_topics(first token, tokens) gives for a range of tokens: each of this process's
    chunks' z, its A rebuilt from them (esca.state_of_topics, on this process's first
    device) where the state holds A.  By word, a device's z is its share's tokens from
    every chunk of its group (all chunks on one axis, its host's on two), and its A that
    of every chunk of the group (Programs.group_states)."""
    chunks = placement.host_chunks()
    rebuild = compilation.jit(esca.state_of_topics, static_argnames="hyper")
    states = {}
    for index, chunk in chunks.items():
        doc_major = _doc_major(placement, corpus_topics, index, chunk.padded_tokens)
        topics = doc_major[np.asarray(chunk.doc_major_pos)]
        states[index] = (ChunkState(topics, None, None) if placement.stored else
                         jax.tree.map(np.asarray, rebuild(chunk, topics, hyper=placement.hyper)))
    if placement.word_shares is not None:
        padded_tokens, parts = chunks[min(chunks)].padded_tokens, placement.word_parts
        num_slots = placement.num_slots

        @functools.cache
        def group_doc_major(group: int, slot: int) -> np.ndarray:  # a spare 0: padding
            return np.concatenate([_doc_major(placement, corpus_topics,
                                              device * num_slots + slot, padded_tokens)
                                   for device in range(group * parts, (group + 1) * parts)]
                                  + [np.zeros(1, placement.hyper.topic_dtype)])

        shares = (tuple(placement.word_shares) if placement.streamed
                  else (placement.word_shares,))
        for index, share in placement.by_chunk(shares).items():
            every = group_doc_major(index // num_slots // parts, index % num_slots)
            positions = np.minimum(share.doc_major_pos, len(every) - 1)
            states[index] = states[index]._replace(topics=every[positions])
        if placement.streamed:  # a streamed slot's state holds its own chunk's A
            return placement.place_chunk_states(states)
        return placement.programs.group_states(placement.place_chunk_states(states))
    return placement.place_chunk_states(states)


def _doc_major(placement, corpus_topics, index: int, padded_tokens: int) -> np.ndarray:
    """Chunk `index`'s doc-major topics (corpus_topics: as place_topics), 0 in padding."""
    first, tokens = placement.chunking[index]
    doc_major = np.zeros(padded_tokens, placement.hyper.topic_dtype)
    doc_major[:tokens] = corpus_topics(first, tokens)
    return doc_major
