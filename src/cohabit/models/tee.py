"""TEE, Rotary-DLT's training epoch estimator (Liu dissertation §3.3.1; the joint fit of §3.2.1).

TEE fits an accuracy-epoch curve "by jointly leveraging the historical data in the
repository and the real-time data of active jobs": the top-k similar finished jobs
(:func:`cohabit.models.similar.top_k`) give an initial curve, and every evaluation the job
reports is added to the fit, the job's own points carrying the same total weight as all
the historical points together (0.5 and 0.5, as in Rotary-AQP's estimator). With no own
point yet the history alone decides (cold start); with no similar history the job's own
points alone do.

The curve is a weighted least-squares polynomial in ``ln(epoch)`` (degree 2 by default):
accuracy curves rise fast and saturate, which a low-degree polynomial in the epoch itself
follows badly (``bench/rotary_dlt.py`` measures both). Predictions are read through a
running maximum over whole epochs, so the estimated accuracy never falls with more
training and "epochs to reach a target" is well defined.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .similar import JobTraits, top_k

if TYPE_CHECKING:
    from ..repository.store import JobRecord

__all__ = ["AccuracyCurve", "TEE"]

#: How far ahead (in epochs) an estimate of "epochs needed" looks before answering "never".
MAX_EPOCHS = 10_000


@dataclass(frozen=True)
class AccuracyCurve:
    """A fitted accuracy-epoch curve: ``acc(e) = poly(ln e)``, read as a running maximum."""

    coef: np.ndarray

    def raw(self, epochs: np.ndarray | float) -> np.ndarray:
        """The polynomial itself at ``epochs`` (>= 1)."""
        return np.polyval(self.coef, np.log(np.maximum(np.asarray(epochs, dtype=float), 1.0)))

    def predict(self, epoch: float) -> float:
        """Estimated accuracy after ``epoch`` epochs (the best the curve reached by then)."""
        e = max(float(epoch), 1.0)
        whole = np.arange(1.0, math.floor(e) + 1.0)
        vals = self.raw(np.append(whole, e))
        return float(vals.max())

    def _path(self, limit: int) -> np.ndarray:
        return np.maximum.accumulate(self.raw(np.arange(1.0, limit + 1.0)))

    def epochs_to_reach(self, target: float, *, higher_is_better: bool = True, limit: int = MAX_EPOCHS) -> float:
        """First whole epoch at which the curve reaches ``target``; ``inf`` if not within ``limit``."""
        path = self._path(limit)
        hit = np.nonzero(path >= target if higher_is_better else path <= target)[0]
        return float(hit[0] + 1) if hit.size else math.inf

    def epochs_to_converge(self, delta: float, *, limit: int = MAX_EPOCHS) -> float:
        """First epoch ``e >= 2`` whose gain over epoch ``e - 1`` is below ``delta`` (Rotary ❷)."""
        path = self._path(limit)
        hit = np.nonzero(np.diff(path) < delta)[0]
        return float(hit[0] + 2) if hit.size else math.inf


class TEE:
    """Training epoch estimator over a repository's finished jobs (see the module doc).

    ``history``: the repository's records; ``k``: how many similar jobs to fit on;
    ``degree``: of the polynomial in ln(epoch); ``own_weight``: total weight of the job's own
    points (the history gets ``1 - own_weight``; the dissertation's 0.5).
    """

    def __init__(self, history: Sequence[JobRecord], *, k: int = 5, degree: int = 2,
                 own_weight: float = 0.5) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k!r}")
        if degree < 1:
            raise ValueError(f"degree must be >= 1, got {degree!r}")
        if not 0.0 < own_weight < 1.0:
            raise ValueError(f"own_weight must be in (0, 1), got {own_weight!r}")
        self.history = list(history)
        self.k, self.degree, self.own_weight = k, degree, own_weight
        self._similar: dict[JobTraits, list[JobRecord]] = {}

    def add(self, record: JobRecord) -> None:
        """A job finished: it joins the history (later estimates may pick it as similar)."""
        self.history.append(record)
        self._similar.clear()

    def similar(self, job: JobTraits) -> list[JobRecord]:
        """The top-k similar finished jobs that have a curve (cached per traits)."""
        hit = self._similar.get(job)
        if hit is None:
            hit = [r for r, _ in top_k(job, [r for r in self.history if r.accuracy], self.k)]
            self._similar[job] = hit
        return hit

    def fit(self, job: JobTraits, own: Sequence[tuple[float, float]] = ()) -> AccuracyCurve | None:
        """The curve for ``job`` given its own ``(epoch, accuracy)`` points; None with no data at all."""
        hx: list[float] = []
        hy: list[float] = []
        for r in self.similar(job):
            hx.extend(float(e) for e in range(1, len(r.accuracy) + 1))
            hy.extend(r.accuracy)
        ox = [float(e) for e, _ in own if e >= 1]
        oy = [float(a) for e, a in own if e >= 1]
        if not hx and not ox:
            return None
        if hx and ox:
            w = [(1.0 - self.own_weight) / len(hx)] * len(hx) + [self.own_weight / len(ox)] * len(ox)
        else:
            n = len(hx) + len(ox)
            w = [1.0 / n] * n
        x = np.log(np.asarray(hx + ox, dtype=float))
        y = np.asarray(hy + oy, dtype=float)
        deg = min(self.degree, len(np.unique(x)) - 1)
        if deg < 1:  # one distinct epoch: a flat curve at the (weighted) mean
            return AccuracyCurve(np.asarray([float(np.average(y, weights=w))]))
        coef = np.polyfit(x, y, deg, w=np.sqrt(np.asarray(w)))
        return AccuracyCurve(coef)
