"""Host-to-device read paths of the chunk store, on one device: a 2 GB file (in the page cache)
read by 8 threads into pageable memory and put on the device, against read into a pinned
buffer filled in place through its address (unsafe_buffer_pointer) and put from there, and
XLA's own pageable-to-pinned copy.  Prints one JSON line (PROBE ...) of seconds; checks that
the bytes read in place reach the device.  Usage: python tools/pinned_read_probe.py"""
import ctypes, os, time, json
import numpy as np, jax
GB = 1 << 30
n = 2 * GB
path = "/tmp/probe.bin"
data = np.random.default_rng(0).integers(0, 255, n, dtype=np.uint8)
data.tofile(path)
fd = os.open(path, os.O_RDONLY)
dev = jax.devices()[0]
mesh = jax.sharding.Mesh(np.array([dev]), ("d",))
on_device = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
pinned_sharding = on_device.with_memory_kind("pinned_host")
import concurrent.futures as cf
pool = cf.ThreadPoolExecutor(8)
PIECE = 1 << 25
def read_into(view):
    futs = [pool.submit(os.preadv, fd, [memoryview(view)[s:s + PIECE]], s) for s in range(0, n, PIECE)]
    for f in futs: f.result()
out = {}
for rep in range(3):
    buf = np.empty(n, np.uint8)
    t = time.perf_counter(); read_into(buf); t1 = time.perf_counter()
    d = jax.device_put(buf, on_device).block_until_ready(); t2 = time.perf_counter()
    out[f"pageable_read_s_{rep}"] = t1 - t; out[f"pageable_h2d_s_{rep}"] = t2 - t1
    del d
try:
    pinned = jax.device_put(np.zeros(n, np.uint8), pinned_sharding).block_until_ready()
    ptr = pinned.addressable_data(0).unsafe_buffer_pointer()
    view = np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(ptr))
    for rep in range(3):
        t = time.perf_counter(); read_into(view); t1 = time.perf_counter()
        d = jax.device_put(pinned, on_device).block_until_ready(); t2 = time.perf_counter()
        out[f"pinned_read_s_{rep}"] = t1 - t; out[f"pinned_h2d_s_{rep}"] = t2 - t1
    out["pinned_in_place_correct"] = bool(np.array_equal(np.asarray(d[:1 << 20]), data[:1 << 20])
                                          and np.array_equal(np.asarray(d[-(1 << 20):]), data[-(1 << 20):]))
    # staged: pageable -> pinned by XLA, then pinned -> device
    buf = np.empty(n, np.uint8); read_into(buf)
    t = time.perf_counter(); p2 = jax.device_put(buf, pinned_sharding).block_until_ready(); t1 = time.perf_counter()
    d = jax.device_put(p2, on_device).block_until_ready(); t2 = time.perf_counter()
    out["xla_pageable_to_pinned_s"] = t1 - t; out["pinned_to_device_s"] = t2 - t1
except Exception as e:
    out["pinned_error"] = repr(e)
out["gb"] = n / 1e9
print("PROBE", json.dumps(out))
os.unlink(path)
