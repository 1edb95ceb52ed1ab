"""The E-step kernel's SASS without a GPU: registers and the block loop's instructions
(docs/measurements/roofline.md, "The profile").

    python tools/kernel_sass.py --triton=/tmp/tri saberjax/pallas/sampler.py OTHER/sampler.py

For each sampler.py: its sample_and_shuffle (with --kernel_args, its keyword arguments, e.g.
max_registers=0 for ptxas's own choice) is lowered by Pallas for an abstract H100 on a small
random state (K = --num_topics; a sparse model's for --model=sparse, e.g.
saberjax/pallas/sparse_sampler.py,
from tests/test_sparse_kernel.py), the Triton IR of each kernel it launches written in MLIR's
generic form, and each compiled for sm_90a by a standalone Triton (--triton: a folder holding
the `triton` package, e.g. an unpacked wheel; it brings ptxas, cuobjdump and nvdisasm) with
floating-point contraction off, as XLA compiles it.  Printed for each kernel: registers a
thread (allocated, and the most live at once by nvdisasm's life ranges: what a cap must fit
without spilling), instructions in all, spill loads and stores (STL, LDL), and for each loop
(a backward branch) its instructions by opcode, the registers live in it at most, and where
its global loads sit, the B-hat gathers (16-bit) apart from the others.  A standalone
Triton is not XLA's: its loop came out within a few percent of the device's (205 against 198
instructions for main's kernel of 2026-11-27) and its scheduling may differ, so this ranks
variants and shows their layout and load order; timing them on the device decides.
"""

from __future__ import annotations

import collections
import importlib.util
import pathlib
import re
import subprocess
import sys
import tempfile

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))

from absl import app, flags

import knob_args  # tools/, beside this script

FLAGS = flags.FLAGS
flags.DEFINE_string("triton", None, "Folder holding a standalone `triton` package.",
                    required=True)
flags.DEFINE_integer("num_topics", 1000, "K of the state the kernel is lowered for.")
flags.DEFINE_enum("model", "dense", ["dense", "sparse"],
                  "The model the sampler takes: the dense Model or the SparseModel.")
flags.DEFINE_integer("num_warps", 1, "The kernel's num_warps (sample_and_shuffle's default).")
flags.DEFINE_bool("listing", False, "Also print each loop's instructions, each with the "
                  "registers live there.")
flags.DEFINE_string("kernel_args", "", "Keyword arguments of sample_and_shuffle, name=value "
                    "comma-separated (knob_args.parse: e.g. max_registers=64).")

LINE = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);")
LIVE = re.compile(r"\s*/\*([0-9a-f]{4,})\*/.*?;\s*//\s*\|\s*(\d+)")  # nvdisasm's count


def triton_ir(sampler_path: str, num_topics: int, model_format: str,
              kernel_args: dict) -> list[str]:
    """The Triton IR (generic MLIR form) of each kernel Pallas lowers sampler_path's
    sample_and_shuffle to (with kernel_args)."""
    import jax  # noqa: PLC0415
    from jax._src.pallas.triton import lowering, pallas_call_registration  # noqa: PLC0415

    import test_pallas  # noqa: PLC0415  (its random state and abstract H100)
    import test_sparse_kernel  # noqa: PLC0415  (its random sparse state)

    spec = importlib.util.spec_from_file_location("sampler_under_test", sampler_path)
    sampler = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sampler)
    captured = []  # modules, printed once lowered (a register cap is set on them after this)
    lower = lowering.lower_jaxpr_to_triton_module

    def capture(*args, **kwargs):
        result = lower(*args, **kwargs)
        captured.append(result.module)
        return result

    pallas_call_registration.lowering.lower_jaxpr_to_triton_module = capture
    try:
        if model_format == "sparse":
            chunk, chunk_state, model, key = test_sparse_kernel.random_sparse_state(
                num_topics, seed=1)
        else:
            chunk, chunk_state, model, key, _ = test_pallas.random_state(
                test_pallas.ragged_corpus(seed=num_topics), num_topics, seed=num_topics)
        test_pallas.lower_for_h100(
            lambda *args: sampler.sample_and_shuffle.__wrapped__(*args, interpret=False,
                                                                 **kernel_args),
            chunk, chunk_state, model, key)
    finally:
        pallas_call_registration.lowering.lower_jaxpr_to_triton_module = lower
    del jax
    return [module.operation.get_asm(enable_debug_info=False, print_generic_op_form=True)
            for module in captured]


def compile_sass(ir_text: str, folder: pathlib.Path) -> tuple[str, str, dict[int, int]]:
    """(SASS, cuobjdump's resource usage, the registers live at each instruction's address:
    nvdisasm's life ranges) of ir_text compiled for sm_90a."""
    sys.path.insert(0, FLAGS.triton)
    from triton.backends.compiler import GPUTarget  # noqa: PLC0415
    from triton.compiler import compile as triton_compile  # noqa: PLC0415

    source = folder / "kernel.ttir"
    source.write_text(ir_text)
    kernel = triton_compile(str(source), target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": FLAGS.num_warps, "num_stages": 1,
                                     "enable_fp_fusion": False})
    cubin = folder / "kernel.cubin"
    cubin.write_bytes(kernel.asm["cubin"])
    tools = pathlib.Path(FLAGS.triton) / "triton/backends/nvidia/bin"
    sass = subprocess.run([tools / "cuobjdump", "-sass", cubin], capture_output=True,
                          text=True).stdout
    usage = subprocess.run([tools / "cuobjdump", "-res-usage", cubin], capture_output=True,
                           text=True).stdout
    ranges = subprocess.run([tools / "nvdisasm", "--print-life-ranges", "--life-range-mode",
                             "count", cubin], capture_output=True, text=True).stdout
    live = {int(m.group(1), 16): int(m.group(2)) for m in map(LIVE.match, ranges.splitlines())
            if m}
    return sass, usage, live


def describe(sass: str, usage: str, live: dict[int, int]) -> list[str]:
    """Registers (allocated, and the most live at once), instruction count, and each loop's
    opcodes, most live registers and load positions."""
    instructions = [(int(m.group(1), 16), m.group(2).strip())
                    for m in map(LINE.match, sass.splitlines()) if m]
    spills = sum(" STL" in f" {x}" or " LDL" in f" {x}" for _, x in instructions)
    lines = [f"registers {','.join(re.findall(r'REG:(\d+)', usage))} "
             f"(at most {max(live.values(), default=0)} live), "
             f"instructions {len(instructions)}, spill loads and stores {spills}"]
    for address, text in instructions:
        target = re.search(r"BRA.*?0x([0-9a-f]+)", text)
        if not target or int(target.group(1), 16) >= address:
            continue
        body = [x for a, x in instructions if int(target.group(1), 16) <= a <= address]
        body_live = [live.get(a, 0) for a, _ in instructions
                     if int(target.group(1), 16) <= a <= address]
        opcodes = collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", x).split()[0].split(".")[0]
                                      for x in body)
        gathers = [i for i, x in enumerate(body) if "LDG" in x and ".U16" in x]
        loads = [i for i, x in enumerate(body) if "LDG" in x and ".U16" not in x]
        most = max((n for a, n in live.items() if int(target.group(1), 16) <= a <= address),
                   default=0)
        lines.append(f"  loop of {len(body)} ({most} registers live at most): "
                     + ", ".join(f"{op} {n}" for op, n in opcodes.most_common(16)))
        lines.append(f"    16-bit gathers at {gathers}, other loads at {loads}")
        if FLAGS.listing:
            lines.extend(f"    {i:4d} [{n:3d}] {x}"
                         for i, (x, n) in enumerate(zip(body, body_live)))
    return lines


def main(argv):
    for path in argv[1:]:
        for number, ir_text in enumerate(triton_ir(path, FLAGS.num_topics, FLAGS.model,
                                                   knob_args.parse(FLAGS.kernel_args))):
            with tempfile.TemporaryDirectory() as folder:
                sass, usage, live = compile_sass(ir_text, pathlib.Path(folder))
            print(f"{path}, kernel {number}")
            print("\n".join(describe(sass, usage, live)))


if __name__ == "__main__":
    app.run(main)
