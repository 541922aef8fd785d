"""GPU devices of real tasks: from the ledger's logical devices to this machine's GPUs, and back.

Scheduler side (:class:`DeviceMap`). The ledger gives every task slot GPU
devices ``(node, d)`` of *logical* nodes (``TaskSlot.devices``). A
:class:`DeviceMap` turns each into a physical GPU id that goes into the
task's ``CUDA_VISIBLE_DEVICES``:

* a node's ``labels: {gpu_ids: "4,5"}`` in the cluster YAML names the
  physical ids of its devices ``0, 1, ...`` in order (one id per device);
  ``LocalBackend(gpu_ids={node: [...]})`` (node index or name) does the same
  and wins over the label;
* every other logical device takes the next id, in node order, from the GPUs
  this scheduler may use (:func:`physical_gpus`) that no node names, wrapping
  around when the cluster declares more devices than that (over all the
  machine's GPUs once the named ones leave none: logical devices then share
  GPUs, as logical nodes share cores); on a machine with no GPU the ids are
  ``0, 1, ...`` skipping the named ones (the environment is still set; torch
  then trains on the CPU and the task reports why, see below).

A task that holds no GPU gets ``CUDA_VISIBLE_DEVICES=""``: it cannot touch a
device another job was given. Members of a pack share their one device.

Task side (:func:`set_visible`, :func:`select_device`,
:func:`device_memory_mb`). A task process (or a warm spare, spawned before its
job was known) sets ``CUDA_VISIBLE_DEVICES`` from its configuration before
CUDA is initialised, then trains on ``cuda:0`` (the first device it sees) when
``torch.cuda.is_available()``, else on the CPU with a note saying why; on CUDA
its progress reports carry the device memory it peaked at
(``torch.cuda.max_memory_allocated``).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the task process imports this module: keep pydantic out of its start-up
    from ..spec.cluster import ClusterSpec

ENV = "CUDA_VISIBLE_DEVICES"
LABEL = "gpu_ids"
"""Node label naming the physical GPU ids of the node's devices (``"0,1"``)."""
_NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")


class DeviceMapError(ValueError):
    """A GPU id mapping that does not fit the cluster (wrong count, duplicate, unknown node)."""


def physical_gpus(environ: Mapping[str, str] | None = None, proc_dir: Path = _NVIDIA_PROC) -> list[str]:
    """GPU ids this scheduler may hand out: its own ``CUDA_VISIBLE_DEVICES`` if set (ids or UUIDs),
    else one id per GPU the NVIDIA driver lists under ``/proc/driver/nvidia/gpus``, else none."""
    env = os.environ if environ is None else environ
    if ENV in env:
        return [x.strip() for x in env[ENV].split(",") if x.strip()]
    try:
        n = sum(1 for _ in proc_dir.iterdir())
    except OSError:
        return []
    return [str(i) for i in range(n)]


def _parse_ids(where: str, value: Any, n: int) -> list[str]:
    items = value.split(",") if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else None
    if items is None:
        raise DeviceMapError(f"{where}: expected GPU ids as \"0,1\" or a list, got {value!r}")
    ids = [str(x).strip() for x in items]
    if any(not x for x in ids):
        raise DeviceMapError(f"{where}: empty GPU id in {value!r}")
    if len(ids) != n:
        raise DeviceMapError(f"{where}: names {len(ids)} GPU id(s) ({','.join(ids)}) but the node has gpu: {n}; "
                             f"give one physical id per device")
    return ids


@dataclass(frozen=True)
class DeviceMap:
    """Physical GPU id of every logical device ``(node, d)``; see the module docstring."""

    ids: dict[tuple[int, int], str]
    machine_gpus: tuple[str, ...]  # what physical_gpus() found (empty: no GPU here)

    @classmethod
    def build(cls, cluster: ClusterSpec, overrides: Mapping[int | str, Any] | None = None,
              machine: Sequence[str] | None = None) -> DeviceMap:
        """The map for ``cluster``: ``overrides`` (node index or name -> ids), then ``gpu_ids``
        labels, then the machine's GPUs (``machine``, default :func:`physical_gpus`) in turn."""
        phys = list(physical_gpus() if machine is None else machine)
        names = {n.name: i for i, n in enumerate(cluster.nodes)}
        explicit: dict[int, tuple[str, Any]] = {}
        for i, node in enumerate(cluster.nodes):
            if LABEL in node.labels:
                explicit[i] = (f"node {node.name!r}: labels.{LABEL}", node.labels[LABEL])
        for key, value in (overrides or {}).items():
            i = names.get(key) if isinstance(key, str) and key in names else key
            if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(cluster.nodes):
                raise DeviceMapError(f"gpu_ids: unknown node {key!r}; nodes are 0..{len(cluster.nodes) - 1} "
                                     f"or their names")
            explicit[i] = (f"gpu_ids[{key!r}]", value)
        ids: dict[tuple[int, int], str] = {}
        owner: dict[str, tuple[int, int]] = {}
        for i, node in enumerate(cluster.nodes):
            if i in explicit:
                where, value = explicit[i]
                for d, gid in enumerate(_parse_ids(where, value, int(round(node.capacity["gpu"])))):
                    if gid in owner:
                        o = owner[gid]
                        raise DeviceMapError(f"{where}: GPU id {gid!r} is already device {o[1]} of node "
                                             f"{cluster.nodes[o[0]].name!r}; one physical GPU per logical device")
                    owner[gid] = (i, d)
                    ids[(i, d)] = gid
        # the other devices take the GPUs no node names, in turn (all of them again once those run out)
        pool = [g for g in phys if g not in owner] or phys
        flat = (str(j) for j in itertools.count() if str(j) not in owner)  # no GPU here: unnamed indices
        k = 0
        for i, node in enumerate(cluster.nodes):
            if i not in explicit:
                for d in range(int(round(node.capacity["gpu"]))):
                    ids[(i, d)] = pool[k % len(pool)] if pool else next(flat)
                    k += 1
        return cls(ids, tuple(phys))

    def visible(self, devices: Iterable[tuple[int, int]]) -> str:
        """``CUDA_VISIBLE_DEVICES`` for a task holding logical ``devices`` (``""``: none)."""
        out: list[str] = []
        for dev in devices:
            if dev not in self.ids:
                raise DeviceMapError(f"logical device {dev} is not in the cluster")
            gid = self.ids[dev]
            if gid not in out:
                out.append(gid)
        return ",".join(out)

    def of_pack(self, device: tuple[int, int]) -> str:
        """``CUDA_VISIBLE_DEVICES`` of the pack host of ``device``: its GPU, or ``""`` for a CPU-only
        node's CPU (a pack's device 0 there)."""
        return self.ids.get(device, "")

    def for_slot(self, slot: Any) -> str:
        """``CUDA_VISIBLE_DEVICES`` of one ledger ``TaskSlot`` (its devices, in order)."""
        return self.visible((slot.node, d) for d, _ in slot.devices)


# ---------------------------------------------------------------- task side
@dataclass(frozen=True)
class DeviceChoice:
    """Where a task trains: ``device`` (``"cuda:0"`` or ``"cpu"``), what it saw, and why if on the CPU
    although it was given GPUs."""

    device: str
    visible: str | None
    note: str | None = None

    def report(self) -> dict[str, Any]:
        """The fields of the task's ``ready`` message."""
        return {"device": self.device, "cuda_visible_devices": self.visible, "device_note": self.note}


def set_visible(visible: str | None) -> str | None:
    """Set this process's ``CUDA_VISIBLE_DEVICES`` to ``visible`` (None: leave it); a note if CUDA was
    already initialised here (then the old set stays in force)."""
    if visible is None:
        return None
    old = os.environ.get(ENV)
    os.environ[ENV] = visible
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and old != visible and torch.cuda.is_initialized():
        return f"CUDA was initialised in this process with {ENV}={old!r}; {visible!r} takes effect in a new one"
    return None


def select_device(visible: str | None) -> DeviceChoice:
    """``cuda:0`` when torch sees a CUDA device, else ``cpu`` (with a note when GPUs were assigned).

    ``visible``: the GPUs assigned to the task; the choice records the ``CUDA_VISIBLE_DEVICES`` this
    process actually has (what CUDA will use)."""
    import torch

    seen = os.environ.get(ENV)
    if torch.cuda.is_available():
        return DeviceChoice("cuda:0", seen)
    note = None
    if visible:
        note = f"{ENV}={visible} assigned but {no_cuda_reason()}: training on the CPU"
    return DeviceChoice("cpu", seen, note)


def no_cuda_reason() -> str:
    """Why torch cannot use CUDA here (a CPU-only build, or no device the driver lets it see)."""
    import torch

    if torch.version.cuda is None:
        return f"this torch build has no CUDA (torch {torch.__version__})"
    return (f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU; check the driver and "
            f"{ENV}={os.environ.get(ENV)!r}")


def torch_device(name: str) -> Any:
    """The ``torch.device`` a benchmark's ``--device`` names: ``auto`` (cuda when torch sees a GPU, else
    cpu), ``cpu``, ``cuda`` or ``cuda:N``; ValueError saying what was expected, or why CUDA is missing."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda"):
        raise ValueError(f"--device: expected cpu, cuda, cuda:N or auto, got {name!r}")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"--device {name}: no CUDA device: {no_cuda_reason()}")
        n = torch.cuda.device_count()
        if dev.index is not None and dev.index >= n:
            raise ValueError(f"--device {name}: torch sees {n} GPU(s): cuda:0..cuda:{n - 1}")
    return dev


def device_memory_mb(device: str | None) -> float | None:
    """Peak device memory this process allocated on ``device`` (MB; ``torch.cuda.max_memory_allocated``),
    None for the CPU."""
    if not device or not device.startswith("cuda"):
        return None
    import torch

    return float(torch.cuda.max_memory_allocated(torch.device(device))) / 2**20


def device_telemetry(device: str | None) -> dict[str, float]:
    """``{"device_mem_mb": ...}`` for a progress report on a CUDA device, ``{}`` on the CPU."""
    mb = device_memory_mb(device)
    return {} if mb is None else {"device_mem_mb": mb}
