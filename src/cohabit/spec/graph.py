"""Task graphs of jobs with model and data parallelism (MLFS, Wang et al., CoNEXT'20, §3.2, Fig. 2).

A job's model is cut into ``partitions`` (each with a size in parameters and, optionally,
its own per-task demand); the partitions form a DAG (``edges``, default a chain: layer
groups in order). ``replicas`` data-parallel copies of that graph each train on their own
mini-batches. A *task* is one partition of one replica: ``replicas * len(partitions)`` tasks,
numbered replica-major (task ``t`` is partition ``t % P`` of replica ``t // P``); they are the
job's workers, in placement order, before any parameter servers.

Communication per iteration (what the simulator charges when peers sit on different nodes,
and what a scheduler knows of a job, like its demand):

* ``activation_mb`` along every edge of every replica (forward activations one way, their
  gradients back the other way);
* ``exchange_mb`` between each task and the parameter server holding its partition
  (``architecture: ps``, both directions), or between the same partition's neighbours on the
  all-reduce ring (``architecture: allreduce`` with ``replicas > 1``).

The paper draws both volumes from [50, 100] MB per exchange (§4.1).
"""

from __future__ import annotations

from functools import cached_property

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .limits import MAX_TASKS
from .resources import Resources


class Partition(BaseModel):
    """One model partition: its size in parameters and (optionally) the demand of each of its tasks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    params: float = Field(gt=0, le=1e13, allow_inf_nan=False)
    demand: Resources | None = None


class TaskGraph(BaseModel):
    """Model partitions x data-parallel replicas, with their dependency edges and traffic."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    partitions: list[Partition] = Field(min_length=1, max_length=MAX_TASKS)
    edges: list[tuple[int, int]] | None = None
    replicas: int = Field(default=1, ge=1, le=MAX_TASKS)
    activation_mb: float = Field(default=75.0, ge=0, le=1e6, allow_inf_nan=False)
    exchange_mb: float = Field(default=75.0, ge=0, le=1e6, allow_inf_nan=False)

    @model_validator(mode="after")
    def _check(self) -> TaskGraph:
        p = len(self.partitions)
        if p * self.replicas > MAX_TASKS:
            raise ValueError(f"partitions x replicas = {p * self.replicas} tasks, more than {MAX_TASKS}")
        for i, (a, b) in enumerate(self.edge_list):
            if not (0 <= a < p and 0 <= b < p) or a == b:
                raise ValueError(f"edges[{i}] = [{a}, {b}]: expected two different partition indices in [0, {p - 1}]")
        if len(self.layers) != p:
            raise ValueError("edges form a cycle: a task graph must be acyclic")
        return self

    # Structure ------------------------------------------------------------
    @property
    def num_partitions(self) -> int:
        return len(self.partitions)

    @property
    def num_tasks(self) -> int:
        return self.num_partitions * self.replicas

    @cached_property
    def edge_list(self) -> tuple[tuple[int, int], ...]:
        """The dependency edges between partitions (a chain when none are given)."""
        if self.edges is None:
            return tuple((i, i + 1) for i in range(self.num_partitions - 1))
        return tuple((int(a), int(b)) for a, b in self.edges)

    @cached_property
    def children(self) -> tuple[tuple[int, ...], ...]:
        """Direct children of each partition (``child(k)`` of MLFS Eq. 3)."""
        out: list[list[int]] = [[] for _ in self.partitions]
        for a, b in self.edge_list:
            if 0 <= a < len(out) and 0 <= b < len(out):
                out[a].append(b)
        return tuple(tuple(sorted(set(c))) for c in out)

    @cached_property
    def layers(self) -> tuple[int, ...]:
        """Partitions in topological order (Kahn); shorter than ``partitions`` if there is a cycle."""
        p = self.num_partitions
        indeg = [0] * p
        for a, b in self.edge_list:
            if 0 <= a < p and 0 <= b < p:
                indeg[b] += 1
        ready = [i for i in range(p) if indeg[i] == 0]
        order: list[int] = []
        while ready:
            i = ready.pop(0)
            order.append(i)
            for c in self.children[i]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    ready.append(c)
        return tuple(order)

    @cached_property
    def size_shares(self) -> tuple[float, ...]:
        """S_k / S^J of each partition: its share of the model's parameters (MLFS Eq. 2)."""
        total = sum(pt.params for pt in self.partitions)
        return tuple(pt.params / total for pt in self.partitions)

    def partition_of(self, task: int) -> int:
        return task % self.num_partitions

    def replica_of(self, task: int) -> int:
        return task // self.num_partitions

    def task_demands(self, default: Resources) -> list[Resources]:
        """Per-task demands in task order (a partition without its own demand takes ``default``)."""
        per = [pt.demand if pt.demand is not None else default for pt in self.partitions]
        return per * self.replicas

    @cached_property
    def peer_memo(self) -> dict[tuple[str, int], tuple[tuple[tuple[int, float], ...], ...]]:
        """Memo of :meth:`peer_table` (filled on use)."""
        return {}

    def peer_table(self, architecture: str, num_ps: int) -> tuple[tuple[tuple[int, float], ...], ...]:
        """:meth:`peers` of every task (workers then servers), computed once per graph."""
        key = (architecture, num_ps)
        hit = self.peer_memo.get(key)
        if hit is None:
            hit = self.peer_memo[key] = tuple(tuple(self.peers(t, architecture, num_ps))
                                              for t in range(self.num_tasks + num_ps))
        return hit

    def peers(self, task: int, architecture: str, num_ps: int) -> list[tuple[int, float]]:
        """The tasks ``task`` exchanges data with each iteration and the MB sent to each (one way).

        Workers are ``0 .. num_tasks - 1``; parameter servers follow (partition ``p`` lives on
        server ``p % num_ps``)."""
        p_count, n = self.num_partitions, self.num_tasks
        if task >= n:  # a parameter server: every task of the partitions it holds
            s = task - n
            return [(t, self.exchange_mb) for t in range(n) if self.partition_of(t) % max(num_ps, 1) == s]
        p, r = self.partition_of(task), self.replica_of(task)
        out: list[tuple[int, float]] = []
        for a, b in self.edge_list:
            if a == p:
                out.append((r * p_count + b, self.activation_mb))
            elif b == p:
                out.append((r * p_count + a, self.activation_mb))
        if architecture == "ps" and num_ps > 0:
            out.append((n + p % num_ps, self.exchange_mb))
        elif self.replicas > 1:  # ring all-reduce among the replicas of this partition
            nxt = ((r + 1) % self.replicas) * p_count + p
            out.append((nxt, self.exchange_mb))
        return out


def cross_node_mb(graph: TaskGraph, architecture: str, num_ps: int, nodes: tuple[int, ...]
                  ) -> dict[int, float]:
    """MB each node sends to other nodes per iteration when task ``i`` runs on ``nodes[i]``."""
    out: dict[int, float] = {}
    table = graph.peer_table(architecture, num_ps)
    for t, node in enumerate(nodes):
        if t >= len(table):
            break
        for peer, mb in table[t]:
            if peer < len(nodes) and nodes[peer] != node:
                out[node] = out.get(node, 0.0) + mb
    return out
