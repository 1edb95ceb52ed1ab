"""How fast many processes write one file's disjoint ranges, as the text reader's worker
processes write a corpus's word ids (text_workers._mapped): `--processes` forked processes,
chunk k of `--chunk_bytes` written at byte HEADER + k x chunk_bytes by process k mod N, in
each of the ways `--modes` names:

- pwrite: os.pwrite into the file, sized first by truncate (the reader's way);
- pwrite_fallocate: the same, the file's blocks allocated first (posix_fallocate);
- mmap / mmap_fallocate: copied into a shared memory map of the file (each process maps it);
- own_files: each process pwrites its chunks into a file of its own (no other writer);
- own_files_joined: the same, then this process joins the files into one in the chunks'
  order, by os.copy_file_range (the kernel copies; joining_s, apart from the writes' wall_s).

Prints one JSON line a mode: wall seconds from the common start to the last process's end,
the processes' user and system seconds and minor page faults, GB/s; then the seconds that
deleting the files took (their pages dropped).  The files go in `--folder` (the file system
that the corpus would be written to).

    python tools/text_write_contention.py --folder=/tmp/w --processes=64 --mb_each=50
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import resource
import time

import numpy as np
from text_core_scaling import run_at_once

HEADER = 128  # the .npy header before a corpus's word ids


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--folder", required=True)
    parser.add_argument("--processes", type=int, default=os.cpu_count())
    parser.add_argument("--mb_each", type=int, default=50)
    parser.add_argument("--chunk_bytes", type=int, default=600_000)
    parser.add_argument("--modes", default="pwrite,pwrite_fallocate,mmap,mmap_fallocate,"
                                           "own_files")
    args = parser.parse_args()
    os.makedirs(args.folder, exist_ok=True)
    chunks = args.mb_each * (1 << 20) // args.chunk_bytes
    for mode in args.modes.split(","):
        path = os.path.join(args.folder, "ids")
        size = HEADER + args.processes * chunks * args.chunk_bytes
        with open(path, "wb") as file:
            file.truncate(size)
            if mode.endswith("fallocate"):
                os.posix_fallocate(file.fileno(), 0, size)
        done, wall = run_at_once(_write, [(mode, path, index, args.processes, chunks,
                                           args.chunk_bytes)
                                          for index in range(args.processes)])
        joining = _joined(path, args.processes, chunks, args.chunk_bytes) if (
            mode == "own_files_joined") else None
        deleting = time.perf_counter()
        for index in range(args.processes):
            own = f"{path}-{index}"
            if os.path.exists(own):
                os.unlink(own)
        os.unlink(path)
        deleting = time.perf_counter() - deleting
        written = args.processes * chunks * args.chunk_bytes
        print(json.dumps(dict(
            mode=mode, processes=args.processes, gb=round(written / 1e9, 2),
            wall_s=round(wall, 2), gb_per_s=round(written / 1e9 / wall, 2),
            most_wall_s=round(max(result["wall_s"] for result in done), 2),
            **{key: round(sum(result[key] for result in done), 2)
               for key in ("user_s", "system_s", "minor_faults")},
            deleting_s=round(deleting, 2),
            **({} if joining is None else dict(joining_s=round(joining, 2), joining_gb_per_s=round(
                written / 1e9 / joining, 2))))), flush=True)


def _joined(path, processes, chunks, chunk_bytes) -> float:
    """Seconds to copy the processes' own files into the file at `path` (after HEADER
    bytes), chunk k from process k mod N's file, by os.copy_file_range from one thread."""
    start = time.perf_counter()
    sources = [os.open(f"{path}-{index}", os.O_RDONLY) for index in range(processes)]
    target = os.open(path, os.O_WRONLY)
    try:
        for chunk in range(processes * chunks):
            offset, left = (chunk // processes) * chunk_bytes, chunk_bytes
            while left:
                copied = os.copy_file_range(sources[chunk % processes], target, left,
                                            offset + chunk_bytes - left,
                                            HEADER + (chunk + 1) * chunk_bytes - left)
                left -= copied
    finally:
        for handle in (*sources, target):
            os.close(handle)
    return time.perf_counter() - start


def _write(mode, path, index, processes, chunks, chunk_bytes, ready, results) -> None:
    data = np.arange(chunk_bytes // 4, dtype=np.int32) + index
    mine = range(index, processes * chunks, processes)
    own = f"{path}-{index}"
    ready.wait()
    usage, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    if mode.startswith("mmap"):
        with open(path, "r+b") as file, mmap.mmap(file.fileno(), 0) as memory:
            view = np.frombuffer(memory, np.uint8)
            for chunk in mine:
                offset = HEADER + chunk * chunk_bytes
                view[offset:offset + chunk_bytes] = data.view(np.uint8)
            del view
    else:
        target, local = (own, True) if mode.startswith("own_files") else (path, False)
        with open(target, "r+b" if not local else "wb") as file:
            for place, chunk in enumerate(mine):
                offset = HEADER + (place if local else chunk) * chunk_bytes
                os.pwrite(file.fileno(), data, offset)
    end = resource.getrusage(resource.RUSAGE_SELF)
    results.put(dict(wall_s=time.perf_counter() - start, user_s=end.ru_utime - usage.ru_utime,
                     system_s=end.ru_stime - usage.ru_stime,
                     minor_faults=end.ru_minflt - usage.ru_minflt))


if __name__ == "__main__":
    main()
