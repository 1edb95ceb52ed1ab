"""The mesh and where arrays live on it: one axis, "data", over every device of every process.

    slot arrays     a leading device axis sharded over "data" (BY_DEVICE): device i holds
                    row i, its own chunk of the slot
    the model       B sharded by word rows; B-hat, the trees and alpha whole on every device
                    (MODEL_SPEC), or, partitioned by word, every row-wise array with its
                    device's words (WORD_MODEL_SPEC; the sparse model: SPARSE_MODEL_SPEC)

Helpers here move pytrees between host and mesh: by-device arrays built from each process's
own parts (by_device_array), a global array fetched whole (to_host), and a device's part of
by-device arrays inside shard_map (local, stacked).
"""

from __future__ import annotations

import concurrent.futures

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from saberjax.background import in_background
from saberjax.sparse_rows import SparseModel, SparseRows
from saberjax.state import Model

AXIS = "data"
# Shard specs: a slot's arrays and states by device; the model's B by word rows, the rest whole.
BY_DEVICE = P(AXIS)
MODEL_SPEC = Model(word_topic=P(AXIS), topic_totals=P(), bhat=P(), tree=P(), tree_total=P(),
                   alpha=P(), bhat_denominator=P())
# Partition by word: every row-wise array of the model stays with its device's words.
WORD_MODEL_SPEC = Model(word_topic=P(AXIS), topic_totals=P(), bhat=P(AXIS), tree=P(AXIS),
                        tree_total=P(AXIS), alpha=P(), bhat_denominator=P())
# The sparse model (partitioned by word): each device's rows of B and their prefix sums; the
# totals, prior and the global tree of term 3 whole on every device.
SPARSE_MODEL_SPEC = SparseModel(
    word_topic=SparseRows(P(AXIS), P(AXIS), P(AXIS)), topic_totals=P(), alpha=P(),
    bhat_denominator=P(), beta=P(), row_prefix=P(AXIS), row_mass=P(AXIS), prior_leaves=P(),
    prior_tree=P(), prior_total=P(), dense_counts=P(AXIS))


def start_devices() -> concurrent.futures.Future:
    """Start the devices in a thread of their own, while the caller reads its corpus: the
    runtime's initialisation and its first allocation on a GPU (where XLA reserves its memory
    pool) take about as long as loading a cached corpus, and need nothing from it.  The
    future's result is the local devices.  Call it after processes.initialize (jax.distributed
    must come first)."""
    def start():
        devices = jax.local_devices()
        jax.device_put(np.zeros((), np.int32), devices[0]).block_until_ready()
        return devices

    return in_background(start, name="saberjax-start-devices")


def make_mesh(num_devices: int = 0) -> Mesh:
    """A one-axis mesh of the first num_devices devices of every process (0: all of them)."""
    devices = jax.devices()
    if num_devices < 0 or num_devices > len(devices):
        raise ValueError(f"num_devices={num_devices}, but there are {len(devices)} "
                         f"{jax.default_backend()} device(s) in {jax.process_count()} "
                         f"process(es); use 0 for all of them")
    if jax.process_count() > 1 and num_devices not in (0, len(devices)):
        raise ValueError(f"num_devices={num_devices}: with {jax.process_count()} processes the "
                         f"mesh takes every device ({len(devices)}); use 0")
    return Mesh(np.array(devices[: num_devices or None]), (AXIS,))


def model_rows(num_words: int, num_devices: int, partition: str) -> int:
    """Rows of the model on each device: V padded to a multiple of the device count by
    documents (B-hat is whole everywhere), a V / N share by words."""
    rows = -(-num_words // num_devices)
    return rows if partition == "words" else rows * num_devices


def local(tree):
    """A device's part of by-device arrays inside shard_map: the leading axis (size 1) dropped."""
    return jax.tree.map(lambda x: x[0], tree)


def stacked(tree):
    """A device's arrays as its part of by-device arrays (a leading axis of size 1)."""
    return jax.tree.map(lambda x: x[None], tree)


def own_devices(mesh: Mesh) -> list[int]:
    """Mesh positions of this process's devices."""
    return [index for index, device in enumerate(mesh.devices.flat)
            if device.process_index == jax.process_index()]


def to_host(array: jax.Array) -> np.ndarray:
    """A global array's whole value on the host of every process."""
    if array.is_fully_addressable:
        return np.asarray(array)
    from jax.experimental import multihost_utils  # noqa: PLC0415

    return np.asarray(multihost_utils.process_allgather(array, tiled=True))


def by_device_array(parts: dict[int, object], sharding: NamedSharding):
    """One pytree of by-device arrays from host pytrees by mesh position (this process's)."""
    example = next(iter(parts.values()))
    leaves, treedef = jax.tree.flatten(example)
    flat = {device: jax.tree.leaves(part) for device, part in parts.items()}
    size = sharding.mesh.size

    def leaf(index: int):
        shape = (size, *np.shape(leaves[index]))
        return jax.make_array_from_callback(
            shape, sharding, lambda slices: np.asarray(flat[slices[0].start or 0][index])[None])

    return jax.tree.unflatten(treedef, [leaf(index) for index in range(len(leaves))])
