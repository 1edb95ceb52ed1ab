"""ESCA iterations keep A and B equal to a recount of z, and one seed gives one model."""

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import random_corpus

from saberjax import esca, mstep, segmented_count, trainer
from saberjax.config import Hyperparams
from saberjax.layout import build_layout
from saberjax.state import (BHAT_DTYPE, MAX_WIDE_PAIR_COUNT, check_document_lengths,
                            max_pair_count, needs_wide_pairs, pack_pairs, pair_topic_bits,
                            unpack_pairs)
from saberjax.tree import WIDTH


def run(corpus, hyper, iterations, chunk_tokens=None, seed=7):
    layout = build_layout(corpus, chunk_tokens)
    chunks = jax.device_put(layout.chunks)
    state = esca.init(chunks, corpus.num_words, hyper, seed)
    states = [state]
    for _ in range(iterations):
        state = esca.step(state, chunks, hyper)
        states.append(state)
    return layout, chunks, states


def assert_counts_match_recount(corpus, layout, chunks, state, hyper):
    z = esca.corpus_order_topics(chunks, state.chunks)
    words = np.asarray(corpus.word_ids)
    recount_b = np.zeros((corpus.num_words, hyper.padded_topics), np.int64)
    np.add.at(recount_b, (words, z), 1)
    np.testing.assert_array_equal(np.asarray(state.model.word_topic), recount_b)
    np.testing.assert_array_equal(np.asarray(state.model.topic_totals), recount_b.sum(axis=0))
    total_a = 0
    offsets = np.asarray(corpus.doc_offsets)
    for chunk, chunk_state, (first, last) in zip(chunks, state.chunks, layout.chunk_docs):
        a_topics, a_counts = map(np.asarray, unpack_pairs(chunk_state.a_pairs, hyper.num_topics))
        a_nnz, doc_start = np.asarray(chunk_state.a_nnz), np.asarray(chunk.doc_start)
        for local, doc in enumerate(range(first, last)):
            expected = collections.Counter(z[offsets[doc]:offsets[doc + 1]].tolist())
            start, nnz = doc_start[local], a_nnz[local]
            assert nnz == len(expected)
            assert list(a_topics[start:start + nnz]) == sorted(expected)  # compacted, increasing
            assert [expected[k] for k in a_topics[start:start + nnz]] == list(
                a_counts[start:start + nnz])
            total_a += a_counts[start:start + nnz].sum()
    assert total_a == recount_b.sum() == corpus.num_tokens


@pytest.mark.parametrize("num_topics", [5, 40, 300, 65_536])
def test_counts_equal_recount_after_every_step(num_topics):
    corpus = random_corpus(num_docs=40, num_words=30, mean_length=30, seed=num_topics)
    hyper = Hyperparams.create(num_topics)
    layout, chunks, states = run(corpus, hyper, iterations=3, chunk_tokens=500)
    assert len(chunks) > 1
    for state in states:
        assert_counts_match_recount(corpus, layout, chunks, state, hyper)


def test_chunking_does_not_change_result():
    corpus = random_corpus(num_docs=90, num_words=60, mean_length=50, seed=1)
    hyper = Hyperparams.create(20)
    _, chunks_one, one = run(corpus, hyper, iterations=5)
    _, chunks_three, three = run(corpus, hyper, iterations=5,
                                 chunk_tokens=corpus.num_tokens // 3 + 1)
    assert len(chunks_one) == 1 and len(chunks_three) == 3
    z_one = esca.corpus_order_topics(chunks_one, one[-1].chunks)
    np.testing.assert_array_equal(z_one,
                                  esca.corpus_order_topics(chunks_three, three[-1].chunks))
    np.testing.assert_array_equal(np.asarray(one[-1].model.word_topic),
                                  np.asarray(three[-1].model.word_topic))
    assert not np.array_equal(z_one, esca.corpus_order_topics(chunks_one, one[1].chunks))


def test_window_initial_topics_are_few_a_window_whatever_the_chunking():
    corpus = random_corpus(num_docs=90, num_words=60, mean_length=50, seed=3)
    windowed = Hyperparams.create(50, init_window_topics=4)
    _, chunks_one, one = run(corpus, windowed, iterations=0)
    _, chunks_three, three = run(corpus, windowed, iterations=0,
                                 chunk_tokens=corpus.num_tokens // 3 + 1)
    assert len(chunks_three) == 3
    z = esca.corpus_order_topics(chunks_one, one[0].chunks)
    np.testing.assert_array_equal(z, esca.corpus_order_topics(chunks_three, three[0].chunks))
    _, chunks_uniform, uniform = run(corpus, Hyperparams.create(50), iterations=0)
    z_uniform = esca.corpus_order_topics(chunks_uniform, uniform[0].chunks)
    window = np.arange(corpus.num_tokens) // esca.INIT_WINDOW_TOKENS
    assert window[-1] >= 3
    for w in range(window[-1] + 1):
        assert len(np.unique(z[window == w])) <= 4
        assert len(np.unique(z_uniform[window == w])) > 4
    assert len(np.unique(z)) > 4  # each window's own topics


def test_different_seeds_give_different_models():
    corpus = random_corpus(seed=2)
    hyper = Hyperparams.create(10)
    _, chunks, a = run(corpus, hyper, iterations=2, seed=1)
    _, _, b = run(corpus, hyper, iterations=2, seed=2)
    assert not np.array_equal(esca.corpus_order_topics(chunks, a[-1].chunks),
                              esca.corpus_order_topics(chunks, b[-1].chunks))


def test_step_is_jittable_and_matches_eager_step():
    corpus = random_corpus(seed=3)
    hyper = Hyperparams.create(8)
    layout, chunks, states = run(corpus, hyper, iterations=1, chunk_tokens=800)
    jitted = jax.jit(esca.step, static_argnames="hyper")(states[0], chunks, hyper)
    np.testing.assert_array_equal(esca.corpus_order_topics(chunks, jitted.chunks),
                                  esca.corpus_order_topics(chunks, states[1].chunks))
    assert int(jitted.iteration) == 1


@pytest.mark.parametrize("num_topics,topic_bits", [(2, 5), (1000, 10), (65_536, 16)])
def test_a_pairs_hold_every_topic_with_counts_up_to_the_limit(num_topics, topic_bits):
    assert pair_topic_bits(num_topics) == topic_bits
    assert max_pair_count(num_topics) == 2 ** (32 - topic_bits) - 1
    rng_np = np.random.default_rng(num_topics)
    topics = np.append(rng_np.integers(0, num_topics, 1000), [0, num_topics - 1])
    counts = np.append(rng_np.integers(0, max_pair_count(num_topics) + 1, 1000),
                       [max_pair_count(num_topics), 1])
    pairs = pack_pairs(jnp.asarray(topics), jnp.asarray(counts), num_topics)
    assert pairs.dtype == jnp.uint32
    got_topics, got_counts = unpack_pairs(pairs, num_topics)
    np.testing.assert_array_equal(got_topics, topics)
    np.testing.assert_array_equal(got_counts, counts)


def test_wide_pairs_hold_every_topic_with_counts_up_to_two_to_the_24():
    num_topics = 1_000_000
    rng_np = np.random.default_rng(7)
    topics = np.append(rng_np.integers(0, num_topics, 1000), [0, num_topics - 1])
    counts = np.append(rng_np.integers(0, MAX_WIDE_PAIR_COUNT + 1, 1000),
                       [MAX_WIDE_PAIR_COUNT, max_pair_count(num_topics) + 1])
    pairs = pack_pairs(jnp.asarray(topics), jnp.asarray(counts), num_topics, wide=True)
    assert pairs.dtype == jnp.complex64
    got_topics, got_counts = unpack_pairs(pairs, num_topics)
    np.testing.assert_array_equal(got_topics, topics)
    np.testing.assert_array_equal(got_counts, counts)
    np.testing.assert_array_equal(unpack_pairs(np.asarray(pairs), num_topics)[1], counts)


def test_wide_pairs_are_needed_exactly_beyond_what_a_packed_pair_counts():
    assert max_pair_count(1_000_000) == 4095
    assert not needs_wide_pairs(4095, 1_000_000)
    assert needs_wide_pairs(4096, 1_000_000)
    assert not needs_wide_pairs(65_535, 65_536) and needs_wide_pairs(65_536, 65_536)


def test_a_document_longer_than_any_pair_can_count_is_named_before_training():
    check_document_lengths([3, MAX_WIDE_PAIR_COUNT, 2])
    message = r"document 1 has 16,777,217 tokens.*at most 16,777,216"
    with pytest.raises(ValueError, match=message):
        check_document_lengths([3, MAX_WIDE_PAIR_COUNT + 1, 2])


@pytest.mark.parametrize("in_table", [False, True])
def test_a_rebuild_in_wide_pairs_holds_the_packed_rebuilds_pairs(in_table):
    """Both ways of the segmented count (table and sort) give the same pairs wide."""
    corpus = random_corpus(num_docs=6 if in_table else 40, seed=5)
    chunk = jax.device_put(build_layout(corpus).chunks[0])
    topics = jnp.asarray(np.random.default_rng(1).integers(0, 30, chunk.padded_tokens),
                         jnp.int32)
    packed = segmented_count.rebuild_doc_topic(chunk, topics, 30)
    wide = segmented_count.rebuild_doc_topic(chunk, topics, 30, wide=True)
    assert wide[0].dtype == jnp.complex64
    np.testing.assert_array_equal(wide[1], packed[1])
    for got, expected in zip(unpack_pairs(wide[0], 30), unpack_pairs(packed[0], 30)):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("num_topics", [40, 5000])
def test_bhat_is_rounded_to_its_dtype_and_its_tree_adds_up_what_it_holds(num_topics):
    hyper = Hyperparams.create(num_topics)
    counts = np.random.default_rng(0).geometric(0.01, (3, hyper.padded_topics)) - 1
    counts[:, hyper.num_topics:] = 0
    model = esca.model_from_counts(jnp.asarray(counts, jnp.int32), hyper.initial_alpha(), hyper)
    assert model.bhat.dtype == BHAT_DTYPE == jnp.bfloat16
    held = np.asarray(model.bhat, np.float64)
    exact = mstep.float32_bhat(model.word_topic, model.topic_totals, hyper.num_topics, hyper.beta)
    np.testing.assert_allclose(held, np.asarray(exact), rtol=2**-8)  # rounded, nothing more
    alpha = np.asarray(model.alpha, np.float64)  # the trees hold alpha_k B-hat_vk
    level_above = (held * alpha).reshape(3, -1, WIDTH).sum(axis=2)
    np.testing.assert_allclose(np.asarray(model.tree[-1])[:, :level_above.shape[1]],
                               level_above, rtol=1e-5)


def readme_loop(corpus, num_topics: int, iterations: int, every: int, burn_in: int, seed: int,
                learn_alpha: bool = True):
    """The README's loop in plain JAX (jit, fori_loop, cond): (B [V, K], alpha [K])."""
    from saberjax import init, prior, step

    layout = build_layout(corpus, chunk_tokens=None)
    chunks = jax.device_put(layout.chunks)
    hyper = Hyperparams.create(num_topics=num_topics)
    lengths = prior.length_histogram(corpus.doc_lengths())

    @jax.jit
    def run(state, chunks, lengths):
        def iteration(i, state):
            state = step(state, chunks, hyper)
            due = prior.is_due(i, every, burn_in) if learn_alpha else False
            return jax.lax.cond(due, lambda s: esca.update_alpha(s, chunks, lengths, hyper),
                                lambda s: s, state)
        return jax.lax.fori_loop(1, iterations + 1, iteration, state)

    state = run(esca.init(chunks, corpus.num_words, hyper, seed=seed), chunks, lengths)
    return (np.asarray(state.model.word_topic)[:, :num_topics],
            np.asarray(state.model.alpha)[:num_topics])


@pytest.mark.parametrize("every,burn_in", [(3, 3), (2, 0), (0, 0)])
def test_the_readme_loop_of_init_step_and_update_alpha_gives_the_model_train_gives(every,
                                                                                  burn_in):
    corpus = random_corpus(num_docs=40, num_words=30, mean_length=30, seed=3)
    config = trainer.TrainConfig(num_topics=6, iterations=10, optimize_alpha_every=every,
                                 burn_in=burn_in, seed=11, backend="xla", num_devices=1)
    trained = trainer.train(corpus, config).model
    word_topic, alpha = readme_loop(corpus, 6, 10, every, burn_in, seed=11)
    np.testing.assert_array_equal(word_topic, trained.word_topic_counts)
    np.testing.assert_array_equal(alpha, trained.alpha)
    if every:  # negative control: without the update, alpha stays where it started
        fixed_counts, fixed_alpha = readme_loop(corpus, 6, 10, every, burn_in, seed=11,
                                                learn_alpha=False)
        assert not np.array_equal(fixed_alpha, trained.alpha)
        assert not np.array_equal(fixed_counts, trained.word_topic_counts)
