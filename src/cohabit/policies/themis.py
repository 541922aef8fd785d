"""Themis-style finish-time fairness: worst rho first when leases expire (Mahajan et al., NSDI'20).

Themis (§3) measures how unfair sharing is to a job by its finish-time fairness

    rho = T_sh / T_id

where ``T_sh`` is the job's finish time in the shared cluster and ``T_id`` the time it
would take running alone on an exclusive ``1/N`` share of the cluster, ``N`` the number of
contending jobs (averaged over the job's lifetime). Resources are granted as *leases*;
when a lease expires, Themis offers the resources to the fraction ``1 - f`` of jobs with
the worst rho (``f``: the fairness knob, §4), which bid through a partial-allocation
auction; leftovers go to the other jobs so nothing idles.

What we implement (observable inputs only):

* ``T_id = W / f_j(x)``: total work ``W`` (iterations done + iterations left) at the speed
  the job would have with ``x`` workers, ``x`` = how many of its workers an exclusive
  ``1/N`` share of every resource holds, ``N`` = time-averaged number of active jobs since
  the job arrived. ``x`` is clipped to ``[n_min, n_max]``; below ``n_min`` the job would
  time-share its minimum, so the speed is scaled by ``x / n_min``. Speeds come from the
  job's measured speeds and the NNLS speed model (:mod:`cohabit.models.speed`).
* ``T_sh(w) = (now - submit) + R / f_j(w)`` for an allocation of ``w`` workers, with ``R``
  the iterations left: declared iterations minus done (Themis's apps report their
  remaining work); for jobs that declare none, the Optimus loss-curve estimate
  (:class:`~cohabit.policies.optimus.JobModels`), else the mean of finished jobs.
  Changing a running job's size, or resuming it, adds ``restart_cost``.
* **Leases.** A job that receives resources holds them for ``lease`` seconds (renewed if it
  wins them again at expiry). Leases expire at their own times; a round re-allocates only
  the resources of the leases that have expired (within ``tick_interval`` of now) plus the
  free room, among the jobs whose leases expired and the waiting jobs. Arrivals and
  departures trigger a round over the free room.
* **Renewal weighed by the restart** (cohabit's rule; the paper makes the lease length the
  knob between fairness and the overhead of re-allocation, and re-offers every expired
  lease). Candidates are ranked by their rho *if they get nothing* (``T_sh(0)`` below, plus
  ``restart_cost`` for a running or paused job, which must restore to go on); a job whose
  lease expired is credited ``restart_gain x restart_cost / lease`` (the share of a lease
  that a restart wastes) on that rho and on the units it holds. So an expired lease moves
  to another job only when that job's rho is worse than the holder's by more than what the
  restart wastes; otherwise it is renewed. ``restart_gain=0`` re-offers every expiry to
  the worst rho (close to the rule before issue 19, which ranked every job holding nothing
  before every holder: 622,000 preemptions, 416 per job, on the Muri artifact's trace1).
* **Allocation: greedy worst-rho-first, not the auction.** In a round, the worst ``1 - f``
  fraction of the candidates by that rank go first: repeatedly, the job whose rho at
  its tentative allocation is worst receives its next unit (its minimum first, then one
  worker), while that fits and lowers its rho. A job holding nothing has an unbounded
  ``T_sh``, so every candidate's minimum comes before any candidate grows (ordered among
  themselves by ``rho`` if the job waited one more lease, ``T_sh(0) = (now - submit) +
  lease [+ restart_cost] + R / f_j(x)``). Then the other candidates share what is left the same way
  (Themis's work-conserving leftover allocation). Candidates that receive nothing are
  paused. The partial-allocation auction (bids of rho for each offer, maximising the
  product of 1/rho with hidden payments) is **not** implemented; greedy worst-rho-first
  water-filling is its fairness-only approximation.
* **GPU types** (heterogeneous clusters: nodes labelled with two or more ``gpu_model`` values;
  :mod:`cohabit.policies.type_speeds`). A job's finish time depends on the speed of the type it
  holds, so (as Themis's bids would, by their rho) jobs are placed on the fastest type for them
  that has room, by the per-type speeds observed so far (the job's own, else estimated from the
  types' relative speeds seen on other jobs); and at a lease's expiry a job renewed on a type
  slower than one with free room (after the round's changes) moves there when the time it saves,
  ``R / f_now - R / f_there``, exceeds ``restart_cost`` (worst rho first). On a cluster of one GPU
  type nothing of this applies: the policy is type-blind as before.

Quiet expiries (issue 18, ninth session). When leases expire and nobody waits, on one GPU type, the
round re-offers the expired jobs' own resources (plus free room) to them alone; if they are rigid, hold
integer demands, and their rho is a number (:meth:`Themis._renews_all`), each gets back exactly what
it holds whatever the order, so the round is skipped and their leases are renewed without computing
any rho. ``skip_quiet = False`` runs it (``tests/test_policy_quiet_rounds.py`` compares both). Likewise a
round after an arrival or finish with no expired lease, which offers the free room alone to the waiting jobs,
is skipped when no waiting job's minimum fits that room (:meth:`JobModels.admits_none`; issue 18, fifteenth
session): nobody can be served, so its plan is empty and no lease changes (``tests/test_policy_event_rounds.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import repeat

import numpy as np

from ..engine.actions import Migrate, Pause, Plan, Resize, Resume, Start
from ..engine.job import JobView
from ..engine.view import ClusterView
from .placement import Draft, consolidated_first
from .job_table import Snapshot
from .job_models import JobModels
from .optimus import ObservingPolicy, check_positive
from .params import build
from .targets import (any_waiting, apply_targets, changed_rows, consolidated_placer, greedy_by_value, room_for_none,
                      row_min, waiting_jobs)
from .type_speeds import MIN_GAIN, TypeSpeeds

UNSERVED = 1e9  # rank offset of jobs holding nothing: their finish-time fairness is unbounded


class Themis(ObservingPolicy):
    """See the module docstring. All durations are seconds; ``fairness`` is Themis's knob f."""

    def __init__(self, lease: float = 600.0, fairness: float = 0.8, report_interval: float = 60.0,
                 restart_cost: float = 30.0, tick: float = 60.0, restart_gain: float = 1.0) -> None:
        self.lease = check_positive("lease", lease)
        if not isinstance(fairness, (int, float)) or isinstance(fairness, bool) or not 0 <= fairness < 1:
            raise ValueError(f"fairness (Themis's f) must be in [0, 1), got {fairness!r}")
        self.fairness = float(fairness)
        self.report_interval = check_positive("report_interval", report_interval)
        self.restart_cost = check_positive("restart_cost", restart_cost, allow_zero=True)
        self.tick_interval = check_positive("tick", tick)
        self.restart_gain = check_positive("restart_gain", restart_gain, allow_zero=True)
        self.models = JobModels(trust_declared=True)
        self.name = "themis"
        self._event = False
        self._expiry: dict[str, float] = {}  # running job -> end of its lease
        # the earliest lease end among the running jobs (-inf: one holds none) and the allocation version
        # it was taken at: while no allocation changed and no round ran, the running jobs and their lease
        # ends are the same, so a turn before that time has no expired lease (decide runs on every report)
        self._soonest: tuple[int, float] | None = None
        # contention integral: C(t) = integral of the number of active jobs
        self._c = 0.0
        self._t = 0.0
        self._n = 0
        # per job, at its arrival order (JobView.seq, dense from 0): its arrival time (row 0) and the contention
        # integral then (row 1), NaN for a job whose arrival this policy did not see or that ended; a round reads
        # them by its snapshot's seq column in one fancy index (issue 18, twelfth session; were two dicts by id)
        self._arrivals = np.full((2, 0), np.nan)
        self._seq_of: dict[str, int] = {}  # job id -> its seq, while it is active
        self.type_speeds = TypeSpeeds()  # per-GPU-type speeds observed (heterogeneous clusters only)
        # wants_reports' (now, allocation version, expired, whether every expired lease is renewed as it is)
        self._expired_at: tuple[float, int, list[JobView], bool] | None = None

    # contention ---------------------------------------------------------------
    def _advance(self, view: ClusterView) -> None:
        now = view.now
        self._c += self._n * max(now - self._t, 0.0)
        self._t = now
        self._n = len(view.running) + len(view.pending) + len(view.paused)

    def contention(self, job: JobView, now: float) -> float:
        """Average number of active jobs since ``job`` arrived (at least 1)."""
        s = self._seq_of.get(job.id)
        t0 = None if s is None else float(self._arrivals[0, s])
        if t0 is None or now <= t0:
            return float(max(self._n, 1))
        c0 = float(self._arrivals[1, s])  # type: ignore[index]
        c = self._c + self._n * max(now - self._t, 0.0)
        return max((c - c0) / (now - t0), 1.0)

    def contention_of(self, ids: Sequence[str], now: float) -> np.ndarray:
        """:meth:`contention` of each job in ``ids`` at ``now``, as one array (the same arithmetic)."""
        seq = np.fromiter(map(self._seq_of.get, ids, repeat(-1, len(ids))), np.int64, len(ids))
        return self.contention_by_seq(seq, now)

    def contention_by_seq(self, seq: np.ndarray, now: float) -> np.ndarray:
        """:meth:`contention` of the jobs of arrival orders ``seq`` (-1: a job whose arrival was not seen) at
        ``now``, as one array: their arrivals read in one fancy index, the same arithmetic."""
        n = len(seq)
        floor = float(max(self._n, 1))
        if not n:
            return np.empty(0)
        arr = self._arrivals
        inside = (seq >= 0) & (seq < arr.shape[1])
        if inside.all():
            t0, c0 = arr[:, seq]
        else:
            t0, c0 = np.full((2, n), np.nan)
            t0[inside], c0[inside] = arr[:, seq[inside]]
        # (a job whose arrival this policy did not see: arrived now, integral 0; its contention is the floor)
        seen = t0 == t0
        t0 = np.where(seen, t0, now)
        c0 = np.where(seen, c0, 0.0)
        c = self._c + self._n * max(now - self._t, 0.0)
        later = now > t0
        out = np.full(n, floor)
        np.divide(c - c0, now - t0, out=out, where=later)
        np.maximum(out, np.where(later, 1.0, floor), out=out)
        return out

    # hooks --------------------------------------------------------------------
    def on_arrival(self, job: JobView, view: ClusterView) -> None:
        self._advance(view)
        seq = job.seq
        if seq >= self._arrivals.shape[1]:  # grow by doubling
            grown = np.full((2, max(2 * self._arrivals.shape[1], seq + 1, 1024)), np.nan)
            grown[:, :self._arrivals.shape[1]] = self._arrivals
            self._arrivals = grown
        self._arrivals[:, seq] = (view.now, self._c)
        self._seq_of[job.id] = seq
        self._event = True

    def on_finish(self, job: JobView, view: ClusterView) -> None:
        self._advance(view)
        seq = self._seq_of.pop(job.id, None)
        if seq is not None:
            self._arrivals[:, seq] = np.nan
        self._expiry.pop(job.id, None)
        self._soonest = None
        self.models.forget(job)
        self._event = True

    # finish-time fairness -----------------------------------------------------
    def rho_table(self, view: ClusterView, snap: Snapshot, w: np.ndarray) -> np.ndarray:
        """``rho`` of each job if it held ``w[j, i]`` workers from now on (``w = 0``: nothing this
        lease, ``T_sh(0)``); ``w = snap.cur[:, None]``: each job's ``rho`` at what it holds now."""
        now = view.now
        n_avg = self.contention_by_seq(snap.seq, now)
        need = snap.worker > 1e-12
        per = np.where(need, snap.total[None, :] / n_avg[:, None] / np.where(need, snap.worker, 1.0), np.inf)
        x = row_min(per) if per.shape[1] else np.full(len(snap), np.inf)
        x = np.where(np.isfinite(x), x, snap.n_max)
        w_id = np.clip(np.floor(x), snap.n_min, snap.n_max)
        f_id = np.where(x >= snap.n_min, 1.0, x / snap.n_min) / snap.inv_speed(w_id)
        r = snap.remaining
        t_id = (snap.done + r) / f_id
        elapsed = now - snap.submit
        resume = np.where(snap.state > 0, self.restart_cost, 0.0)  # a running or paused job restores to go on
        wait = (elapsed + self.lease + resume + r / f_id) / t_id
        restart = (snap.state[:, None] == 2) | ((snap.state[:, None] == 1) & (w != snap.cur[:, None]))
        t_sh = elapsed[:, None] + r[:, None] * snap.inv_speed(w) + np.where(restart, self.restart_cost, 0.0)
        return np.where(w > 0, t_sh / t_id[:, None], wait[:, None])

    # decision -----------------------------------------------------------------
    def wants_reports(self, view: ClusterView) -> list[str]:
        """The running jobs whose reported telemetry the coming :meth:`decide` may read: a round reads the
        jobs whose lease ends and the waiting ones (``ObservingPolicy.wants_reports``); kept for decide. None
        when every expired lease is renewed as it is (:meth:`_quiet_expiry`, which reads no reported
        telemetry): their reports wait for a later round or the job's end (issue 18, tenth session)."""
        expired = self._expired(view, view.now + self.tick_interval / 2)
        renew = self._quiet_expiry(view, expired)
        self._expired_at = (view.now, view.allocation_version, expired, renew)
        return [] if renew else [j.id for j in expired]

    def _quiet_expiry(self, view: ClusterView, expired: list[JobView]) -> bool:
        """Whether the round due now only renews every lease of ``expired`` as it is (see the module
        docstring): some expired, nobody waits, one GPU type, and :meth:`_renews_all`."""
        return (bool(expired) and self.skip_quiet and not any_waiting(view)
                and not self.type_speeds.heterogeneous(view) and self._renews_all(view, expired))

    def decide(self, view: ClusterView) -> Plan:
        self._advance(view)
        now = view.now
        horizon = now + self.tick_interval / 2  # leases ending before the next tick go now
        memo = self._expired_at
        self._expired_at = None
        renew: bool | None = None
        if memo is not None and memo[0] == now and memo[1] == view.allocation_version:
            expired, renew = memo[2], memo[3]  # (wants_reports found them a moment ago: nothing changed since)
        else:
            expired = self._expired(view, horizon)
        if not expired and not (self._event and any_waiting(view)):
            self._event = False
            return []
        self._event = False
        typed = self.type_speeds.heterogeneous(view)
        if typed:  # the running jobs' speeds on their types, as last reported
            self.type_speeds.observe(view)
        if not expired and room_for_none(view):  # a round over the free room alone would admit nobody
            return []
        if not expired and self.skip_quiet and self.models.admits_none(view, view.free_total):
            return []  # nor when no waiting job's minimum fits it (see the module docstring)
        self._soonest = None  # the round sets lease ends
        if renew is None:
            renew = self._quiet_expiry(view, expired)
        if renew:
            until = now + self.lease  # a quiet expiry (see the module docstring): every lease renewed as it is
            for job in expired:
                self._expiry[job.id] = until
            return []
        waiting = waiting_jobs(view)
        targets, served, shrink = self.targets(view, expired + waiting, waiting_tail=len(waiting))
        jobs_by_id = view.jobs
        plan = apply_targets(view, targets, [jobs_by_id[jid] for jid in served],
                             self.type_speeds.place if typed else consolidated_placer, reason="themis: lease expired",
                             shrink=[jobs_by_id[jid] for jid in shrink])
        if typed:
            plan += self.faster_types(view, plan, [j for j in expired if targets.get(j.id, 0) > 0])
        started = {a.job for a in plan if isinstance(a, (Start, Resume))}
        # the leases: a job given workers holds one until now + lease, a job given none holds none, nor does a
        # waiting job that could not be placed. One pass over the round's jobs: a job it does not name holds a
        # lease that has not expired and is running (every paused and pending job is in the round), so its
        # entry stays; no pass over every running job's entry
        until = now + self.lease
        expiry = self._expiry
        paused, pending = view.paused, view.pending
        for jid, n in targets.items():
            if n > 0 and (jid in started or not (jid in paused or jid in pending)):
                expiry[jid] = until
            elif jid in expiry:
                del expiry[jid]
        return plan

    def _renews_all(self, view: ClusterView, expired: Sequence[JobView]) -> bool:
        """Whether a round over ``expired`` alone (nobody waits) provably gives each of them what it holds:
        they are rigid (one unit: their minimum, which they hold), every demand row and the free room are
        integers (the greedy's sums and comparisons exact in any order), so all of them fit the free room
        plus what they hold in any order, and each one's rho is a number (not NaN, which the greedy would
        pass over): its speed model gives a positive time per iteration at any worker count
        (``a, b, c >= 0``, finite, ``a + b + c > 0``), so its ideal speed ``f_id`` is positive and finite."""
        models = self.models
        if not models.rows_integral or models.rigid_hold(view, [job.id for job in expired]) is None:
            return False
        free = view.free_total
        if not ((free >= 0) & (free == np.floor(free)) & (free < 2.0 ** 50)).all():
            return False
        for job in expired:
            a, b, c = models.coefficients(job)
            if not (0 <= a < math.inf and 0 <= b < math.inf and 0 <= c < math.inf and a + b + c > 0):
                return False
        return True

    def _expired(self, view: ClusterView, horizon: float) -> list[JobView]:
        """The running jobs whose lease ends by ``horizon`` (or that hold none), in running order."""
        version = view.allocation_version
        soonest = self._soonest
        if soonest is not None and soonest[0] == version and horizon < soonest[1]:
            return []
        expiry = self._expiry
        ends = list(map(expiry.get, view.running, repeat(-math.inf, len(view.running))))
        self._soonest = (version, min(ends, default=math.inf))
        if horizon < self._soonest[1]:
            return []
        return [job for job, end in zip(view.running.values(), ends) if end <= horizon]

    def faster_types(self, view: ClusterView, plan: Plan, renewed: Sequence[JobView]) -> Plan:
        """Moves of jobs whose lease was just renewed to a faster GPU type with room after ``plan``
        (see the module docstring), worst rho first."""
        draft = Draft(view)
        for a in plan:
            if isinstance(a, Pause):
                draft.give_back(view.jobs[a.job])
            elif isinstance(a, Resize):
                draft.give_back(view.jobs[a.job])
                draft.reserve(view.jobs[a.job], a.placement)
            elif isinstance(a, (Start, Resume)):
                draft.reserve(view.jobs[a.job], a.placement)
        touched = {a.job for a in plan}
        jobs = [j for j in renewed if j.id not in touched and j.id in view.running]
        if not jobs:
            return []
        snap = self.models.snapshot(view, jobs)
        rho_now = self.rho_table(view, snap, snap.cur[:, None])[:, 0]
        types = self.type_speeds.types(view)
        moves: Plan = []
        for i in np.argsort(-rho_now, kind="stable"):
            job = snap.jobs[i]
            here = self.type_speeds.type_of(view, job)
            n = job.n_workers
            now_speed = self.type_speeds.speed(job, here, n) if here is not None else None
            order = self.type_speeds.ranked(view, job, n)
            if now_speed is None or order is None:
                continue
            for t in order:
                there = self.type_speeds.speed(job, t, n)
                if t == here or there is None or there < now_speed * MIN_GAIN:
                    break  # the types after are no faster
                if snap.remaining[i] * (1.0 / now_speed - 1.0 / there) <= self.restart_cost:
                    break
                p = consolidated_first(draft, job, n, types[t])
                if p is not None and draft.reserve(job, p):
                    draft.give_back(job)
                    moves.append(Migrate(job.id, p))
                    break
        return moves

    def targets(self, view: ClusterView, jobs: Sequence[JobView], *,
                waiting_tail: int = 0) -> tuple[dict[str, int], list[str], list[str]]:
        """Greedy worst-rho-first allocation of the free room plus what ``jobs`` hold now.

        Unit 0 of a job is its minimum, unit ``i`` one more worker; the value of a unit is the
        job's rho before it (the worst rho is served first), and a unit that would not lower
        the job's rho is not offered. Jobs holding nothing come first (their rho is unbounded).
        Returns worker counts, the jobs set higher than they hold in serving order, and the running jobs
        set lower (in running order): the plan acts on these two only. ``waiting_tail``: see
        :meth:`JobModels.snapshot`."""
        snap = self.models.snapshot(view, jobs, waiting_tail=waiting_tail)
        if not len(snap):
            return {}, [], []
        free = view.free_total + snap.bundle(snap.cur)[snap.state == 1].sum(axis=0)
        width = min(int((snap.n_max - snap.n_min).max()) + 1, int(snap.fits_units(free).max()) + 1)
        held = np.concatenate([np.zeros((len(snap), 1), dtype=np.int64),
                               snap.n_min[:, None] + np.arange(max(width, 1))[None, :]], axis=1)
        table = self.rho_table(view, snap, held)
        before, after = table[:, :-1], table[:, 1:]
        valid = (held[:, 1:] <= snap.n_max[:, None]) & (after < before - 1e-12)
        valid[:, 0] = True  # a job with nothing always takes its minimum, if it fits
        for k in range(1, valid.shape[1]):  # (np.logical_and.accumulate along the units, a column at a time)
            valid[:, k] &= valid[:, k - 1]
        values = np.where(valid, before, -np.inf)
        values[:, 0] += UNSERVED
        # Renewal (restart weighed): a holder's units up to what it holds are worth its rho if it lost
        # them (a lease of waiting plus a restore) plus the credit `restart_gain x restart_cost / lease`,
        # so another job takes them only if its rho is worse by more than the share of the lease a
        # restart wastes. Candidates are ranked (the worst 1 - f first) by that same rho-if-nothing.
        credit = self.restart_gain * self.restart_cost / self.lease
        holding = snap.state == 1
        kept = holding[:, None] & (held[:, 1:] <= snap.cur[:, None])
        values = np.where(kept, values + credit, values)
        rank_rho = table[:, 0] + np.where(holding, credit, 0.0)
        first = snap.bundle(snap.n_min)
        rank = np.argsort(-rank_rho, kind="stable")
        n_first = max(1, math.ceil((1.0 - self.fairness) * len(snap)))
        counts = np.zeros(len(snap), dtype=np.int64)
        for group in (rank[:n_first], rank[n_first:]):
            if group.size:
                got, free = greedy_by_value(values[group], first[group], snap.worker[group], free, floor=-np.inf)
                counts[group] = got
        n = np.where(counts > 0, snap.n_min + counts - 1, 0)
        served = np.argsort(-values[:, 0], kind="stable")
        targets = dict(zip(snap.ids, n.tolist()))
        shrink, _ = changed_rows(snap.state, snap.cur, n)
        ids = snap.ids
        return targets, [ids[i] for i in served[n[served] > snap.cur[served]]], [ids[i] for i in shrink.tolist()]


def make(oracle: bool = False, **params: object) -> Themis:
    """Themis-style policy on observed estimates; ``oracle`` is ignored."""
    return build(Themis, params, policy="themis")
