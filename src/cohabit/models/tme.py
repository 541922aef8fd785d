"""TME, Rotary-DLT's training memory estimator (Liu dissertation §3.3.1).

"TME first retrieves all the data of historical jobs that use the same training dataset and
then computes the similarity between the job for estimation and other historical jobs
according to the number of model parameters": ``similarity(x, y) = 1 - |x - y| / max(x, y)``
(:func:`cohabit.models.similar.size_similarity`). It "picks top-k similar historical jobs
from the job repository to fit the batch size-memory curve" by weighted linear regression,
"the more similar a historical job is, the higher weights", and pads the estimate "by an
additional offset, such as 5%, to minimize the likelihood of out-of-memory issues".

The points of the curve are (batch size, peak memory): several finished jobs of one model at one
batch size (other learning rates, optimizers) are one point, their mean, so that the top-k are
k distinct (model size, batch size) points rather than k runs of one configuration. The weight of
a point is its similarity; the regression is
``memory = a + b * batch_size`` by weighted least squares. With a single batch size among
the similar jobs there is no slope to fit, and their weighted mean memory is the estimate
(padded as well). The dissertation does not give k; 4 points (typically the same model at
its four batch sizes) measured best on the bench's held-out records (``bench/rotary_dlt.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from .similar import JobTraits, size_similarity

if TYPE_CHECKING:
    from ..repository.store import JobRecord

__all__ = ["SizeBlindTME", "TME", "held_back_errors"]


class TME:
    """Peak device memory (MB) of a job from similar finished jobs (see the module doc)."""

    def __init__(self, history: Sequence[JobRecord], *, k: int = 4, pad: float = 0.05) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k!r}")
        if not 0.0 <= pad < 1.0:
            raise ValueError(f"pad must be in [0, 1), got {pad!r}")
        self.history = [r for r in history if r.peak_mem_mb is not None and r.batch_size is not None]
        self.k, self.pad = k, pad

    def points(self, dataset: str) -> list[tuple[int | None, int, float]]:
        """(parameters, batch size, mean peak memory MB) of the ``dataset``'s finished jobs."""
        acc: dict[tuple[int | None, int], list[float]] = {}
        for r in self.history:
            if r.dataset == dataset:
                acc.setdefault((r.num_parameters, int(r.batch_size)), []).append(float(r.peak_mem_mb))  # type: ignore[arg-type]
        return [(p, b, sum(v) / len(v)) for (p, b), v in acc.items()]

    def similar(self, job: JobTraits) -> list[tuple[tuple[int | None, int, float], float]]:
        """The top-k (parameters, batch size, memory) points by model-size similarity, best first."""
        scored = [(pt, size_similarity(job.num_parameters, pt[0])) for pt in self.points(job.dataset)]
        scored.sort(key=lambda ps: -ps[1])
        return scored[: self.k]

    def unpadded(self, job: JobTraits, batch_size: int | None = None) -> float | None:
        """The regression's estimate at ``batch_size`` (default: the job's), without the pad."""
        b = batch_size if batch_size is not None else job.batch_size
        top = [(pt, s) for pt, s in self.similar(job) if s > 0]
        if not top or b is None:
            return None
        x = np.asarray([float(pt[1]) for pt, _ in top])
        y = np.asarray([pt[2] for pt, _ in top])
        w = np.asarray([s for _, s in top])
        if np.unique(x).size < 2:
            return float(np.average(y, weights=w))
        slope, intercept = np.polyfit(x, y, 1, w=np.sqrt(w))
        return float(intercept + slope * b)

    def estimate(self, job: JobTraits, batch_size: int | None = None) -> float | None:
        """Padded peak memory (MB) of ``job`` at ``batch_size``; None without similar history."""
        m = self.unpadded(job, batch_size)
        return None if m is None else m * (1.0 + self.pad)


class SizeBlindTME(TME):
    """TME that ignores similarity: every point of the dataset, equal weight (an ablation: what the
    top-k similar jobs are worth)."""

    def similar(self, job: JobTraits) -> list[tuple[tuple[int | None, int, float], float]]:
        return [(pt, 1.0) for pt in self.points(job.dataset)]


def held_back_errors(records: Sequence[JobRecord], held_models: Sequence[str],
                     make: Callable[[list[JobRecord]], TME] = TME) -> dict[str, float]:
    """TME's error on real measurements it did not see: for each model in ``held_models``, every
    record of that model is estimated by ``make(all records of other models)``.

    Returns ``mean_rel_error`` (|estimate - measured| / measured, mean over the held-back
    records), ``p95_rel_error``, ``under_rate`` (fraction estimated below the measured peak: an
    out-of-memory risk), ``mean_shortfall`` (mean of max(measured - estimate, 0) / measured: how far
    below, the memory a job would lack) and ``n``."""
    rel: list[float] = []
    short: list[float] = []
    under = 0
    for model in held_models:
        held = [r for r in records if r.model == model and r.peak_mem_mb]
        if not held:
            raise ValueError(f"no measured record of model {model!r}")
        tme = make([r for r in records if r.model != model])
        for r in held:
            est = tme.estimate(JobTraits(r.model, r.dataset, r.batch_size, num_parameters=r.num_parameters))
            if est is None:
                raise ValueError(f"TME has no similar history for {r.name or r.model!r}")
            truth = float(r.peak_mem_mb)  # type: ignore[arg-type]
            rel.append(abs(est - truth) / truth)
            short.append(max(truth - est, 0.0) / truth)
            under += est < truth
    return {"mean_rel_error": float(np.mean(rel)), "p95_rel_error": float(np.percentile(rel, 95)),
            "under_rate": under / len(rel), "mean_shortfall": float(np.mean(short)), "n": float(len(rel))}
