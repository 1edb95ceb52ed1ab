"""The text form of a kernel's keyword arguments on the tools' command lines.

    max_registers=64,own_count=thread        -> {"max_registers": 64, "own_count": "thread"}
    r64:max_registers=64;thread:own_count=thread  -> {"r64": {...}, "thread": {...}}

A value of digits (a minus sign allowed) is an int, any other a str: the kernels' knobs are
integers and words (a register cap, a program count, an ablation's name, a sampler's file).
Shared by tools/sparse_bench.py, tools/kernel_sass.py and tools/sampler_sweep.py; it defines
no flags, so any script imports it beside its own.
"""

from __future__ import annotations

import re

INTEGER = re.compile(r"-?\d+")


def parse(text: str) -> dict[str, int | str]:
    """{name: value} of 'name=value,name=value' (empty items skipped)."""
    knobs = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, equals, value = item.partition("=")
        if not equals or not name:
            raise ValueError(f"{item!r} in {text!r} is not name=value")
        knobs[name] = int(value) if INTEGER.fullmatch(value) else value
    return knobs


def parse_named(text: str) -> dict[str, dict[str, int | str]]:
    """{name: knobs} of 'name:knob=value,...;name:...' (empty items skipped; 'name:' has no
    knobs)."""
    return {name: parse(knobs) for name, _, knobs in
            (item.partition(":") for item in filter(None, (part.strip()
                                                           for part in text.split(";"))))}
