"""``hypersched``: HyperSched (Liaw et al., SoCC'19), MLFS's accuracy-by-deadline baseline.

HyperSched gives resources to the trials with the best accuracy before a deadline and pauses
trials that no longer gain. Here, each round (every ``interval`` seconds): waiting jobs are
taken earliest deadline first and start where they fit; when some wait and nothing fits, the
running job whose reported accuracy rose least per GPU-hour over its last ``window`` reports
(below ``min_gain`` per GPU-hour) is paused (checkpointed) to make room; a job past its
deadline is paused before any other. Jobs that report no accuracy are never paused.
"""

from __future__ import annotations

import math

from ..engine.actions import Pause, Plan
from ..engine.job import JobView
from ..engine.view import ClusterView
from .base import BasePolicy, place_in_order, waiting_jobs
from .params import build
from .placement import Draft


class HyperSched(BasePolicy):
    report_interval = 60.0

    def __init__(self, interval: float = 300.0, window: int = 3, min_gain: float = 0.01) -> None:
        if not (math.isfinite(interval) and interval >= 0.1):
            raise ValueError(f"interval must be >= 0.1 s, got {interval!r}")
        if window < 1:
            raise ValueError(f"window must be >= 1 report, got {window!r}")
        self.tick_interval = interval
        self.window, self.min_gain = window, min_gain
        self.name = "hypersched"

    def gain(self, job: JobView) -> float:
        """Accuracy gained per GPU-hour over the last ``window`` reports (inf without enough)."""
        hist = job.metrics.get("accuracy")
        if not hist or len(hist) <= self.window or not job.iter_time:
            return math.inf
        (i0, a0), (i1, a1) = hist[-1 - self.window], hist[-1]
        hours = (i1 - i0) * job.iter_time * max(job.spec.num_gpus, 1.0) / 3600.0
        return (a1 - a0) / hours if hours > 0 else math.inf

    def decide(self, view: ClusterView) -> Plan:
        waiting = waiting_jobs(view)
        if not waiting:
            return []
        queue = sorted(waiting, key=lambda j: (j.spec.absolute_deadline or math.inf, j.seq))
        plan = place_in_order(view, queue, Draft(view).place)
        if plan:
            return plan
        now = view.now

        def badness(j: JobView) -> tuple[int, float]:
            late = j.spec.absolute_deadline is not None and now > j.spec.absolute_deadline
            return (0 if late else 1, self.gain(j))
        victims = sorted(view.running.values(), key=badness)
        for j in victims:
            late, g = badness(j)
            if late == 0 or g < self.min_gain:
                return [Pause(j.id, "hypersched: low accuracy gain" if late else "hypersched: past its deadline")]
            break
        return plan


def make(oracle: bool = False, **params: object) -> HyperSched:
    return build(HyperSched, params, policy="hypersched")
