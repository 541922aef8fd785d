"""The Dorm policy: re-solve P2 on every arrival and completion, then move to its allocation.

Sun et al., §III-C: when an application arrives or finishes, the
utilization-fairness optimizer (:mod:`.milp`, Eq. 10-18) decides how many
containers every application in the system gets on every server; the
DormMaster then enforces it by the checkpoint protocol — save the state of
each application whose containers change, kill it, create/destroy containers,
resume it from the saved state (cohabit's :class:`~cohabit.engine.actions.Resize`).
New applications are started on their containers. The solver is offered a
first incumbent (:func:`.milp.keep_and_fill`: keep everyone, make room for the
new applications' n_min by shrinking the most over-served ones), so that a
time-limited solve on a large cluster has a feasible point. If P2 has no feasible
solution (or the time limit passes without one), the current allocation is
kept and waiting applications go on waiting until the next arrival or
completion. Above 20,000 (application, server) pairs, on clusters of few server kinds, P2 is
solved on classes of identical servers and split to servers (:mod:`.aggregate`); the paper's
50 x 20 workload is solved per server.

Enforcement order. The scheduler applies a plan's actions one by one against
its ledger, so a resize must find its new containers free when it runs.
Resizes are emitted in an order where each fits once the earlier ones are
done (an application's own old containers are freed first). If some remain
that cannot go in any order (a cycle: A grows where B is, B where A is), one of
them is paused (checkpoint, release) and resumed at the end of the same plan
with its new containers — the same checkpoint-kill-resume, spelled with two
actions. New applications start last.

Admission (an addition to the paper). P2 gives every application in A^t at
least n_min containers, so if the waiting applications' n_min do not fit
together, P2 stays infeasible at every event and — when nothing is running —
no event ever comes: the paper's "keep the current allocation until running
applications finish" deadlocks (three 1-GPU applications on two GPUs do it).
With ``admit_prefix`` (default) A^t holds the running applications plus the
longest arrival-ordered prefix of the waiting ones whose n_min containers fit
the cluster's pooled capacity next to the running ones' n_min; the rest wait
for a later event. On the paper's workload (Σ n_min = 124 of 240 CPUs, 4 of 5
GPUs) every waiting application is admitted and nothing changes.
``admit_prefix=False`` is the paper's rule as written.

Applications with parameter-server task groups are outside Dorm's container
model (all containers of an application are alike) and are not scheduled.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...engine.actions import Pause, Placement, Plan, Resize, Resume, Start
from ...engine.job import JobView
from ...engine.state import JobState
from ...engine.view import ClusterView
from ..base import BasePolicy
from ..placement import Draft
from .aggregate import should_aggregate, solve_aggregated
from .milp import PAPER_SETTINGS, Problem, Solution, Thresholds, keep_and_fill, solve
from .shares import AppDemand


@dataclass(frozen=True, slots=True)
class Decision:
    """One re-solve: what P2 returned and what the policy did with it."""

    time: float
    apps: int
    running: int
    status: str
    utilization: float
    fairness_loss: float
    fairness_bound: float
    adjusted: int
    adjust_bound: int
    started: int
    paused_for_cycle: int
    seconds: float
    gap: float | None


class Dorm(BasePolicy):
    """Dorm with thresholds θ1 (fairness loss) and θ2 (adjustment overhead)."""

    def __init__(self, theta1: float = 0.1, theta2: float = 0.1, *, time_limit: float = 10.0,
                 mip_rel_gap: float = 1e-4, admit_prefix: bool = True, name: str | None = None) -> None:
        self.thresholds = Thresholds(theta1, theta2)
        self.admit_prefix = admit_prefix
        self.time_limit = time_limit
        self.mip_rel_gap = mip_rel_gap
        self.name = name or f"dorm(θ1={theta1:g},θ2={theta2:g})"
        self.log: list[Decision] = []
        self._dirty = True
        self._view: ClusterView | None = None

    # hooks: Dorm re-solves on arrivals and completions only (§III-C-1)
    def on_arrival(self, job: JobView, view: ClusterView) -> None:
        self._dirty = True

    def on_finish(self, job: JobView, view: ClusterView) -> None:
        self._dirty = True

    def decide(self, view: ClusterView) -> Plan:
        if view is not self._view:  # a new run
            self._view = view
            self.log = []
            self._dirty = True
        if not self._dirty:
            return []
        self._dirty = False
        jobs = self.admitted(view)
        if not jobs:
            return []
        problem = self.problem(view, jobs)
        assert problem.running is not None
        start = keep_and_fill(problem, self.thresholds.adjust_bound(int(problem.running.sum())))
        solver = solve_aggregated if should_aggregate(problem) else solve  # large clusters: server classes
        sol = solver(problem, self.thresholds, time_limit=self.time_limit, mip_rel_gap=self.mip_rel_gap,
                    start=start)
        plan: Plan = []
        cycles = 0
        if sol.ok:
            assert sol.x is not None
            plan, cycles = self.transition(view, jobs, problem, sol.x)
        self.log.append(self._entry(view, problem, sol, plan, cycles))
        return plan

    # ------------------------------------------------------------------ model
    def admitted(self, view: ClusterView) -> list[JobView]:
        """A^t: the running applications, then waiting ones in arrival order (see module doc)."""
        running = sorted((j for j in view.running.values() if j.spec.num_ps == 0), key=lambda j: j.seq)
        waiting = sorted((j for g in (view.pending, view.paused) for j in g.values() if j.spec.num_ps == 0),
                         key=lambda j: j.seq)
        if not self.admit_prefix:
            return sorted(running + waiting, key=lambda j: j.seq)
        room = np.asarray(view.capacity, dtype=float).sum(axis=0)
        for j in running:
            room = room - j.spec.min_workers * view.demand_vector(j)
        out = list(running)
        for j in waiting:
            need = j.spec.min_workers * view.demand_vector(j)
            if (room - need < -1e-9).any():
                break
            room = room - need
            out.append(j)
        return sorted(out, key=lambda j: j.seq)

    @staticmethod
    def problem(view: ClusterView, jobs: list[JobView]) -> Problem:
        """P2's data from the view: demands, weights, bounds, capacity, current containers."""
        apps = [AppDemand(j.id, view.demand_vector(j), float(j.spec.weight), j.spec.min_workers, j.spec.max_workers)
                for j in jobs]
        cap = np.asarray(view.capacity, dtype=float)
        prev = np.zeros((len(jobs), cap.shape[0]), dtype=np.int64)
        for i, j in enumerate(jobs):
            if j.state is JobState.RUNNING:
                np.add.at(prev[i], list(j.placement[: j.n_workers]), 1)
        running = np.array([j.state is JobState.RUNNING for j in jobs], dtype=bool)
        return Problem(apps, cap, previous=prev, running=running)

    # ------------------------------------------------------------ enforcement
    @staticmethod
    def transition(view: ClusterView, jobs: list[JobView], problem: Problem, x: np.ndarray) -> tuple[Plan, int]:
        """Actions that move the cluster from ``problem.previous`` to ``x`` (see module doc)."""
        assert problem.previous is not None
        draft = Draft(view)
        target = {j.id: _placement(x[i]) for i, j in enumerate(jobs)}
        moves = [j for i, j in enumerate(jobs)
                 if j.state is JobState.RUNNING and (x[i] != problem.previous[i]).any()]
        plan: Plan = []
        parked: list[JobView] = []
        while moves:
            progress = False
            for job in list(moves):
                saved = draft.save()
                draft.give_back(job)
                if draft.reserve(job, target[job.id]):
                    plan.append(Resize(job.id, target[job.id]))
                    moves.remove(job)
                    progress = True
                else:
                    draft.restore(saved)
            if not progress:  # a cycle: park the app that frees the most, resume it below
                job = max(moves, key=lambda j: len(j.placement))
                draft.give_back(job)
                plan.append(Pause(job.id, reason="dorm: resize (checkpoint, re-create containers, resume)"))
                parked.append(job)
                moves.remove(job)
        for job in parked:
            if draft.reserve(job, target[job.id]):
                plan.append(Resume(job.id, target[job.id]))
        for job in jobs:
            if job.state in (JobState.PENDING, JobState.PAUSED) and target[job.id]:
                if draft.reserve(job, target[job.id]):
                    cls = Start if job.state is JobState.PENDING else Resume
                    plan.append(cls(job.id, target[job.id]))
        return plan, len(parked)

    def _entry(self, view: ClusterView, problem: Problem, sol: Solution, plan: Plan, cycles: int) -> Decision:
        assert problem.running is not None
        return Decision(
            time=view.now, apps=len(problem.apps), running=int(problem.running.sum()), status=sol.status,
            utilization=sol.utilization, fairness_loss=sol.fairness_loss, fairness_bound=sol.fairness_bound,
            adjusted=len(sol.adjusted), adjust_bound=sol.adjust_bound,
            started=sum(isinstance(a, Start) for a in plan), paused_for_cycle=cycles, seconds=sol.seconds,
            gap=sol.gap,
        )


def _placement(row: np.ndarray) -> Placement:
    """One node index per container, from the containers-per-server row x_i."""
    return tuple(int(j) for j in np.repeat(np.arange(row.size), row))


def make(oracle: bool = False) -> Dorm:
    """``dorm``: the paper's Dorm-3 thresholds (θ1 = θ2 = 0.1)."""
    return Dorm(*_th("dorm-3"), name="dorm")


def make_1(oracle: bool = False) -> Dorm:
    return Dorm(*_th("dorm-1"), name="dorm-1")


def make_2(oracle: bool = False) -> Dorm:
    return Dorm(*_th("dorm-2"), name="dorm-2")


def make_3(oracle: bool = False) -> Dorm:
    return Dorm(*_th("dorm-3"), name="dorm-3")


def _th(name: str) -> tuple[float, float]:
    t = PAPER_SETTINGS[name]
    return t.theta1, t.theta2
