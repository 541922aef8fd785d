"""``mlfs``: the whole of MLFS (§3) — a task scheduler (MLF-RL once its training has converged,
MLF-H before) plus MLF-C's load control.

The switch (§3.4: "only after the RL model is well trained (i.e., converged), MLFS switches
from MLF-H to MLF-RL"): MLF-RL is used when the shipped weights' metadata says
``converged: true`` (criterion in ``docs/mlfs.md``) and the converged network scored at least
MLF-H's on the trainer's held-out workloads (:func:`cohabit.policies.mlfs.rl.switch_ready`);
otherwise MLFS runs MLF-H. ``scheduler=h`` or ``scheduler=rl`` forces either.
"""

from __future__ import annotations

from ...engine.actions import Plan
from ...engine.job import JobView
from ...engine.view import ClusterView
from ..base import BasePolicy
from ..params import build
from .control import LoadControl
from .heuristic import MLFH


class MLFS(BasePolicy):
    tick_interval: float | None = 60.0
    report_interval: float = 60.0

    def __init__(self, scheduler: str = "auto", control: bool = True, h_s: float = 0.9, confidence: float = 0.9,
                 epsilon: float = 0.01, interval: float = 60.0) -> None:
        if scheduler not in ("auto", "h", "rl"):
            raise ValueError(f"scheduler must be 'auto', 'h' or 'rl', got {scheduler!r}")
        if scheduler == "auto":
            from .rl import switch_ready
            scheduler = "rl" if switch_ready() else "h"
        if scheduler == "rl":
            from .rl import MLFRL
            self.inner: BasePolicy = MLFRL(interval=interval)
        else:
            self.inner = MLFH(interval=interval)
        self.scheduler = scheduler
        self.control = LoadControl(h_s=h_s, confidence=confidence, epsilon=epsilon) if control else None
        self.tick_interval = interval
        self.report_interval = interval
        self.name = "mlfs"

    def on_arrival(self, job: JobView, view: ClusterView) -> None:
        self.inner.on_arrival(job, view)  # type: ignore[attr-defined]

    def on_finish(self, job: JobView, view: ClusterView) -> None:
        self.inner.on_finish(job, view)  # type: ignore[attr-defined]

    def decide(self, view: ClusterView) -> Plan:
        stops = self.control.stops(view) if self.control is not None else []
        if not stops:
            return self.inner.decide(view)
        gone = {s.job for s in stops}
        rest = [a for a in self.inner.decide(view) if getattr(a, "job", None) not in gone]
        return [*stops, *rest]


def make(oracle: bool = False, **params: object) -> MLFS:
    return build(MLFS, params, policy="mlfs")
