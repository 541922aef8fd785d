"""ClusterView: the read-only window a policy decides through.

It shows the cluster spec, free capacity per node (read-only numpy arrays),
and the jobs by state — each a :class:`JobView` of spec plus observed
telemetry. It holds no reference to any backend, so simulator ground truth is
unreachable from it by construction (``tests/test_barrier.py`` walks the
object graph to prove it). Collections are live read-only proxies: building a
view costs nothing per decision.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np

from ..spec.cluster import ClusterSpec
from .job import JobView
from .ledger import fit_counts

if TYPE_CHECKING:
    from .history import History
    from .ledger import Allocation, Ledger
    from .waiting import Running, Waiting


def _readonly(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


class ClusterView:
    __slots__ = ("_cluster", "_ledger", "_clock_now", "_pending", "_running", "_paused", "_jobs",
                 "_pending_by_tenant", "_paused_by_tenant", "_pending_by_shape", "_position", "_removals", "history",
                 "_journal", "_free_ro", "_cap_ro", "_dev_ro", "_dev_jobs_ro", "_max_tasks", "_shapes", "_task_floor", "_floor_ro", "_floor_rows", "_floor_margin",
                 "_shape_keys")

    def __init__(
        self,
        cluster: ClusterSpec,
        ledger: Ledger,
        jobs: dict[str, JobView],
        pending: Waiting,
        running: dict[str, JobView] | Running,
        paused: Waiting,
        history: History,
    ) -> None:
        self._cluster = cluster
        self._ledger = ledger
        self._jobs = MappingProxyType(jobs)
        self._pending = MappingProxyType(pending)
        self._running = MappingProxyType(running)
        self._journal = running if hasattr(running, "changed_since") else None
        self._paused = MappingProxyType(paused)
        self._pending_by_tenant = pending.by_tenant
        self._paused_by_tenant = paused.by_tenant
        self._pending_by_shape = pending.by_shape
        self._position = pending.position
        self._removals = pending.removals
        self._clock_now = 0.0
        self.history = history
        self._free_ro = _readonly(ledger.free)
        self._cap_ro = _readonly(ledger.capacity)
        self._dev_ro = _readonly(ledger.device_free)
        self._dev_jobs_ro = _readonly(ledger.dev_jobs)
        self._max_tasks: dict[int, tuple[np.ndarray, int]] = {}
        # id(spec) -> (spec, worker demand row, target workers): a spec never changes, so neither do these
        self._shapes: dict[tuple[int, int | None], tuple[object, np.ndarray, int]] = {}
        # elementwise minimum of every admitted job's per-worker demand (see task_floor)
        self._task_floor = np.full(len(ledger.names), np.inf)
        self._floor_ro = _readonly(self._task_floor)
        # (id(worker row), workers, id(PS row), PS count) -> shape_key: one entry per distinct shape
        self._shape_keys: dict[tuple[int, int, int, int], tuple[bytes, int, bytes | None, int]] = {}
        self._floor_rows: dict[int, np.ndarray] = {}
        self._floor_margin = tuple((self._task_floor - 1e-9).tolist())  # see task_floor_margin  # id(row) -> row, of the rows folded into _task_floor

    @property
    def now(self) -> float:
        return self._clock_now

    @property
    def cluster(self) -> ClusterSpec:
        return self._cluster

    # Capacity -------------------------------------------------------------
    @property
    def resource_names(self) -> tuple[str, ...]:
        return self._ledger.names

    def resource_index(self, name: str) -> int | None:
        return self._ledger.index.get(name)

    @property
    def free(self) -> np.ndarray:
        """Free capacity, shape (nodes, resources), read-only."""
        return self._free_ro

    @property
    def free_total(self) -> np.ndarray:
        """Column sums of :attr:`free` (free room per resource over all nodes), read-only, kept until
        the free capacity changes."""
        return self._ledger.free_total()

    @property
    def capacity(self) -> np.ndarray:
        return self._cap_ro

    @property
    def device_free(self) -> np.ndarray:
        """Free fraction of each GPU device, shape (nodes, max GPUs per node); -1 where no device."""
        return self._dev_ro

    @property
    def device_jobs(self) -> np.ndarray:
        """How many running jobs hold each GPU device (owners and time-sharing guests), shape as
        :attr:`device_free`, read-only."""
        return self._dev_jobs_ro

    def device_holders(self, node: int, device: int) -> tuple[str, ...]:
        """The running jobs holding GPU ``device`` of ``node``, in the order they took it."""
        shares = self._ledger.dev_shares.get((node, device))
        return tuple(shares) if shares else ()

    def demand_vector(self, job: JobView) -> np.ndarray:
        """The per-worker demand of ``job`` as a row over :attr:`resource_names`."""
        return self.shape(job)[0]

    def shape(self, job: JobView) -> tuple[np.ndarray, int]:
        """``(demand_vector(job), target_workers(job))``, cached per task group and n_min (one dict lookup: policies
        ask it for every queued job in every round)."""
        spec = job.spec
        workers = spec.workers  # (all it depends on: traces share one task group per size, so 82k jobs
        key = (id(workers), spec.n_min)  # make a few entries, not one per job)
        hit = self._shapes.get(key)
        if hit is None or hit[0] is not workers:
            v = self._ledger.vector(workers.demand)
            assert v is not None  # jobs naming unknown resources are rejected at arrival
            hit = self._shapes[key] = (workers, v, self._target_workers(job, v))  # (keeps workers alive)
        return hit[1], hit[2]

    def shape_key(self, job: JobView) -> tuple[bytes, int, bytes | None, int]:
        """What a job's default placement depends on besides the free capacity: the contents of
        ``demand_vector``, ``target_workers``, the contents of ``ps_demand_vector`` (or None) and
        ``num_ps``. :attr:`pending_by_shape` groups the pending jobs by it."""
        w, n = self.shape(job)
        p = self.ps_demand_vector(job)
        num_ps = job.spec.num_ps
        ids = (id(w), n, id(p), num_ps)  # (the rows are the ledger's interned ones: their ids stay theirs)
        key = self._shape_keys.get(ids)
        if key is None:
            key = self._shape_keys[ids] = (w.tobytes(), n, None if p is None else p.tobytes(), num_ps)
        return key

    @property
    def task_floor(self) -> np.ndarray:
        """Elementwise minimum of the per-worker demand of every job admitted so far: a free total
        below it in some resource fits no waiting job's first worker (``Draft.exhausted``)."""
        return self._floor_ro

    @property
    def task_floor_margin(self) -> tuple[float, ...]:
        """``task_floor - 1e-9`` as Python floats (what ``Draft.exhausted`` compares the free total with)."""
        return self._floor_margin

    def _admitted(self, job: JobView) -> None:
        """Scheduler side: ``job`` was admitted; lower :attr:`task_floor` by its worker demand."""
        w = self.shape(job)[0]
        if self._floor_rows.get(id(w)) is not w:  # (a row already folded in changes nothing)
            self._floor_rows[id(w)] = w
            np.minimum(self._task_floor, w, out=self._task_floor)
            self._floor_margin = tuple((self._task_floor - 1e-9).tolist())

    def target_workers(self, job: JobView) -> int:
        """The worker count to start ``job`` with when a policy has no opinion: what it asked
        for, lowered (not below ``n_min``) to what the empty cluster could ever hold."""
        return self.shape(job)[1]

    def _target_workers(self, job: JobView, w: np.ndarray) -> int:
        hit = self._max_tasks.get(id(w))
        if hit is None or hit[0] is not w:
            empty = np.where(self._ledger.device_free >= 0, 1.0, -1.0)
            hit = self._max_tasks[id(w)] = (w, int(fit_counts(self._ledger.capacity, empty, w,
                                                                self._ledger.gpu_col).sum()))
        return max(min(job.spec.workers.count, hit[1]), job.spec.min_workers)

    def ps_demand_vector(self, job: JobView) -> np.ndarray | None:
        return None if job.spec.ps is None else self._ledger.vector(job.spec.ps.demand)

    def tasks_fit(self, demand: np.ndarray) -> np.ndarray:
        """How many tasks of ``demand`` fit on each node now."""
        return self._ledger.tasks_fit(demand)

    def fit_now(self, demand: np.ndarray) -> np.ndarray:
        """:meth:`tasks_fit` of a demand row from :meth:`demand_vector` / :meth:`ps_demand_vector`,
        read-only and kept until the free capacity changes (the ledger's free-capacity index)."""
        return self._ledger.fit_of(demand)

    @property
    def allocation_version(self) -> int:
        """A number that changes whenever any allocation changes (every start, resume, pause, move and
        end allocates or releases): while it stays, the running set and the free capacity stay too."""
        return self._ledger.version

    @property
    def change_mark(self) -> Hashable:
        """A mark of the free capacity and device holders as they are now, for :meth:`nodes_changed_since`."""
        return self._ledger.change_mark

    def nodes_changed_since(self, mark: Hashable) -> set[int] | None:
        """Nodes whose free capacity or GPU device holders changed since ``mark`` (a :attr:`change_mark` of this
        view); None when unknown (then treat every node as changed)."""
        return self._ledger.changed_since(mark)  # type: ignore[arg-type]

    @property
    def room_version(self) -> int:
        """A number that changes whenever room may have grown (a release: an end, pause or move); while
        it stays, free capacity only shrank, so a placement that failed still fails."""
        return self._ledger.grown

    def no_room_now(self) -> set[Hashable]:
        """Planning memo of ``placement.Draft``: shapes (e.g. ``(id(demand row), workers)``) found not to fit
        the free capacity; kept while room only shrinks, emptied whenever room may have grown (``Ledger.no_room``)."""
        return self._ledger.no_room()

    def allocation_of(self, job_id: str) -> Allocation | None:
        """The slots (node, GPU devices) a running job holds."""
        return self._ledger.allocations.get(job_id)

    def ledger_draft(self) -> Ledger:
        """A scratch copy of the allocation ledger (packs, device memory) for planning: actions it
        accepts are actions the scheduler accepts, if planned in the same order. Policies plan on
        ``policies.placement.Draft``, whose ``ledger()`` builds on this (one scratch mechanism)."""
        return self._ledger.draft()

    @property
    def gpu_col(self) -> int | None:
        return self._ledger.gpu_col

    def sharers(self, job_id: str) -> frozenset[str]:
        """Jobs that share a GPU device with ``job_id``."""
        return frozenset(self._ledger.sharers(job_id))

    # Jobs -------------------------------------------------------------------
    @property
    def jobs(self) -> Mapping[str, JobView]:
        """Every job ever submitted, by id."""
        return self._jobs

    @property
    def pending(self) -> Mapping[str, JobView]:
        """Jobs waiting for a first start, in arrival order."""
        return self._pending

    @property
    def running(self) -> Mapping[str, JobView]:
        return self._running

    @property
    def running_mark(self) -> int | None:
        """A position in the journal of the running set (None if this view has none): see
        :meth:`running_changes`."""
        return self._journal.mark if self._journal is not None else None

    def running_changes(self, mark: int | None) -> list[str] | None:
        """Ids of jobs that started or stopped running since ``mark`` (a :attr:`running_mark`), oldest
        first; None when unknown (no mark, no journal, or that part of it was dropped): compare
        :attr:`running` as a whole then."""
        if mark is None or self._journal is None:
            return None
        return self._journal.changed_since(mark)

    @property
    def paused(self) -> Mapping[str, JobView]:
        """Preempted jobs waiting to resume, in the order they were paused."""
        return self._paused

    @property
    def pending_by_tenant(self) -> Mapping[str, Mapping[str, JobView]]:
        """Tenant -> its pending jobs, in the order of :attr:`pending` (only tenants with pending jobs):
        a tenant's queue without walking everyone's."""
        return self._pending_by_tenant

    @property
    def paused_by_tenant(self) -> Mapping[str, Mapping[str, JobView]]:
        """Tenant -> its paused jobs, in the order of :attr:`paused`."""
        return self._paused_by_tenant

    @property
    def pending_by_shape(self) -> Mapping[Hashable, Mapping[str, JobView]]:
        """:meth:`shape_key` -> the pending jobs of that shape, in the order of :attr:`pending` (only
        shapes with pending jobs): skip every job of a shape that does not fit without visiting each."""
        return self._pending_by_shape

    @property
    def pending_removals(self) -> int:
        """How many jobs left :attr:`pending` so far (started, cancelled, held): while it and the number of
        tenants with pending jobs stay, every tenant's first pending job stays the same."""
        return self._removals()

    def pending_position(self, job_id: str) -> int:
        """Rank of a pending job in the order of :attr:`pending` (increasing, comparable across tenants)."""
        return self._position(job_id)
