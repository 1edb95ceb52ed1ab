"""Training with the sparse word-topic model (model_format "sparse"): its B is a recount of
its topics, one seed gives the bit-identical model on any number of devices, it learns as
the dense model does, and the plan picks and sizes it."""

import dataclasses
import functools
import json

import jax
import numpy as np
import pytest
from helpers import needs_local_devices, random_corpus, run_on_mesh

from saberjax import evaluate, sparse_word_topic, trainer
from saberjax import corpus as corpus_io
from saberjax.config import Hyperparams, TrainConfig
from saberjax.execution import memory
from saberjax.execution.mesh import SPARSE_MODEL_SPEC
from saberjax.execution.placement import place
from saberjax.execution.plan import plan
from saberjax.state import unpack_pairs


def recount(corpus, topics, num_topics):
    counts = np.zeros((corpus.num_words, num_topics), np.int32)
    np.add.at(counts, (np.asarray(corpus.word_ids), topics), 1)
    return counts


def resident_corpus():
    return random_corpus(num_docs=120, num_words=37, mean_length=25, seed=3)


@functools.cache
def resident_steps(model_format: str):
    """(placement, state, step) of resident_corpus at K = 40 in `model_format`, resident on
    one device, initialised from seed 5, its iteration compiled once for every test that
    trains it."""
    placed = place(resident_corpus(), Hyperparams.create(40, model_format=model_format),
                   num_devices=1)
    state = placed.init(5)
    return placed, state, placed.compile(state)


def iterated(placed, state, step, iterations: int):
    """(placement, state) after `iterations` calls of step from state."""
    for _ in range(iterations):
        state = step(state)
    return placed, state


@functools.cache
def resident_run(model_format: str):
    """resident_steps(model_format) after 3 iterations: the model the streamed runs are
    compared with, trained once for them all."""
    return iterated(*resident_steps(model_format), 3)


@functools.cache
def by_words_run(model_format: str, wide_pairs: bool = False, chunk_tokens: int | None = None):
    """(placement, state) of resident_run(model_format)'s corpus, settings and seed on two
    devices by words (each device holds its words' rows), A's pairs wide or packed, resident
    or streamed in chunks of chunk_tokens: each trained once for the tests comparing it."""
    hyper = dataclasses.replace(Hyperparams.create(40, model_format=model_format),
                                wide_pairs=wide_pairs)
    return run_on_mesh(resident_corpus(), hyper, 3, 5, num_devices=2, partition="words",
                       chunk_tokens=chunk_tokens)


def test_sparse_training_is_bit_identical_on_one_and_two_devices():
    needs_local_devices(2)
    corpus = resident_corpus()  # V odd: padded
    results = []
    for placed, state in (resident_run("sparse"), by_words_run("sparse")):
        assert placed.partition == "words" and placed.hyper.sparse
        if placed.num_devices > 1:  # each device holds its words' rows
            assert (state.model.word_topic.topics.sharding.spec
                    == SPARSE_MODEL_SPEC.word_topic.topics)
        topics = placed.corpus_order_topics(state)
        word_topic = placed.sparse_word_topic(state)
        np.testing.assert_array_equal(sparse_word_topic.to_dense(word_topic),
                                      recount(corpus, topics, 40))
        np.testing.assert_array_equal(np.asarray(state.model.topic_totals)[:40],
                                      np.bincount(topics, minlength=40))
        np.testing.assert_array_equal(placed.word_topic(state)[:, :40],
                                      recount(corpus, topics, 40))
        results.append((topics, word_topic))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    for left, right in zip(results[0][1], results[1][1]):
        np.testing.assert_array_equal(left, right)


def test_sparse_model_learns_as_the_dense_model_does():
    """Same seed and corpus: the two formats draw from one distribution (B-hat rounded to
    bfloat16 in the dense one), so their models' fit of the training tokens agree after 30
    iterations (10 iterations of either fit them some 0.04 worse, 3 some 0.07)."""
    corpus = resident_corpus()
    scores = {}
    for model_format in ("dense", "sparse"):
        placed, state = iterated(*resident_steps(model_format), 30)
        alpha = placed.hyper.alpha
        topic_word = np.asarray(placed.topic_word(state))  # B-hat [K, V]
        topics = placed.corpus_order_topics(state)
        theta = np.zeros((corpus.num_docs, 40))
        doc_of_token = np.repeat(np.arange(corpus.num_docs), np.diff(corpus.doc_offsets))
        np.add.at(theta, (doc_of_token, topics), 1)
        theta = (theta + alpha) / (theta + alpha).sum(axis=1, keepdims=True)
        likelihood = (theta[doc_of_token] * topic_word[:, corpus.word_ids].T).sum(axis=1)
        scores[model_format] = np.log(likelihood).mean()
    assert abs(scores["sparse"] - scores["dense"]) < 0.02, scores


def test_placement_round_trips_the_sparse_model_through_the_host():
    """A checkpoint's B and z, put back on the devices, give the state the iteration made."""
    needs_local_devices(2)
    placed, state = by_words_run("sparse")
    rebuilt = placed.model_from_word_topic(placed.sparse_word_topic(state),
                                           np.asarray(state.model.alpha))
    for left, right in zip(jax.tree.leaves(rebuilt), jax.tree.leaves(state.model)):
        np.testing.assert_array_equal(np.asarray(left), np.asarray(right))
    dense = placed.model_from_word_topic(placed.word_topic(state), np.asarray(state.model.alpha))
    np.testing.assert_array_equal(np.asarray(dense.row_prefix), np.asarray(state.model.row_prefix))
    # and a checkpoint's z: each device's share of it and its group's A, in the dtypes the
    # iteration made (a resumed run's programs are the uninterrupted run's)
    topics = placed.corpus_order_topics(state)
    placed_again = placed.place_topics(lambda first, tokens: topics[first:first + tokens])
    for left, right in zip(jax.tree.leaves(placed_again), jax.tree.leaves(state.chunks)):
        assert left.dtype == right.dtype
        np.testing.assert_array_equal(np.asarray(left), np.asarray(right))


def test_auto_takes_sparse_only_where_the_dense_model_does_not_fit():
    # about 8,000 tokens of 1,000 words: A's rebuild's scratch rows (1,024 of K ints) in the
    # sparse plan stay below the dense model
    corpus = random_corpus(num_docs=200, num_words=1000, seed=7)
    hyper = Hyperparams.create(20_000)
    dense_model = memory.model_bytes(1000, hyper.padded_topics)
    roomy = plan(corpus, hyper, 1, device_memory_gb=2 * dense_model / 1e9 + 0.01,
                 model_format="auto")
    assert roomy.model_format == "dense"
    sparse = dataclasses.replace(hyper, model_format="sparse")
    sparse_needed = memory.resident_bytes(corpus, sparse, 1, "words",
                                          memory.SPARSE_BYTES_PER_TOKEN)
    assert sparse_needed < dense_model
    tight = plan(corpus, hyper, 1, device_memory_gb=sparse_needed / 1e9, model_format="auto")
    assert tight.model_format == "sparse" and tight.partition == "words"
    streamed = (memory.streamed_sparse_model_bytes(corpus.num_tokens, 1000, hyper.padded_topics,
                                                   1)
                + 3 * 1024 * memory.SPARSE_BYTES_PER_TOKEN)
    assert streamed < sparse_needed
    tighter = plan(corpus, hyper, 1, device_memory_gb=streamed / 1e9, model_format="auto")
    assert (tighter.model_format, tighter.partition, tighter.streamed) == (
        "sparse", "documents", True)
    assert plan(corpus, hyper, 1, model_format="auto").model_format == "dense"  # CPU: no limit


def test_sparse_plan_counts_the_sparse_model_and_refuses_what_it_cannot_run():
    corpus = random_corpus(num_docs=200, num_words=1000, seed=7)
    hyper = Hyperparams.create(1_000_000, model_format="sparse")
    share = corpus.num_tokens
    needed = (memory.sparse_model_bytes(share, corpus.num_words, hyper.padded_topics)
              + share * memory.SPARSE_BYTES_PER_TOKEN
              + (memory.WORD_PARTITION_BYTES_PER_TOKEN
                 + memory.DOC_MAJOR_OWNER_BYTES_PER_TOKEN) * corpus.num_tokens)
    assert memory.model_bytes(corpus.num_words, hyper.padded_topics) > needed
    resident = plan(corpus, hyper, 1, device_memory_gb=needed / 1e9)
    assert resident.model_format == "sparse" and resident.partition == "words"
    # a share that does not fit resident streams by documents while the whole model fits
    streamed_model = memory.streamed_sparse_model_bytes(corpus.num_tokens, corpus.num_words,
                                                        hyper.padded_topics, 1)
    budget = streamed_model + 1024 * memory.SPARSE_BYTES_PER_TOKEN * 3
    assert budget < needed
    streamed = plan(corpus, hyper, 1, device_memory_gb=budget / 1e9)
    assert (streamed.model_format, streamed.partition, streamed.streamed) == (
        "sparse", "documents", True)
    assert 1024 <= streamed.chunk_tokens < corpus.num_tokens
    with pytest.raises(MemoryError, match="the model does not fit the device"):
        plan(corpus, hyper, 1, device_memory_gb=streamed_model / 2e9)
    for settings in (dict(partition="documents", stream=False), dict(mesh="1x1")):
        with pytest.raises(ValueError, match="model_format 'sparse'"):
            plan(corpus, hyper, 1 if "mesh" not in settings else 0, **settings)


@pytest.mark.parametrize("num_devices", [1, 2])
def test_sparse_model_streamed_from_memory_and_from_disk_is_the_resident_model(
        num_devices, tmp_path, monkeypatch):
    """Streamed by documents (the whole model on every device, the tokens' keys counted at
    the end) from pinned memory and from a chunk store: the same topics and B, bit for bit,
    as resident by words on one device, over several chunks a device."""
    needs_local_devices(num_devices)
    corpus = resident_corpus()
    hyper = Hyperparams.create(40, model_format="sparse")
    resident, resident_state = resident_run("sparse")
    expected = (resident.corpus_order_topics(resident_state),
                resident.sparse_word_topic(resident_state))
    from_memory = run_on_mesh(corpus, hyper, 3, 5, num_devices=num_devices, chunk_tokens=700,
                              stream=True)
    # a host budget too small for the states: the chunk store (the process's memory not
    # counted)
    monkeypatch.setattr(memory, "anonymous_host_memory", lambda: 0)
    from_disk = run_on_mesh(corpus, hyper, 3, 5, num_devices=num_devices, chunk_tokens=700,
                            stream=True, host_memory_gb=1.5e-4, chunk_store_dir=tmp_path / "s")
    for placed, state in (from_memory, from_disk):
        assert placed.partition == "documents" and placed.hyper.sparse and placed.streamed
        assert placed.num_slots > 1
        np.testing.assert_array_equal(placed.corpus_order_topics(state), expected[0])
        for got, want in zip(placed.sparse_word_topic(state), expected[1]):
            np.testing.assert_array_equal(got, want)
    assert from_disk[0].stored and not from_memory[0].stored
    # the model put back from the host is the one the iteration made (checkpoints)
    placed, state = from_memory
    rebuilt = placed.model_from_word_topic(placed.sparse_word_topic(state),
                                           np.asarray(state.model.alpha))
    for left, right in zip(jax.tree.leaves(rebuilt), jax.tree.leaves(state.model)):
        np.testing.assert_array_equal(np.asarray(left), np.asarray(right))


def test_a_sparse_plan_refuses_seed_words():
    corpus = random_corpus(num_docs=30, seed=7)
    config = TrainConfig(num_topics=8, model_format="sparse",
                         seed_words=json.dumps({0: [corpus.vocab[0]]}))
    hyper = Hyperparams.from_config(config, corpus.vocab)
    with pytest.raises(ValueError, match="seed_words train on the dense model"):
        plan(corpus, hyper, 1)


@pytest.fixture(scope="module")
def alpha_runs(tmp_path_factory):
    """run(partition, chunk_tokens): (config, checkpoint folder, result, held-out halves) of
    the uninterrupted 4 iterations learning alpha of resident_corpus at K = 40 from seed 5
    on two devices (the programs of by_words_run and of the streamed runs: resident by words,
    streamed by documents or by words in chunks of 700 tokens), a checkpoint every 2,
    held-out documents of its words scored; each trained once for the tests comparing it."""
    heldout = corpus_io.split_document_halves(
        random_corpus(num_docs=20, num_words=37, mean_length=25, seed=4), 0)

    @functools.cache
    def run(partition: str, chunk_tokens: int | None):
        config = trainer.TrainConfig(num_topics=40, iterations=4, backend="xla", seed=5,
                                     checkpoint_every=2, optimize_alpha_every=1,
                                     model_format="sparse", partition=partition,
                                     chunk_tokens=chunk_tokens)
        folder = tmp_path_factory.mktemp("checkpoints")
        result = trainer.train(resident_corpus(), config, checkpoint_dir=folder, heldout=heldout)
        return config, folder, result, heldout
    return run


@pytest.mark.parametrize("partition, chunk_tokens", [("auto", None), ("auto", 700),
                                                     ("words", 700)])
def test_a_sparse_run_learning_alpha_resumes_to_the_uninterrupted_model(alpha_runs, partition,
                                                                      chunk_tokens):
    """Resident, streamed by documents, or streamed by words (each slot's share of z and its
    own A put back), in chunks of some 700 tokens: resumed from the uninterrupted run's
    checkpoint of iteration 2, which stores B sparse.  The uninterrupted run is the resident
    one, and scores its held-out documents by their words' rows (never K x V) as its topics
    made dense score."""
    config, folder, uninterrupted, heldout = alpha_runs(partition, chunk_tokens)
    assert uninterrupted.model.config["model_format"] == "sparse"
    assert uninterrupted.model.config["streamed"] == (chunk_tokens is not None)
    assert isinstance(uninterrupted.model.word_topic_counts, sparse_word_topic.SparseWordTopic)
    halfway = folder / "checkpoint-00000002.json"
    with np.load(halfway.with_suffix(".npz")) as arrays:
        assert "word_topic.indptr" in arrays and "word_topic" not in arrays
    resumed = trainer.train(resident_corpus(), dataclasses.replace(config, checkpoint_every=0),
                            resume_from=halfway)
    assert len(resumed.metrics) == 4
    resident = alpha_runs("auto", None)[2]
    for run in (resumed, resident):
        for left, right in zip(run.model.word_topic_counts[:3],
                               uninterrupted.model.word_topic_counts[:3]):
            np.testing.assert_array_equal(left, right)
        np.testing.assert_array_equal(run.model.alpha, uninterrupted.model.alpha)
    assert not np.allclose(uninterrupted.model.alpha, uninterrupted.model.alpha[0])  # learned
    dense = evaluate.heldout_loglik(uninterrupted.model.topic_word, *heldout,
                                    uninterrupted.model.alpha)
    assert np.isclose(uninterrupted.metrics[-1]["heldout_loglik_per_token"],
                      dense.loglik_per_token, rtol=1e-5)


def test_auto_names_the_gb_the_model_needs_where_neither_format_fits():
    corpus = random_corpus(seed=15)
    with pytest.raises(MemoryError, match="need .* GB for B, B-hat"):
        plan(corpus, Hyperparams.create(8), 1, device_memory_gb=1e-6, model_format="auto")


@pytest.mark.parametrize("model_format", ["sparse", "dense"])
def test_wide_pairs_train_the_model_packed_pairs_train(model_format):
    """A's pairs forced wide (as the plan takes them for long documents) give the topics and
    B of packed pairs on one device, A gathered over two devices by word, resident and
    streamed."""
    needs_local_devices(2)
    runs = []
    for (placed, state), wide, streamed in ((resident_run(model_format), False, False),
                                            (by_words_run(model_format, True), True, False),
                                            (by_words_run(model_format, True, 700), True, True)):
        assert placed.hyper.wide_pairs == wide
        assert placed.streamed == streamed
        assert state.chunks[0].a_pairs.dtype == (np.complex64 if wide else np.uint32)
        runs.append((placed.corpus_order_topics(state), placed.word_topic(state)))
    for run in runs[1:]:
        for left, right in zip(runs[0], run):
            np.testing.assert_array_equal(left, right)


def test_a_document_longer_than_a_packed_pair_counts_trains_at_a_million_topics():
    """At K = 1,000,000 a packed pair counts 4,095 tokens: the plan takes wide pairs for a
    document of 4,500, and B stays the recount of z."""
    lengths = [4500, 30, 12]
    words = np.random.default_rng(0).integers(0, 6, sum(lengths)).astype(np.int32)
    corpus = corpus_io.Corpus(np.cumsum([0, *lengths]), words, tuple(f"w{i}" for i in range(6)))
    hyper = Hyperparams.create(1_000_000, model_format="sparse")
    placed, state = run_on_mesh(corpus, hyper, 2, 3, num_devices=1)
    assert placed.hyper.wide_pairs
    topics = placed.corpus_order_topics(state)
    word_topic = placed.sparse_word_topic(state)
    expected = sparse_word_topic.from_entries(corpus.word_ids, topics, np.ones_like(topics), 6,
                                              1_000_000)
    for got, want in zip(word_topic, expected):
        np.testing.assert_array_equal(got, want)
    chunk, chunk_state = placed.host_chunks()[0], placed.chunk_states(state)[0]
    for doc, (first, last) in enumerate(zip(corpus.doc_offsets[:-1], corpus.doc_offsets[1:])):
        start = int(chunk.doc_start[doc])
        doc_topics, doc_counts = map(np.asarray, unpack_pairs(
            chunk_state.a_pairs[start:start + int(chunk_state.a_nnz[doc])], 1_000_000))
        expected_topics, expected_counts = np.unique(topics[first:last], return_counts=True)
        np.testing.assert_array_equal(doc_topics, expected_topics)
        np.testing.assert_array_equal(doc_counts, expected_counts)


@pytest.mark.parametrize("model_format", ["sparse", "dense"])
def test_streamed_by_words_is_the_model_resident_on_one_device(model_format):
    """Partitioned by word and streamed (each device keeps its words' rows while every
    device's slots of documents pass by with their word shares): the same topics and B, bit
    for bit, as resident on one device, over several slots a device."""
    needs_local_devices(2)
    resident, resident_state = resident_run(model_format)
    placed, state = by_words_run(model_format, chunk_tokens=700)
    assert (placed.partition, placed.streamed, placed.hyper.model_format) == (
        "words", True, model_format)
    assert placed.num_slots > 1
    np.testing.assert_array_equal(placed.corpus_order_topics(state),
                                  resident.corpus_order_topics(resident_state))
    np.testing.assert_array_equal(placed.word_topic(state), resident.word_topic(resident_state))
    if model_format == "sparse":  # each device holds its words' rows, of its shares' tokens
        assert (state.model.word_topic.topics.sharding.spec
                == SPARSE_MODEL_SPEC.word_topic.topics)
        assert state.model.word_topic.topics.shape == (2 * placed.streamed_tokens,)
        rebuilt = placed.model_from_word_topic(placed.sparse_word_topic(state),
                                               np.asarray(state.model.alpha))
        for left, right in zip(jax.tree.leaves(rebuilt), jax.tree.leaves(state.model)):
            np.testing.assert_array_equal(np.asarray(left), np.asarray(right))


def test_the_sparse_plan_streams_by_words_where_each_device_holds_its_share(monkeypatch):
    """On two devices, where every share does not fit resident, the sparse model streams by
    word: a device's plan counts its rows (half the tokens' entries), where streamed by
    document every device holds the whole model."""
    corpus = random_corpus(num_docs=200, seed=7)
    hyper = Hyperparams.create(1_000_000, model_format="sparse")
    share = -(-corpus.num_tokens // 2)
    resident = memory.resident_bytes(corpus, hyper, 2, "words", memory.SPARSE_BYTES_PER_TOKEN)
    by_word = memory.streamed_by_word_model_bytes(share, 25, hyper.padded_topics, True)
    by_document = memory.streamed_sparse_model_bytes(corpus.num_tokens, 50,
                                                     hyper.padded_topics, 2)
    assert by_word < by_document
    # the model and two slots in flight (prefetch 1), a slot token's bytes with both devices'
    # A gathered and doc-major topics
    budget = by_word + 2 * 1100 * (memory.SPARSE_BYTES_PER_TOKEN
                                   + 2 * memory.WORD_PARTITION_BYTES_PER_TOKEN)
    assert budget < min(resident, by_document)
    planned = plan(corpus, hyper, 2, device_memory_gb=budget / 1e9, prefetch=1)
    assert (planned.partition, planned.streamed, planned.model_format) == (
        "words", True, "sparse")
    assert 1024 <= planned.chunk_tokens < share
    with pytest.raises(MemoryError, match="the model does not fit the device"):
        plan(corpus, hyper, 2, partition="words", device_memory_gb=by_word / 2e9)
    # a host budget that holds the model but not the chunks beside it (the process's memory
    # not counted): a chunk store's, which streams by document only
    monkeypatch.setattr(memory, "anonymous_host_memory", lambda: 0)
    assert plan(corpus, hyper, 2, stream=True, host_memory_gb=4e-4).stored
    with pytest.raises(ValueError, match="partition 'words' streams from host memory"):
        plan(corpus, hyper, 2, partition="words", stream=True, host_memory_gb=4e-4)
