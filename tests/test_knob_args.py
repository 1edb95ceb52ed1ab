"""tools/knob_args.py: the kernel knobs of the commands recorded in docs/measurements parse to
the keyword arguments they meant, for sparse_bench, kernel_sass and sampler_sweep alike."""

import pytest
from helpers import import_script

knob_args = import_script("tools/knob_args.py", "knob_args")


def test_keywords_are_integers_or_words():
    assert knob_args.parse("max_registers=64") == {"max_registers": 64}
    assert knob_args.parse("touched_groups=0,packed_fill=0") == {"touched_groups": 0,
                                                                "packed_fill": 0}
    assert knob_args.parse("own_count=thread,max_registers=0,shift=-3,scale=0.5") == {
        "own_count": "thread", "max_registers": 0, "shift": -3, "scale": "0.5"}
    assert knob_args.parse("sparse_programs=2147483647,ablate=") == {
        "sparse_programs": 2147483647, "ablate": ""}
    assert knob_args.parse("") == {} and knob_args.parse("num_warps=8,") == {"num_warps": 8}
    for each in "min_programs=512;num_warps=8".split(";"):  # sparse_bench's settings
        assert knob_args.parse(each) in ({"min_programs": 512}, {"num_warps": 8})
    for wrong in ("max_registers", "=64", "a=1,b"):
        with pytest.raises(ValueError, match="is not name=value"):
            knob_args.parse(wrong)


def test_named_variants_keep_their_names_and_knobs():
    assert knob_args.parse_named(
        "thread64:own_count=thread;thread:own_count=thread,max_registers=0") == {
        "thread64": {"own_count": "thread"},
        "thread": {"own_count": "thread", "max_registers": 0}}
    assert knob_args.parse_named(
        "new:; a:file=tools/estep_probe.py,probe=a ;zero_max:file=scratch/zero_max.py") == {
        "new": {}, "a": {"file": "tools/estep_probe.py", "probe": "a"},
        "zero_max": {"file": "scratch/zero_max.py"}}
    assert knob_args.parse_named("") == {}
