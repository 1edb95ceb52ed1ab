"""Seconds from the start of a launch/train.py process to its first iteration (issue 15's
start-up floor), as one JSON line: every run's figure and the load average before it, and the
best.  A first run fills the caches and is not counted.

    python tools/first_iteration.py --repeats=5 -- --corpus=/work/shared/data/wiki25k \\
        --num_topics=16 --iterations=1 --backend=xla --output=/tmp/w16 --overwrite

Each run is a fresh process that runs `saberjax train` with the compiled iteration replaced by
a stop: its first call (the first iteration's dispatch, after loading, the layout, the
transfer, initialisation and compilation) prints the seconds since the process started
(/proc/self/stat: Linux) and ends the process.  A stopped run leaves OUTPUT.partial behind, so
pass --overwrite.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
MARK = "first iteration after"


def process_start() -> float:
    """time.time() at which this process started."""
    stat = pathlib.Path("/proc/self/stat").read_text()
    start_ticks = int(stat.rsplit(")", 1)[1].split()[19])
    uptime = float(pathlib.Path("/proc/uptime").read_text().split()[0])
    return time.time() - uptime + start_ticks / os.sysconf("SC_CLK_TCK")


def child(train_flags: list[str]) -> None:
    """Runs `saberjax train` with these flags up to its first iteration."""
    started = process_start()
    sys.path.insert(0, str(REPO))
    from saberjax.commands import run  # noqa: PLC0415
    from saberjax.execution.compiled import CompiledStep  # noqa: PLC0415

    def stop(self, state):
        print(f"{MARK} {time.time() - started:.3f} s", file=sys.stderr, flush=True)
        os._exit(0)

    CompiledStep.__call__ = stop
    run("train", [str(REPO / "launch" / "train.py"), *train_flags])


def main(argv: list[str]) -> None:
    repeats, train_flags = 3, argv
    if argv and argv[0].startswith("--repeats="):
        repeats, train_flags = int(argv[0].split("=", 1)[1]), argv[1:]
    if train_flags[:1] == ["--"]:
        train_flags = train_flags[1:]
    runs = []
    for _ in range(repeats + 1):
        load = os.getloadavg()[0]
        done = subprocess.run([sys.executable, __file__, "--child", *train_flags],
                              capture_output=True, text=True)
        lines = [line for line in done.stderr.splitlines() if line.startswith(MARK)]
        if not lines:
            sys.exit(f"train.py did not reach its first iteration:\n{done.stderr[-3000:]}")
        runs.append(dict(seconds=float(lines[0].split()[3]), load=round(load, 2)))
    counted = runs[1:]
    print(json.dumps(dict(best=min(run["seconds"] for run in counted), runs=counted,
                          first_run=runs[0])))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2:])
    else:
        main(sys.argv[1:])
