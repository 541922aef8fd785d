"""Tenant quotas: admission before the scheduler sees a job.

A tenant row carries ``max_running`` (jobs) and ``max_gpus``. A submitted job enters the
scheduler only while its tenant's jobs in the scheduler (pending, running, paused or held) stay
within both; otherwise it waits here, in submission order, with pending reason
``QuotaExceeded`` (``Held`` when an administrator holds it). The tenant's ``weight`` reaches
the fairness policies (DRF, Themis, Dorm) as every job's ``spec.weight`` (set by the feed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..spec.job import JobSpec

if TYPE_CHECKING:
    from ..engine.loop import Scheduler
    from .store import Store

QUOTA_EXCEEDED = "QuotaExceeded"
HELD = "Held"
ADMITTED = "Resources"  # in the scheduler's queue, waiting for the policy to place it


class QuotaGate:
    """Jobs stored but not yet given to the scheduler, in submission order."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._waiting: dict[int, JobSpec] = {}
        self.held: set[int] = set()

    def add(self, seq: int, spec: JobSpec) -> None:
        self._waiting[seq] = spec

    def drop(self, seq: int) -> bool:
        return self._waiting.pop(seq, None) is not None

    def waiting(self) -> list[int]:
        return list(self._waiting)

    def admit(self, sched: Scheduler, note: Callable[[int, str], None]) -> None:
        """Give the scheduler every waiting job its tenant's quota allows now; note the others' reason."""
        if not self._waiting:
            return
        limits = {t.name: t for t in self.store.tenant_limits().values()}
        count: dict[str, int] = {}
        gpus: dict[str, float] = {}
        for group in (sched.pending, sched.running, sched.paused, sched.held):
            for jv in group.values():
                count[jv.spec.tenant] = count.get(jv.spec.tenant, 0) + 1
                gpus[jv.spec.tenant] = gpus.get(jv.spec.tenant, 0.0) + jv.spec.num_gpus
        for seq in sorted(self._waiting):
            spec = self._waiting[seq]
            if seq in self.held:
                note(seq, HELD)
                continue
            t = limits.get(spec.tenant)
            n, g = count.get(spec.tenant, 0), gpus.get(spec.tenant, 0.0)
            if t is not None and ((t.max_running is not None and n + 1 > t.max_running)
                                  or (t.max_gpus is not None and g + spec.num_gpus > t.max_gpus + 1e-9)):
                note(seq, QUOTA_EXCEEDED)
                continue
            del self._waiting[seq]
            sched.submit_now(spec)
            note(seq, ADMITTED)
            count[spec.tenant] = n + 1
            gpus[spec.tenant] = g + spec.num_gpus
