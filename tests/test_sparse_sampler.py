"""The sparse word-topic model's E-step draws exactly from the dense sampler's distribution,
p(k) proportional to (A_dk + alpha_k) B-hat_vk with the token left out; its M-step counts B's
rows as a recount of the tokens does."""

import functools
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import goodness_of_fit_pvalue, one_document_state

from saberjax import rng, sparse_build, sparse_rows, sparse_sampler
from saberjax.config import Hyperparams
from saberjax.execution import memory
from saberjax.corpus import Corpus
from saberjax.layout import build_layout

DRAWS = 100_000
# sparse_rows' builds and lookups compiled whole, as the samplers' programs hold them (run op by
# op, each of their many small operations compiles for every shape of the tests' rows)
compiled = types.SimpleNamespace(
    nonzero_rows=jax.jit(sparse_rows.nonzero_rows),
    row_buckets=jax.jit(sparse_rows.row_buckets, static_argnums=2),
    row_tables=jax.jit(sparse_rows.row_tables, static_argnums=(2, 3, 4)),
    find_in_bucket=jax.jit(sparse_rows.find_in_bucket),
    find_in_table=jax.jit(sparse_rows.find_in_table),
    count_in_row=jax.jit(sparse_rows.count_in_row))


def rows_of_dense(counts: np.ndarray, capacity: int) -> sparse_rows.SparseRows:
    """SparseRows of a dense B [rows, K_pad] with room for `capacity` nonzeros."""
    row, topic = np.nonzero(counts)
    topics = np.full(capacity, counts.shape[1], np.int32)
    values = np.zeros(capacity, np.int32)
    topics[:len(topic)], values[:len(topic)] = topic, counts[row, topic]
    row_start = np.searchsorted(row, np.arange(counts.shape[0] + 1)).astype(np.int32)
    return sparse_rows.SparseRows(jnp.asarray(row_start), jnp.asarray(topics),
                                  jnp.asarray(values))


@functools.partial(jax.jit, static_argnames=("num_topics", "beta", "num_words",
                                             "dense_row_bytes", "dense_dtype",
                                             "row_table_bytes", "compaction"))
def sparse_model(rows: sparse_rows.SparseRows, alpha, *, num_topics: int, beta: float,
                 num_words: int, dense_row_bytes: int,
                 dense_dtype=sparse_rows.DENSE_ROW_DTYPE,
                 row_table_bytes: int = sparse_rows.ROW_TABLE_BYTES,
                 compaction=sparse_rows.COMPACTION) -> sparse_rows.SparseModel:
    """sparse_build.model_from_totals of rows and their own totals, compiled as one program (op
    by op it compiles each of its many small operations, most of a test's time on a CPU)."""
    return sparse_build.model_from_totals(
        rows, sparse_rows.topic_totals(rows, alpha.shape[0], compaction), alpha, num_topics,
        beta, num_words, dense_row_bytes, dense_dtype, row_table_bytes,
        compaction=compaction)


def draws_for_fixed_row(num_topics: int, nonzeros: int, word_nonzeros: int, alpha: float,
                        seed: int = 0, asymmetric: bool = False, own_count: int | None = None,
                        word: int = 0):
    """DRAWS tokens of `word` in one document whose A row is fixed by hand (as
    test_sampler.draws_for_fixed_row), B's rows holding word_nonzeros random nonzeros each,
    word 0's row dense (SparseModel.dense_bhat), words 1 and 2 sparse only.

    Returns (samples, exact p from the dense formula, p counting the token, p with the prior
    doubled: None where A's row, the token left out, is empty and doubling changes nothing)."""
    rng_np = np.random.default_rng(seed)
    num_words = 3
    corpus = Corpus(np.array([0, DRAWS], np.int64), np.full(DRAWS, word, np.int32),
                    tuple(f"w{i}" for i in range(num_words)))
    chunk = jax.device_put(build_layout(corpus).chunks[0])
    hyper = Hyperparams.create(num_topics, alpha=alpha)
    counts = np.zeros((num_words, hyper.padded_topics), np.int32)
    for row in range(num_words):
        columns = rng_np.choice(num_topics, word_nonzeros, replace=False)
        counts[row, columns] = rng_np.integers(1, 50, word_nonzeros)
    topics = np.sort(rng_np.choice(num_topics, nonzeros, replace=False))
    own = topics[nonzeros // 2]
    counts[word, own] = max(counts[word, own], 1) if own_count is None else own_count
    alpha = np.full(num_topics, alpha, np.float32)
    if asymmetric:
        alpha *= rng_np.gamma(0.5, 2.0, num_topics).astype(np.float32)
    padded_alpha = np.zeros(hyper.padded_topics, np.float32)
    padded_alpha[:num_topics] = alpha
    rows = rows_of_dense(counts, num_words * num_topics + 7)
    model = sparse_model(rows, jnp.asarray(padded_alpha), num_topics=num_topics,
                         beta=hyper.beta, num_words=num_words,
                         dense_row_bytes=np.dtype(sparse_rows.DENSE_ROW_DTYPE).itemsize
                         * hyper.padded_topics)
    assert model.dense_bhat.shape[0] == 1

    doc_counts = rng_np.integers(1, 8, nonzeros)
    state = one_document_state(chunk, topics, doc_counts, own, num_topics, hyper.topic_dtype)
    samples = jax.jit(sparse_sampler.sample_chunk)(chunk, state, model, rng.iteration_key(seed, 1))
    a_row = np.zeros(num_topics)
    a_row[topics] = doc_counts
    denominator = counts[:, :num_topics].sum(axis=0) + num_words * hyper.beta
    bhat_row = (counts[word, :num_topics] + hyper.beta) / denominator
    counted = (a_row + alpha) * bhat_row
    a_row[own] -= 1
    bhat_row[own] = (counts[word, own] - 1 + hyper.beta) / (denominator[own] - 1)
    exact = (a_row + alpha) * bhat_row
    doubled = (a_row + 2 * alpha) * bhat_row if a_row.any() else None
    return np.asarray(samples[:DRAWS]), exact, counted, doubled


@pytest.mark.parametrize("word", [0, 2])  # a dense row, a sparse row
@pytest.mark.parametrize("num_topics,nonzeros,word_nonzeros,alpha,asymmetric", [
    (2, 1, 1, 0.5, False),  # one nonzero everywhere
    (100, 70, 30, 0.5, False),  # three 32-blocks of A, a two-level prior tree
    (1000, 300, 600, 0.05, False),  # ten blocks of A, long rows of B
    (2000, 40, 100, 0.05, True),  # a three-level prior tree, a learned prior
])
def test_sparse_sampler_matches_the_dense_distribution(num_topics, nonzeros, word_nonzeros,
                                                       alpha, asymmetric, word):
    samples, exact, _, doubled_prior = draws_for_fixed_row(num_topics, nonzeros, word_nonzeros,
                                                           alpha, asymmetric=asymmetric,
                                                           word=word)
    assert goodness_of_fit_pvalue(samples, exact) > 1e-4
    if doubled_prior is not None:  # the test has power
        assert goodness_of_fit_pvalue(samples, doubled_prior) < 1e-6


@pytest.mark.parametrize("beta", [0.01, 0.9])
def test_count_of_bhat_is_exact_below_128_and_within_bhats_rounding_above(beta):
    """B_vz recovered from a bfloat16 B-hat_vz = (B_vz + beta) / D_z (as sparse_build.dense_rows
    stores it) for every count to 400 and denominators spread over several binades."""
    counts = np.arange(400, dtype=np.float32)[:, None]
    denominators = np.float32(2.0) ** np.random.default_rng(1).uniform(3, 20, 64).astype(
        np.float32)
    held = ((counts + beta) / denominators).astype(jnp.bfloat16)
    got = np.asarray(sparse_sampler.count_of_bhat(jnp.asarray(held).astype(jnp.float32),
                                                  jnp.asarray(denominators), beta))
    below = np.broadcast_to(counts + beta < 127, got.shape)
    np.testing.assert_array_equal(got[below], np.broadcast_to(counts, got.shape)[below])
    assert np.all(np.abs(got - counts) <= (counts + beta) * 2.0**-8 + 1e-4)


@pytest.mark.parametrize("word", [0, 2])
def test_sparse_sampler_leaves_the_token_out_of_its_own_topics_counts(word):
    samples, exact, counted, _ = draws_for_fixed_row(100, 10, 20, 0.5, seed=5, own_count=2,
                                                     word=word)
    assert goodness_of_fit_pvalue(samples, exact) > 1e-4
    assert goodness_of_fit_pvalue(samples, counted) < 1e-6


@pytest.mark.parametrize("word", [0, 2])
def test_sparse_sampler_draws_the_word_row_term_alone(word):
    """A word seen in three topics, its token alone in its own, alpha large: term 2 carries
    most of the mass, so a wrong skip of the own entry would show."""
    samples, exact, counted, _ = draws_for_fixed_row(64, 1, 3, 20.0, seed=2, own_count=1,
                                                     word=word)
    assert goodness_of_fit_pvalue(samples, exact) > 1e-4
    assert goodness_of_fit_pvalue(samples, counted) < 1e-6


def test_count_rows_matches_a_recount():
    """count_rows' rows are a recount's, empty rows among them (the first, one inside and
    the last ten: their starts come from the next row's first token, or the tokens' end)."""
    rng_np = np.random.default_rng(0)
    num_words, num_topics = 60, 40
    word_ids = rng_np.zipf(1.5, 3000) % 50
    word_ids[np.isin(word_ids, (0, 7))] += 1  # rows 0, 7 and 50 on empty
    corpus = Corpus(np.array([0, 1000, 2200, 3000], np.int64), word_ids.astype(np.int32),
                    tuple(f"w{i}" for i in range(num_words)))
    chunk = build_layout(corpus).chunks[0]
    topics = rng_np.integers(0, num_topics, chunk.padded_tokens).astype(np.int32)
    rows = sparse_rows.count_rows(jax.device_put(chunk), jnp.asarray(topics), num_words, 64)
    real = slice(0, int(chunk.num_tokens))
    expected = np.zeros((num_words, 64), np.int32)
    np.add.at(expected, (chunk.word[real], topics[real]), 1)
    row_start, pair_topics, counts = map(np.asarray, rows)
    got = np.zeros_like(expected)
    for row in range(num_words):
        entries = slice(row_start[row], row_start[row + 1])
        assert np.all(np.diff(pair_topics[entries]) > 0)
        got[row, pair_topics[entries]] = counts[entries]
    np.testing.assert_array_equal(got, expected)
    nnz = row_start[-1]
    assert nnz == np.count_nonzero(expected)
    assert not expected[[0, 7, *range(50, 60)]].any() and expected[[1, 8]].sum(axis=1).all()
    assert np.all(counts[:nnz] > 0) and np.all(counts[nnz:] == 0)
    np.testing.assert_array_equal(np.asarray(sparse_rows.topic_totals(rows, 64)),
                                  expected.sum(axis=0))


def test_model_prefix_sums_and_prior_tree():
    rng_np = np.random.default_rng(1)
    counts = np.zeros((6, 64), np.int32)
    counts[:, :40] = rng_np.integers(0, 3, (6, 40)) * (rng_np.random((6, 40)) < 0.3)
    counts[3] = 0  # an empty row
    alpha = np.zeros(64, np.float32)
    alpha[:40] = rng_np.gamma(1.0, 0.5, 40)
    rows = rows_of_dense(counts, 300)
    model = sparse_model(rows, jnp.asarray(alpha), num_topics=40, beta=0.1, num_words=6,
                         dense_row_bytes=2 * 64 * 4, dense_dtype=jnp.bfloat16)
    denominator = counts.sum(axis=0) + 6 * 0.1
    bhat = np.where(np.arange(64) < 40, (counts + 0.1) / denominator, 0.0)
    held = np.asarray(model.dense_bhat, np.float32)
    np.testing.assert_allclose(held, bhat[:4], rtol=2**-8)  # 4 dense rows, bfloat16
    np.testing.assert_allclose(np.asarray(model.dense_tree_total), (held * alpha).sum(axis=1),
                               rtol=1e-5)
    weights = alpha * counts / denominator
    np.testing.assert_allclose(np.asarray(model.row_mass), weights.sum(axis=1), rtol=1e-5)
    prefix = np.asarray(model.row_prefix)
    row_start = np.asarray(rows.row_start)
    for row in range(6):
        expected = np.cumsum(weights[row][counts[row] > 0])
        np.testing.assert_allclose(prefix[row_start[row]:row_start[row + 1]], expected,
                                   rtol=1e-5)
    np.testing.assert_allclose(float(model.prior_total[0]), (alpha[:40] * 0.1
                                                             / denominator[:40]).sum(),
                               rtol=1e-5)


def rows_of_350_nonzeros(capacity: int) -> sparse_rows.SparseRows:
    """Rows of 40 x 64 of about 350 nonzeros (row 5 empty) with room for `capacity`."""
    rng_np = np.random.default_rng(7)
    counts = np.zeros((40, 64), np.int32)
    counts[:, :50] = rng_np.geometric(0.4, (40, 50)) * (rng_np.random((40, 50)) < 0.18)
    counts[5] = 0  # an empty row
    assert 300 < np.count_nonzero(counts) <= 400
    return rows_of_dense(counts, capacity)


@pytest.mark.parametrize("capacity,prefix", [(1600, 400), (1200, 400), (900, 450),
                                             (600, None)])
def test_the_build_takes_the_shortest_prefix_holding_the_nonzeros(capacity, prefix):
    """Of the prefixes a quarter, a third and a half of the rows' capacity, the build runs on
    the shortest that holds B's nonzeros (about 350), on the whole capacity where none does,
    and not on prefixes shorter than the compaction's min_entries."""
    rows = rows_of_350_nonzeros(capacity)
    compaction = sparse_rows.Compaction((4, 3, 2), 0)
    chosen = sparse_rows.on_nonzero_prefix(rows, compaction, jnp.int32,
                                           lambda: jnp.int32(capacity))
    assert int(chosen) == (prefix or capacity)
    assert sparse_rows.compact_prefixes(capacity, compaction) == tuple(
        capacity // share for share in (4, 3, 2))
    assert sparse_rows.compact_prefixes(capacity, compaction._replace(min_entries=401)) == tuple(
        capacity // share for share in (4, 3, 2) if capacity // share >= 401)


@pytest.mark.parametrize("capacity,share", [(1600, 4), (900, 2)])
def test_the_build_on_the_first_entries_is_the_build_on_the_whole_capacity(capacity, share):
    """The model built on a prefix of the rows' entries holding B's nonzeros (a quarter of
    the capacity, or a half: two lengths), padded back, is the whole build's, array for
    array, bit for bit (the row tables sized for the whole capacity, the directory's last
    slots the rows' end), the topic totals among them."""
    rows = rows_of_350_nonzeros(capacity)
    rng_np = np.random.default_rng(8)
    alpha = jnp.asarray(np.where(np.arange(64) < 50, rng_np.gamma(1.0, 0.5, 64), 0.0),
                        jnp.float32)
    settings = dict(num_topics=50, beta=0.1, num_words=40, dense_row_bytes=2 * 64 * 4)
    got = sparse_model(rows, alpha, compaction=sparse_rows.Compaction((share,), 0), **settings)
    whole = sparse_model(rows, alpha, compaction=sparse_rows.Compaction((), 0), **settings)
    assert jax.tree.structure(got) == jax.tree.structure(whole)
    for got_leaf, whole_leaf in zip(jax.tree.leaves(got), jax.tree.leaves(whole)):
        assert got_leaf.shape == whole_leaf.shape and got_leaf.dtype == whole_leaf.dtype
        np.testing.assert_array_equal(np.asarray(got_leaf), np.asarray(whole_leaf))
    assert int(np.asarray(got.tables.window).max()) > 0  # some rows have tables


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float32])
def test_dense_rows_filled_as_pairs_are_the_rows_filled_value_by_value(dtype):
    """The dense rows' B-hat filled as uint32 pairs of its 2-byte values is, bit for bit, B-hat
    filled value by value, and so are their trees (rows empty, sparse and full)."""
    rng_np = np.random.default_rng(11)
    padded_topics, num_topics = 2048, 2000
    counts = np.zeros((12, padded_topics), np.int32)
    density = np.array([0, 0.001, 0.01, 0.05, 0.3, 1.0, 0.002, 0, 0.02, 0.5, 0.004, 0.1])
    counts[:, :num_topics] = rng_np.geometric(0.3, (12, num_topics)) * (
        rng_np.random((12, num_topics)) < density[:, None])
    rows = rows_of_dense(counts, int(np.count_nonzero(counts)) + 100)
    alpha = jnp.asarray(np.where(np.arange(padded_topics) < num_topics,
                                 rng_np.gamma(0.5, 0.2, padded_topics), 0.0), jnp.float32)
    denominator = jnp.asarray(counts.sum(axis=0) + 12 * 0.01, jnp.float32)

    @functools.partial(jax.jit, static_argnames=("packed",))
    def built(rows, denominator, alpha, packed):
        return sparse_build.dense_rows(rows, sparse_rows.nonzero_rows(rows), denominator, alpha,
                                       num_topics, 0.01, 10, dtype, packed_fill=packed)

    got, whole = (built(rows, denominator, alpha, packed) for packed in (True, False))
    for got_leaf, whole_leaf in zip(jax.tree.leaves(got), jax.tree.leaves(whole)):
        assert got_leaf.dtype == whole_leaf.dtype and got_leaf.shape == whole_leaf.shape
        np.testing.assert_array_equal(np.asarray(got_leaf.astype(jnp.float32)),
                                      np.asarray(whole_leaf.astype(jnp.float32)))
    if dtype == jnp.bfloat16:  # filled through uint32 pairs
        text = built.lower(rows, denominator, alpha, True).as_text()
        assert "tensor<10x1024xui32>" in text


def scatters(lowered_text: str) -> list[tuple[bool, bool]]:
    """(declares unique indices, combines the values) of each scatter of a lowered program."""
    found = []
    for part in lowered_text.split('"stablehlo.scatter"')[1:]:
        attributes, region = part.split("({", 1)
        region = region.split("})", 1)[0]
        found.append(("unique_indices = true" in attributes,
                      any(f"stablehlo.{op} " in region
                          for op in ("add", "maximum", "minimum", "multiply", "or"))))
    return found


def test_the_m_steps_stores_declare_unique_indices():
    """Every scatter of the sparse M-step that stores values without combining them (count_rows'
    pairs, the dense rows' B-hat) declares unique indices: XLA's deterministic mode
    (compilation.COMPILER_OPTIONS, under which training compiles) runs any other store as a
    sort of its indices and a scan, where the separate phases compiled without it do not.
    count_rows combines none (its counts are no atomic adds)."""
    rng_np = np.random.default_rng(5)
    counts = (rng_np.integers(0, 3, (6, 64)) * (rng_np.random((6, 64)) < 0.3)).astype(np.int32)
    rows = rows_of_dense(counts, 300)
    alpha = jnp.full(64, 0.1, jnp.float32)
    compaction = sparse_rows.Compaction((4, 3, 2), 0)
    model_text = sparse_model.lower(rows, alpha, num_topics=64, beta=0.1, num_words=6,
                                    dense_row_bytes=2 * 64 * 2,
                                    compaction=compaction).as_text()
    corpus = Corpus(np.array([0, 40, 100], np.int64), rng_np.integers(0, 6, 100, np.int32),
                    tuple(f"w{i}" for i in range(6)))
    chunk = jax.device_put(build_layout(corpus).chunks[0])
    count_text = jax.jit(sparse_rows.count_rows, static_argnums=(2, 3)).lower(
        chunk, jnp.zeros(chunk.padded_tokens, jnp.int32), 6, 64).as_text()
    stores = [unique for unique, combines in scatters(model_text) + scatters(count_text)
              if not combines]
    # count_rows' topics and runs' first positions; dense B-hat and the row tables' slots in
    # each of the build's ways (on the whole capacity and on each of its compact prefixes)
    builds = 1 + len(sparse_rows.compact_prefixes(300, compaction))
    assert builds == 4 and len(stores) == 2 + 2 * builds and all(stores)
    # count_rows counts its runs without atomic adds
    assert not any(combines for _, combines in scatters(count_text))


@pytest.mark.parametrize("num_rows,padded_topics", [(50, 64), (5000, 1 << 20),
                                                    (5000, 1 << 28)])
def test_sort_by_row_then_topic_in_one_key_or_two_sorts(num_rows, padded_topics):
    rng_np = np.random.default_rng(3)
    rows = rng_np.integers(0, num_rows + 1, 4000)
    topics = rng_np.integers(0, padded_topics, 4000)
    got = sparse_rows.sort_by_row_then_topic(jnp.asarray(rows, jnp.int32),
                                             jnp.asarray(topics, jnp.int32), num_rows,
                                             padded_topics)
    order = np.lexsort((topics, rows))
    np.testing.assert_array_equal(np.asarray(got[0]), rows[order])
    np.testing.assert_array_equal(np.asarray(got[1]), topics[order])


def directory_rows(padded_topics: int) -> tuple[np.ndarray, sparse_rows.SparseRows]:
    """(B [9, K_pad], its sparse rows): rows empty, short, full and, the last, twelve topics
    crowded into the lowest buckets of a row of twelve."""
    rng_np = np.random.default_rng(padded_topics)
    num_topics = padded_topics - 3
    counts = np.zeros((9, padded_topics), np.int32)
    for row, length in enumerate([0, 1, 2, 3, 5, 17, num_topics // 2, num_topics]):
        columns = rng_np.choice(num_topics, length, replace=False)
        counts[row, columns] = rng_np.integers(1, 9, length)
    counts[8, :12] = 1
    return counts, rows_of_dense(counts, int(np.count_nonzero(counts)) + 5)


@pytest.mark.parametrize("padded_topics", [64, 96, 1 << 10])
def test_bucket_directory_finds_every_topic_of_every_row(padded_topics):
    """find_in_bucket gives B_row,topic for every row and topic (K_pad: none) of
    directory_rows, and each found position is the topic's in its row."""
    counts, rows = directory_rows(padded_topics)
    np.testing.assert_array_equal(
        np.asarray(compiled.nonzero_rows(rows)),
        np.searchsorted(np.asarray(rows.row_start), np.arange(rows.topics.shape[0]),
                        side="right") - 1)
    buckets = compiled.row_buckets(rows, compiled.nonzero_rows(rows), padded_topics)
    row, topic = np.meshgrid(np.arange(9), np.arange(padded_topics + 1), indexing="ij")
    position, found = compiled.find_in_bucket(rows, buckets, jnp.asarray(row),
                                                 jnp.asarray(topic))
    expected = np.concatenate([counts, np.zeros((9, 1), np.int32)], axis=1)
    np.testing.assert_array_equal(np.asarray(found), expected)
    present = expected > 0
    np.testing.assert_array_equal(np.asarray(rows.topics)[np.asarray(position)[present]],
                                  topic[present])
    # a row of L nonzeros has 2**floor(log2 L) buckets (one when empty), and its fullest
    # bucket (row 8's twelve topics crowd the lowest) sets its halvings
    lengths = np.count_nonzero(counts, axis=1)
    np.testing.assert_array_equal(np.diff(np.asarray(buckets.base)) - 1,
                                  [1 << max(int(n).bit_length() - 1, 0) for n in lengths])
    row_of_entry, topic_of_entry = np.nonzero(counts)
    pairs, per_bucket = np.unique(np.stack(
        [row_of_entry, topic_of_entry >> np.asarray(buckets.shift)[row_of_entry]]), axis=1,
        return_counts=True)
    fullest = np.zeros(9, np.int64)
    np.maximum.at(fullest, pairs[0], per_bucket)
    np.testing.assert_array_equal(np.asarray(buckets.steps),
                                  [int(n).bit_length() for n in fullest])
    assert fullest[8] >= 4


@pytest.mark.parametrize("padded_topics", [64, 96, 1 << 10])
def test_row_tables_find_every_topic_of_every_row(padded_topics):
    """count_in_row gives B_row,topic for every row and topic (K_pad: none) of directory_rows
    with a count too large for its slot's bits in row 1, from the rows' tables where they have
    one: every row from num_dense on whose topics sit less than the window past their homes
    (ordered linear probing) and whose counts fit, while the tables' slots hold them."""
    counts, _ = directory_rows(padded_topics)
    counts[1, np.flatnonzero(counts[1])] = 1 << 27
    rows = rows_of_dense(counts, int(np.count_nonzero(counts)) + 5)
    row_of_entry = compiled.nonzero_rows(rows)
    buckets = compiled.row_buckets(rows, row_of_entry, padded_topics)
    row, topic = np.meshgrid(np.arange(9), np.arange(padded_topics + 1), indexing="ij")
    expected = np.concatenate([counts, np.zeros((9, 1), np.int32)], axis=1)
    topic_bits = (padded_topics - 1).bit_length()
    lengths = np.count_nonzero(counts, axis=1)
    home_bits = np.minimum([int(max(n, 1) - 1).bit_length() + sparse_rows.ROW_TABLE_SPREAD
                            for n in lengths], topic_bits)
    for num_dense, table_bytes in [(0, sparse_rows.ROW_TABLE_BYTES), (2, 4 * 40)]:
        tables = compiled.row_tables(rows, row_of_entry, padded_topics, num_dense,
                                        table_bytes)
        np.testing.assert_array_equal(np.asarray(tables.shift), topic_bits - home_bits)
        # each row's displacements as a sequential insertion gives them
        window = np.zeros(9, np.int64)
        for r in range(9):
            homes = np.flatnonzero(counts[r]) >> (topic_bits - home_bits[r])
            slots = np.maximum.accumulate(homes - np.arange(len(homes))) + np.arange(len(homes))
            window[r] = (slots - homes).max(initial=0) + 1
        fits = window <= sparse_rows.ROW_TABLE_WINDOW
        fits[1] = False  # its count needs more than the slot's bits
        fits[:num_dense] = False
        extent = np.where(np.arange(9) >= num_dense,
                          (1 << home_bits) + sparse_rows.ROW_TABLE_WINDOW - 1, 0)
        fits &= np.cumsum(extent) <= tables.slots.shape[0]
        # and whose entries lie within those the build reads from the first table row's
        span = sparse_rows.row_table_entries(rows.topics.shape[0], 9, table_bytes)
        row_start = np.asarray(rows.row_start)
        fits &= row_start[1:] <= min(row_start[num_dense], rows.topics.shape[0] - span) + span
        np.testing.assert_array_equal(np.asarray(tables.window), np.where(fits, window, 0))
        assert fits.any() and not fits.all()
        np.testing.assert_array_equal(
            np.asarray(compiled.find_in_table(tables, jnp.asarray(row),
                                                 jnp.asarray(topic)))[fits[row]],
            expected[fits[row]])
        np.testing.assert_array_equal(
            np.asarray(compiled.count_in_row(rows, buckets, tables, jnp.asarray(row),
                                                jnp.asarray(topic))), expected)
    # row 8's twelve topics crowd its lowest homes: beyond K_pad = 64 they sit 8 or more past
    # them, and the row has no table
    assert (window[8] > sparse_rows.ROW_TABLE_WINDOW) == (padded_topics > 64)


def test_memory_plan_counts_the_sparse_model_and_its_rebuild():
    """The plan's bytes of the sparse model (memory.sparse_model_bytes) hold its arrays twice
    (the model and the next one, built while it is held), the row tables among them."""
    counts, _ = directory_rows(1 << 10)
    rows = rows_of_dense(counts, 3 * int(np.count_nonzero(counts)))
    alpha = jnp.full(1 << 10, 0.1, jnp.float32)
    model = sparse_model(rows, alpha, num_topics=(1 << 10) - 3, beta=0.01, num_words=9,
                         dense_row_bytes=2 * (1 << 10))
    assert model.tables.slots.shape[0] == sparse_rows.row_table_slots(rows.topics.shape[0], 9)
    held = sum(leaf.nbytes for leaf in jax.tree.leaves(model))
    assert 2 * held <= memory.sparse_model_bytes(rows.topics.shape[0], 9, 1 << 10)


def test_row_max_over_blocks_and_single_entries():
    rng_np = np.random.default_rng(4)
    lengths = np.array([0, 1, 31, 32, 33, 100, 0, 5, 64])
    row = np.repeat(np.arange(len(lengths)), lengths)
    row = np.concatenate([row, np.full(7, len(lengths))])  # entries of no row
    values = rng_np.integers(0, 50, row.shape[0]).astype(np.int32)
    expected = np.zeros(len(lengths), np.int32)
    np.maximum.at(expected, row[row < len(lengths)], values[row < len(lengths)])
    got = sparse_rows.row_max(jnp.asarray(values), jnp.asarray(row, jnp.int32), len(lengths))
    np.testing.assert_array_equal(np.asarray(got), expected)


@pytest.mark.parametrize("num_rows,padded_topics,high_key", [(5000, 1 << 20, "ui8"),
                                                             (5000, 1 << 28, "ui16")])
def test_sort_by_row_then_topic_sorts_the_rows_high_bits_by_a_narrow_key(
        num_rows, padded_topics, high_key):
    """Where row * K_pad + topic does not fit 32 bits, the second sort's key is the rows' high
    bits in 8 or 16 bits (one or two radix passes), not a uint32 row (four)."""
    text = jax.jit(sparse_rows.sort_by_row_then_topic, static_argnums=(2, 3)).lower(
        jnp.zeros(64, jnp.int32), jnp.zeros(64, jnp.int32), num_rows, padded_topics).as_text()
    sorts = [part.split("}) : ", 1)[1].split("\n", 1)[0]
             for part in text.split('"stablehlo.sort"')[1:]]
    assert len(sorts) == 2
    assert "tensor<64xui32>, tensor<64xui16>" in sorts[0]
    assert f"tensor<64x{high_key}>, tensor<64xui32>" in sorts[1]
