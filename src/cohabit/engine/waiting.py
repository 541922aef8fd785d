"""The scheduler's pending and paused jobs: a dict by job id that also keeps them per tenant.

Per-tenant policies (DRF, static partitions) walk each tenant's queue from its head; listing
the whole queue to group it by tenant every round cost O(queue) per round on a contended
cluster (thousands waiting). :class:`Waiting` keeps, beside the dict, one insertion-ordered
dict per tenant with waiting jobs and each job's position in the queue, updated by the three
mutations the scheduler makes (``[id] = job``, ``del``, ``pop``), so a policy reads a tenant's
queue in the queue's own order, and merges tenants in that order, without touching the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NoReturn

from .job import JobView

_MISSING = object()


class Waiting(dict[str, JobView]):
    """Jobs by id in queue order (insertion order, as a dict), with per-tenant views and positions.

    Only ``[id] = job``, ``del`` and ``pop`` change it; the other dict mutators are refused, so the
    per-tenant index cannot fall out of step."""

    __slots__ = ("_tenants", "_proxies", "_by_tenant", "_pos", "_next")

    def __init__(self) -> None:
        super().__init__()
        self._tenants: dict[str, dict[str, JobView]] = {}
        self._proxies: dict[str, Mapping[str, JobView]] = {}
        self._by_tenant: Mapping[str, Mapping[str, JobView]] = MappingProxyType(self._proxies)
        self._pos: dict[str, int] = {}
        self._next = 0

    @property
    def by_tenant(self) -> Mapping[str, Mapping[str, JobView]]:
        """Tenant -> its waiting jobs by id, in queue order (read-only; only tenants with jobs here)."""
        return self._by_tenant

    def position(self, job_id: str) -> int:
        """Rank of ``job_id`` in the queue order (increasing; comparable across tenants)."""
        return self._pos[job_id]

    def __setitem__(self, key: str, job: JobView) -> None:
        t = job.spec.tenant
        if key not in self:  # a new entry goes last (an existing one keeps its place, as in a dict)
            self._pos[key] = self._next
            self._next += 1
        mine = self._tenants.get(t)
        if mine is None:
            mine = self._tenants[t] = {}
            self._proxies[t] = MappingProxyType(mine)
        mine[key] = job
        super().__setitem__(key, job)

    def _forget(self, key: str, job: JobView) -> None:
        t = job.spec.tenant
        mine = self._tenants[t]
        del mine[key]
        if not mine:
            del self._tenants[t]
            del self._proxies[t]
        del self._pos[key]

    def __delitem__(self, key: str) -> None:
        job = self[key]
        super().__delitem__(key)
        self._forget(key, job)

    def pop(self, key: str, default: object = _MISSING) -> JobView:  # type: ignore[override]
        if key not in self:
            if default is _MISSING:
                raise KeyError(key)
            return default  # type: ignore[return-value]
        job = super().pop(key)
        self._forget(key, job)
        return job

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("Waiting changes only by [id] = job, del and pop (its per-tenant index follows them)")

    update = setdefault = popitem = clear = __ior__ = _refuse  # type: ignore[assignment]
