"""tools/bench_windows.py: rates and speed-ups over windows of a bench record's iterations."""

import json

import pytest
from helpers import import_script

windows = import_script("tools/bench_windows.py", "bench_windows")


def _record(devices, seconds, k=10, init=16):
    return dict(type="result", devices=devices, partition="words" if devices > 1 else None,
                K=k, init_window_topics=init, T=2_000_000, warmup_seconds=seconds[:2],
                iteration_seconds=seconds[2:])


def test_window_rates_count_the_warm_up_and_divide_by_the_one_device_run(tmp_path):
    """Iteration 3 of one device takes 4 s, of four 1 s: 0.5 against 2 Mtoken/s, 4x; the
    window 3-4 of four sums 1 + 3 s; a window past the run's end is left empty; the same K
    with other initial topics has no baseline and no ratio."""
    path = tmp_path / "runs.jsonl"
    lines = [_record(1, [9, 9, 4, 4]), _record(4, [9, 9, 1, 3]), _record(4, [1, 1, 1, 1], init=0),
             dict(type="summary")]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    rows = windows.table(windows.read_results([str(path)]), windows.parse_windows("3-3,3-4,4-9"))
    assert rows[2].endswith("| 0.5 | 0.5 |  |")
    assert rows[3].endswith("| 2.0 (4.000x) | 1.0 (2.000x) |  |")
    assert rows[4].endswith("| 2.0 | 2.0 |  |")
    assert windows.window_rate(lines[1], (3, 4)) == pytest.approx(1.0)


def test_a_window_must_run_forwards():
    with pytest.raises(ValueError):
        windows.parse_windows("5-4")
