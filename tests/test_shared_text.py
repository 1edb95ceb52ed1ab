"""Several processes read a text input together, each tokenising only its share of the files
(saberjax.shared_text), into the corpus and the model of one process reading it whole."""

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from corpus_helpers import count_hashing
from test_processes import start_training, train_processes, word_topic_counts

from saberjax.corpus import load_text
from saberjax.corpus.text_sources import FileShare
from saberjax.shared_text import file_shares

SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi")
# made-up words of three syllables, drawn with the frequencies of Zipf's law: some are in
# every shard, many in a few documents of one
WORDS = [a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES[:4]]
WORD_WEIGHTS = 1 / np.arange(1, len(WORDS) + 1) / np.sum(1 / np.arange(1, len(WORDS) + 1))
RULES = ("--min_df=3", "--max_features=40")


def write_shards(folder, shards: int = 4, docs: int = 25, seed: int = 5,
                 suffix: str = "jsonl") -> list:
    """Shards of documents of made-up words, of unequal sizes, as JSON Lines (with ids) or
    plain text (suffix "txt": one document a line); their paths in reading order."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    paths = []
    for shard in range(shards):
        path = folder / f"part-{shard}.{suffix}"
        with open(path, "w") as file:
            for doc in range(docs + 7 * shard):
                text = " ".join(rng.choice(WORDS, int(rng.integers(0, 30)), p=WORD_WEIGHTS))
                file.write((text if suffix == "txt" else
                            json.dumps({"id": f"{shard}-{doc}", "text": text})) + "\n")
        paths.append(path)
    return paths


def readable_only_in_share(paths: list, directory, count: int) -> list:
    """A copy of the input for each of `count` processes in which every byte but the line
    breaks outside the lines of that process's share is "{", so that reading them fails
    (the shares depend on the files' sizes only: file_shares); each copy has the input's
    name.  At least one file is shared by two processes."""
    from saberjax.corpus.text_blocks import line_span

    sizes = [path.stat().st_size for path in paths]
    shares = file_shares(paths, sizes, [True] * len(paths), count)
    assert any(file.span != (0, size) for share in shares for file in share
               for size in [sizes[paths.index(file.path)]])
    copies = []
    for process, share in enumerate(shares):
        kept = {path: np.zeros(size, bool) for path, size in zip(paths, sizes)}
        for file in share:
            with open(file.path, "rb") as stream:
                first, last = line_span(stream, file.path, *file.span)
            kept[file.path][first:last] = True
        assert any(mask.any() for mask in kept.values())
        folder = directory / f"process{process}"
        if len(paths) > 1:  # a folder of shards
            folder = folder / paths[0].parent.name
        folder.mkdir(parents=True)
        for path in paths:
            data = np.frombuffer(path.read_bytes(), np.uint8).copy()
            data[~kept[path] & (data != ord("\n"))] = ord("{")
            (folder / path.name).write_bytes(data.tobytes())
        copies.append(folder / paths[0].name if len(paths) == 1 else folder)
    return copies


def one_process_model(source, iterations: int):
    """(the corpus of the input read whole by this one process under RULES, B of
    train_command's training on it on one device)."""
    from saberjax import trainer

    corpus = load_text(source, format="auto", min_df=3, max_features=40)
    config = trainer.TrainConfig(num_topics=6, iterations=iterations, backend="xla",
                                 num_devices=1)
    return corpus, trainer.train(corpus, config).model.word_topic_counts


@pytest.mark.filterwarnings("ignore:.*dropped .* empty document")
def test_processes_reading_their_shares_train_the_one_process_model(tmp_path):
    """2 processes, each given a copy of JSON Lines shards readable only in its share (one
    shard split between them), train the model one process trains on the input read whole
    and record its corpus fingerprint: the vocabulary rules apply to the whole input's counts
    (those of a share choose another vocabulary), each process receives the tokens of its
    documents in training that it did not read from the process that read them.  Each keeps
    its share in the cache, and a second run loads it (the entries untouched) and, by words,
    receives every document's tokens it did not read: the same model again."""
    paths = write_shards(tmp_path / "shards")
    copies = readable_only_in_share(paths, tmp_path, 2)
    cache = tmp_path / "cache"
    corpus, model = one_process_model(tmp_path / "shards", 3)
    assert load_text(paths[0], min_df=3, max_features=40).vocab != corpus.vocab
    for run, partition in (("first", "documents"), ("second", "words")):
        train_processes(2, copies, tmp_path / run, "--iterations=3", f"--cache_dir={cache}",
                        *RULES, f"--partition={partition}")
        recorded = json.loads((tmp_path / run / "config.json").read_text())
        assert recorded["processes"] == 2 and recorded["partition"] == partition
        assert recorded["corpus_fingerprint"] == corpus.fingerprint()
        assert (tmp_path / run / "vocab.txt").read_text().split() == list(corpus.vocab)
        np.testing.assert_array_equal(word_topic_counts(tmp_path / run), model)
        if run == "first":
            entries = sorted(path.parent for path in (cache / "corpora").glob("*/cache.json"))
            assert len(entries) == 2
            written = {file: file.stat().st_mtime_ns for entry in entries
                       for file in entry.iterdir()}
    assert {file: file.stat().st_mtime_ns for file in written} == written


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


def test_shares_cut_the_input_bytes_evenly_files_of_lines_within():
    files = [Path(f"f{index}") for index in range(4)]
    whole = [FileShare(file) for file in files]
    assert file_shares(files, [10] * 4, [False] * 4, 2) == [whole[:2], whole[2:]]
    assert file_shares(files, [100, 1, 1, 1], [False] * 4, 2) == [whole[:1], whole[1:]]
    assert file_shares(files[:1], [5], [False], 3) == [whole[:1], [], []]
    assert file_shares(files[:2], [30, 10], [True, False], 2) == [
        [FileShare(files[0], (0, 20))], [FileShare(files[0], (20, 30)), whole[1]]]
    # a file beginning at a cut is its reader's, after the lines before the cut
    assert file_shares(files[:3], [1, 1, 1], [True, False, True], 3) == [
        [FileShare(files[0], (0, 1))], [whole[1]], [FileShare(files[2], (0, 1))]]
    assert file_shares(files[:2], [2, 1], [True, False], 6) == [
        [], [FileShare(files[0], (0, 1))], [], [FileShare(files[0], (1, 2))], [], [whole[1]]]


def test_the_spans_of_a_file_of_lines_hold_each_line_once(tmp_path):
    """Consecutive byte ranges covering a file give its lines, each once, whatever the cuts
    (in a line, at its start, at its line break) and the blocks, read by the collecting
    process (line_blocks) or as LineRanges by the workers (line_ranges)."""
    from saberjax.corpus.text_blocks import line_blocks, line_ranges

    path = tmp_path / "lines.txt"
    path.write_bytes(b"kalo mine\nrutavo\n\nzika lo\nmine ru ta vo zi ka")
    size = path.stat().st_size
    readers = (lambda span: [block.data for block in line_blocks(path, 4, span)],
               lambda span: [part.parsed().data for part in line_ranges(path, 4, span=span)])
    for cuts in ([0, size], [0, 1, 10, 11, 17, size], [0, 9, 10, 30, size],
                 list(range(size + 1))):
        for read in readers:
            pieces = [data.tobytes() for first, last in zip(cuts[:-1], cuts[1:])
                      for data in read((first, last)) if data.size]
            assert b"".join(pieces) == path.read_bytes()
            assert all(piece.endswith(b"\n") or piece.endswith(b"ka") for piece in pieces)


def test_the_spans_of_a_parquet_file_hold_each_row_group_once(tmp_path):
    """Consecutive byte ranges covering a Parquet file give its documents, each once, in
    order, whatever the cuts: a row group is the range's in which it begins."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from saberjax.corpus.text_sources import document_blocks

    path = tmp_path / "docs.parquet"
    texts = [f"kalo mine {index}" for index in range(100)]
    pq.write_table(pa.table({"text": texts}), path, row_group_size=30)
    size = path.stat().st_size

    def documents(share):
        return [block.document(index).decode() for block in document_blocks(path, share=share)
                for index in range(block.num_docs)]

    assert documents(None) == texts
    for cuts in ([0, size], [0, 300, size], [0, 4, 5, 640, 1000, size],
                 list(range(0, size + 1, 97)) + [size]):
        spans = [FileShare(path, (first, last)) for first, last in zip(cuts[:-1], cuts[1:])]
        assert documents(spans) == texts
        assert [documents([span]) != [] for span in spans].count(True) <= 4  # row groups


@pytest.mark.filterwarnings("ignore:.*dropped .* empty document")
def test_one_process_reading_in_shares_reads_the_input_whole(tmp_path):
    """Alone, a process's share is the whole input: load_shared_text gives load_text's
    corpus (held whole), and then the same from its cache entry."""
    from saberjax.shared_text import load_shared_text

    write_shards(tmp_path / "shards")
    whole = load_text(tmp_path / "shards", format="jsonl", min_df=3, max_features=40,
                      id_field="id")
    for _ in range(2):
        shared = load_shared_text(tmp_path / "shards", cache_dir=tmp_path / "cache",
                                  min_df=3, max_features=40, id_field="id")
        assert shared.held_tokens == (0, whole.num_tokens) and shared.vocab == whole.vocab
        for field in ("doc_offsets", "word_ids", "doc_names"):
            np.testing.assert_array_equal(getattr(shared, field), getattr(whole, field))
    assert len(list((tmp_path / "cache").glob("*/cache.json"))) == 1


def test_bytes_are_gathered_in_rounds_of_at_most_round_bytes():
    from saberjax.processes import gathered_bytes

    data = bytes(range(256)) * 3
    for round_bytes in (1, 7, 256, 10_000):
        assert gathered_bytes(data, round_bytes) == [data]
    assert gathered_bytes(b"") == [b""]


class ThreadReaders:
    """Readers of an input's shares on threads of this process, exchanging their bytes as the
    processes of a run do (Exchange's `gathered`): a barrier, each reader's bytes, a
    barrier."""

    def __init__(self, count: int):
        import threading

        self.barrier = threading.Barrier(count, timeout=120)  # a failed reader breaks it
        self.messages = [b""] * count

    def exchange(self, index: int):
        from saberjax.shared_text import Exchange

        count = len(self.messages)

        def gathered(data: bytes) -> list[bytes]:
            self.messages[index] = data
            self.barrier.wait()
            messages = list(self.messages)
            self.barrier.wait()
            return messages

        return Exchange(gathered, index, count)


def held_shares(path, format: str, count: int, **arguments) -> list:
    """What each of `count` readers of a file of lines, on threads, holds of it (held_share
    with `arguments`), in reader order."""
    from concurrent.futures import ThreadPoolExecutor

    from saberjax.shared_text import held_share

    shares = file_shares([path], [path.stat().st_size], [True], count)
    readers = ThreadReaders(count)
    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda index: held_share(
            path, format, shares[index], readers.exchange(index), **arguments), range(count)))


@pytest.mark.filterwarnings("ignore:.*dropped .* empty document")
@pytest.mark.parametrize("suffix", ["txt", "jsonl"])
def test_readers_of_shares_tokenising_in_worker_processes_give_the_whole_corpus(
        tmp_path, monkeypatch, suffix):
    """3 readers of a file of lines (plain text; JSON Lines with ids), each tokenising its
    share's line ranges (line_ranges' span) in 2 worker processes, hold the corpus one reader
    of the whole file builds: its vocabulary (chosen from every reader's counts), document
    offsets and ids, and, the shares' word ids assembled in order, its word ids."""
    from saberjax.corpus import text_pieces

    monkeypatch.setattr(text_pieces, "PIECE_BYTES", 150)  # many pieces for each worker
    [path] = write_shards(tmp_path / "input", shards=1, docs=120, suffix=suffix)
    options = dict(min_df=3, max_features=40, **({"id_field": "id"} if suffix == "jsonl"
                                                 else {}))
    whole = load_text(path, format="auto", **options)
    held = held_shares(path, suffix.replace("txt", "text"), 3, workers=2, processes=True,
                       **options)
    for share in held:
        assert share.vocab == whole.vocab
        np.testing.assert_array_equal(share.doc_offsets, whole.doc_offsets)
        assert share.doc_names == (None if whole.doc_names is None
                                   else list(whole.doc_names))
        assert share.dropped == whole.dropped_empty_docs
    assert [share.first for share in held] == list(
        np.cumsum([0] + [share.word_ids.size for share in held[:-1]]))
    assert all(share.word_ids.size for share in held)
    np.testing.assert_array_equal(np.concatenate([share.word_ids for share in held]),
                                  whole.word_ids)


def test_a_reader_whose_share_holds_no_document_keeps_the_ids_of_the_others(tmp_path):
    """A share lying within one long line holds no document and so no ids: the ids of the
    documents the other readers hold are the input's, as one reader reading it whole finds."""
    path = tmp_path / "long.jsonl"
    records = [dict(id="long", text=" ".join(["kalo mine ruta"] * 300))]
    records += [dict(id=f"doc{index}", text="kalo mine zika") for index in range(20)]
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    held = held_shares(path, "jsonl", 3, workers=1, min_df=1, max_df=1.0, id_field="id")
    assert [share.word_ids.size for share in held][1] == 0
    names = list(load_text(path, format="jsonl", min_df=1, max_df=1.0,
                           id_field="id").doc_names)
    assert names == [record["id"] for record in records]
    assert [share.doc_names for share in held] == [names] * 3


def settled_hashing(monkeypatch) -> list:
    """count_hashing's list, files counting as settled at once, so that an entry gets its
    source record on its first load."""
    from saberjax.corpus import cache

    monkeypatch.setattr(cache, "SETTLED_SECONDS", -60.0)
    return count_hashing(monkeypatch)


@pytest.mark.filterwarnings("ignore:.*dropped .* empty document")
def test_a_share_entry_is_a_corpus_entry_known_by_its_record_until_its_files_change(
        tmp_path, monkeypatch):
    """A process's entry of its share is an entry of the corpus cache as a whole input's is
    (its manifest, its corpus as a native folder, its source record): the second load takes
    the share's key from the record, hashing nothing; a damaged entry is rebuilt, with a
    warning; a changed file is hashed again and read again, and its new entry replaces the
    old one."""
    from saberjax.corpus import load_native
    from saberjax.shared_text import load_shared_text

    paths = write_shards(tmp_path / "shards")
    options = dict(min_df=3, max_features=40, id_field="id")
    cache = tmp_path / "cache"
    hashed = settled_hashing(monkeypatch)
    for load in ("first", "recorded", "damaged", "changed"):
        expected = warnings.catch_warnings()
        if load == "damaged":
            data = bytearray((entry / "corpus" / "word_ids.npy").read_bytes())
            data[-1] ^= 1
            (entry / "corpus" / "word_ids.npy").write_bytes(bytes(data))
            expected = pytest.warns(UserWarning, match="damaged or stale.*rebuilding")
        if load == "changed":
            with open(paths[1], "a") as file:
                file.write(json.dumps({"id": "new", "text": " ".join(WORDS[:3] * 9)}) + "\n")
        whole = load_text(tmp_path / "shards", format="jsonl", **options)
        with expected:
            shared = load_shared_text(tmp_path / "shards", cache_dir=cache, **options)
        assert shared.vocab == whole.vocab
        for field in ("doc_offsets", "word_ids", "doc_names"):
            np.testing.assert_array_equal(getattr(shared, field), getattr(whole, field))
        assert len(hashed) == (2 if load == "changed" else 1)
        (entry,) = cache.iterdir()
        assert sorted(file.name for file in entry.iterdir()) == [
            "cache.json", "corpus", "source.json"]
        assert load_native(entry / "corpus").fingerprint() == whole.fingerprint()
    assert "new" in shared.doc_names


@pytest.mark.filterwarnings("ignore:.*dropped .* empty document")
def test_share_entries_serve_only_the_shares_they_were_read_with(tmp_path, monkeypatch):
    """Two inputs whose first halves are alike: the first reader's share has the same key in
    both, but its entry holds ids into the vocabulary of the input it was read with, and
    serves only that input (the readers' keys together, which its manifest records).  An
    unchanged input is loaded by every reader with nothing hashed (the source records)."""
    [first] = write_shards(tmp_path / "first", shards=1, docs=40, suffix="txt")
    second = tmp_path / "second" / first.name
    second.parent.mkdir()
    lines = first.read_text().split("\n")
    lines[-2] = "zzzz" + lines[-2][4:]  # a new word at the end, the size kept
    second.write_text("\n".join(lines))
    hashed = settled_hashing(monkeypatch)
    cache = tmp_path / "cache"
    for run, path in enumerate((first, second, first, first)):
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # another input's entry: no damage
            held = held_shares(path, "text", 2, cache_dir=cache, min_df=1, max_df=1.0)
        whole = load_text(path, min_df=1, max_df=1.0)
        assert held[0].vocab == whole.vocab
        np.testing.assert_array_equal(held[0].doc_offsets, whole.doc_offsets)
        np.testing.assert_array_equal(np.concatenate([share.word_ids for share in held]),
                                      whole.word_ids)
        # the second input's first reader hashes its share (its file is another), and so
        # does the first's, whose entry the second's replaced, once
        assert len(hashed) == (2, 4, 5, 5)[run]


@pytest.mark.filterwarnings("ignore:.*dropped .* empty document")
def test_an_input_and_a_share_of_it_keep_entries_of_their_own(tmp_path, monkeypatch):
    """The entry of the whole input and that of one process's share of it (alone, its share
    is the whole input) record the same source and options: neither takes the other's source
    record nor removes the other."""
    from saberjax.corpus import cache as corpus_cache
    from saberjax.shared_text import load_shared_text

    write_shards(tmp_path / "shards")
    options = dict(min_df=3, max_features=40, id_field="id")
    cache, hashed = tmp_path / "cache", settled_hashing(monkeypatch)
    for _ in range(2):
        shared = load_shared_text(tmp_path / "shards", cache_dir=cache, **options)
        whole = corpus_cache.load_corpus(tmp_path / "shards", cache_dir=cache, **options)
        np.testing.assert_array_equal(shared.word_ids, whole.word_ids)
        assert len(list(cache.iterdir())) == 2 and len(hashed) == 2
