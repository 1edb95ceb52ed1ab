"""Training produces a saved model that loads back identically and learns real structure."""

import json
import struct
import zipfile

import numpy as np
import pytest
from helpers import needs_local_devices, random_corpus

from saberjax import backend, trainer
from saberjax.corpus import load_bundled, split_document_halves, train_test_split
from saberjax import files
from saberjax import topic_word as topic_word_module
from saberjax.model import TopicModel
from saberjax.model_files import DENSE_FORMAT_VERSION, FORMAT_VERSION


def test_saved_model_loads_back_identically(tmp_path):
    counts = np.random.default_rng(0).integers(0, 9, (12, 4)).astype(np.int32)
    model = TopicModel(counts, 0.5, 0.01, tuple(f"w{i}" for i in range(12)), {"seed": 3})
    model.save(tmp_path / "m")
    loaded = TopicModel.load(tmp_path / "m")
    np.testing.assert_array_equal(loaded.word_topic_counts, counts)
    np.testing.assert_allclose(loaded.topic_word, model.topic_word)
    np.testing.assert_allclose(loaded.topic_word.sum(axis=1), 1.0, rtol=1e-5)
    assert loaded.vocab == model.vocab and loaded.beta == 0.01
    np.testing.assert_array_equal(loaded.alpha, [0.5] * 4)  # one value per topic
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["format_version"] == DENSE_FORMAT_VERSION and config["seed"] == 3
    assert not [p for p in (tmp_path / "m").iterdir() if p.name.startswith(".")]


def test_loading_a_newer_format_fails_clearly(tmp_path):
    model = TopicModel(np.ones((3, 2), np.int32), 0.5, 0.01, ("a", "b", "c"))
    model.save(tmp_path)
    with np.load(tmp_path / "model.npz") as arrays:
        data = dict(arrays)
    data["format_version"] = np.int32(FORMAT_VERSION + 1)
    np.savez(tmp_path / "model.npz", **data)
    with pytest.raises(ValueError, match="newer than this saberjax"):
        TopicModel.load(tmp_path)


def test_training_improves_heldout_likelihood_and_reports_metrics():
    corpus = load_bundled("kos")
    train, test = train_test_split(corpus.subset(np.arange(600)), 0.2, seed=0)
    halves = split_document_halves(test)
    config = trainer.TrainConfig(num_topics=10, iterations=12, eval_every=4, backend="xla")
    result = trainer.train(train, config, halves)
    scores = [m["heldout_loglik_per_token"] for m in result.metrics
              if "heldout_loglik_per_token" in m]
    assert len(scores) == 3 and scores[-1] > scores[0]
    assert all(m["tokens_per_second"] > 0 for m in result.metrics)
    assert result.model.word_topic_counts.sum() == train.num_tokens
    assert result.model.config["corpus_fingerprint"] == train.fingerprint()


def test_callback_can_stop_training_early():
    """The iteration queued behind the stopping one (train_on_chunks queues ahead) is dropped:
    the result is the model of exactly three iterations."""
    corpus = random_corpus(seed=4)
    seen = []
    result = trainer.train(corpus, trainer.TrainConfig(num_topics=4, iterations=10),
                           callback=lambda it, metrics, state: seen.append(it) or it == 3)
    assert seen == [1, 2, 3] and len(result.metrics) == 3
    assert int(result.state.iteration) == 3
    three = trainer.train(corpus, trainer.TrainConfig(num_topics=4, iterations=3))
    np.testing.assert_array_equal(result.model.word_topic_counts, three.model.word_topic_counts)


def test_pallas_backend_without_gpu_raises_a_clear_error():
    if backend.pallas_available():
        pytest.skip("a GPU with the Pallas kernels is present")
    with pytest.raises(ValueError, match="not yet available here"):
        backend.resolve_backend("pallas")


def test_device_count_does_not_change_the_model():
    needs_local_devices(2)
    corpus = random_corpus(num_docs=80, seed=8)
    models = [trainer.train(corpus, trainer.TrainConfig(num_topics=6, iterations=4,
                                                        num_devices=n)).model
              for n in (1, 2)]
    assert models[1].config["devices"] == 2 and models[1].config["num_chunks"] == 2
    np.testing.assert_array_equal(models[0].word_topic_counts, models[1].word_topic_counts)


def test_a_learned_alpha_is_saved_per_topic_and_must_fit_the_topics(tmp_path):
    counts = np.ones((3, 2), np.int32)
    model = TopicModel(counts, np.array([0.2, 1.5]), 0.01, ("a", "b", "c"))
    np.testing.assert_array_equal(TopicModel.load(model.save(tmp_path)).alpha, [0.2, 1.5])
    for wrong in (np.array([0.2, 1.5, 1.0]), np.array([0.2, 0.0])):
        with pytest.raises(ValueError, match="alpha must be 2 positive values"):
            TopicModel(counts, wrong, 0.01, ("a", "b", "c"))


def test_a_model_from_before_format_versions_still_loads(tmp_path):
    """Version-1 directories written before format_version and config.json existed."""
    counts = np.arange(12, dtype=np.int32).reshape(6, 2)
    np.savez(tmp_path / "model.npz", topic_word=np.zeros((2, 6), np.float32),
             word_topic_counts=counts, alpha=0.25, beta=0.1)
    (tmp_path / "vocab.txt").write_text("".join(f"w{i}\n" for i in range(6)))
    loaded = TopicModel.load(tmp_path)
    np.testing.assert_array_equal(loaded.word_topic_counts, counts)
    np.testing.assert_array_equal(loaded.alpha, [0.25, 0.25])  # a scalar: every topic's
    assert loaded.config == {}
    assert loaded.top_words(1) == [["w5"], ["w5"]]


def test_top_words_with_weights_are_topic_word_values_in_the_same_order():
    counts = np.random.default_rng(7).integers(0, 5, (40, 6)).astype(np.int32)  # many ties
    counts[:, 4] = 0  # an empty topic: every word ties, so the lowest ids come first
    vocab = tuple(f"w{i}" for i in range(40))
    model = TopicModel(counts, 0.1, 0.05, vocab)
    topic_word = model.topic_word
    weighted = model.top_words(8, with_weights=True)
    assert [[word for word, _ in topic] for topic in weighted] == model.top_words(8)
    assert [word for word, _ in weighted[4]] == list(vocab[:8])
    for k, topic in enumerate(weighted):
        for word, probability in topic:
            assert type(probability) is float
            assert probability == topic_word[k, vocab.index(word)]  # the float32 value, exactly
        # largest first, ties to the lower word id
        keys = [(-probability, vocab.index(word)) for word, probability in topic]
        assert keys == sorted(keys)
    assert len(model.top_words(100, with_weights=True)[0]) == 40


def test_word_topics_gives_p_topic_given_word_largest_first():
    counts = np.array([[0, 6, 2, 2], [5, 0, 0, 0], [0, 0, 0, 0]], np.int32)
    model = TopicModel(counts, 0.5, 0.5, ("apple", "berry", "cherry"))

    def pairs(word, minimum_probability=0.0):
        found = model.word_topics(word, minimum_probability)
        assert all(type(k) is int and type(weight) is float for k, weight in found)
        return [k for k, _ in found], [weight for _, weight in found]

    # (n_wk + beta) / (n_w + K beta) = (0.5, 6.5, 2.5, 2.5) / 12; the tie goes to topic 2
    topics, weights = pairs("apple")
    assert topics == [1, 2, 3, 0]
    assert weights == pytest.approx([6.5 / 12, 2.5 / 12, 2.5 / 12, 0.5 / 12], rel=1e-12)
    assert pairs("apple", minimum_probability=2.5 / 12)[0] == [1, 2, 3]
    assert sum(pairs("berry")[1]) == pytest.approx(1.0, rel=1e-12)
    assert pairs("berry", minimum_probability=0.75) == ([0], [pytest.approx(5.5 / 7)])
    assert model.word_topics("berry", minimum_probability=0.9) == []
    assert pairs("cherry") == ([0, 1, 2, 3], [0.25] * 4)  # no tokens: the prior alone
    with pytest.raises(KeyError, match="'durian' is not in the model's vocabulary"):
        model.word_topics("durian")


def test_topic_word_is_computed_in_tiles_exactly_as_in_float64(tmp_path, monkeypatch):
    """Writing a large model stays fast because topic_word is computed over a thread per core
    and never holds a float64 copy of the whole matrix (K = 1,024 x V = 50,000 took 2 s for
    that alone): peak memory is the float32 result plus a float64 tile per thread; the values
    are the float64 formula rounded once, and model.npz holds them as np.savez would."""
    import tracemalloc

    monkeypatch.setattr(topic_word_module, "TOPIC_WORD_TILE", (100, 64))  # tiles cut the topics too
    monkeypatch.setattr(topic_word_module, "cpu_cores", lambda: 4)
    counts = np.random.default_rng(1).integers(0, 50, (20_001, 96)).astype(np.int32)
    expected = ((counts.astype(np.float64) + 0.01)
                / (counts.sum(axis=0) + counts.shape[0] * 0.01)).T.astype(np.float32)
    model = TopicModel(counts, 0.5, 0.01, tuple(map(str, range(20_001))))
    tracemalloc.start()
    topic_word = model.topic_word
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    np.testing.assert_array_equal(topic_word, expected)
    per_thread = 8 * 100 * 64 + (1 << 18)  # a float64 tile and numpy's casting buffers
    assert peak < 1.05 * expected.nbytes + 4 * per_thread < 1.3 * expected.nbytes
    model.save(tmp_path)
    with np.load(tmp_path / "model.npz") as saved:
        np.testing.assert_array_equal(saved["topic_word"], expected)
        np.testing.assert_array_equal(saved["word_topic_counts"], counts)


@pytest.mark.parametrize("shape", [(0, 3), (1, 2), (5, 3), (333, 7)])
def test_topic_word_of_any_shape_is_the_float64_formula_rounded_once(shape, monkeypatch):
    monkeypatch.setattr(topic_word_module, "TOPIC_WORD_TILE", (4, 2))
    counts = np.random.default_rng(2).integers(0, 1000, shape).astype(np.int32)
    expected = ((counts.astype(np.float64) + 0.1)
                / (counts.sum(axis=0) + shape[0] * 0.1)).T.astype(np.float32)
    np.testing.assert_array_equal(topic_word_module.topic_word_from_counts(counts, 0.1), expected)


def test_model_npz_is_the_zip64_archive_np_savez_writes(tmp_path, monkeypatch):
    """model.npz is written in pieces by several threads (checksummed separately, CRCs
    combined): its members and local headers are np.savez's byte for byte, the CRCs verify,
    and the central directory's zip64 fields (sizes and offsets of every member) and zip64
    end records are right."""
    monkeypatch.setattr(files, "PIECE_BYTES", 4_097)  # many pieces, a short last one
    counts = np.random.default_rng(4).integers(0, 99, (301, 13)).astype(np.int32)
    model = TopicModel(counts, np.linspace(0.1, 1, 13), 0.02, tuple(map(str, range(301))))
    model.save(tmp_path / "ours")
    arrays = dict(word_topic_counts=counts, alpha=model.alpha, beta=np.float64(0.02),
                  format_version=np.int32(DENSE_FORMAT_VERSION), topic_word=model.topic_word)
    np.savez(tmp_path / "savez.npz", **arrays)
    ours, theirs = (tmp_path / "ours" / "model.npz").read_bytes(), \
        (tmp_path / "savez.npz").read_bytes()
    with zipfile.ZipFile(tmp_path / "ours" / "model.npz") as archive, \
            zipfile.ZipFile(tmp_path / "savez.npz") as reference:
        assert archive.testzip() is None
        assert [(i.filename, i.CRC, i.file_size, i.compress_size, i.header_offset,
                 i.compress_type, i.date_time, i.external_attr) for i in archive.infolist()] \
            == [(i.filename, i.CRC, i.file_size, i.compress_size, i.header_offset,
                 i.compress_type, i.date_time, i.external_attr) for i in reference.infolist()]
        directory = archive.start_dir
        assert all(info.extra[:4] == b"\x01\x00\x18\x00" for info in archive.infolist())
    assert ours[:directory] == theirs[:directory]  # every local header and member
    end = struct.unpack("<4s4H2LH", ours[-22:])
    zip64_end = struct.unpack("<4sQ2H2L4Q", ours[-98:-42])
    assert end == (b"PK\x05\x06", 0, 0, 5, 5, len(ours) - 98 - directory, directory, 0)
    assert zip64_end == (b"PK\x06\x06", 44, 45, 45, 0, 0, 5, 5, end[5], directory)
    assert struct.unpack("<4sLQL", ours[-42:-22]) == (b"PK\x06\x07", 0, len(ours) - 98, 1)
    with np.load(tmp_path / "ours" / "model.npz") as saved:
        assert list(saved.keys()) == list(arrays)
        for name, value in arrays.items():
            np.testing.assert_array_equal(saved[name], value, strict=True)


def test_a_failed_save_leaves_no_model_file(tmp_path, monkeypatch):
    def fail(*args):
        raise OSError("no space left")

    monkeypatch.setattr(files, "_write_piece", fail)
    with pytest.raises(OSError, match="no space left"):
        TopicModel(np.ones((3, 2), np.int32), 0.5, 0.01, ("a", "b", "c")).save(tmp_path)
    assert list(tmp_path.iterdir()) == []
