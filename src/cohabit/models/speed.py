"""Optimus's resource-speed model: training speed as a function of (#PS, #workers).

Peng et al., EuroSys'18, §3.2, derive the time of one training step from its
parts — forward/backward computation, pushing gradients to and pulling
parameters from ``p`` parameter servers shared by ``w`` workers, the update at
the servers, and per-connection overheads — and obtain, with non-negative
coefficients ``theta``:

* synchronous training (Eq. 4), global batch ``M`` split over the workers::

      f(p, w) = (theta0 * M / w + theta1 + theta2 * w / p + theta3 * w + theta4 * p) ^ -1

* asynchronous training (Eq. 3), every worker stepping on its own::

      f(p, w) = w * (theta0 + theta1 * w / p + theta2 * w + theta3 * p) ^ -1

Both are linear in ``theta`` after inverting the speed (``1/f``, resp. ``w/f``),
so Optimus fits them with non-negative least squares (NNLS) over measured
(p, w, speed) points; we weigh each point by its inverse so the fit minimises
relative errors. ``M`` is fixed per job, so ``theta0 * M`` is fitted as one
coefficient of ``1 / w``.

All-reduce jobs have no parameter servers; for them (mode ``"allreduce"``) we
keep the terms that do not involve ``p``: ``f(w) = (theta0 / w + theta1 + theta2 * w) ^ -1``
(computation split over workers, a constant per-step cost, and a cost that
grows with the ring) — our adaptation, not in the paper.

With measurements at fewer than two distinct configurations the coefficients are
not identifiable; :class:`SpeedModel` then assumes the computation term alone
(speed proportional to ``w``: perfect scaling), scaled to the one measurement. This
optimistic prior is what makes a scheduler try a larger size, which then yields
a second point.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

Mode = Literal["sync", "async", "allreduce"]
MODES: tuple[str, ...] = ("sync", "async", "allreduce")


def features(p: float, w: float, mode: Mode) -> np.ndarray:
    """The regressors of ``1/f`` (sync, allreduce) or ``w/f`` (async) at ``p`` PS and ``w`` workers."""
    if w <= 0:
        raise ValueError(f"w must be > 0 workers, got {w!r}")
    if mode == "allreduce":
        return np.array([1.0 / w, 1.0, w])
    if p <= 0:
        raise ValueError(f"p must be > 0 parameter servers in mode {mode!r}, got {p!r}")
    if mode == "sync":
        return np.array([1.0 / w, 1.0, w / p, w, p])
    if mode == "async":
        return np.array([1.0, w / p, w, p])
    raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")


def _target(p: float, w: float, speed: float, mode: Mode) -> float:
    return w / speed if mode == "async" else 1.0 / speed


def fit_speed(points: Sequence[tuple[float, float, float]], mode: Mode = "sync") -> np.ndarray:
    """NNLS coefficients ``theta`` of the mode's speed function from (p, w, speed) points."""
    from scipy.optimize import nnls  # here, not at the top: scipy.optimize costs ~0.3 CPU s to import

    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not points:
        raise ValueError("fit_speed needs at least one (p, w, speed) point")
    rows, ys = [], []
    for p, w, s in points:
        if not s > 0:
            raise ValueError(f"speed must be > 0, got {s!r} at p={p}, w={w}")
        rows.append(features(p, w, mode))
        ys.append(_target(p, w, s, mode))
    a, y = np.array(rows), np.array(ys)
    scale = 1.0 / y  # relative residuals
    theta, _ = nnls(a * scale[:, None], y * scale)
    return theta


def predict(theta: np.ndarray, p: float, w: float, mode: Mode) -> float:
    """Speed at (p, w) under coefficients ``theta``; 0 if the model gives no finite speed."""
    t = float(features(p, w, mode) @ theta)
    if not t > 0:
        return 0.0
    return w / t if mode == "async" else 1.0 / t


class SpeedModel:
    """Measured (p, w) -> speed points of one job and the fitted speed function.

    The latest measurement at a configuration replaces older ones. The fit is
    redone lazily, only after a new measurement.
    """

    __slots__ = ("mode", "_points", "_theta", "_dirty", "_abc")

    def __init__(self, mode: Mode = "sync") -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode: Mode = mode
        self._points: dict[tuple[int, int], float] = {}
        self._theta: np.ndarray | None = None
        self._dirty = False
        self._abc: dict[int, tuple[float, float, float]] = {}

    @property
    def points(self) -> dict[tuple[int, int], float]:
        return dict(self._points)

    def observe(self, p: int, w: int, speed: float) -> bool:
        """Record a measured speed (work units per second) at ``p`` PS and ``w`` workers.

        Returns whether the model changed (a new configuration or a different speed)."""
        if w < 1:
            raise ValueError(f"w must be >= 1 worker, got {w!r}")
        if not speed > 0:
            raise ValueError(f"speed must be > 0, got {speed!r}")
        key = (int(p), int(w))
        if self._points.get(key) == speed:
            return False
        self._points[key] = float(speed)
        self._dirty = True
        self._abc.clear()
        return True

    @property
    def theta(self) -> np.ndarray | None:
        if self._dirty:
            pts = [(p, w, s) for (p, w), s in self._points.items()]
            if len(pts) >= 2:
                self._theta = fit_speed(pts, self.mode)
            else:
                (p, w, s), = pts
                self._theta = np.zeros(features(max(p, 1), w, self.mode).shape[0])
                # perfect-scaling prior: only the computation term (theta0 / w in 1/f, theta0 in w/f)
                self._theta[0] = w / s
            self._dirty = False
        return self._theta

    def coefficients(self, p: int) -> tuple[float, float, float] | None:
        """``(A, B, C)`` with ``1 / f(p, w) = A / w + B + C * w`` at a fixed ``p`` (sync, allreduce).

        Synchronous: ``A = theta0, B = theta1 + theta4 p, C = theta2 / p + theta3``;
        all-reduce: ``(theta0, theta1, theta2)``. Lets a scheduler evaluate many sizes at once.
        None before any measurement."""
        if self.mode == "async":
            raise ValueError("coefficients() needs mode 'sync' or 'allreduce'; async speed is not of that form")
        hit = self._abc.get(p)
        if hit is not None:
            return hit
        if self._dirty and len(self._points) == 1:  # the one-point prior, theta = (w / s, 0, ...), without numpy:
            ((_, w), s), = self._points.items()  # A = theta0; B and C sums and products of zeros (issue 18, 17th
            abc = (w / s, 0.0, 0.0)  # session: a finished rigid job's model, read once)
            self._abc[p] = abc
            return abc
        theta = self.theta
        if theta is None:
            return None
        if self.mode == "sync":
            q = max(p, 1)
            abc = (float(theta[0]), float(theta[1] + theta[4] * q), float(theta[2] / q + theta[3]))
        else:
            abc = (float(theta[0]), float(theta[1]), float(theta[2]))
        self._abc[p] = abc
        return abc

    def speed(self, p: int, w: int) -> float | None:
        """Predicted speed at (p, w); None before any measurement."""
        theta = self.theta
        if theta is None or w < 1:
            return None
        return predict(theta, p, w, self.mode)
