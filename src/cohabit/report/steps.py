"""Step functions of cluster totals over time (allocated or used resources, see :mod:`.metrics`):
built from rises and falls, clipped to a window, integrated, thinned to a point budget without
changing their area, and turned into a :class:`ShareSeries` of capacity fractions."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True, eq=False)
class ShareSeries:
    """Allocated (or used) fraction of each resource's capacity over time, as a step function.

    ``fractions[r][i]`` holds on ``[times[i], times[i+1])``; the last point
    marks the window end. When the raw series had more than the point budget,
    each step is the time-weighted mean over an equal-width bin, so the area
    under the curve (the overall share) is preserved.
    """

    times: np.ndarray
    fractions: dict[str, np.ndarray]

    def __len__(self) -> int:
        return int(self.times.size)

    def to_json(self) -> dict[str, Any]:
        return {
            "times": [float(t) for t in self.times],
            "fractions": {r: [float(v) for v in a] for r, a in self.fractions.items()},
        }



def _floats(x: Sequence[float]) -> np.ndarray:
    """``x`` as a float64 array: a view of an ``array('d')`` (no copy), else converted."""
    if isinstance(x, array) and x.typecode == "d":
        return np.frombuffer(x, dtype=np.float64) if len(x) else np.zeros(0)
    return np.asarray(x, dtype=float)


def steps(up_t: Sequence[float], up_flat: Sequence[float], down_t: Sequence[float], down_flat: Sequence[float],
          n_res: int) -> tuple[np.ndarray, np.ndarray]:
    """A total as a step function from its rises (``up``) and falls (``down``): change times and
    the level after each. (Lists or ``array('d')``s, read without copies; one array of rows at a
    time is alive besides the result: the pass's peak memory on an 82k-job record.)"""
    up, down = _floats(up_t), _floats(down_t)
    t = np.concatenate([up, down])
    k = up.size
    order = np.argsort(t, kind="stable")
    t = t[order]
    rows = np.empty((t.size, n_res), dtype=float)
    if k:
        rows[:k] = _floats(up_flat).reshape(k, n_res)
    if t.size - k:
        rows[k:] = _floats(down_flat).reshape(t.size - k, n_res)
        np.negative(rows[k:], out=rows[k:])
    levels = rows[order]
    del rows, order
    np.cumsum(levels, axis=0, out=levels)
    np.maximum(levels, 0.0, out=levels)  # float drift below zero on an idle cluster
    return t, levels


def _clipsteps(t: np.ndarray, levels: np.ndarray, w0: float, w1: float) -> tuple[np.ndarray, np.ndarray]:
    """Restrict steps to [w0, w1]: one point per distinct time, starting at w0, ending at w1."""
    tc = np.clip(t, w0, w1)
    if tc.size:
        last_at_time = np.append(tc[1:] != tc[:-1], True)  # level after all changes at a time
        tc, levels = tc[last_at_time], levels[last_at_time]
    if tc.size == 0 or tc[0] > w0:
        tc = np.insert(tc, 0, w0)
        levels = np.vstack([np.zeros((1, levels.shape[1])), levels])
    if tc[-1] < w1:
        tc = np.append(tc, w1)
        levels = np.vstack([levels, levels[-1:]])
    return tc, levels


def integral(tc: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Integral of each column of the step function over [tc[0], tc[-1]]."""
    return (levels[:-1] * np.diff(tc)[:, None]).sum(axis=0)


def decimate(tc: np.ndarray, levels: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Equal-width bins holding the time-weighted mean level (area preserving)."""
    cum = np.vstack([np.zeros((1, levels.shape[1])), np.cumsum(levels[:-1] * np.diff(tc)[:, None], axis=0)])
    edges = np.linspace(tc[0], tc[-1], max_points)
    width = edges[1] - edges[0]
    out = np.empty((edges.size, levels.shape[1]))
    for j in range(levels.shape[1]):
        at_edges = np.interp(edges, tc, cum[:, j])  # the integral is piecewise linear in t
        out[:-1, j] = np.diff(at_edges) / width
    out[-1] = out[-2]
    return edges, out


def drop_flat(tc: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Remove interior points whose level equals the previous one."""
    if tc.size <= 2:
        return tc, levels
    keep = np.ones(tc.size, dtype=bool)
    keep[1:-1] = np.any(levels[1:-1] != levels[:-2], axis=1)
    return tc[keep], levels[keep]


def shares(t: np.ndarray, levels: np.ndarray, names: Sequence[str], caps: np.ndarray,
            window: tuple[float, float] | None, max_points: int) -> tuple[dict[str, float], ShareSeries]:
    """Time-weighted share of each capacity over ``window``, and the series, of a step function."""
    if window is None:
        empty = np.zeros(0)
        return {n: 0.0 for n in names}, ShareSeries(empty, {n: empty.copy() for n in names})
    w0, w1 = window
    tc, levels = _clipsteps(t, levels, w0, w1)
    span = w1 - w0
    share = integral(tc, levels) / (caps * span) if span > 0 else np.zeros(len(names))
    tc, levels = drop_flat(tc, levels)
    if tc.size > max_points and span > 0:
        tc, levels = decimate(tc, levels, max_points)
    frac = levels / caps
    for a in (tc, frac):
        a.flags.writeable = False
    series = ShareSeries(tc, {n: frac[:, j] for j, n in enumerate(names)})
    return {n: float(u) for n, u in zip(names, share)}, series
