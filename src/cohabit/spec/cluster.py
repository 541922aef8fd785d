"""NodeSpec and ClusterSpec, with the presets used by the papers' evaluations."""

from __future__ import annotations

import csv
from functools import cache
from importlib import resources as ilr

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


def _philly() -> ClusterSpec:
    # Philly (Jeon et al., ATC'19): ~2,500 GPUs; modelled as 313 nodes x 8 GPUs = 2,504.
    return ClusterSpec.homogeneous(
        "philly", 313, Resources(gpu=8, cpu=48, mem_gb=480, net_gbps=100, gpu_mem_gb=8 * 24), gpu_model="P100"
    )


def _tiresias() -> ClusterSpec:
    # Tiresias (Gu et al., NSDI'19) and Muri testbed: 16 nodes x 4 GPUs.
    return ClusterSpec.homogeneous(
        "tiresias", 16, Resources(gpu=4, cpu=32, mem_gb=256, net_gbps=100, gpu_mem_gb=4 * 16), gpu_model="P100"
    )


def _pollux() -> ClusterSpec:
    # Pollux (Qiao et al., OSDI'21): 16 nodes x 4 T4 GPUs.
    return ClusterSpec.homogeneous(
        "pollux", 16, Resources(gpu=4, cpu=64, mem_gb=192, net_gbps=50, gpu_mem_gb=4 * 16), gpu_model="T4"
    )


def _alibaba_openb() -> ClusterSpec:
    # Alibaba GPU cluster trace 2023: the 1,213 GPU nodes of openb_node_list_gpu_node.csv.
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
    return ClusterSpec(name="alibaba-openb", nodes=tuple(nodes))


def _harmony() -> ClusterSpec:
    """Harmony's evaluation cluster (Lee et al., §V-B): 100 machines of 8 vCPU / 32 GB / 1.1 Gbps."""
    from ..sim.harmony_workload import harmony_cluster

    return harmony_cluster(100)


PRESETS = {
    "philly": _philly,
    "tiresias": _tiresias,
    "pollux": _pollux,
    "alibaba-openb": _alibaba_openb,
    "harmony": _harmony,
}


@cache
def preset(name: str) -> ClusterSpec:
    """Return a named preset cluster; unknown names list the known ones."""
    try:
        return PRESETS[name]()
    except KeyError:
        raise ValueError(f"unknown cluster preset {name!r}; known presets: {', '.join(sorted(PRESETS))}") from None
