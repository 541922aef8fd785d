"""ReLAQS-style arbitration (Liu dissertation §3.2.2: cores go "to jobs with the most potential for
improvement ... simply estimated according to previous processing results").

A job's potential is the accuracy it gained per second of work over its last epoch's worth of
reports (the last ``iterations / epochs`` batches, at its measured seconds per batch), from its
own reports only: no job history, no memory model (what distinguishes Rotary-AQP). A job with no
two reports yet has unknown, hence highest, potential (arrival order among them); a job at or
above its target has none left.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..engine.job import JobView
from ..engine.view import ClusterView
from .arbiter import EpochArbiter
from .params import build
from .progress_view import batches_per_epoch, latest_accuracy, target_accuracy


def potential(job: JobView) -> float:
    """Accuracy gained per second of work over the last epoch's reports (inf when unknown)."""
    series = job.metrics.get("accuracy") or []
    if len(series) < 2 or not job.iter_time:
        return float("inf")
    if latest_accuracy(job) >= target_accuracy(job):
        return 0.0
    it1, a1 = series[-1]
    span = batches_per_epoch(job)
    it0, a0 = next(((i, a) for i, a in reversed(series[:-1]) if it1 - i >= span), series[0])
    return (a1 - a0) / max((it1 - it0) * job.iter_time, 1e-9)


class ReLAQS(EpochArbiter):
    def __init__(self, switch_cost_s: float = 0.0) -> None:
        super().__init__()
        self.name = "relaqs"
        self.switch_cost_s = switch_cost_s or None

    def rank(self, view: ClusterView, jobs: Sequence[JobView]) -> list[JobView]:
        return sorted(jobs, key=lambda j: (-potential(j), j.seq))


def make(oracle: bool = False, **params: object) -> ReLAQS:
    return build(ReLAQS, params, policy="relaqs")
