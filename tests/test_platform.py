"""Process-wide settings of saberjax.platform."""

import ctypes

from saberjax import platform


def test_reuse_freed_memory_passes_values_mallopt_takes(monkeypatch):
    """mallopt's value is a C int: a larger one wraps (1 << 62 became 0, trimming the heap on
    every free, the opposite of what reuse_freed_memory asks)."""
    calls = []

    class FakeLibc:
        def mallopt(self, param, value):
            calls.append((param, value))
            return 1

    monkeypatch.setattr(platform.ctypes, "CDLL", lambda _: FakeLibc())
    platform.reuse_freed_memory()
    assert {param for param, _ in calls} == {platform._M_TRIM_THRESHOLD,
                                            platform._M_MMAP_THRESHOLD}
    for _, value in calls:
        assert ctypes.c_int(value).value == value > 0
