"""One device's GPU kernels over some calls of a program, from jax.profiler's trace: the
events (start, duration, stream, kernel name) and their totals by kernel, so that what comes
back from a device machine is a short text (tools/iteration_profile.py, tools/sparse_bench.py
--profile)."""

from __future__ import annotations

import collections
import glob
import re

import jax


def traced_events(run, trace_dir: str, device: int = 0):
    """(run()'s result, the kernel events of GPU `device` while it ran: (start_ns,
    duration_ns, stream, name) sorted by start; None where the trace has no such GPU)."""
    jax.profiler.start_trace(trace_dir)
    result = jax.block_until_ready(run())
    jax.profiler.stop_trace()
    return result, gpu_events(trace_dir).get(device)


def gpu_events(trace_dir: str) -> dict[int, list]:
    """The kernel events of every GPU in the latest trace under trace_dir, by GPU number:
    (start_ns, duration_ns, stream, name) sorted by start (one clock for all GPUs)."""
    path = sorted(glob.glob(f"{trace_dir}/**/*.xplane.pb", recursive=True))[-1]
    events = {}
    for plane in jax.profiler.ProfileData.from_file(path).planes:
        found = re.fullmatch(r"/device:GPU:(\d+)", plane.name)
        if found:
            events[int(found.group(1))] = sorted(
                (event.start_ns, event.duration_ns, line.name, event.name)
                for line in plane.lines if "Stream" in line.name for event in line.events)
    return events


def kernel_details(trace_dir: str, names, device: int = 0) -> str:
    """A line of each kernel of `names`: the profiler's statistics of its first launch
    (registers a thread, shared memory, grid and block, occupancy where the trace has them)."""
    path = sorted(glob.glob(f"{trace_dir}/**/*.xplane.pb", recursive=True))[-1]
    data = jax.profiler.ProfileData.from_file(path)
    found = {}
    for plane in data.planes:
        if plane.name != f"/device:GPU:{device}":
            continue
        for line in plane.lines:
            for event in line.events:
                if event.name in names and event.name not in found:
                    found[event.name] = "; ".join(f"{key}={value}" for key, value in event.stats)
    return "\n".join(f"{name[:60]}: {found.get(name, '')[:400]}" for name in names)


def repeated(step, state, calls: int):
    """state after `calls` calls of step (an iteration: state -> state)."""
    for _ in range(calls):
        state = step(state)
    return state


def top_kernels(events, count: int) -> list[str]:
    """The names of the `count` kernels of the most time in all."""
    total = collections.defaultdict(float)
    for _, duration, _, name in events:
        total[name] += duration
    return sorted(total, key=lambda name: -total[name])[:count]


def kernel_totals(events, calls: int, top: int = 40) -> str:
    """A text of the events' busy ms a call in all, then by kernel name (the `top` largest,
    ms a call and launches a call) and by kind (the name without its numbers: fusion,
    sort, scatter, ...)."""
    by_name = collections.defaultdict(lambda: [0.0, 0])
    by_kind = collections.defaultdict(float)
    for _, duration, _, name in events:
        by_name[name][0] += duration / 1e6 / calls
        by_name[name][1] += 1
        by_kind[re.sub(r"[._]?\d+", "", name)[:60]] += duration / 1e6 / calls
    span = (events[-1][0] + events[-1][1] - events[0][0]) / 1e6 / calls if events else 0.0
    lines = [f"{len(events) / calls:.0f} kernels a call, busy {sum(by_kind.values()):.2f} ms "
             f"a call, span {span:.2f} ms a call"]
    for name, (ms, count) in sorted(by_name.items(), key=lambda item: -item[1][0])[:top]:
        lines.append(f"{ms:9.3f} ms {count / calls:6.1f}x  {name[:110]}")
    lines.append("by kind:")
    for kind, ms in sorted(by_kind.items(), key=lambda item: -item[1])[:top]:
        lines.append(f"{ms:9.3f} ms  {kind}")
    return "\n".join(lines)
