"""tools/determinism_trace.py: A's topic totals from packed pairs, and where two traces part."""

import json

import numpy as np

from helpers import import_script
from saberjax.state import pack_pairs

trace_tool = import_script("tools/determinism_trace.py", "determinism_trace")


def test_a_topic_totals_add_each_pairs_count_to_its_topic_and_skip_empty_slots():
    padded_topics = 64
    topics = np.array([3, 7, 63, 3, 0], np.int32)
    counts = np.array([2, 1, 5, 4, 0], np.int32)  # the last slot is empty (packed 0)
    pairs = np.asarray(pack_pairs(topics, counts, padded_topics))
    totals = trace_tool.a_topic_totals(pairs, padded_topics)
    expected = np.zeros(padded_topics, np.int64)
    expected[[3, 7, 63]] = [6, 1, 5]
    np.testing.assert_array_equal(totals, expected)


def _line(iteration, b="b", alpha="a", tokens=True, a_matches_b=True):
    return dict(iteration=iteration, b=b, alpha=alpha, b_total_is_tokens=tokens,
                a_matches_b=a_matches_b)


def test_first_difference_names_the_first_iteration_and_what_differs():
    first = [_line(1), _line(2), _line(3)]
    assert trace_tool.first_difference(first, list(first)) == dict(same=True, iterations=3)
    alpha_first = [_line(1), _line(2, alpha="other"), _line(3, b="x", alpha="other")]
    assert trace_tool.first_difference(first, alpha_first) == dict(
        same=False, iteration=2, differs=["alpha"])
    both = [_line(1, b="x", alpha="y"), _line(2)]
    assert trace_tool.first_difference(first, both) == dict(
        same=False, iteration=1, differs=["b", "alpha"])
    assert trace_tool.first_difference(first, first[:2]) == dict(
        same=False, iteration=3, differs=["iterations"])


def test_compare_fails_on_a_broken_invariant_or_a_difference(tmp_path, capsys):
    def trace(name, lines):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return str(path)

    good = trace("good", [_line(1), _line(2)])
    assert trace_tool.compare([good, trace("same", [_line(1), _line(2)])]) == 0
    assert trace_tool.compare([trace("lost", [_line(1), _line(2, a_matches_b=False)])]) == 1
    assert trace_tool.compare([trace("extra", [_line(1, tokens=False)])]) == 1
    assert trace_tool.compare([trace("store", [_line(1, a_matches_b=None)])]) == 0
    assert trace_tool.compare([good, trace("parts", [_line(1), _line(2, b="x")])]) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert dict(invariants_broken_at=[2]).items() <= lines[1].items()
    assert dict(same=False, iteration=2, differs=["b"]).items() <= lines[-1].items()
