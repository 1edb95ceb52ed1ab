"""Issue 14, section 2: every launcher ends every mistake in one line, ``error: ...``, with exit
status 2 for a bad flag and 1 for bad data; the traceback only on request."""

import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import ROOT, random_corpus, run_launcher

from saberjax import cli, corpus, trainer
from saberjax.corpus import CorpusFormatError, align_vocabulary
from saberjax.model import ModelFormatError

TRAIN = ("--num_topics=3", "--iterations=1", "--backend=xla", "--top_words=0")


def uci(directory, docword: str, vocab=("aaa", "bbb", "ccc")):
    """A UCI corpus folder with the given docword.txt text and vocabulary."""
    directory.mkdir()
    (directory / "docword.txt").write_text(docword)
    (directory / "vocab.txt").write_text("".join(word + "\n" for word in vocab))
    return directory


def folder(path, *files):
    """A folder holding empty files of the given names."""
    path.mkdir()
    for name in files:
        (path / name).touch()
    return path


def text_file(path, content: str):
    path.write_text(content)
    return path


def random_bytes(path):
    path.write_bytes(np.random.default_rng(0).bytes(5000))
    return path


# name -> (corpus builder given a fresh path, extra train flags, what the error line names)
BAD_CORPORA = {
    "nonexistent path": (lambda path: path, (), "no such file or directory"),
    "empty docword": (lambda path: uci(path, ""), (), "docword.txt: file is empty"),
    "negative count": (lambda path: uci(path, "2\n3\n2\n1 1 -1\n2 2 1\n"), (),
                       "docword.txt, line 4: count -1 must be in 1.."),
    "zero count": (lambda path: uci(path, "2\n3\n2\n1 1 0\n2 2 1\n"), (),
                   "docword.txt, line 4: count 0 must be in 1.."),
    "word id out of range": (lambda path: uci(path, "2\n3\n2\n1 9 1\n2 2 1\n"), (),
                             "docword.txt, line 4: wordID 9 is out of range 1..3"),
    "document id out of range": (lambda path: uci(path, "2\n3\n2\n7 1 1\n2 2 1\n"), (),
                                 "docword.txt, line 4: docID 7 is out of range 1..2"),
    "non-numeric token": (lambda path: uci(path, "2\n3\n2\n1 x 1\n2 2 1\n"), (),
                          "docword.txt, line 4: wordID 'x' is not a decimal integer"),
    "truncated header": (lambda path: uci(path, "2\n3\n"), (),
                         "docword.txt, line 3: expected the header integer NNZ"),
    "fewer lines than the header says": (lambda path: uci(path, "2\n3\n3\n1 1 1\n2 2 1\n"), (),
                                         "header declares NNZ=3 but 2 entry lines follow"),
    "vocab.txt shorter than the word ids": (lambda path: uci(path, "2\n5\n2\n1 5 1\n2 2 1\n"),
                                            (), "declares W=5 (line 2) but"),
    "folder without text files": (lambda path: folder(path, "a.xml"), (), "format unknown"),
    "empty folder": (lambda path: folder(path), (), "format unknown"),
    "binary data as text": (lambda path: random_bytes(path), ("--format=text",),
                            "binary data, not text"),
    "malformed JSON line": (lambda path: text_file(path, '{"text": "a b"}\n{"text": c}\n'),
                            ("--format=jsonl",), "line 2: not valid JSON"),
    "missing CSV column": (lambda path: text_file(path, "id,body\n1,a b\n"),
                           ("--format=csv",), "no column 'text' (its columns: 'id', 'body')"),
    "empty JSON Lines": (lambda path: text_file(path, "\n"), ("--format=jsonl",),
                         "no documents"),
}


@pytest.mark.parametrize("case", BAD_CORPORA)
def test_train_names_what_is_wrong_with_a_corpus_in_one_line(tmp_path, case):
    build, flags, message = BAD_CORPORA[case]
    path = build(tmp_path / "corpus")
    result = run_launcher("train.py", f"--corpus={path}", f"--output={tmp_path / 'out'}",
                          *TRAIN, *flags, timeout=300)
    assert result.returncode == 1
    assert message in one_error_line(result)
    assert str(path) in one_error_line(result)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("launcher, flags, message", [
    ("train.py", ("--num_topics=0",), "--num_topics: 0 must be at least 2"),
    ("train.py", ("--num_topics=-5",), "--num_topics: -5 must be at least 2"),
    ("train.py", ("--num_topics=1",), "--num_topics: 1 must be at least 2"),
    ("train.py", ("--iterations=0",), "--iterations: 0 must be at least 1"),
    ("train.py", ("--iterations=-3",), "--iterations: -3 must be at least 1"),
    ("train.py", ("--alpha=-1",), "--alpha: -1.0 must be positive"),
    ("train.py", ("--beta=0",), "--beta: 0.0 must be positive"),
    ("train.py", ("--test_fraction=1",), "--test_fraction: 1.0 must be in [0, 1)"),
    ("train.py", ("--test_fraction=-0.1",), "--test_fraction: -0.1 must be in [0, 1)"),
    ("train.py", ("--no_such_flag=1",), "--no_such_flag: no such flag"),
    ("evaluate.py", (), "--model"),
    ("evaluate.py", ("--model=m", "--em_iterations=0"),
     "--em_iterations: 0 is not a positive integer"),
    ("infer.py", ("--model=m", "--corpus=c", "--output=o", "--iterations=0"),
     "--iterations: 0 is not a positive integer"),
    ("report.py", ("--model=m", "--top_n=0"), "--top_n: 0 is not integer >= 2"),
    ("synth.py", ("--output=o", "--num_docs=0"), "num_docs must be >= 1, got 0"),
    ("bench.py", ("--iterations=0",), "--iterations: 0 is not a positive integer"),
])
def test_a_bad_flag_is_one_line_and_exit_status_2(tmp_path, launcher, flags, message):
    result = subprocess.run([sys.executable, str(ROOT / "launch" / launcher), *flags],
                            capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode == 2
    assert message in one_error_line(result)
    assert os.listdir(tmp_path) == []


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A 3-topic model of a random corpus (words w0..w29), as launch/train.py saves it."""
    directory = tmp_path_factory.mktemp("model") / "model"
    result = trainer.train(random_corpus(num_docs=40, num_words=30, mean_length=20),
                           trainer.TrainConfig(num_topics=3, iterations=1, backend="xla"))
    result.model.save(directory)
    return directory


def damaged_copy(model_dir, tmp_path, file: str, damage) -> str:
    """A copy of the model directory with `file` damaged by damage(bytes) -> bytes."""
    copy = tmp_path / "damaged"
    copy.mkdir()
    for source in model_dir.iterdir():
        data = source.read_bytes()
        (copy / source.name).write_bytes(damage(data) if source.name == file else data)
    return str(copy)


DAMAGE = {
    "truncated model.npz": ("model.npz", lambda data: data[:len(data) // 2],
                            "model.npz: not a readable model"),
    "garbage config.json": ("config.json", lambda data: b"{garbage",
                            "config.json: not valid JSON"),
}


@pytest.mark.parametrize("launcher", ["evaluate.py", "report.py", "infer.py"])
@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_model_is_named_in_one_line(model_dir, tmp_path, launcher, damage):
    file, edit, message = DAMAGE[damage]
    damaged = damaged_copy(model_dir, tmp_path, file, edit)
    flags = {"infer.py": (f"--corpus={damaged}", f"--output={tmp_path / 'theta.npy'}"),
             "evaluate.py": ("--corpus=saberjax/data/kos",)}.get(launcher, ())
    result = run_launcher(launcher, f"--model={damaged}", *flags, timeout=300)
    assert result.returncode == 1
    line = one_error_line(result)
    assert message in line and damaged in line


def test_a_missing_model_is_named_in_one_line(tmp_path):
    result = run_launcher("evaluate.py", f"--model={tmp_path / 'none'}", timeout=300)
    assert result.returncode == 1
    assert f"{tmp_path / 'none' / 'model.npz'}: no model here" in one_error_line(result)


@pytest.fixture
def foreign_corpus(tmp_path):
    """A UCI corpus none of whose words is in model_dir's vocabulary."""
    return uci(tmp_path / "foreign", "2\n3\n3\n1 1 2\n2 2 1\n2 3 4\n", ("xxx", "yyy", "zzz"))


def test_scoring_documents_that_share_no_word_with_the_model_is_an_error(model_dir,
                                                                          foreign_corpus):
    result = run_launcher("evaluate.py", f"--model={model_dir}", f"--corpus={foreign_corpus}",
                          "--coherence=", timeout=300)
    assert result.returncode == 1
    assert ("0 of its 3 words are in the model vocabulary of 30 words, so none of its 7 tokens "
            "can be scored") in one_error_line(result)


def test_a_test_corpus_that_shares_no_word_with_the_training_corpus_is_an_error(
        tmp_path, foreign_corpus):
    result = run_launcher("train.py", f"--test_corpus={foreign_corpus}",
                          f"--output={tmp_path / 'out'}", *TRAIN, timeout=300)
    assert result.returncode == 1
    assert "0 of its 3 words are in the model vocabulary of 6906 words" in \
        one_error_line(result)
    assert not (tmp_path / "out").exists()


def test_a_test_split_without_held_out_tokens_is_an_error_before_training(tmp_path):
    documents = uci(tmp_path / "tiny", "2\n3\n2\n1 1 1\n2 2 1\n")  # one token each
    result = run_launcher("train.py", f"--corpus={documents}", "--test_fraction=0.5",
                          f"--output={tmp_path / 'out'}", *TRAIN, timeout=300)
    assert result.returncode == 1
    assert "tiny: no held-out token to score (1 documents" in one_error_line(result)
    assert not (tmp_path / "out").exists()


def test_a_small_vocabulary_overlap_is_a_warning_naming_both_sizes():
    documents = corpus.Corpus(np.array([0, 3]), np.array([0, 1, 2]), ("a", "b", "c"))
    with pytest.warns(UserWarning, match="1 of its 3 words are in the model vocabulary of 2 "
                                         "words; dropped 2 of 3 tokens"):
        align_vocabulary(documents, ("c", "z"))
    with pytest.raises(CorpusFormatError, match="0 of its 3 words"):
        align_vocabulary(documents, ("y", "z"))


@pytest.mark.parametrize("request_traceback", [{"SABERJAX_TRACEBACK": "1"}, "--verbosity=1"])
def test_the_traceback_comes_on_request(tmp_path, request_traceback):
    env = dict(os.environ, **request_traceback) if isinstance(request_traceback, dict) \
        else os.environ
    flags = [] if isinstance(request_traceback, dict) else [request_traceback]
    result = subprocess.run([sys.executable, str(ROOT / "launch" / "evaluate.py"),
                             f"--model={tmp_path}", *flags], capture_output=True, text=True,
                            cwd=ROOT, env=env, timeout=300)
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: ")


def test_error_lines_name_the_type_only_of_unexpected_errors():
    assert cli.error_line(ModelFormatError("m/model.npz: damaged\nmore")) == \
        "error: m/model.npz: damaged"
    assert cli.error_line(KeyError("alpha")).startswith("error: KeyError: 'alpha' (a bug?")
    out_of_memory = RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
                                 "4.00GiB.\n[executable_name='jit_model_from_counts']")
    assert cli.error_line(out_of_memory).startswith(
        "error: the device ran out of memory (RESOURCE_EXHAUSTED: Out of memory while trying "
        "to allocate 4.00GiB.); ")
    assert cli.exit_status(ModelFormatError("x")) == 1 and cli.exit_status(out_of_memory) == 1
    assert cli.exit_status(cli.app.UsageError("x")) == 2


def one_error_line(result) -> str:
    """The launcher's error line: the last line of stderr, the only one starting 'error: ',
    with no traceback before it."""
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert lines and lines[-1].startswith("error: "), result.stderr[-3000:]
    assert sum(line.startswith("error: ") for line in lines) == 1, result.stderr[-3000:]
    return lines[-1]


@pytest.mark.parametrize("users", [{}, {"XLA_PYTHON_CLIENT_PREALLOCATE": "true"},
                                   {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"},
                                   {"XLA_CLIENT_MEM_FRACTION": ".5"},
                                   {"XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}])
def test_launchers_grow_the_device_pool_on_demand_unless_the_user_chose(monkeypatch, users):
    for name in cli.DEVICE_MEMORY_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in users.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(cli.app, "run", lambda main, argv, flags_parser: None)
    monkeypatch.setattr(cli.warnings, "formatwarning", cli.warnings.formatwarning)  # restored
    cli.run_main(lambda argv: None)
    expected = dict(users) if users else {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    assert {name: os.environ[name] for name in cli.DEVICE_MEMORY_ENV
            if name in os.environ} == expected


@pytest.mark.parametrize("users", [None, "4"])
def test_launchers_give_nccl_collectives_more_channels_unless_the_user_chose(monkeypatch, users):
    """NCCL_MIN_NCHANNELS=32 for the run's collectives, unless the user set it."""
    monkeypatch.setenv(cli.NCCL_CHANNELS_ENV, "restored after the test")
    monkeypatch.delenv(cli.NCCL_CHANNELS_ENV)
    if users is not None:
        monkeypatch.setenv(cli.NCCL_CHANNELS_ENV, users)
    monkeypatch.setattr(cli.app, "run", lambda main, argv, flags_parser: None)
    monkeypatch.setattr(cli.warnings, "formatwarning", cli.warnings.formatwarning)  # restored
    cli.run_main(lambda argv: None)
    assert os.environ[cli.NCCL_CHANNELS_ENV] == (users or "32")


def test_a_library_error_names_settings_and_the_command_line_shows_them_as_flags():
    from absl import flags

    from saberjax import cli

    flag_values = flags.FlagValues()
    flags.DEFINE_integer("num_topics", 2, "", flag_values=flag_values)
    flags.DEFINE_float("device_memory_gb", None, "", flag_values=flag_values)
    message = ("num_topics=3000000 needs 9.1 GB; raise device_memory_gb or host_memory_gb "
               "(chunk_store.host_chunk_tokens, /tmp/a_b)")
    assert cli.as_flags(message, flag_values) == (
        "--num_topics=3000000 needs 9.1 GB; raise --device_memory_gb or host_memory_gb "
        "(chunk_store.host_chunk_tokens, /tmp/a_b)")
    assert "a bug?" not in cli.error_line(MemoryError("the model does not fit"))
