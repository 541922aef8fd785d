"""NodeSpec and ClusterSpec, with the presets used by the papers' evaluations."""

from __future__ import annotations

import csv
from functools import cache
from importlib import resources as ilr
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .limits import MAX_CLUSTER_GPUS, MAX_NAME_LEN, MAX_NODE_GPUS, MAX_NODES, check_quantities
from .resources import Resources


class NodeSpec(BaseModel):
    """One machine: a name, its capacity and free-form labels (e.g. ``gpu_model``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=MAX_NAME_LEN)
    capacity: Resources
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("capacity")
    @classmethod
    def _bounded(cls, v: Resources) -> Resources:
        return check_quantities(v, "capacity", max_gpu=MAX_NODE_GPUS)


class ClusterSpec(BaseModel):
    """A named set of nodes. Node names must be unique."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "cluster"
    nodes: tuple[NodeSpec, ...] = Field(min_length=1, max_length=MAX_NODES)

    @model_validator(mode="after")
    def _unique(self) -> ClusterSpec:
        gpus = sum(n.capacity["gpu"] for n in self.nodes)
        if gpus > MAX_CLUSTER_GPUS:
            raise ValueError(f"the cluster has {gpus:g} GPUs; at most {MAX_CLUSTER_GPUS} are supported")
        seen: set[str] = set()
        for n in self.nodes:
            if n.name in seen:
                raise ValueError(f"duplicate node name {n.name!r}")
            seen.add(n.name)
        return self

    @property
    def capacity(self) -> Resources:
        return Resources.total(n.capacity for n in self.nodes)

    @property
    def resource_names(self) -> tuple[str, ...]:
        names: dict[str, None] = {}
        for n in self.nodes:
            names.update(dict.fromkeys(n.capacity))
        return tuple(names)

    @classmethod
    def homogeneous(cls, name: str, n_nodes: int, capacity: Resources, **labels: str) -> ClusterSpec:
        if n_nodes < 1:
            raise ValueError(f"n_nodes must be >= 1, got {n_nodes}")
        width = len(str(n_nodes - 1))
        return cls(
            name=name,
            nodes=tuple(
                NodeSpec(name=f"{name}-{i:0{width}d}", capacity=capacity, labels=dict(labels))
                for i in range(n_nodes)
            ),
        )


_PHILLY_NODE = Resources(gpu=8, cpu=48, mem_gb=480, net_gbps=100, gpu_mem_gb=8 * 24)


def _philly() -> ClusterSpec:
    # Philly (Jeon et al., ATC'19): ~2,500 GPUs; modelled as 313 nodes x 8 GPUs = 2,504.
    return ClusterSpec.homogeneous("philly", 313, _PHILLY_NODE, gpu_model="P100")


def _philly_800() -> ClusterSpec:
    """100 Philly nodes (800 GPUs): the default cluster of the embedded ``philly_82k`` trace.

    On the full 2,504-GPU preset the trace offers a GPU load of 0.15 and no job ever waits,
    so every policy gives the same result; on 800 GPUs it offers 0.47 on average, its busy
    weeks queue (as a virtual cluster of Philly did, Jeon et al. §3) and policies differ.
    The largest job (128 GPUs) still fits."""
    return ClusterSpec.homogeneous("philly-800", 100, _PHILLY_NODE, gpu_model="P100")


def _philly_512() -> ClusterSpec:
    """64 nodes x 8 GPUs (512 GPUs, 64 CPUs, 512 GB each): the contended cluster of the simulator
    speed benchmark (``bench/sim_scale.py``, issue 18). The ``philly_82k`` trace queues here for
    most of its span, so preemptive policies preempt and every decision round sees a long queue."""
    return ClusterSpec.homogeneous("philly-512", 64, Resources(gpu=8, cpu=64, mem_gb=512))


def _tiresias() -> ClusterSpec:
    # Tiresias (Gu et al., NSDI'19) and Muri testbed: 16 nodes x 4 GPUs.
    return ClusterSpec.homogeneous(
        "tiresias", 16, Resources(gpu=4, cpu=32, mem_gb=256, net_gbps=100, gpu_mem_gb=4 * 16), gpu_model="P100"
    )


def _mlfs() -> ClusterSpec:
    """MLFS's testbed (Wang et al., CoNEXT'20 §4.1): 20 p3.8xlarge (4 V100, 32 vCPU, 244 GB, 10 Gb/s)."""
    return ClusterSpec.homogeneous(
        "mlfs", 20, Resources(gpu=4, cpu=32, mem_gb=244, net_gbps=10, gpu_mem_gb=4 * 16), gpu_model="V100"
    )


def _muri_n8g8() -> ClusterSpec:
    """The Muri artifact's simulated cluster (Zhao et al., SIGCOMM'22, ``simulator/cluster_spec/n8g8.csv``):
    8 nodes x 8 GPUs, 92 CPUs and 520 GB of memory each; the default of the ``muri`` trace format."""
    return ClusterSpec.homogeneous("muri-n8g8", 8, Resources(gpu=8, cpu=92, mem_gb=520))


#: GPU memory per GPU of Gavel's GPU types (GB): V100 and P100 16, K80 12 (one GK210 of a board).
GAVEL_GPU_MEM_GB: dict[str, float] = {"v100": 16.0, "p100": 16.0, "k80": 12.0}
#: Resource counting a node's GPUs with at least 16 GB: Gavel jobs that ran out of memory on a K80
#: demand one per worker (``sim.traces.gavel``), which keeps them off K80 nodes.
BIG_GPU = "gpu16gb"


def gavel_cluster(v100: int, p100: int, k80: int, *, gpus_per_server: int = 4, name: str | None = None) -> ClusterSpec:
    """A cluster as Gavel's simulator builds it (``--cluster_spec V:P:K --num_gpus_per_server N``):
    servers of ``gpus_per_server`` GPUs of one type each (the last one of a type takes the rest),
    labelled ``gpu_model`` (``v100``, ``p100``, ``k80``), with 8 CPUs, 64 GB and the type's GPU memory
    per GPU, and :data:`BIG_GPU` = its GPUs of at least 16 GB."""
    if isinstance(gpus_per_server, bool) or not isinstance(gpus_per_server, int) or gpus_per_server < 1:
        raise ValueError(f"gpus_per_server must be an integer >= 1, got {gpus_per_server!r}")
    nodes: list[NodeSpec] = []
    for gpu, count in (("v100", v100), ("p100", p100), ("k80", k80)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"{gpu}: GPU count must be an integer >= 0, got {count!r}")
        full, rest = divmod(count, gpus_per_server)
        for i, g in enumerate([gpus_per_server] * full + ([rest] if rest else [])):
            mem = GAVEL_GPU_MEM_GB[gpu]
            cap = Resources({"gpu": g, "cpu": 8 * g, "mem_gb": 64 * g, "gpu_mem_gb": mem * g,
                             BIG_GPU: g if mem >= 16 else 0})
            nodes.append(NodeSpec(name=f"{gpu}-{i}", capacity=cap, labels={"gpu_model": gpu}))
    if not nodes:
        raise ValueError("a Gavel cluster needs at least one GPU")
    return ClusterSpec(name=name or f"gavel-{v100}-{p100}-{k80}", nodes=tuple(nodes))


def _gavel() -> ClusterSpec:
    """Gavel's simulated heterogeneous cluster (Narayanan et al., OSDI'20, §7: 36 V100s, 36 P100s and
    36 K80s), 4 GPUs per server: the default of the ``gavel`` trace format."""
    return gavel_cluster(36, 36, 36, name="gavel-v100-p100-k80")


def _pollux() -> ClusterSpec:
    # Pollux (Qiao et al., OSDI'21): 16 nodes x 4 T4 GPUs.
    return ClusterSpec.homogeneous(
        "pollux", 16, Resources(gpu=4, cpu=64, mem_gb=192, net_gbps=50, gpu_mem_gb=4 * 16), gpu_model="T4"
    )


def _alibaba_nodes() -> list[NodeSpec]:
    """The 1,213 GPU nodes of the Alibaba 2023 trace (``openb_node_list_gpu_node.csv``), in file order."""
    path = ilr.files("cohabit.data").joinpath("traces/alibaba_openb_gpu_nodes.csv")
    nodes = []
    with path.open() as f:
        for row in csv.DictReader(f):
            cap = Resources(
                gpu=float(row["gpu"]),
                cpu=float(row["cpu_milli"]) / 1000.0,
                mem_gb=float(row["memory_mib"]) / 1024.0,
            )
            nodes.append(NodeSpec(name=row["sn"], capacity=cap, labels={"gpu_model": row["model"]}))
    return nodes


def _alibaba_openb() -> ClusterSpec:
    # Alibaba GPU cluster trace 2023: the 1,213 GPU nodes of openb_node_list_gpu_node.csv.
    return ClusterSpec(name="alibaba-openb", nodes=tuple(_alibaba_nodes()))


ALIBABA_SAMPLE_STRIDE = 8


def _alibaba_openb_sample() -> ClusterSpec:
    """Every 8th node of each GPU model of ``alibaba-openb`` (at least one per model: 154 nodes, 775 GPUs).

    The default cluster of the embedded ``alibaba_openb`` pods. All 7,255 replayable pods
    together request 5,485 GPUs, fewer than the full cluster's 6,212, so on the full cluster
    no pod ever waits, whatever the arrival times. Weng et al. (ATC'23) evaluate by offering
    pods until the cluster's GPUs are all requested; a one-in-eight sample keeps the node mix
    (GPU models, node sizes) with about a seventh of the pods' total request as capacity, so
    with compressed arrivals (``sim.traces.scenario``: 200x, when up to about 1,100 GPUs are
    requested at once) queues form."""
    by_model: dict[str, list[NodeSpec]] = {}
    for n in _alibaba_nodes():
        by_model.setdefault(n.labels["gpu_model"], []).append(n)
    picked = {n.name for group in by_model.values() for n in group[::ALIBABA_SAMPLE_STRIDE]}
    return ClusterSpec(name="alibaba-openb-1in8", nodes=tuple(n for n in _alibaba_nodes() if n.name in picked))


def _harmony() -> ClusterSpec:
    """Harmony's evaluation cluster (Lee et al., §V-B): 100 machines of 8 vCPU / 32 GB / 1.1 Gbps."""
    from ..sim.harmony_workload import harmony_cluster

    return harmony_cluster(100)


def _rotary() -> ClusterSpec:
    """Rotary-DLT's evaluation server (Liu dissertation §3.3.2): 4 GPUs of 8 GB."""
    from ..sim.rotary_workload import rotary_cluster

    return rotary_cluster()
def _drl() -> ClusterSpec:
    """Bao et al.'s testbed (ToN'22, §VII-B): 6 servers of 8 cores, 2 GPUs, 48 GB, with interference."""
    from ..sim.drl_workload import drl_cluster

    return drl_cluster(6)


def _drl_30() -> ClusterSpec:
    """Bao et al.'s rack-scale simulation (Fig. 14): 30 of the testbed's servers, with interference."""
    from ..sim.drl_workload import drl_cluster

    return drl_cluster(30)


PRESETS = {
    "philly": _philly,
    "philly-800": _philly_800,
    "philly-512": _philly_512,
    "tiresias": _tiresias,
    "muri-n8g8": _muri_n8g8,
    "gavel-v100-p100-k80": _gavel,
    "pollux": _pollux,
    "alibaba-openb": _alibaba_openb,
    "alibaba-openb-1in8": _alibaba_openb_sample,
    "harmony": _harmony,
    "rotary": _rotary,
    "mlfs": _mlfs,
    "drl": _drl,
    "drl-30": _drl_30,
}


@cache
def preset(name: str) -> ClusterSpec:
    """Return a named preset cluster; unknown names list the known ones."""
    try:
        return PRESETS[name]()
    except KeyError:
        raise ValueError(f"unknown cluster preset {name!r}; known presets: {', '.join(sorted(PRESETS))}") from None


def cluster_from_arg(text: str) -> ClusterSpec:
    """A ``--cluster`` argument: a preset name (``philly``, ``tiresias``, ...) or a YAML file path.

    Raises :class:`~cohabit.spec.errors.SpecError` for a bad file and ``ValueError`` naming the
    presets when ``text`` is neither.
    """
    name = text.strip()
    if name.lower() in PRESETS:
        return preset(name.lower())
    path = Path(name).expanduser()
    if path.suffix.lower() in (".yaml", ".yml") or path.is_file():
        from .yamlio import load_cluster  # (YAML only for a file: a preset needs none)

        return load_cluster(path)
    raise ValueError(
        f"unknown cluster {text!r}: give a preset ({', '.join(sorted(PRESETS))}) or the path of a YAML "
        f"cluster file (.yaml/.yml)"
    )
