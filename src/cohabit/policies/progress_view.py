"""What the progress-based arbitration policies read from a job: its reported accuracy, the
accuracy its criterion asks for, and its deadline (all observed or user-declared values)."""

from __future__ import annotations

from ..engine.job import JobView
from ..spec.criteria import MetricTarget


def latest_accuracy(job: JobView) -> float:
    """The job's latest reported ``accuracy`` (0 before its first report)."""
    series = job.metrics.get("accuracy")
    return float(series[-1][1]) if series else 0.0


def target_accuracy(job: JobView, default: float = 1.0) -> float:
    """The accuracy the job's criterion asks for (``default`` without an accuracy target)."""
    c = job.spec.criteria
    if isinstance(c, MetricTarget) and c.metric == "accuracy" and c.op in (">=", ">"):
        return float(c.value)
    return default


def absolute_deadline(job: JobView) -> float:
    """Submission time plus the criterion's WITHIN seconds (else the job's ``deadline``); inf without one."""
    within = getattr(job.spec.criteria, "within", None)
    if within is not None and within.unit == "seconds":
        return job.spec.submit_time + float(within.amount)
    if job.spec.absolute_deadline is not None:
        return job.spec.absolute_deadline
    return float("inf")


def batches_per_epoch(job: JobView) -> float:
    """Iterations in one of the job's epochs (``iterations / epochs``; all of them without ``epochs``)."""
    spec = job.spec
    if spec.iterations and spec.epochs:
        return spec.iterations / spec.epochs
    return float(spec.iterations or 1)
