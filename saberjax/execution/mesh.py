"""The mesh and where arrays live on it.

A one-axis mesh ("data") spans every device of every process, partitioned by documents or by
words.  The two-axis mesh (partition "hybrid") is hosts x gpus: documents are split across
"hosts" and words within a host's "gpus", so the collectives a host's devices share (A
gathered, topics sent back) stay on the inner axis and only B's word shares (or their tokens'
topics) cross the outer one.  Axes names the roles: the axis over which B's rows are reduced (documents) and the one
over which A is gathered (words).

    slot arrays     a leading device axis sharded over every axis of the mesh (by_device):
                    device i (row-major over the mesh) holds row i, its own chunk of the slot
    the model       B sharded by word rows; B-hat, the trees and alpha whole on every device
                    (MODEL_SPEC), or, partitioned by word, every row-wise array with its
                    device's words (WORD_MODEL_SPEC; the sparse model: SPARSE_MODEL_SPEC,
                    or whole on every device streamed by document: WHOLE_SPARSE_MODEL_SPEC);
                    on the two-axis mesh B-hat's rows are those of the device's word share
                    and B's rows a 1 / hosts part of them (HYBRID_MODEL_SPEC), or, where
                    the hosts exchange topics, B's rows too are the whole share
                    (HYBRID_TOPICS_MODEL_SPEC)

Helpers here move pytrees between host and mesh: by-device arrays built from each process's
own parts (by_device_array), a global array fetched whole (to_host), and a device's part of
by-device arrays inside shard_map (local, stacked).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from saberjax.background import in_background
from saberjax.sparse_rows import RowBuckets, RowTables, SparseModel, SparseRows
from saberjax.state import Model

AXIS = "data"
HOSTS, GPUS = "hosts", "gpus"  # the two-axis mesh: documents across hosts, words within one
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
    word_topic=SparseRows(P(AXIS), P(AXIS), P(AXIS)),
    buckets=RowBuckets(P(AXIS), P(AXIS), P(AXIS), P(AXIS)),
    tables=RowTables(P(AXIS), P(AXIS), P(AXIS), P(AXIS)), topic_totals=P(), alpha=P(),
    bhat_denominator=P(), beta=P(), row_prefix=P(AXIS), row_mass=P(AXIS), prior_leaves=P(),
    prior_tree=P(), prior_total=P(), dense_bhat=P(AXIS), dense_tree=P(AXIS),
    dense_tree_total=P(AXIS))
# The sparse model streamed by document: whole on every device.
WHOLE_SPARSE_MODEL_SPEC = SparseModel(
    word_topic=SparseRows(P(), P(), P()), buckets=RowBuckets(P(), P(), P(), P()),
    tables=RowTables(P(), P(), P(), P()), topic_totals=P(), alpha=P(), bhat_denominator=P(),
    beta=P(), row_prefix=P(), row_mass=P(),
    prior_leaves=P(), prior_tree=P(), prior_total=P(), dense_bhat=P(), dense_tree=P(),
    dense_tree_total=P())


# The two-axis mesh: B-hat and the trees by word share over the gpus, B's rows of a share
# further split over the hosts (row block gpu * hosts + host).
HYBRID_MODEL_SPEC = Model(word_topic=P((GPUS, HOSTS)), topic_totals=P(), bhat=P(GPUS),
                          tree=P(GPUS), tree_total=P(GPUS), alpha=P(), bhat_denominator=P())
# The two-axis mesh exchanging topics between hosts: every row-wise array of the model with the
# device's word share, the same on every host (each host counts the share's B whole).
HYBRID_TOPICS_MODEL_SPEC = Model(word_topic=P(GPUS), topic_totals=P(), bhat=P(GPUS),
                                 tree=P(GPUS), tree_total=P(GPUS), alpha=P(),
                                 bhat_denominator=P())


@dataclasses.dataclass(frozen=True)
class Axes:
    """The roles of a mesh's axes for a partition: B's rows are reduce-scattered and B-hat
    gathered over `documents` (None: B never moves), A gathered and the E-step's topics sent
    back over `words` (None: each device samples its own documents)."""

    documents: str | None
    words: str | None

    @staticmethod
    def of(partition: str) -> "Axes":
        return {"documents": Axes(AXIS, None), "words": Axes(None, AXIS),
                "hybrid": Axes(HOSTS, GPUS)}[partition]

    def model_spec(self) -> Model:
        return {AXIS: MODEL_SPEC, None: WORD_MODEL_SPEC, HOSTS: HYBRID_MODEL_SPEC}[
            self.documents]


def by_device(mesh: Mesh) -> P:
    """The spec of by-device arrays on a mesh: the leading axis over every axis of it."""
    return BY_DEVICE if mesh.axis_names == (AXIS,) else P(mesh.axis_names)


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


def make_grid(hosts: int, gpus: int) -> Mesh:
    """A two-axis mesh (hosts, gpus) of the first hosts x gpus devices of every process, row
    h the devices h * gpus ... (with one process a host, each process's devices)."""
    devices = sorted(jax.devices(), key=lambda device: (device.process_index, device.id))
    if hosts * gpus > len(devices) or (jax.process_count() > 1
                                       and hosts * gpus != len(devices)):
        raise ValueError(f"mesh={hosts}x{gpus} needs {hosts * gpus} devices, but there are "
                         f"{len(devices)} {jax.default_backend()} device(s) in "
                         f"{jax.process_count()} process(es)")
    return Mesh(np.array(devices[: hosts * gpus]).reshape(hosts, gpus), (HOSTS, GPUS))


def model_rows(num_words: int, num_devices: int, partition: str, hosts: int = 1) -> int:
    """Rows of B-hat on each device: V padded to a multiple of the device count by documents
    (B-hat is whole everywhere), a V / N share by words, and on the two-axis mesh of `hosts`
    rows a V / gpus share padded to a multiple of hosts (B's rows are split over them)."""
    if partition == "hybrid":
        share = -(-num_words // (num_devices // hosts))
        return -(-share // hosts) * hosts
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
