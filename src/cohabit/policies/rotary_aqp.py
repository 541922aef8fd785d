"""Rotary-AQP: resource arbitration for progressive queries (Liu dissertation §3.2.1, Algorithm 4).

The epochs, preemption and checkpoint mechanics are :class:`~cohabit.policies.arbiter.EpochArbiter`'s
(shared with Rotary-DLT and the baselines); Rotary-AQP supplies, per decision:

* **memory** ``m-hat`` of every active job (:class:`cohabit.aqp.estimators.MemoryEstimator`): the
  query plan's estimate (DuckDB ``EXPLAIN``, no execution) before it runs, raised by the memory it
  was seen to use (its ``query_mem_mb`` reports) once it runs; before its data exists, a prior by
  its Table 3.1 class;
* **adaptive running epoch** (:meth:`RotaryAQP.epoch_span`): "the length of the running epoch of
  every AQP job proportionate to the estimated memory consumption": ``m-hat / mean(m-hat)`` of
  the job's epochs, clipped to ``[0.5, 4]``;
* **accuracy progress** ``phi-hat`` after one more running epoch: Rotary's joint fit of the
  top-k similar finished jobs' curves and the job's own real-time points at equal total weight
  (:class:`cohabit.models.tee.TEE`, shared with Rotary-DLT; a query's batches are its epochs, its
  traits the query and its batch count, so the same query's history is most similar); with
  neither, the prior ``phi = fraction of batches read``;
* **RESOURCEARBITRATION**: jobs in priority order get one core each (their one task) while
  ``m-hat <= M``, M being the node's memory less the ``m-hat`` of the jobs running or granted
  there (:meth:`RotaryAQP.admissible`); a job that does not fit is passed over this round;
  then "while D != 0: allocate extra 1 core" to the granted jobs in priority order
  (:meth:`~cohabit.policies.arbiter.EpochArbiter.deal_extra_cores`: ``SetShare`` actions, which
  the simulator turns into a faster job by Amdahl's law and ``LocalBackend`` into more DuckDB
  threads at the query's next batch). ``rotary-aqp:extra_cores=false`` leaves spare cores idle.

Priority ("place j_i in PQ due to phi-hat"): the share of its remaining gap to its accuracy target
the next epoch is estimated to close, ``(min(phi-hat, target) - phi) / (target - phi)``: a job
estimated to attain within its epoch comes first; ties go to the earlier deadline. Rotary's
objective is the number of attained jobs (§3.1.4), so a job the same fitted curve says cannot
reach its target before its deadline (batches still needed x its measured seconds per batch)
goes after every job that still can.

On finish, the job's observed per-batch accuracy curve joins the history (kept by this policy
object for the run, as :class:`~cohabit.repository.store.JobRecord` s).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

from ..aqp.data import default_root, is_complete
from ..aqp.estimators import MemoryEstimator
from ..aqp.queries import WEIGHT_CLASSES, query_spec
from ..engine.job import JobView
from ..engine.state import JobState
from ..engine.view import ClusterView
from ..models.similar import JobTraits
from ..models.tee import TEE, AccuracyCurve
from ..repository.store import JobRecord
from .arbiter import EpochArbiter
from .params import build
from .progress_view import absolute_deadline, batches_per_epoch, latest_accuracy, target_accuracy

#: m-hat (MB) of a query whose data cannot be EXPLAINed here, by its Table 3.1 class.
CLASS_PRIOR_MB = {"light": 64.0, "medium": 128.0, "heavy": 256.0}


def query_of(job: JobView) -> str | None:
    """The TPC-H query a job runs (``q5``), None for other jobs."""
    w = job.spec.workload or {}
    if w.get("name") != "tpch-query":
        return None
    try:
        return query_spec(w.get("query", "q6")).name
    except ValueError:
        return None


def data_dir_of(job: JobView) -> Path | None:
    """Where a query job's tables are, if they exist already (a policy never generates data)."""
    w = job.spec.workload or {}
    if w.get("data"):
        path = Path(str(w["data"])).expanduser()
    else:
        path = default_root() / f"sf{float(w.get('scale', 0.01)):g}"
    return path if is_complete(path) else None


class RotaryAQP(EpochArbiter):
    def __init__(self, k: int = 3, switch_cost_s: float = 0.0, extra_cores: bool = True) -> None:
        super().__init__()
        self.name = "rotary-aqp"
        self.switch_cost_s = switch_cost_s or None
        self.extra_cores = extra_cores
        self.progress = TEE([], k=k)
        self.memory = MemoryEstimator()
        self._m_hat: dict[str, float] = {}
        self._mem_left: dict[int, float] = {}
        self._fits: dict[str, AccuracyCurve | None] = {}  # this round's fitted curve per job
        self._batch_s: dict[str, list[float]] = {}  # query -> measured seconds per batch of its finished jobs

    # --------------------------------------------------------------- estimates
    def memory_mb(self, job: JobView) -> float:
        """m-hat of ``job`` in MB (module docstring)."""
        q = query_of(job)
        if q is None:
            return 1024.0 * float(job.spec.workers.demand["mem_gb"])
        prior = CLASS_PRIOR_MB[WEIGHT_CLASSES[q]]
        plan = self.memory.plan(query_spec(q), data_dir_of(job), int(job.spec.iterations or 1), prior)
        return self.memory.estimate(plan, [v for _, v in job.metrics.get("query_mem_mb", [])])

    def epoch_span(self, job: JobView) -> float:
        m = self._m_hat.get(job.id)
        if m is None or not self._m_hat:
            return 1.0
        mean = sum(self._m_hat.values()) / len(self._m_hat)
        return min(4.0, max(0.5, m / mean)) if mean > 0 else 1.0

    @staticmethod
    def traits(job: JobView) -> JobTraits:
        return JobTraits(model=query_of(job) or job.spec.model, dataset="tpch", batch_size=job.spec.iterations)

    @staticmethod
    def realtime_curve(job: JobView) -> list[tuple[float, float]]:
        """``(batches read, accuracy)`` the job reported."""
        return [(float(it), float(acc)) for it, acc in job.metrics.get("accuracy", []) if it >= 1]

    def curve(self, job: JobView) -> AccuracyCurve | None:
        """The job's fitted accuracy curve (once per decision round; None with no data at all)."""
        if job.id not in self._fits:
            with warnings.catch_warnings():  # a few nearly equal points: a poorly conditioned but usable fit
                warnings.simplefilter("ignore")
                self._fits[job.id] = self.progress.fit(self.traits(job), self.realtime_curve(job))
        return self._fits[job.id]

    def phi_hat(self, job: JobView, now: float) -> float:
        """Estimated accuracy after one more running epoch."""
        total = float(job.spec.iterations or 1)
        nxt = min(total, job.iterations_done(now) + self.epoch_span(job) * batches_per_epoch(job))
        curve = self.curve(job)
        return nxt / total if curve is None else min(1.0, max(0.0, curve.predict(nxt)))

    def batch_s(self, job: JobView) -> float | None:
        """Seconds per batch: measured on the job itself, else the mean of the finished jobs of its
        query (the job repository's history), else None."""
        if job.iter_time:
            return job.iter_time
        past = self._batch_s.get(query_of(job) or job.spec.model)
        return sum(past) / len(past) if past else None

    def feasible(self, job: JobView, now: float) -> bool:
        """False only when the fitted curve and the speed (measured, or of its query's past runs for a
        job not yet measured) say the target comes after the deadline; a paused job also pays
        ``switch_cost_s`` (its restore) first."""
        curve = self.curve(job)
        per_batch = self.batch_s(job)
        if curve is None or not per_batch:
            return True
        need = curve.epochs_to_reach(target_accuracy(job), limit=int(job.spec.iterations or 1))
        left = max(0.0, need - job.iterations_done(now)) * per_batch
        if job.state is JobState.PAUSED:
            left += self.switch_cost_s or 0.0
        return now + left <= absolute_deadline(job)

    # -------------------------------------------------------------- arbitration
    def rank(self, view: ClusterView, jobs: Sequence[JobView]) -> list[JobView]:
        self._m_hat = {j.id: self.memory_mb(j) for j in jobs}
        self._fits = {}
        col = view.resource_index("mem_gb")
        cap = view.capacity
        self._mem_left = {n: (float(cap[n, col]) * 1024.0 if col is not None else float("inf"))
                          for n in range(cap.shape[0])}
        for j in view.running.values():  # running jobs hold their memory where they are
            for n in set(j.placement):
                self._mem_left[n] -= self._m_hat.get(j.id, 0.0)

        known = [t for ts in self._batch_s.values() for t in ts]
        fleet = sum(known) / len(known) if known else None

        def key(j: JobView) -> tuple[int, float, float, int]:
            phi, target = latest_accuracy(j), target_accuracy(j)
            gap = target - phi
            gain = 1.0 if gap <= 0 else (min(self.phi_hat(j, view.now), target) - phi) / gap
            if self.switch_cost_s:  # the cost model: gain per second of the next epoch, a start or restore included
                per_batch = self.batch_s(j) or fleet
                if per_batch:
                    span = self.epoch_span(j) * batches_per_epoch(j) * per_batch
                    gain /= span + (0.0 if j.state is JobState.RUNNING else self.switch_cost_s)
            return (0 if self.feasible(j, view.now) else 1, -gain, absolute_deadline(j), j.seq)

        return sorted(jobs, key=key)

    def admissible(self, view: ClusterView, job: JobView, node: int) -> bool:
        m = self._m_hat.get(job.id, 0.0)
        if m > self._mem_left.get(node, float("inf")):
            return False
        self._mem_left[node] -= m  # granted here (the caller reserves it next)
        return True

    def on_finish(self, job: JobView, view: ClusterView) -> None:
        super().on_finish(job, view)
        if job.iter_time:
            self._batch_s.setdefault(query_of(job) or job.spec.model, []).append(float(job.iter_time))
        curve = [acc for _, acc in self.realtime_curve(job)]
        if curve:
            t = self.traits(job)
            self.progress.add(JobRecord(model=t.model, dataset=t.dataset, batch_size=t.batch_size,
                                        accuracy=tuple(curve), name=job.id))


def make(oracle: bool = False, **params: object) -> RotaryAQP:
    return build(RotaryAQP, params, policy="rotary-aqp")
