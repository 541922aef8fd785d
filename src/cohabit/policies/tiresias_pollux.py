"""The Pollux artifact's Tiresias: two-queue discretized LAS by GPU count, re-decided every round.

The Pollux artifact (petuum/adaptdl, branch ``osdi21-artifact``, ``simulator/tiresias.py``) compares
Pollux with its own reading of Tiresias (Gu et al., NSDI'19), which differs from cohabit's
``tiresias`` (the paper's) in three ways that move average JCT by up to 17 % on the artifact's
workloads (docs/pollux.md). This policy is that reading, so that ``bench/fidelity_pollux.py``
can compare the same policy on both simulators:

* **Queues.** Two queues; a job enters queue 0 on arrival and moves to the back of queue 1 once
  its executed time x GPUs reaches ``threshold`` (16 GPU-hours). No starvation promotion (the
  artifact's ``_solve_starvation = 0``). Within a queue, jobs keep their queue order (arrival,
  or demotion), not their attained service.
* **Statuses from the queue order, every round.** Walking queue 0 then queue 1, a job is to run
  if its GPU count fits in the GPUs not yet claimed by the jobs before it (counting GPUs only,
  wherever they are), else it is to wait. So an earlier job that fits takes GPUs back from a
  later one that back-filled ahead of it (cohabit's ``tiresias`` never preempts within a queue),
  and a demoted job is paused whenever queue-0 jobs claim its GPU count, whether or not they
  then fit on the nodes.
* **Placement anywhere.** A job's GPUs are taken from the nodes with the most free GPUs first
  (``most_common``), split across nodes when needed; a running job keeps its placement.

Two switches turn one of these differences at a time into cohabit's ``tiresias`` rule (for measuring
which one explains the gap, ``bench/fidelity_pollux_tiresias.py``, docs/fidelity.md): ``reclaim=false``
(a running job keeps its GPUs against jobs of its own queue: running jobs claim before waiting ones) and
``placement=consolidated`` (cohabit's placement: as few nodes as hold the job). With both,
its average JCT on the artifact's 11 workloads equals cohabit's ``tiresias`` (with the artifact's
parameters) within 0.05 %.

It decides every ``round_s`` seconds (the artifact's 60 s scheduling interval: ``decision_period``),
so a job runs at least a round between a start and a pause. It observes only the job's size,
arrival and executed time.
"""

from __future__ import annotations

import numpy as np

from ..engine.actions import Pause, Plan, Resume, Start
from ..engine.job import JobView
from ..engine.state import JobState
from ..engine.view import ClusterView
from .base import BasePolicy
from .params import build
from .placement import Draft, fill


class TiresiasPollux(BasePolicy):
    """See the module docstring. ``threshold``: GPU-seconds of service that demote a job to queue 1."""

    def __init__(self, threshold: float = 16 * 3600.0, round_s: float = 60.0, reclaim: bool = True,
                 placement: str = "most-free") -> None:
        if not threshold > 0:
            raise ValueError(f"threshold must be > 0 GPU-seconds, got {threshold!r}")
        if not 0 < round_s < float("inf"):
            raise ValueError(f"round_s must be a finite number of seconds > 0, got {round_s!r}")
        if placement not in ("most-free", "consolidated"):
            raise ValueError(f"placement must be 'most-free' or 'consolidated', got {placement!r}")
        self.threshold = float(threshold)
        self.decision_period = float(round_s)
        self.reclaim = bool(reclaim)
        self.placement = placement
        self.name = "tiresias-pollux"
        self._queues: tuple[list[str], list[str]] = ([], [])

    def on_arrival(self, job: JobView, view: ClusterView) -> None:
        self._queues[0].append(job.id)

    def on_finish(self, job: JobView, view: ClusterView) -> None:
        for q in self._queues:
            if job.id in q:
                q.remove(job.id)

    def gpus(self, job: JobView, view: ClusterView) -> float:
        """GPUs the job asks for (workers x GPUs per worker)."""
        w, n = view.shape(job)
        g = view.gpu_col
        return float(w[g]) * n if g is not None else float(n)

    def decide(self, view: ClusterView) -> Plan:
        now = view.now
        q0, q1 = self._queues
        for jid in [j for j in q0 if j in view.running]:
            job = view.jobs[jid]
            if job.executed_time(now) * self.gpus(job, view) >= self.threshold:
                q0.remove(jid)
                q1.append(jid)
        g = view.gpu_col
        left = float(view.capacity[:, g].sum()) if g is not None else float("inf")
        chosen: list[JobView] = []
        live = (JobState.PENDING, JobState.PAUSED, JobState.RUNNING)
        for q in (q0, q1):
            queue = [view.jobs[jid] for jid in q if view.jobs[jid].state in live]
            if not self.reclaim:  # cohabit's Tiresias: a running job is not preempted by one of its own queue
                queue = ([j for j in queue if j.state is JobState.RUNNING]
                         + [j for j in queue if j.state is not JobState.RUNNING])
            for job in queue:
                need = self.gpus(job, view)
                if need <= left + 1e-9:
                    chosen.append(job)
                    left -= need
        keep = {j.id for j in chosen}
        draft = Draft(view)
        plan: Plan = []
        for jid, job in view.running.items():
            if jid not in keep:
                draft.give_back(job)
                plan.append(Pause(jid, reason="tiresias-pollux: a job before it in the queues claims its GPUs"))
        for job in chosen:
            if job.state is JobState.RUNNING:
                continue
            placement = self._place(draft, job, view)
            if placement is None:
                continue  # other resources than GPUs do not fit: it waits
            plan.append(Resume(job.id, placement) if job.state is JobState.PAUSED else Start(job.id, placement))
        return plan

    def _place(self, draft: Draft, job: JobView, view: ClusterView) -> tuple[int, ...] | None:
        if self.placement == "consolidated":
            return draft.place(job)  # cohabit's: on as few nodes as hold it (consolidated first)
        return self._most_free_first(draft, job, view)

    @staticmethod
    def _most_free_first(draft: Draft, job: JobView, view: ClusterView) -> tuple[int, ...] | None:
        """The artifact's placement: workers on the nodes with the most room first (reserved in ``draft``)."""
        if job.spec.num_ps:
            return draft.place(job)  # parameter-server jobs: cohabit's placement (the artifact has none)
        w, n = view.shape(job)
        fit = draft.tasks_fit(w)
        workers = fill(fit, n, np.argsort(-fit, kind="stable"))
        if workers is None or not draft.reserve(job, tuple(workers)):
            return None
        return tuple(workers)


def make(oracle: bool = False, **params: object) -> TiresiasPollux:
    """The Pollux artifact's Tiresias; ``oracle`` is ignored (it reads no ground truth)."""
    return build(TiresiasPollux, params, policy="tiresias-pollux")
