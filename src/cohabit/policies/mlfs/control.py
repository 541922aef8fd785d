"""MLF-C: MLFS's ML-feature-based system load control (Wang et al., CoNEXT'20, §3.5).

* **User options** (``JobSpec.stop_option``): i ``max-iterations`` (run what was asked),
  ii ``optstop`` (stop when the accuracy reached is at, or close to, the maximum the job will
  reach), iii ``accuracy`` (stop once the required accuracy ``JobSpec.accuracy`` is reached).
  ``JobSpec.stop_option_may_change`` says whether the system may switch the option when the
  cluster is overloaded: i may become ii or iii, ii may become iii (iii only when the job
  states a required accuracy; otherwise ii).
* **Overload** (§3.5): tasks wait in the queue, or the cluster's overload degree
  ``O_c = mean_s ||U_s||`` exceeds ``h_s``. ``||U_s||`` is divided by ``sqrt(M)`` (M resource
  types) so that it lies in [0, 1] like the threshold (the paper leaves the scale open).
* **Prediction**: the weighted probabilistic learning-curve model of
  :mod:`cohabit.models.mlfs_curve` on the accuracy the job reported, at its maximum iteration.
* **OptStop** (option ii): stop when the model is confident (``confidence``) that the
  accuracy at the maximum iteration will not exceed the best accuracy reached by more than
  ``epsilon``. Option iii: stop at the required accuracy, or (the rule of [17]) when the model
  is confident the requirement cannot be met by the maximum iteration.

Jobs stopped this way end ``stopped-early``; the reason carries the accuracy reached.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...engine.actions import Stop
from ...engine.job import JobView
from ...engine.view import ClusterView
from ...models.mlfs_curve import CurvePrediction, predict

OPTIONS = ("max-iterations", "optstop", "accuracy")


def overload_degree(view: ClusterView) -> float:
    """O_c: the mean over nodes of the norm of their allocated-utilisation vector, in [0, 1]."""
    cap = np.asarray(view.capacity, dtype=float)
    used = cap - np.asarray(view.free, dtype=float)
    have = cap > 0
    u = np.where(have, used / np.where(have, cap, 1.0), 0.0)
    m = np.maximum(have.sum(axis=1), 1)
    return float(np.mean(np.linalg.norm(u, axis=1) / np.sqrt(m)))


def system_overloaded(view: ClusterView, h_s: float) -> bool:
    """§3.5: tasks in the queue, or O_c > h_s."""
    return bool(view.pending or view.paused) or overload_degree(view) > h_s


def effective_option(job: JobView, overloaded: bool) -> str:
    """The option MLF-C applies to ``job`` now (the user's, or the one the system switched to)."""
    opt = job.spec.stop_option
    if not overloaded or not job.spec.stop_option_may_change:
        return opt
    if job.spec.accuracy is not None:
        return "accuracy"
    return "optstop" if opt == "max-iterations" else opt


@dataclass
class LoadControl:
    """MLF-C's stopping decisions; predictions are cached per job until a new accuracy arrives."""

    h_s: float = 0.9
    confidence: float = 0.9
    epsilon: float = 0.01
    min_points: int = 4

    def __post_init__(self) -> None:
        if not 0.0 < self.h_s <= 1.0:
            raise ValueError(f"h_s must be in (0, 1], got {self.h_s!r}")
        if not 0.5 <= self.confidence < 1.0:
            raise ValueError(f"confidence must be in [0.5, 1), got {self.confidence!r}")
        if not (math.isfinite(self.epsilon) and 0.0 <= self.epsilon < 1.0):
            raise ValueError(f"epsilon must be in [0, 1), got {self.epsilon!r}")
        if self.min_points < 3:
            raise ValueError(f"min_points must be >= 3, got {self.min_points!r}")
        self._cache: dict[str, tuple[int, CurvePrediction | None]] = {}

    def prediction(self, job: JobView) -> CurvePrediction | None:
        """Predicted accuracy at the job's maximum iteration (None without enough reports)."""
        hist = job.metrics.get("accuracy")
        total = job.spec.iterations
        if not hist or total is None or len(hist) < self.min_points:
            return None
        hit = self._cache.get(job.id)
        if hit is not None and hit[0] == len(hist):
            return hit[1]
        xs = [it / total for it, _ in hist]
        ys = [v for _, v in hist]
        pred = predict(xs, ys, 1.0)
        self._cache[job.id] = (len(hist), pred)
        return pred

    def forget(self, job_id: str) -> None:
        self._cache.pop(job_id, None)

    def verdict(self, job: JobView, option: str) -> str | None:
        """Why ``job`` should stop now under ``option`` (None: keep training)."""
        if option == "max-iterations":
            return None
        hist = job.metrics.get("accuracy")
        if not hist:
            return None
        best = max(v for _, v in hist)
        req = job.spec.accuracy
        if option == "accuracy" and req is not None and best >= req:
            return f"mlf-c: required accuracy {req:.4f} reached: accuracy {best:.4f}"
        pred = self.prediction(job)
        if pred is None:
            return None
        if option == "accuracy" and req is not None:
            if pred.prob_at_least(req) < 1.0 - self.confidence:
                return (f"mlf-c: accuracy {req:.4f} out of reach (predicted {pred.mean:.4f} at the last "
                        f"iteration): accuracy {best:.4f}")
            return None
        if pred.prob_at_least(best + self.epsilon) < 1.0 - self.confidence:
            return f"mlf-c: optstop, predicted {pred.mean:.4f} at the last iteration: accuracy {best:.4f}"
        return None

    def stops(self, view: ClusterView) -> list[Stop]:
        """Stop actions for the running jobs MLF-C ends now (§3.5)."""
        over = system_overloaded(view, self.h_s)
        out = []
        for job in view.running.values():
            why = self.verdict(job, effective_option(job, over))
            if why is not None:
                out.append(Stop(job.id, why))
                self.forget(job.id)
        return out
