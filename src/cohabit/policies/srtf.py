"""SRTF: shortest remaining time first, preemptive.

Remaining time is estimated from what a scheduler observes, unless the user
explicitly grants the oracle (``--oracle``):

* observed (default): remaining iterations x measured seconds per iteration,
  when the job declared its iterations; before its first measurement, the
  mean iteration time of finished jobs of the same model. A job that declared
  no length (Philly) is expected to run as long as the mean finished job,
  minus what it has run (so it degrades to least-attained-service ordering
  until history accumulates).
* oracle: remaining = true iterations left x measured iteration time, or the
  trace's duration scaled by the fraction left before the first measurement.

Preemption: a waiting job that does not fit may pause running jobs whose
remaining time exceeds its own by more than the checkpoint/restore margin,
longest first. With ``min_run_time`` > 0 a job that (re)started less than that
many seconds ago is not paused (``srtf:min_run_time=60`` bounds preemptions to
one per restart cost; by default SRTF preempts at once, as the textbook rule
does, and a burst of shorter arrivals can pause a job a second after it
resumed). SRTF has no tick: a spared job is preempted at the next scheduling
event after its minimum run, which costs average JCT: on the Muri artifact's
trace1, 1,495,896 s with 0, 1,636,434 s with 60, 1,688,510 s with 30 (issue 19).
Jobs are started consolidated-first.
"""

from __future__ import annotations

import heapq
import math
from itertools import chain

from ..engine.actions import Pause, Plan, Resume, Start
from ..engine.job import JobView
from ..engine.oracle import Oracle
from ..engine.state import JobState
from ..engine.view import ClusterView
from .base import BasePolicy
from .placement import Draft
from .params import build


class SRTF(BasePolicy):
    def __init__(self, use_oracle: bool = False, preempt_margin: float = 60.0, preemptive: bool = True,
                 min_run_time: float = 0.0) -> None:
        if preempt_margin < 0:
            raise ValueError(f"preempt_margin must be >= 0 seconds, got {preempt_margin!r}")
        if not min_run_time >= 0:
            raise ValueError(f"min_run_time must be >= 0 seconds, got {min_run_time!r}")
        self.min_run_time = min_run_time
        self._started: dict[str, float] = {}  # job -> when this policy last started or resumed it
        self.uses_oracle = use_oracle
        self.preempt_margin = preempt_margin
        self.preemptive = preemptive
        self._oracle: Oracle | None = None
        # job id -> (inputs, estimate) of a job that is not running: its estimate changes only when the
        # history grows or the job itself ran again (a new pause), so a round does not recompute it
        self._waiting_rem: dict[str, tuple[tuple[object, ...], float]] = {}
        self._running_rem: dict[str, tuple[tuple[object, ...], float]] = {}  # see _running_bound
        self.name = "srtf[oracle]" if use_oracle else "srtf"

    def bind_oracle(self, oracle: Oracle) -> None:
        self._oracle = oracle

    # -------------------------------------------------------------- estimate
    def remaining(self, job: JobView, view: ClusterView) -> float:
        """Estimated seconds of running left for ``job`` at ``view.now``."""
        now = view.now
        done = job.iterations_done(now)
        it = job.iter_time or view.history.mean_iter_time(job.spec.model)
        if self._oracle is not None:
            total = self._oracle.total_iterations(job.id)
            if job.iter_time:
                return max(total - done, 0.0) * job.iter_time
            dur = self._oracle.duration(job.id)
            if dur is not None:
                return dur * max(1.0 - done / total, 0.0)
            return max(total - done, 0.0) * it if it else math.inf
        if job.spec.iterations is not None and it:
            return max(job.spec.iterations - done, 0.0) * it
        mean = view.history.mean_run_time()
        if mean is None:
            return math.inf
        return max(mean - job.executed_time(now), 0.0)

    def _waiting_remaining(self, job: JobView, view: ClusterView, n_history: int) -> float:
        """:meth:`remaining` of a job that is not running, cached while its inputs stay the same."""
        inputs = (n_history, job.preemptions, job.state, job.iter_time)
        hit = self._waiting_rem.get(job.id)
        if hit is not None and hit[0] == inputs:
            return hit[1]
        rem = self.remaining(job, view)
        self._waiting_rem[job.id] = (inputs, rem)
        return rem

    def _running_bound(self, view: ClusterView, n_history: int) -> float:
        """An upper bound of :meth:`remaining` over the running jobs. A running job's estimate only
        falls as time passes while the history and its last report stay the same (it extrapolates
        its progress, or its run time, forward), so the estimate made at its last change bounds it."""
        best = -math.inf
        cache = self._running_rem
        for r in view.running.values():
            inputs = (n_history, r.report_time, r.iter_time, r.preemptions, r.reported_iterations)
            hit = cache.get(r.id)
            if hit is None or hit[0] != inputs:
                hit = cache[r.id] = (inputs, self.remaining(r, view))
            if hit[1] > best:
                best = hit[1]
        return best

    # ---------------------------------------------------------------- decide
    def decide(self, view: ClusterView) -> Plan:
        if not view.pending and not view.paused:
            return []
        n_history = len(view.history)
        rem = self._waiting_remaining
        # a heap, not a sort: a round usually stops after the first few jobs (see the break below)
        keyed = [(rem(j, view, n_history), j.seq, j) for j in chain(view.pending.values(), view.paused.values())]
        heapq.heapify(keyed)
        draft = Draft(view)
        plan: Plan = []
        victims: list[tuple[float, JobView]] | None = None
        while keyed:
            mine, _, job = heapq.heappop(keyed)
            p = draft.place(job)
            if p is None and self.preemptive and view.running:
                if victims is None:
                    if self._running_bound(view, n_history) <= mine + self.preempt_margin:
                        victims = []  # nobody is worth pausing for this job, nor for any later one
                    else:
                        victims = sorted(((self.remaining(r, view), r) for r in view.running.values()
                                          if view.now - self._started.get(r.id, -math.inf) >= self.min_run_time),
                                         key=lambda x: -x[0])
                p = self._preempt_for(job, mine, draft, victims, plan)
            if p is None:
                # Waiting jobs come in order of remaining time and victims only leave the list: once
                # nobody is worth pausing for this job and no room is left, none of the later ones
                # can start either.
                if (not self.preemptive or not victims or victims[0][0] <= mine + self.preempt_margin) \
                        and draft.exhausted():
                    break
                continue
            plan.append(Resume(job.id, p) if job.state is JobState.PAUSED else Start(job.id, p))
            self._started[job.id] = view.now
        return plan

    def on_finish(self, job: JobView, view: ClusterView) -> None:
        """Forget an ended job (one ``on_finish``: a second definition used to replace this one, and
        the estimate caches kept every finished job)."""
        self._started.pop(job.id, None)
        self._waiting_rem.pop(job.id, None)
        self._running_rem.pop(job.id, None)

    def _preempt_for(self, job: JobView, mine: float, draft: Draft,
                     victims: list[tuple[float, JobView]], plan: Plan) -> tuple[int, ...] | None:
        """Pause the longest-remaining running jobs until ``job`` (``mine`` seconds left) fits;
        undo if it never does."""
        if not victims or victims[0][0] <= mine + self.preempt_margin:
            return None  # nobody has enough more work left to be worth pausing
        saved = draft.save()
        chosen: list[int] = []
        for k, (rem, r) in enumerate(victims):
            if rem <= mine + self.preempt_margin:
                break
            draft.give_back(r)
            chosen.append(k)
            p = draft.place(job)
            if p is not None:
                for idx in sorted(chosen, reverse=True):
                    plan.append(Pause(victims[idx][1].id, reason=f"srtf: {job.id} has less work left"))
                    del victims[idx]
                return p
        draft.restore(saved)
        return None


def make(oracle: bool = False, **params: object) -> SRTF:
    return build(SRTF, params, policy="srtf", fixed={"use_oracle": oracle})
