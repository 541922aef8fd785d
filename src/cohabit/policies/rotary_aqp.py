"""Rotary-AQP: resource arbitration for progressive queries (Liu dissertation §3.2.1, Algorithm 4).

Per round (:class:`~.arbiter.EpochArbiter` supplies the epochs and the pause/resume mechanics):

* **memory** ``m-hat`` of every active job (:class:`cohabit.aqp.estimators.MemoryEstimator`):
  the query plan's estimate (DuckDB ``EXPLAIN``) before it runs, raised by the memory it was
  seen to use (``query_mem_mb``) once it runs;
* **adaptive running epoch**: "the length of the running epoch of every AQP job proportionate
  to the estimated memory consumption": ``epoch_s * m-hat / mean(m-hat)``, clipped to
  ``[epoch_s / 2, 4 epoch_s]``;
* **accuracy progress** ``phi-hat`` for the next epoch
  (:class:`cohabit.aqp.estimators.AccuracyProgressEstimator`: top-k similar archived jobs of the
  job repository and the job's own real-time points, weighted regression); the batches one
  epoch reads come from the job's measured seconds per batch;
* **arbitration** (``RESOURCEARBITRATION``): jobs in priority order get one core each while
  ``m-hat <= M`` (the cluster's memory, less what granted and locked jobs are estimated to
  hold); a job whose ``m-hat`` does not fit is skipped this round.

Priority ("place j_i in PQ due to phi-hat"): the share of its remaining gap to its accuracy
target the next epoch is estimated to close, ``(min(phi-hat, target) - phi) / (target - phi)``;
a job estimated to attain within the epoch thus comes first, ties go to the earlier deadline.

Not built: Alg. 4's "allocate extra 1 core" loop. A query task's threads are fixed when it
starts (its ``cpu`` demand), and the engine has no action that changes a running task's share
(``SetShare`` is rejected by every backend), so spare cores stay idle rather than being faked.

On finish, the job's observed (fraction read, accuracy) curve is archived in the repository.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..aqp.data import default_root, is_complete
from ..aqp.estimators import AccuracyProgressEstimator, JobRepository, MemoryEstimator
from ..aqp.queries import WEIGHT_CLASSES, query_spec
from ..engine.job import JobView
from ..engine.view import ClusterView
from .arbiter import EpochArbiter, absolute_deadline, latest_accuracy, target_accuracy
from .params import build

#: m-hat before anything is known of a query (no data to EXPLAIN): by its Table 3.1 class, MB.
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
    """Where a query job's tables are, if they exist already (the policy never generates data)."""
    w = job.spec.workload or {}
    if w.get("data"):
        path = Path(str(w["data"])).expanduser()
    else:
        path = default_root() / f"sf{float(w.get('scale', 0.01)):g}"
    return path if is_complete(path) else None


class RotaryAQP(EpochArbiter):
    name = "rotary-aqp"

    def __init__(self, epoch_s: float = 2.0, k: int = 3, ratchet: bool = True, switch_cost_s: float = 1.0) -> None:
        super().__init__(epoch_s, ratchet, switch_cost_s)
        self.tick_interval = self.epoch_s / 8  # epochs as short as epoch_s / 2
        self.repository = JobRepository()
        self.progress = AccuracyProgressEstimator(self.repository, k=k)
        self.memory = MemoryEstimator()
        self._m_hat: dict[str, float] = {}
        self._budget_mb = 0.0

    # --------------------------------------------------------------- estimates
    def memory_mb(self, job: JobView) -> float:
        """m-hat of ``job`` in MB (module docstring)."""
        q = query_of(job)
        if q is None:
            return 1024.0 * float(job.spec.workers.demand["mem_gb"])
        prior = CLASS_PRIOR_MB[WEIGHT_CLASSES[q]]
        plan = self.memory.plan(query_spec(q), data_dir_of(job), int(job.spec.iterations or 1), prior)
        seen = [v for _, v in job.metrics.get("query_mem_mb", [])]
        return self.memory.estimate(plan, seen)

    def begin_round(self, view: ClusterView, jobs: Sequence[JobView]) -> None:
        col = view.resource_index("mem_gb")
        self._budget_mb = float(view.capacity[:, col].sum()) * 1024.0 if col is not None else float("inf")
        self._m_hat = {j.id: self.memory_mb(j) for j in jobs}

    def epoch_length(self, job: JobView, view: ClusterView) -> float:
        m = self._m_hat.get(job.id)
        if m is None or not self._m_hat:
            return self.epoch_s
        mean = sum(self._m_hat.values()) / len(self._m_hat)
        ratio = m / mean if mean > 0 else 1.0
        return self.epoch_s * min(4.0, max(0.5, ratio))

    def realtime_curve(self, job: JobView) -> list[tuple[float, float]]:
        total = float(job.spec.iterations or 1)
        return [(it / total, acc) for it, acc in job.metrics.get("accuracy", [])]

    def phi_hat(self, job: JobView, view: ClusterView) -> float:
        """Estimated accuracy after one more running epoch."""
        total = float(job.spec.iterations or 1)
        done = job.iterations_done(view.now)
        per_batch = job.iter_time if job.iter_time else self.epoch_s / 4
        x_next = min(1.0, (done + self.epoch_length(job, view) / per_batch) / total)
        q = query_of(job) or job.spec.model
        return self.progress.estimate(q, self.realtime_curve(job), x_next)

    # -------------------------------------------------------------- arbitration
    def priority(self, job: JobView, view: ClusterView) -> tuple[float, ...]:
        phi = latest_accuracy(job)
        target = target_accuracy(job)
        gap = target - phi
        gain = 1.0 if gap <= 0 else (min(self.phi_hat(job, view), target) - phi) / gap
        return (-gain, absolute_deadline(job))

    def admit(self, job: JobView, view: ClusterView) -> bool:
        return self._m_hat.get(job.id, 0.0) <= self._budget_mb

    def charge(self, job: JobView, view: ClusterView) -> None:
        self._budget_mb -= self._m_hat.get(job.id, 0.0)

    def on_finish(self, job: JobView, view: ClusterView) -> None:
        super().on_finish(job, view)
        q = query_of(job) or job.spec.model
        self.repository.archive(q, self.realtime_curve(job))


def make(oracle: bool = False, **params: object) -> RotaryAQP:
    return build(RotaryAQP, params, policy="rotary-aqp")
