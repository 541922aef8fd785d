"""ReLAQS-style arbitration (Liu dissertation §3.2.2: "scheduling CPU cores to jobs with the most
potential for improvement ... simply estimated according to previous processing results").

A job's potential is the accuracy it gained per second over its last granted epoch, taken
from its own reports only (no history, no memory model: what distinguishes Rotary-AQP). A job
never run has unknown, hence highest, potential (cold start: arrival order); a job at or above
its target has none left.
"""

from __future__ import annotations

from ..engine.job import JobView
from ..engine.view import ClusterView
from .arbiter import EpochArbiter, latest_accuracy, target_accuracy
from .params import build


class ReLAQS(EpochArbiter):
    name = "relaqs"

    def __init__(self, epoch_s: float = 2.0, ratchet: bool = True, switch_cost_s: float = 1.0) -> None:
        super().__init__(epoch_s, ratchet, switch_cost_s)
        self._mark: dict[str, tuple[float, float]] = {}  # job -> (running seconds, accuracy) at its epoch start

    def potential(self, job: JobView, view: ClusterView) -> float:
        series = job.metrics.get("accuracy")
        if not series:
            return float("inf")
        acc = latest_accuracy(job)
        if acc >= target_accuracy(job):
            return 0.0
        ran = job.executed_time(view.now)
        t0, a0 = self._mark.get(job.id, (0.0, 0.0))
        return (acc - a0) / (ran - t0) if ran > t0 else float("inf")

    def priority(self, job: JobView, view: ClusterView) -> tuple[float, ...]:
        return (-self.potential(job, view),)

    def charge(self, job: JobView, view: ClusterView) -> None:
        if job.id not in view.running or view.now - self._epoch_start.get(job.id, view.now) >= self.epoch_length(job, view):
            self._mark[job.id] = (job.executed_time(view.now), latest_accuracy(job) if job.metrics.get("accuracy") else 0.0)


def make(oracle: bool = False, **params: object) -> ReLAQS:
    return build(ReLAQS, params, policy="relaqs")
