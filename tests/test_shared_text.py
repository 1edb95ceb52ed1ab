"""Several processes read a text input together, each tokenising only its share of the files
(saberjax.shared_text), into the corpus and the model of one process reading it whole."""

import json

import numpy as np
import pytest
from test_processes import start_training, train_processes, word_topic_counts

from saberjax.corpus import load_text
from saberjax.shared_text import file_shares

SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi")
# made-up words of three syllables, drawn with the frequencies of Zipf's law: some are in
# every shard, many in a few documents of one
WORDS = [a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES[:4]]
WORD_WEIGHTS = 1 / np.arange(1, len(WORDS) + 1) / np.sum(1 / np.arange(1, len(WORDS) + 1))
RULES = ("--min_df=3", "--max_features=40")


def write_shards(folder, shards: int = 4, docs: int = 25, seed: int = 5) -> list:
    """JSON Lines shards of documents of made-up words, of unequal sizes; their paths in
    reading order."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    paths = []
    for shard in range(shards):
        path = folder / f"part-{shard}.jsonl"
        with open(path, "w") as file:
            for doc in range(docs + 7 * shard):
                words = rng.choice(WORDS, int(rng.integers(0, 30)), p=WORD_WEIGHTS)
                file.write(json.dumps({"id": f"{shard}-{doc}", "text": " ".join(words)}) + "\n")
        paths.append(path)
    return paths


def readable_only_in_share(paths: list, directory, count: int) -> list:
    """A copy of the shards for each of `count` processes in which the shards outside that
    process's share are garbage of the same size (file_shares: the shares depend on the
    sizes), so that reading one fails; each copy's folder has the input's name."""
    shares = file_shares([path.stat().st_size for path in paths], count)
    assert all(len(share) for share in shares)
    copies = []
    for process, share in enumerate(shares):
        folder = directory / f"process{process}" / paths[0].parent.name
        folder.mkdir(parents=True)
        for index, path in enumerate(paths):
            data = path.read_bytes()
            (folder / path.name).write_bytes(data if index in share else b"{" * len(data))
        copies.append(folder)
    return copies


def one_process_model(source, iterations: int, partition: str = "auto"):
    """(the corpus of the input read whole by this one process under RULES, B of
    train_command's training on it on one device)."""
    from saberjax import trainer
    from saberjax.corpus import load_text

    corpus = load_text(source, format="jsonl", min_df=3, max_features=40)
    config = trainer.TrainConfig(num_topics=6, iterations=iterations, backend="xla",
                                 num_devices=1, partition=partition)
    return corpus, trainer.train(corpus, config).model.word_topic_counts


@pytest.mark.filterwarnings("ignore:.*dropped .* empty document")
@pytest.mark.parametrize("partition", ["documents", "words"])
def test_processes_reading_their_shares_train_the_one_process_model(tmp_path, partition):
    """2 processes, each given a copy of the input readable only in its share of the shards,
    train the model one process trains on the input read whole and record its corpus
    fingerprint: the vocabulary rules apply to the whole input's counts (those of a share
    choose another vocabulary), each process receives the tokens of its documents in training
    that it did not read (by words: every document's) from the process that read them."""
    paths = write_shards(tmp_path / "shards")
    copies = readable_only_in_share(paths, tmp_path, 2)
    train_processes(2, copies, tmp_path / "two", "--iterations=3", "--nocache", *RULES,
                    f"--partition={partition}")
    corpus, model = one_process_model(tmp_path / "shards", 3)
    share = load_text(tmp_path / "shards" / "part-0.jsonl", min_df=3, max_features=40)
    assert share.vocab != corpus.vocab
    recorded = json.loads((tmp_path / "two" / "config.json").read_text())
    assert recorded["processes"] == 2 and recorded["partition"] == partition
    assert recorded["corpus_fingerprint"] == corpus.fingerprint()
    assert (tmp_path / "two" / "vocab.txt").read_text().split() == list(corpus.vocab)
    np.testing.assert_array_equal(word_topic_counts(tmp_path / "two"), model)


def test_a_bad_shard_stops_every_process_with_one_line_naming_it(tmp_path):
    paths = write_shards(tmp_path / "shards")
    with open(paths[-1], "a") as file:
        file.write('{"text": "kalo mine" oops}\n')
    workers = start_training(2, tmp_path / "shards", tmp_path / "out", "--iterations=2",
                             "--nocache", "--heartbeat_seconds=5")
    errors = [worker.communicate(timeout=120)[1] for worker in workers]
    assert [worker.returncode for worker in workers] == [1, 1], errors
    for error in errors:
        assert f"error: {paths[-1]}, line 47: not valid JSON" in error, error
        assert "Traceback" not in error
    assert not (tmp_path / "out").exists()


def test_shares_are_runs_of_consecutive_files_of_about_equal_bytes():
    assert file_shares([10, 10, 10, 10], 2) == [range(0, 2), range(2, 4)]
    assert file_shares([100, 1, 1, 1], 2) == [range(0, 1), range(1, 4)]
    assert file_shares([5], 3) == [range(0, 1), range(1, 1), range(1, 1)]
    shares = file_shares(list(range(1, 40)), 7)
    assert [index for share in shares for index in share] == list(range(39))
