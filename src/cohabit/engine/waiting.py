"""The scheduler's pending and paused jobs: a dict by job id that also keeps them per tenant and per shape.

Per-tenant policies (DRF, static partitions) walk each tenant's queue from its head; listing
the whole queue to group it by tenant every round cost O(queue) per round on a contended
cluster (thousands waiting). :class:`Waiting` keeps, beside the dict, one insertion-ordered
dict per tenant with waiting jobs and each job's position in the queue, updated by the three
mutations the scheduler makes (``[id] = job``, ``del``, ``pop``), so a policy reads a tenant's
queue in the queue's own order, and merges tenants in that order, without touching the others.

The same kind of index per *shape* (:meth:`Waiting.group_by`: the scheduler keys its pending jobs by
placement shape, ``ClusterView.shape_key``) lets a backfilling policy skip every job of a shape that
did not fit in O(1) instead of visiting each one (FIFO with backfill: ``policies.fifo``).

A CPython dict never shrinks on deletion: a removed entry leaves a hole in its entries array, and every
new iteration walks the holes before the first live entry. A queue served from its head (FIFO) thus
pays, for each ``next(iter(queue))``, for every job that left it since the table was last rebuilt: up
to a few times the queue's longest length (82k Philly jobs on 512 GPUs: ~8 us a round at a queue of
13,000 jobs, 0.9 us at 10k jobs). :class:`Waiting` therefore rebuilds its table and its groups' in
place (same order, same objects) once the holes left since the last rebuild reach ``HOLES_MIN`` and
``HOLES_PER_ROOT`` x sqrt(len) (16 x): rebuilding costs O(len), paid once per that many removals,
and an iteration's walk stays O(sqrt(len)) instead of O(len) (docs/speed.md, "Sixteenth session").
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from types import MappingProxyType
from typing import NoReturn

from .job import JobView

_MISSING = object()

#: a table is rebuilt once the holes left since its last rebuild reach ``HOLES_MIN`` and
#: ``holes**2 >= HOLES_PER_ROOT**2 x len``: each rebuild (O(len)) is paid for by ~16 sqrt(len) removals
HOLES_MIN = 64
HOLES_PER_ROOT = 16


def compact(d: dict) -> None:  # type: ignore[type-arg]
    """Rebuild ``d``'s table in place without the holes its removed entries left (same items, same order).

    Uses ``dict``'s own methods, so a subclass's overridden mutators are not called."""
    items = list(dict.items(d))
    dict.clear(d)
    dict.update(d, items)


def _absent(key: str, default: object) -> JobView:
    """What ``pop(key, default)`` of a dict gives for a missing ``key``: ``default``, or ``KeyError``."""
    if default is _MISSING:
        raise KeyError(key)
    return default  # type: ignore[return-value]


class _Groups:
    """Insertion-ordered sub-dicts of a :class:`Waiting` by a key of each job, with read-only proxies."""

    __slots__ = ("_groups", "_proxies", "view")

    def __init__(self) -> None:
        self._groups: dict[Hashable, dict[str, JobView]] = {}
        self._proxies: dict[Hashable, Mapping[str, JobView]] = {}
        self.view: Mapping[Hashable, Mapping[str, JobView]] = MappingProxyType(self._proxies)

    def add(self, key: Hashable, job_id: str, job: JobView) -> None:
        mine = self._groups.get(key)
        if mine is None:
            mine = self._groups[key] = {}
            self._proxies[key] = MappingProxyType(mine)
        mine[job_id] = job

    def remove(self, key: Hashable, job_id: str) -> None:
        mine = self._groups[key]
        del mine[job_id]
        if not mine:
            del self._groups[key]
            del self._proxies[key]

    def compact(self) -> None:
        """Rebuild every group's table without holes (the proxies stay: they wrap the same dicts)."""
        for mine in self._groups.values():
            compact(mine)


class Waiting(dict[str, JobView]):
    """Jobs by id in queue order (insertion order, as a dict), with per-tenant (and, after
    :meth:`group_by`, per-shape) views and positions.

    Only ``[id] = job``, ``del`` and ``pop`` change it; the other dict mutators are refused, so the
    indexes cannot fall out of step."""

    __slots__ = ("_tenants", "_shapes", "_shape_fn", "_shape_of", "_pos", "_next", "_removed", "_holes")

    def __init__(self) -> None:
        super().__init__()
        self._tenants = _Groups()
        self._shapes = _Groups()
        self._shape_fn: Callable[[JobView], Hashable] | None = None
        self._shape_of: dict[str, Hashable] = {}  # job id -> its shape key (as when it was added)
        self._pos: dict[str, int] = {}
        self._next = 0
        self._removed = 0  # entries removed so far (see removals)
        self._holes = 0  # entries removed since the tables were last rebuilt (see _compact)

    def group_by(self, shape: Callable[[JobView], Hashable]) -> None:
        """Also keep the jobs per ``shape(job)`` (:attr:`by_shape`); set before the first job is added."""
        if self:
            raise ValueError("group_by must be set while no job waits")
        self._shape_fn = shape

    @property
    def by_tenant(self) -> Mapping[str, Mapping[str, JobView]]:
        """Tenant -> its waiting jobs by id, in queue order (read-only; only tenants with jobs here)."""
        return self._tenants.view  # type: ignore[return-value]

    @property
    def by_shape(self) -> Mapping[Hashable, Mapping[str, JobView]]:
        """Shape key -> the waiting jobs of that shape by id, in queue order (read-only; empty without
        :meth:`group_by`)."""
        return self._shapes.view

    def removals(self) -> int:
        """How many entries were removed (or replaced) so far: while it and the number of tenants stay,
        every tenant's first job stays (new entries go last)."""
        return self._removed

    def position(self, job_id: str) -> int:
        """Rank of ``job_id`` in the queue order (increasing; comparable across tenants)."""
        return self._pos[job_id]

    def __setitem__(self, key: str, job: JobView) -> None:
        shape = self._shape_fn(job) if self._shape_fn is not None else _MISSING
        old = self.get(key)
        if old is not None:  # an existing entry keeps its place, as in a dict (and in its groups)
            self._removed += 1  # (counted as a change: its job, even its tenant, may differ)
            if old.spec.tenant == job.spec.tenant:
                self._tenants.add(old.spec.tenant, key, job)
            else:
                self._move(self._tenants, old.spec.tenant, job.spec.tenant, key, job)
            if shape is not _MISSING:
                s = self._shape_of.get(key, _MISSING)
                if s == shape:
                    self._shapes.add(shape, key, job)
                else:
                    self._move(self._shapes, s, shape, key, job)
                self._shape_of[key] = shape
        else:  # a new entry goes last
            self._pos[key] = self._next
            self._next += 1
            self._tenants.add(job.spec.tenant, key, job)
            if shape is not _MISSING:
                self._shape_of[key] = shape
                self._shapes.add(shape, key, job)
        super().__setitem__(key, job)

    @staticmethod
    def _move(groups: _Groups, old: Hashable, new: Hashable, key: str, job: JobView) -> None:
        """An entry's group key changed: it leaves the old group and goes last in the new one."""
        if old is not _MISSING:
            groups.remove(old, key)
        groups.add(new, key, job)

    def _forget(self, key: str, job: JobView) -> None:
        """The indexes' side of removing ``key`` (``job``), just removed from the dict itself."""
        self._tenants.remove(job.spec.tenant, key)
        s = self._shape_of.pop(key, _MISSING)
        if s is not _MISSING:
            self._shapes.remove(s, key)
        del self._pos[key]
        self._removed += 1
        holes = self._holes = self._holes + 1
        if holes >= HOLES_MIN and holes * holes >= HOLES_PER_ROOT * HOLES_PER_ROOT * len(self):
            self._compact()

    def __delitem__(self, key: str) -> None:
        job = self[key]
        super().__delitem__(key)
        self._forget(key, job)

    def pop(self, key: str, default: object = _MISSING) -> JobView:  # type: ignore[override]
        if key not in self:
            return _absent(key, default)
        job = super().pop(key)
        self._forget(key, job)
        return job

    def _compact(self) -> None:
        """Rebuild this dict's table and its groups' without the holes of removed entries (module doc):
        the same jobs in the same order; positions, groups and :meth:`removals` unchanged."""
        compact(self)
        self._tenants.compact()
        self._shapes.compact()
        self._holes = 0

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("Waiting changes only by [id] = job, del and pop (its per-tenant index and other indexes follow them)")

    update = setdefault = popitem = clear = __ior__ = _refuse  # type: ignore[assignment]


class Running(dict[str, JobView]):
    """The running jobs by id, with a journal of the ids that entered or left
    (:meth:`changed_since`, ``ClusterView.running_changes``): a policy that keeps its own book of the
    running set (DRF's tenant usage) follows it in O(changes) instead of comparing the whole set every
    round. Only ``[id] = job``, ``del`` and ``pop`` change it."""

    __slots__ = ("_log", "_base")

    #: the journal keeps at least this many recent entries (older ones are dropped in halves)
    KEEP = 4096

    def __init__(self) -> None:
        super().__init__()
        self._log: list[str] = []
        self._base = 0  # journal entries dropped from the front so far

    def _note(self, key: str) -> None:
        log = self._log
        log.append(key)
        if len(log) > 2 * self.KEEP:
            self._note_drop()

    def _note_drop(self) -> None:
        """Drop the journal's entries older than the last :attr:`KEEP`."""
        log = self._log
        drop = len(log) - self.KEEP
        del log[:drop]
        self._base += drop

    def __setitem__(self, key: str, job: JobView) -> None:
        super().__setitem__(key, job)
        log = self._log
        log.append(key)
        if len(log) > 2 * self.KEEP:  # (_note, inline: one per start, resume, pause and end)
            self._note_drop()

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        log = self._log
        log.append(key)
        if len(log) > 2 * self.KEEP:
            self._note_drop()

    def pop(self, key: str, default: object = _MISSING) -> JobView:  # type: ignore[override]
        if key not in self:
            return _absent(key, default)
        job = super().pop(key)
        self._note(key)
        return job

    @property
    def mark(self) -> int:
        """The journal's position now (pass it to :meth:`changed_since` later)."""
        return self._base + len(self._log)

    def changed_since(self, mark: int) -> list[str] | None:
        """Ids that entered or left since ``mark`` (a :attr:`mark`), oldest first, an id once per change;
        None if that part of the journal was dropped (compare the whole set instead)."""
        i = mark - self._base
        if i < 0:
            return None
        return self._log[i:]

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("Running changes only by [id] = job, del and pop (its journal follows them)")

    update = setdefault = popitem = clear = __ior__ = _refuse  # type: ignore[assignment]
