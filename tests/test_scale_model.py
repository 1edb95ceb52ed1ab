"""tools/scale_model.py: the scaling model reproduces a case worked by hand."""

import pytest
from helpers import import_script

scale_model = import_script("tools/scale_model.py", "scale_model")


def test_the_model_reproduces_a_hand_worked_two_axis_case():
    """V = 1,000 words, K = 64 (one tree level of 32 nodes above the leaves), 1M tokens in 10k
    documents, one GPU at 100 Mtoken/s, 1 GB/s within a host, 0.1 GB/s between hosts.

    A row of the model all-gathered by documents: 4 x 64 (B) + 2 x 64 (B-hat) + 4 x 32 (tree)
    + 4 (tree total) = 516 bytes.  On 2 hosts x 2 GPUs, two-axis: within a host, by words over
    the host's 500k tokens and 5k documents, 1/2 x (500k x (4 + 2) + 5k x 4) = 1.51 MB; between
    hosts, by documents over 2 devices holding 500 rows each, 1/2 x 500 x 516 = 129 kB.  An
    iteration: 1M / 4 / 100M = 2.5 ms of compute, 1.51 + 1.29 ms of collectives: 5.3 ms,
    188.7 Mtoken/s."""
    setting = scale_model.Setting(tokens=1e6, docs=1e4, num_words=1000, num_topics=64,
                                  one_gpu_rate=1e8, within_host=1e9, between_hosts=1e8)
    two_axis = scale_model.predict(setting, hosts=2, gpus=2, partition="two-axis")
    assert two_axis.within_bytes == pytest.approx(1.51e6)
    assert two_axis.between_bytes == pytest.approx(129e3)
    assert two_axis.seconds == pytest.approx(5.3e-3)
    assert two_axis.mtoken_s == pytest.approx(1e6 / 5.3e-3 / 1e6)
    # the counts' changes as float16: 2 bytes a cell less, 1/2 x 500 x (516 - 128) = 97 kB
    half = scale_model.predict(setting, hosts=2, gpus=2, partition="two-axis f16")
    assert half.between_bytes == pytest.approx(97e3)
    # exchanging topics: the other host's 1M / 4 tokens of the share, 2 bytes each
    topics = scale_model.predict(setting, hosts=2, gpus=2, partition="two-axis topics")
    assert (topics.within_bytes, topics.between_bytes) == (pytest.approx(1.51e6),
                                                           pytest.approx(500e3))
    # one axis over all 4 devices, across hosts: every byte at the between-host bandwidth
    by_documents = scale_model.predict(setting, hosts=2, gpus=2, partition="documents")
    assert (by_documents.within_bytes, by_documents.between_bytes) == (0, pytest.approx(387e3))
    by_words = scale_model.predict(setting, hosts=2, gpus=2, partition="words")
    assert by_words.between_bytes == pytest.approx(3 / 4 * (6e6 + 4e4))
    assert by_words.collective_seconds == pytest.approx(by_words.between_bytes / 1e8)
    # on one host, the one-axis partitions move their bytes at the within-host bandwidth
    one_host = scale_model.predict(setting, hosts=1, gpus=4, partition="documents")
    assert (one_host.within_bytes, one_host.between_bytes) == (pytest.approx(387e3), 0)
    assert scale_model.predict(setting, 1, 1, "words").seconds == pytest.approx(1e-2)


def test_the_check_lists_every_measured_configuration_within_a_fifth():
    rows = scale_model.check_table()[2:]
    assert len(rows) == len(scale_model.MEASURED)
    ratios = [float(row.split("|")[-2]) for row in rows]
    assert all(0.8 <= ratio <= 1.2 for ratio in ratios), ratios
