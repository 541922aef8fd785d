"""What simulated jobs *use* (``sim.usage``): each run's level, its use samples and how they are handed out;
mixed into :class:`~cohabit.sim.backend.SimBackend` (whose state, ``_runs``, ``_device_jobs``, ``_ps_groups``,
``_packs``, ``_used``, ``_levels_seen``, ``_plain_levels``, ``_shared_levels``, they use)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..engine.backend import BackendEvent, BackendEventKind
from ..engine.ledger import Allocation
from ..spec.job import JobSpec
from . import host_physics
from .physics import consolidation_factor
from .usage import device_factor, job_gpus, ps_levels, restoring, trace_level

if TYPE_CHECKING:
    from .backend import SimBackend, _Run

_USED = BackendEventKind.USED


class UsageLevels:
    """The simulator's usage levels and use samples (mixed into ``SimBackend``)."""

    def _levels(self: SimBackend, jobs: set[str]) -> None:
        """New usage levels of ``jobs`` after their speeds changed (``sim.usage``)."""
        by_id = self._runs
        if len(jobs) == 1:  # (most changes: one job launched or rescheduled)
            for j in jobs:
                r = by_id.get(j)
                if r is None:
                    return
                if r.speed is None and r.pack is None and r.host is None and self._alone(r):
                    self._plain_level(r)
                    return
        runs = [by_id[j] for j in (sorted(jobs) if len(jobs) > 1 else jobs) if j in by_id]
        groups = ({r.group for r in runs if r.speed is not None}
                  if len(runs) > 1 or (runs and runs[0].speed is not None) else ())
        for key in groups:
            members = [self._runs[j] for j in sorted(self._ps_groups.get(key, ()))]
            mode = key[0] if key[0] != "solo" else None
            levels = ps_levels([(r.spec, r.truth.ps, r.alloc, r.speed) for r in members], mode)  # type: ignore[misc]
            for r, level in zip(members, levels):
                r.level = level
        kept = self.kept_shared_levels
        for r in runs:
            if r.speed is not None:
                continue
            if r.pack is not None:
                r.busy = 1.0 / len(self._packs[r.pack])
            else:  # computing share: off the consolidated placement and slowed by co-located jobs
                if r.consolidation is None:
                    r.consolidation = consolidation_factor(r.spec, r.truth, r.alloc, self.cfg)
                r.busy = r.consolidation * r.rate / r.solo
            if r.gpus is None:
                r.gpus = _job_gpus(r.spec, r.alloc)
            if kept and r.host is None and r.pack is None:
                continue  # (its level below, once every run's busy share is set: the device caps read them)
            r.level = trace_level(r.spec, r.truth, r.alloc, r.busy, gpus=r.gpus)
            if r.host is not None and r.host_factors is not None:  # cores and links it uses (LocalBackend measures them)
                r.level["cpu"] = host_physics.cpu_used(r.host, *r.host_factors)
                if r.host.link_nodes():
                    r.level["net_gbps"] = host_physics.net_used(r.host, *r.host_factors, self.cfg.link_gbps)
        for r in runs:  # jobs time-sharing a device use at most the device together
            if r.speed is not None:
                continue
            if kept and r.host is None and r.pack is None:
                cap = self._device_cap(r) if r.devices else 1.0
                self._kept_level(r, (r.gpus, r.busy, cap, bool(r.devices), id(r.truth.used), id(r.alloc.total)), cap)
            elif r.devices and r.level.get("gpu"):
                r.level["gpu"] *= self._device_cap(r)

    def _alone(self: SimBackend, r: _Run) -> bool:
        """Whether ``r`` holds each of its devices alone (nobody time-shares them)."""
        on_device = self._device_jobs
        for d in r.devices:
            if len(on_device[d]) != 1:
                return False
        return True

    def _plain_level(self: SimBackend, r: _Run) -> None:
        """:meth:`_levels` of one run that is no PS group member, no pack member, not host-shared, alone on its
        devices: the level is a pure function of its GPUs, busy share, one device's share, the truth's ``used``
        fractions, the allocation's total and whether it holds devices, so it is kept per those (the shared dict
        :meth:`_report_use` hands out, never changed, and that of its restoring level), made by the same steps
        as :meth:`_levels` the first time."""
        if r.consolidation is None:
            r.consolidation = consolidation_factor(r.spec, r.truth, r.alloc, self.cfg)
        r.busy = busy = r.consolidation * r.rate / r.solo
        gpus = r.gpus
        if gpus is None:
            gpus = r.gpus = _job_gpus(r.spec, r.alloc)
        self._kept_level(r, (gpus, busy, r.unit, bool(r.devices), id(r.truth.used), id(r.alloc.total)),
                         None, self._plain_levels)

    def _kept_level(self: SimBackend, r: _Run, key: tuple, cap: float | None,
                    kept: dict[tuple, tuple[Any, Any, dict[str, float], dict[str, float]]] | None = None) -> None:
        """Set ``r``'s level (and its shared copies, :meth:`_report_use`'s) to the one kept in ``kept`` (default: the
        levels of time-shared runs) for ``key``: the run's inputs that fix it, its GPUs, busy share, truth's
        ``used`` fractions, allocation total and whether it holds devices, with ``cap`` (its devices' factor,
        :meth:`_device_cap`; None: it holds them alone, ``device_factor`` of its own share) or what fixes it. Made
        the first time by :meth:`_levels`' steps: ``trace_level``, its GPU level times the cap where it holds
        devices."""
        if kept is None:
            kept = self._shared_levels
        used, total = r.truth.used, r.alloc.total
        hit = kept.get(key)
        if hit is None or hit[0] is not used or hit[1] is not total:
            level = trace_level(r.spec, r.truth, r.alloc, r.busy, gpus=r.gpus)
            if r.devices and level.get("gpu"):
                level["gpu"] *= cap if cap is not None else device_factor([r.unit * r.busy])
            shared = self._shared_level(level)
            if len(kept) > 4096:
                kept.clear()
            hit = kept[key] = (used, total, shared, self._shared_level(restoring(shared)))
        r.level = hit[2]  # (the shared dict itself: a new level replaces it, nothing edits it)
        r.shared = (hit[2], hit[2], hit[3])

    def _device_cap(self: SimBackend, r: _Run) -> float:
        """The smallest ``device_factor`` over the run's devices (each over the jobs on that device). A device
        it holds alone gives ``device_factor([its own share])``: computed once for all such devices. A device it
        shares with one other job gives the factor of their two shares, whichever order the device's set holds
        them in (a sum of two floats does not depend on their order): computed once per other job."""
        by_id, on_device = self._runs, self._device_jobs
        jid = r.spec.id
        alone: float | None = None
        pairs: dict[str, float] = {}  # the other job of a two-job device -> that device's factor
        best = math.inf
        for d in r.devices:
            occ = on_device[d]
            n = len(occ)
            if n == 1:  # (r itself)
                if alone is None:
                    alone = device_factor([r.unit * r.busy])
                f = alone
            elif n == 2:
                a, b = occ
                other = b if a == jid else a
                f = pairs.get(other)  # type: ignore[assignment]
                if f is None:
                    o = by_id[other]
                    f = pairs[other] = device_factor((r.unit * r.busy, o.unit * o.busy))
            else:
                f = device_factor([(o := by_id[j]).unit * o.busy for j in occ])
            if f < best:
                best = f
        return best

    def _device_share(self: SimBackend, job: str) -> float:
        """Share of one of its devices a job uses at its current speed."""
        r = self._runs[job]
        return r.unit * r.busy

    def _report_use(self: SimBackend, run: _Run, now: float) -> None:
        """Queue ``USED`` events for the run's use since it was last reported, up to ``now``: memory
        only while it restores (before ``t0``), then its level."""
        since = run.use_since
        if now <= since or not run.level:
            run.use_since = max(since, now)
            return
        jid = run.spec.id
        shared = run.shared
        if shared is None or shared[0] is not run.level:  # (a new level: _levels replaces the dict, never edits it later)
            shared = run.shared = (run.level, self._shared_level(run.level), None)
        if since < run.t0:
            end = min(run.t0, now)
            rest = shared[2]
            if rest is None:
                rest = self._shared_level(restoring(run.level))
                run.shared = (shared[0], shared[1], rest)
            self._used.append((now, jid, rest, since, end))
            since = end
        if now > since:
            self._used.append((now, jid, shared[1], since, now))
        run.use_since = now

    def _shared_level(self: SimBackend, level: dict[str, float]) -> dict[str, float]:
        """The one dict this backend hands out for ``level``'s contents (the value types included, as the record
        keeps them): the ``used`` of its USED events, shared between events and never changed (see
        :attr:`shares_used_levels`)."""
        try:
            key = (*level.items(), *map(type, level.values()))
            hit = self._levels_seen.get(key)
        except TypeError:  # (an unhashable amount: a copy of its own)
            return dict(level)
        if hit is None:
            if len(self._levels_seen) > 4096:
                self._levels_seen.clear()
            hit = self._levels_seen[key] = dict(level)
        return hit

    def drain_usage(self: SimBackend, now: float) -> list[BackendEvent]:
        """``USED`` events for every running job up to ``now`` and those not yet returned."""
        for run in self._runs.values():
            self._report_use(run, now)
        return self._used_events()

    def _used_events(self: SimBackend) -> list[BackendEvent]:
        """The use samples not yet handed out, as ``USED`` events (in the order they were made)."""
        out = [BackendEvent(t, _USED, job, {"used": used, "since": since, "until": until})
               for t, job, used, since, until in self._used]
        self._used = []
        return out

    def take_used(self: SimBackend) -> list[tuple[float, str, dict[str, float], float, float]]:
        """The use samples made since the last take (:meth:`open_usage_channel`); the ``used`` dicts are shared,
        never changed (:attr:`shares_used_levels`)."""
        out, self._used = self._used, []
        return out


#: (id(workers), id(ps), workers on the allocation) -> (workers, ps, usage.job_gpus): traces share their
#: task-group objects, so a job's GPU count is computed once per shape (task-graph jobs: not cached)
_GPUS: dict[tuple[int, int, int], tuple[object, object, float]] = {}


def _job_gpus(spec: JobSpec, alloc: Allocation) -> float:
    """``usage.job_gpus(spec, alloc)``, cached per task-group objects and worker count."""
    if spec.graph is not None:
        return job_gpus(spec, alloc)
    key = (id(spec.workers), id(spec.ps), len(alloc.slots))
    hit = _GPUS.get(key)
    if hit is None or hit[0] is not spec.workers or hit[1] is not spec.ps:
        if len(_GPUS) > 4096:
            _GPUS.clear()
        hit = _GPUS[key] = (spec.workers, spec.ps, job_gpus(spec, alloc))  # (keeps them alive: ids stay theirs)
    return hit[2]
