"""The Pallas kernels compute what their XLA references compute, and lower to Triton for an H100.

Kernels run in interpret mode on a CPU (CI) and compiled on a GPU, where these tests then check
the real kernels; the lowering tests compile each kernel to Triton IR for an abstract H100, so
an operation Triton cannot lower fails on a CPU-only machine too.
"""

import dataclasses
import functools
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import test_sampler
from helpers import import_script, random_corpus

from saberjax import esca, rng
from saberjax.config import Hyperparams
from saberjax.corpus import Corpus
from saberjax.layout import TILE_TOKENS, build_layout, max_tiles, with_tile_tokens
from saberjax.pallas import bhat_tree as pallas_bhat_tree
from saberjax.pallas import default_interpret
from saberjax.pallas import sampler as pallas_sampler
from saberjax.pallas import segmented_count as pallas_ssc
from saberjax.pallas import word_topic_count as pallas_word_count
from saberjax.pallas.tile_queues import queue_bounds
from saberjax.segmented_count import shuffle_to_doc_major
from saberjax.state import BHAT_DTYPE, ChunkState

CHECK_GPU = import_script("tools/check_gpu.py", "check_gpu")  # its ragged test corpora
H100 = jax.sharding.AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=None,
                                   platform="gpu")


def ragged_corpus(num_words: int = 40, seed: int = 0) -> Corpus:
    """Random documents plus empty and one-token ones; word 0 frequent, the last word once."""
    return CHECK_GPU.ragged_corpus(num_words, seed)


def with_backend(num_topics: int, backend: str) -> Hyperparams:
    """The default settings of num_topics topics on `backend` as given: "pallas" off a GPU too
    (the kernels in interpret mode), which a run's settings refuse (backend.resolve_backend)."""
    return dataclasses.replace(Hyperparams.create(num_topics, backend="xla"), backend=backend)


def doc_major(chunk, topics):
    """Word-major topics at their doc-major positions (the reference shuffle)."""
    return shuffle_to_doc_major(topics, chunk.doc_major_pos)


def random_state(corpus: Corpus, num_topics: int, seed: int, zero_share: float = 0.0):
    """(chunk, chunk state, model, key) with random topics and random, skewed counts in B;
    with zero_share, that share of the tokens (at random) has topic 0."""
    rng_np = np.random.default_rng(seed)
    hyper = Hyperparams.create(num_topics, backend="xla")
    chunk = jax.device_put(build_layout(corpus).chunks[0])
    topics = np.where(np.arange(chunk.padded_tokens) < chunk.num_tokens,
                      rng_np.integers(0, num_topics, chunk.padded_tokens), 0)
    if zero_share:
        topics = np.where(rng_np.random(chunk.padded_tokens) < zero_share, 0, topics)
    topics = jnp.asarray(topics).astype(hyper.topic_dtype)
    chunk_state = esca.chunk_state_from_topics(chunk, topics, doc_major(chunk, topics), hyper)
    counts = np.zeros((corpus.num_words, hyper.padded_topics), np.int32)
    counts[:, :num_topics] = rng_np.geometric(0.3, (corpus.num_words, num_topics)) - 1
    alpha = np.zeros(hyper.padded_topics, np.float32)  # a learned prior: one value per topic
    alpha[:num_topics] = rng_np.gamma(0.5, 2 * hyper.alpha, num_topics)
    model = esca.model_from_counts(jnp.asarray(counts), jnp.asarray(alpha), hyper)
    return chunk, chunk_state, model, rng.iteration_key(seed, 3), hyper


@pytest.mark.parametrize("num_topics,block_reduction,tile_tokens,zero_share", [
    (2, "sum", 4, 0.0), (1000, "sum", 16, 0.0), (1000, "butterfly", 8, 0.0), (37, "sum", 1, 0.0),
    (48, "sum", 8, 0.5), (65_536, "sum", 4, 0.0)])
def test_sampler_kernel_draws_the_reference_topics(num_topics, block_reduction, tile_tokens,
                                                   zero_share):
    """zero_share: half the tokens on topic 0 at K = 48 puts the own topic in every block of
    the rows, where an own count lost across blocks or to the lanes past a row would show."""
    chunk, chunk_state, model, key, hyper = random_state(ragged_corpus(seed=num_topics),
                                                         num_topics, seed=num_topics,
                                                         zero_share=zero_share)
    expected = jax.jit(pallas_sampler.sample_chunk_reference)(chunk, chunk_state, model, key)
    got, got_doc_major = pallas_sampler.sample_and_shuffle(
        with_tile_tokens(chunk, model.bhat.shape[0], tile_tokens), chunk_state, model, key,
        block_reduction=block_reduction)
    np.testing.assert_array_equal(got_doc_major, doc_major(chunk, got))
    assert got.dtype == got_doc_major.dtype == expected.dtype
    assert np.mean(np.asarray(got) != np.asarray(expected)) < 1e-3
    assert np.all(np.asarray(got)[int(chunk.num_tokens):] == 0)


def test_sampler_kernel_unzeroed_stores_the_same_topics_at_the_tokens_positions():
    """zero_doc_major=False: the same draws, and the same topics at every real token's
    doc-major position (the rest is left unset, so not compared)."""
    chunk, chunk_state, model, key, hyper = random_state(ragged_corpus(seed=7), 37, seed=7)
    zeroed = pallas_sampler.sample_and_shuffle(chunk, chunk_state, model, key)
    unzeroed = pallas_sampler.sample_and_shuffle(chunk, chunk_state, model, key,
                                                 zero_doc_major=False)
    np.testing.assert_array_equal(unzeroed[0], zeroed[0])
    real = np.asarray(chunk.doc_major_pos)[:int(chunk.num_tokens)]
    np.testing.assert_array_equal(np.asarray(unzeroed[1])[real], np.asarray(zeroed[1])[real])


@pytest.mark.parametrize("tile_tokens", [1, 4, 8, 32])
def test_word_tiles_cover_every_token_once_within_one_word(tile_tokens):
    """The E-step's work list for any tile size (the layout's Chunk.tile_start at TILE_TOKENS)."""
    corpus = ragged_corpus(seed=3)
    chunk = build_layout(corpus).chunks[0]
    tiled = with_tile_tokens(chunk, corpus.num_words, tile_tokens)
    tile_start = tiled.tile_start
    assert tiled.tile_tokens == tile_tokens and chunk.tile_tokens == TILE_TOKENS
    if tile_tokens == TILE_TOKENS:
        np.testing.assert_array_equal(tile_start, chunk.tile_start)
    n, word = int(chunk.num_tokens), np.asarray(chunk.word)
    num_tiles = int(np.argmax(tile_start == n))
    assert len(tile_start) == max_tiles(chunk.padded_tokens, corpus.num_words, tile_tokens) + 1
    assert tile_start[0] == 0 and np.all(tile_start[num_tiles:] == n)
    sizes = np.diff(tile_start[: num_tiles + 1])
    assert np.all((sizes >= 1) & (sizes <= tile_tokens))
    for first, size in zip(tile_start[:num_tiles], sizes):
        assert np.all(word[first : first + size] == word[first])
    # a tile is cut short only where its word ends
    short = sizes < tile_tokens
    ends = tile_start[1 : num_tiles + 1][short]
    assert np.all((ends == n) | (word[np.minimum(ends, n - 1)] != word[ends - 1]))


@pytest.fixture
def kernel_sampler(monkeypatch):
    """Makes test_sampler draw its tokens with the Pallas kernel instead of the reference."""
    monkeypatch.setattr(test_sampler, "sampler", types.SimpleNamespace(
        sample_chunk=lambda *args: pallas_sampler.sample_and_shuffle(*args)[0]))


@pytest.mark.parametrize("num_topics,nonzeros,alpha,asymmetric", [
    (2, 1, 0.5, False), (100, 70, 0.5, False), (1000, 40, 0.05, False), (2000, 300, 1.0, False),
    (2000, 40, 0.05, True)])
def test_sampler_kernel_matches_exact_distribution(kernel_sampler, num_topics, nonzeros, alpha,
                                                   asymmetric):
    test_sampler.test_sampler_matches_exact_distribution(num_topics, nonzeros, alpha,
                                                         asymmetric)


def test_sampler_kernel_uses_both_parts_in_the_right_proportion(kernel_sampler):
    test_sampler.test_sampler_uses_both_parts_in_the_right_proportion()


@pytest.mark.parametrize("num_topics,block_tokens,num_programs,levels", [
    (2, 32, 7, 2), (37, 16, 64, None), (1000, 32, 5, None), (65_536, 64, 3, None)])
def test_segmented_count_kernel_rebuilds_the_reference_doc_topic(num_topics, block_tokens,
                                                                 num_programs, levels):
    """Programs reuse their scratch rows over several documents (num_programs < documents);
    the bitmap at one level and with its summary (levels 2: forced at K = 2, by default at
    K = 65,536)."""
    corpus = ragged_corpus(seed=num_topics)
    chunk, chunk_state, *_ = random_state(corpus, num_topics, seed=num_topics + 1)
    topics = doc_major(chunk, chunk_state.topics)
    got = pallas_ssc.rebuild_doc_topic(chunk, topics, num_topics, block_tokens=block_tokens,
                                       num_programs=num_programs, levels=levels)
    expected = pallas_ssc.rebuild_doc_topic_reference(chunk, topics, num_topics)
    assert got[0].dtype == expected[0].dtype == np.uint32
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])
    # padding tokens are not counted: the padding document's row is empty
    assert not np.any(got[0][int(chunk.num_tokens):]) and not np.any(got[1][corpus.num_docs:])


def test_segmented_count_programs_by_topics():
    """The L2's share of scratch rows where they fit (at least 512 programs), 1,024 programs
    where the rows outgrow the L2 and 1,024 of them fit the wide scratch's bytes (K =
    100,000), 512 where they do not (K = 1,000,000), never more than one a document; the
    scratch's bytes are the programs' rows."""
    assert pallas_ssc.program_count(1000, 10**6) == 2048
    assert pallas_ssc.program_count(10_000, 10**6) == (24 << 20) // pallas_ssc.scratch_row_bytes(
        10_000) > 512
    assert pallas_ssc.program_count(100_000, 10**6) == 1024
    assert pallas_ssc.program_count(100_000, 10**6, wide_scratch_bytes=1 << 28) == 512
    assert pallas_ssc.program_count(1_000_000, 10**6) == 512
    assert pallas_ssc.program_count(1_000_000, 300) == 300
    assert pallas_ssc.scratch_bytes_of(100_000, 10**6) == 1024 * 4 * (100_000 + 3 * 3125 + 3 * 98)
    assert pallas_ssc.scratch_bytes_of(1_000_000, 10**6) <= 512 * 4.4e6


@pytest.mark.parametrize("operation", ["add", "swap"])
def test_atomics_act_lane_by_lane_and_return_the_old_values(operation):
    """Repeated indices within a vector, a mask, a 2-D ref indexed (program, column)."""
    from jax.experimental import pallas as pl  # noqa: PLC0415

    from saberjax.pallas import atomics  # noqa: PLC0415

    atomic = getattr(atomics, f"atomic_{operation}")

    rng_np = np.random.default_rng(3)
    columns = jnp.asarray(rng_np.integers(0, 5, 64), jnp.int32)
    values = jnp.asarray(rng_np.integers(-3, 9, 64), jnp.int32)
    mask = jnp.asarray(rng_np.random(64) < 0.7)

    def kernel(columns_ref, values_ref, mask_ref, totals_in_ref, totals_ref, old_ref):
        del totals_in_ref
        old_ref[...] = atomic(totals_ref, (pl.program_id(0), columns_ref[...]),
                                  values_ref[...], mask=mask_ref[...])

    full = pl.BlockSpec(memory_space=pl.ANY)
    totals, old = pl.pallas_call(
        kernel, grid=(2,), in_specs=[pl.BlockSpec((64,), lambda i: (0,))] * 3 + [full],
        out_specs=(full, pl.BlockSpec((None, 64), lambda i: (i, 0))),
        out_shape=(jax.ShapeDtypeStruct((2, 5), jnp.int32),
                   jax.ShapeDtypeStruct((2, 64), jnp.int32)),
        input_output_aliases={3: 0}, interpret=True,  # the interpret rule's lane order
    )(columns, values, mask, jnp.full((2, 5), 100, jnp.int32))
    expected_totals, expected_old = np.full(5, 100), np.zeros(64, np.int64)
    for lane in range(64):
        expected_old[lane] = expected_totals[columns[lane]]
        if mask[lane]:
            expected_totals[columns[lane]] = (expected_totals[columns[lane]] + int(values[lane])
                                              if operation == "add" else int(values[lane]))
    np.testing.assert_array_equal(totals, np.stack([expected_totals] * 2))
    np.testing.assert_array_equal(old[:, mask], np.stack([expected_old[mask]] * 2))


def test_an_atomic_of_constants_runs_in_a_loop_in_interpret_mode():
    """A scalar counter claimed by constant increments in a while loop (the sparse E-step's
    tile queue): interpret mode discharges the loop's body, which must hold no constants."""
    from jax.experimental import pallas as pl  # noqa: PLC0415

    from saberjax.pallas import atomics  # noqa: PLC0415

    def kernel(counter_in_ref, claims_in_ref, counter_ref, claims_ref):
        del counter_in_ref, claims_in_ref
        program = pl.program_id(0)

        def claim(count):
            old = atomics.atomic_add(counter_ref, jnp.zeros((), jnp.int32), jnp.int32(1),
                                     semantic="relaxed")
            claims_ref[program] = claims_ref[program] + 1
            return jnp.maximum(count, old)
        jax.lax.while_loop(lambda count: count < 9, claim, jnp.int32(0))

    full = pl.BlockSpec(memory_space=pl.ANY)
    counter, claims = pl.pallas_call(
        kernel, grid=(3,), in_specs=[full, full], out_specs=(full, full),
        out_shape=(jax.ShapeDtypeStruct((1,), jnp.int32), jax.ShapeDtypeStruct((3,), jnp.int32)),
        input_output_aliases={0: 0, 1: 1}, interpret=True)(jnp.zeros(1, jnp.int32),
                                                           jnp.zeros(3, jnp.int32))
    # programs run one after another: the first claims 0 .. 9, the others one each
    assert int(counter[0]) == 12
    np.testing.assert_array_equal(claims, [10, 1, 1])


@pytest.mark.parametrize("num_topics,block_tokens,spread", [
    (2, 8, 512), (1000, 32, 1), (37, 1, 6), (65_536, 64, 512)])
def test_word_topic_count_kernel_adds_exactly_the_chunk_to_b(num_topics, block_tokens, spread):
    """Against a recount, onto a B that is not zero; padding tokens are not counted; blocks in
    order or spread (spread 6 uses its common divisor with the block count)."""
    corpus = ragged_corpus(seed=num_topics + 7)
    chunk, chunk_state, *_ = random_state(corpus, num_topics, seed=num_topics)
    start = np.random.default_rng(num_topics).integers(0, 5, (corpus.num_words, num_topics))
    got = pallas_word_count.count_word_topic(chunk, chunk_state.topics,
                                             jnp.asarray(start, jnp.int32),
                                             block_tokens=block_tokens, spread=spread)
    real = int(chunk.num_tokens)
    np.add.at(start, (np.asarray(chunk.word)[:real], np.asarray(chunk_state.topics)[:real]), 1)
    np.testing.assert_array_equal(got, start)


@pytest.mark.parametrize("num_topics,num_words,block_columns,rows_per_program", [
    (2, 9, 1024, 8), (37, 7, 32, None), (1000, 11, 1024, 256), (10_000, 21, 256, 16),
    (65_536, 3, 1024, 8)])
def test_model_arrays_kernels_match_the_reference(num_topics, num_words, block_columns,
                                                  rows_per_program):
    """Totals exactly, B-hat up to division rounding, the tree levels up to summation order."""
    hyper = Hyperparams.create(num_topics, backend="xla")
    counts = np.zeros((num_words, hyper.padded_topics), np.int32)
    counts[:, :num_topics] = np.random.default_rng(num_topics).geometric(
        0.3, (num_words, num_topics)) - 1
    counts = jnp.asarray(counts)
    alpha = np.zeros(hyper.padded_topics, np.float32)  # a learned prior: one value per topic
    alpha[:num_topics] = np.random.default_rng(1).gamma(0.5, 1.0, num_topics)
    alpha = jnp.asarray(alpha)
    totals, bhat, tree = pallas_bhat_tree.model_arrays(
        counts, alpha, num_topics, hyper.beta, block_columns=block_columns,
        rows_per_program=rows_per_program)
    expected = pallas_bhat_tree.model_arrays_reference(counts, alpha, num_topics, hyper.beta)
    np.testing.assert_array_equal(totals, expected[0])
    assert bhat.dtype == expected[1].dtype == BHAT_DTYPE
    np.testing.assert_allclose(np.asarray(bhat, np.float32), np.asarray(expected[1], np.float32),
                               rtol=2**-8)  # the same float32 quotient, rounded; ties may differ
    assert not np.any(np.asarray(bhat, np.float32)[:, num_topics:])
    assert len(tree) == len(expected[2])
    for got_level, expected_level in zip(tree, expected[2]):
        np.testing.assert_allclose(got_level, expected_level, rtol=1e-5)


def test_pallas_backend_trains_the_same_model_as_xla():
    """Each of two steps from the same state: bit-identical in interpret mode, where the
    kernels run XLA's own ops; compiled on a GPU, Triton's rounding may change a rare token's
    topic (1e-7 to 1e-4 of them on large corpora, docs/measurements/kernels.md)."""
    corpus = random_corpus(num_docs=30, num_words=30, mean_length=20, seed=5)
    chunks = jax.device_put(build_layout(corpus, corpus.num_tokens // 2 + 1).chunks)
    hypers = {backend: with_backend(30, backend) for backend in ("xla", "pallas")}
    state = esca.init(chunks, corpus.num_words, hypers["xla"], seed=11)
    for _ in range(2):
        steps = {backend: esca.step(state, chunks, hyper) for backend, hyper in hypers.items()}
        topics = [esca.corpus_order_topics(chunks, steps[b].chunks) for b in ("pallas", "xla")]
        counts = [np.asarray(steps[b].model.word_topic) for b in ("pallas", "xla")]
        if default_interpret():
            np.testing.assert_array_equal(*topics)
            np.testing.assert_array_equal(*counts)
        else:
            assert np.mean(topics[0] != topics[1]) <= 0.01
            assert np.abs(counts[0] - counts[1]).sum() <= 2 * np.sum(topics[0] != topics[1])
        state = steps["xla"]


def lower_for_h100(function, *args) -> str:
    """The text of `function` lowered for CUDA under an abstract H100 (Triton IR inside)."""
    with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((1,), ("x",),
                                                                  abstract_device=H100)):
        return jax.jit(function).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


@pytest.mark.parametrize("num_topics,block_reduction", [
    (2, "sum"), (1000, "sum"), (1000, "butterfly"), (65_536, "sum")])
def test_kernels_lower_to_triton_for_h100(num_topics, block_reduction):
    chunk, chunk_state, model, key, hyper = random_state(ragged_corpus(), num_topics, seed=1)
    sample = functools.partial(pallas_sampler.sample_and_shuffle,
                               block_reduction=block_reduction, interpret=False)
    text = lower_for_h100(sample, chunk, chunk_state, model, key)
    assert "triton" in text.lower()
    rebuild = functools.partial(pallas_ssc.rebuild_doc_topic, num_topics=num_topics,
                                interpret=False)
    assert "triton" in lower_for_h100(rebuild, chunk, chunk_state.topics).lower()
    count = functools.partial(pallas_word_count.count_word_topic, interpret=False)
    assert "triton" in lower_for_h100(count, chunk, chunk_state.topics,
                                      model.word_topic).lower()
    arrays = functools.partial(pallas_bhat_tree.model_arrays, num_topics=num_topics,
                               beta=hyper.beta, interpret=False)
    assert "triton" in lower_for_h100(arrays, model.word_topic, model.alpha).lower()


def test_sampler_kernel_lowers_for_a_model_over_4_gib():
    """V x K >= 2^31 (NYTimes shape at K = 30,000): offsets into B-hat and B need 64 bits."""
    chunk, chunk_state, model, key, hyper = random_state(ragged_corpus(), 30_000, seed=1)
    num_words, small = 102_660, model.bhat.shape[0]
    big = jax.tree_util.tree_map(  # every per-word array gets 102,660 rows (abstract: no memory)
        lambda array: jax.ShapeDtypeStruct(
            (num_words, *array.shape[1:]) if array.shape[:1] == (small,) else array.shape,
            array.dtype), model)
    sample = functools.partial(pallas_sampler.sample_and_shuffle, interpret=False)
    text = lower_for_h100(sample, chunk, chunk_state, big, key)
    assert "triton" in text.lower()
    count = functools.partial(pallas_word_count.count_word_topic, interpret=False)
    assert "triton" in lower_for_h100(count, chunk, chunk_state.topics, big.word_topic).lower()
    arrays = functools.partial(pallas_bhat_tree.model_arrays, num_topics=30_000,
                               beta=hyper.beta, interpret=False)
    assert "triton" in lower_for_h100(arrays, big.word_topic, big.alpha).lower()


def triton_texts(samplers, *args) -> list[str]:
    """The Triton module (as text) each of samplers (functions of args, each launching one
    kernel) lowers to for an H100."""
    from jax._src.pallas.triton import pallas_call_registration  # noqa: PLC0415

    lowering = pallas_call_registration.lowering
    lower, modules = lowering.lower_jaxpr_to_triton_module, []

    def capture(*capture_args, **kwargs):
        result = lower(*capture_args, **kwargs)
        modules.append(result.module)
        return result

    lowering.lower_jaxpr_to_triton_module = capture
    try:
        for sampler in samplers:
            lower_for_h100(sampler, *args)
        return [str(module) for module in modules]
    finally:
        lowering.lower_jaxpr_to_triton_module = lower


def test_sampler_kernel_register_cap_reaches_the_triton_function():
    """max_registers (64 by default) puts nvvm.maxnreg (the kernel's .maxnreg) on the Triton
    module's function, and only then: XLA's -maxrregcount flag does not reach a Pallas kernel
    (registers.py)."""
    chunk, chunk_state, model, key, _ = random_state(ragged_corpus(), 37, seed=1)
    texts = triton_texts([functools.partial(pallas_sampler.sample_and_shuffle, interpret=False,
                                            **cap)
                          for cap in ({"max_registers": None}, {"max_registers": 48}, {})],
                         chunk, chunk_state, model, key)
    assert "maxnreg" not in texts[0]
    assert "nvvm.maxnreg = 48 : i32" in texts[1]
    assert "nvvm.maxnreg = 64 : i32" in texts[2]  # the default: 32 programs an SM


@pytest.mark.parametrize("claim_tiles", [1, 4])
def test_tile_queues_claim_by_vector_atomics(claim_tiles):
    """The tile queues' claims lower to vector atomics: a scalar atomic hands its value to the
    lanes through shared memory, and XLA launches a kernel that uses shared memory with a
    small L1, which made the queued kernel about twice as slow (tile_queues.py)."""
    chunk, chunk_state, model, key, _ = random_state(ragged_corpus(), 37, seed=1)
    (text,) = triton_texts([functools.partial(
        pallas_sampler.sample_and_shuffle, interpret=False, tile_queues=132,
        claim_tiles=claim_tiles)], chunk, chunk_state, model, key)
    atomics = [line for line in text.splitlines() if "tt.atomic_rmw" in line]
    assert len(atomics) == 2, atomics  # the first claim and the loop's
    assert all(line.rstrip().endswith("-> tensor<32xi32>") for line in atomics), atomics


def test_lowering_check_rejects_what_triton_cannot_lower():
    from jax.experimental import pallas as pl  # noqa: PLC0415

    def sort_kernel(x_ref, out_ref):
        out_ref[...] = jnp.sort(x_ref[...])

    sort = pl.pallas_call(sort_kernel, out_shape=jax.ShapeDtypeStruct((16,), jnp.float32))
    with pytest.raises(NotImplementedError, match="sort"):
        lower_for_h100(sort, jnp.zeros(16, jnp.float32))



def word_share_state(num_topics: int):
    """(share, state over every document's A, model, key, hyper) of the first of two shares of
    the vocabulary (layout.word_shares: a token_base table of two blocks, doc-major output
    as long as both chunks)."""
    from saberjax.layout import word_shares  # noqa: PLC0415

    corpus = ragged_corpus()
    chunk, _, model, key, hyper = random_state(corpus, num_topics, seed=2)
    layout = build_layout(corpus, -(-corpus.num_tokens // 2), num_parts=2)
    share = jax.device_put(word_shares(corpus, layout, 2, [0])[0])
    tokens, docs = layout.chunks[0].padded_tokens, layout.chunks[0].padded_docs
    state = ChunkState(topics=jnp.zeros(share.padded_tokens, hyper.topic_dtype),
                       a_pairs=jnp.zeros(2 * tokens, jnp.uint32),
                       a_nnz=jnp.zeros(2 * docs, jnp.int32))
    assert share.token_base.shape == (2, 2) and share.block_tokens == tokens
    return share, state, model, key, hyper


def test_sampler_kernel_on_a_word_share_lowers_to_triton_for_h100():
    share, state, model, key, hyper = word_share_state(1000)
    sample = functools.partial(pallas_sampler.sample_and_shuffle, interpret=False)
    text = lower_for_h100(sample, share, state, model, key)
    assert "triton" in text.lower()


def test_pallas_backend_partitioned_by_word_trains_the_xla_model():
    """The kernels on word shares (token ids through a table of blocks, doc-major topics as
    long as every chunk) from the same seed: two iterations bit-identical in interpret mode;
    compiled on a GPU, one iteration within Triton's rounding (after two, one token drawn
    differently changes the counts every later draw reads, and a few % of a corpus this small
    differ)."""
    from saberjax.execution.placement import place  # noqa: PLC0415

    corpus = random_corpus(num_docs=30, num_words=30, mean_length=20, seed=5)
    results = {}
    for backend in ("xla", "pallas"):
        placed = place(corpus, with_backend(30, backend),
                       min(2, jax.device_count()), partition="words")
        state = placed.init(11)
        step = placed.compile(state)
        for _ in range(2 if default_interpret() else 1):
            state = step(state)
        results[backend] = (placed.corpus_order_topics(state), placed.word_topic(state))
    (topics, counts), (xla_topics, xla_counts) = results["pallas"], results["xla"]
    if default_interpret():
        np.testing.assert_array_equal(topics, xla_topics)
        np.testing.assert_array_equal(counts, xla_counts)
    else:
        assert np.mean(topics != xla_topics) <= 0.01


def test_sampler_kernel_draws_the_same_topics_from_tile_queues():
    """Tiles claimed three at a time from queues (three queues, 32 programs each: in
    interpret mode the first program claims every tile, from the last queue round to the
    others) draw the topics of one program a tile, bit for bit, with the doc-major output
    unzeroed (its array not aliased, the queues' counters after it): a tile claimed twice or
    never would not.  The sparse kernel's reference test claims them zeroed."""
    chunk, chunk_state, model, key, _ = random_state(ragged_corpus(seed=5), 37, seed=5)
    expected = pallas_sampler.sample_and_shuffle(chunk, chunk_state, model, key,
                                                 zero_doc_major=False)
    queued = pallas_sampler.sample_and_shuffle(chunk, chunk_state, model, key,
                                               zero_doc_major=False, tile_queues=3,
                                               claim_tiles=3)
    np.testing.assert_array_equal(queued[0], expected[0])
    assert np.any(np.asarray(expected[0]) != 0)
    real = np.asarray(chunk.doc_major_pos)[:int(chunk.num_tokens)]
    np.testing.assert_array_equal(np.asarray(queued[1])[real], np.asarray(expected[1])[real])


@pytest.mark.parametrize("queues", [1, 3, 7, 500])
def test_tile_queues_cut_the_tiles_in_order_into_runs_of_about_equal_tokens(queues):
    chunk, _, model, _, _ = random_state(ragged_corpus(seed=5), 37, seed=5)
    chunk = with_tile_tokens(chunk, model.bhat.shape[0], 2)
    tile_start = np.asarray(chunk.tile_start)
    bounds = np.asarray(queue_bounds(chunk.tile_start, queues))
    assert bounds.shape == (queues + 1,) and bounds[0] == 0
    assert bounds[-1] == len(tile_start) - 1 and np.all(np.diff(bounds) >= 0)
    tokens = np.diff(tile_start[bounds])
    largest_tile = np.max(np.diff(tile_start))
    assert np.all(tokens <= tile_start[-1] // queues + 1 + largest_tile), tokens
