"""A PNG comparing policies: JCT CDF (log x) and the allocated and used share of one resource over time.

Uses matplotlib's object API with the Agg canvas directly, so it works headless
and never touches pyplot's global backend or figure registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .metrics import Metrics

#: Time units for the share-over-time axis: (label, seconds per unit, use when the span is at least).
_TIME_UNITS = (("d", 86400.0, 4 * 86400.0), ("h", 3600.0, 4 * 3600.0), ("min", 60.0, 4 * 60.0), ("s", 1.0, 0.0))


def plot_resource(results: Mapping[str, Metrics]) -> str | None:
    """The resource to plot: ``gpu`` if any result has it, else the first one seen."""
    names = [r for m in results.values() for r in m.allocated_series.fractions]
    if "gpu" in names:
        return "gpu"
    return names[0] if names else None


def _time_unit(results: Mapping[str, Metrics]) -> tuple[str, float]:
    span = max((m.window[1] - m.window[0] for m in results.values() if m.window), default=0.0)
    for label, scale, threshold in _TIME_UNITS:
        if span >= threshold:
            return label, scale
    return "s", 1.0


def _plot_cdf(ax: Axes, results: Mapping[str, Metrics]) -> None:
    drawn = False
    for name, m in results.items():
        jct = np.sort(m.jct_values[m.jct_values > 0])
        if jct.size == 0:
            ax.plot([], [], label=f"{name} (no finished jobs)")
            continue
        y = np.arange(1, jct.size + 1) / jct.size
        ax.step(np.concatenate([[jct[0]], jct]), np.concatenate([[0.0], y]), where="post", label=name)
        drawn = True
    if drawn:
        ax.set_xscale("log")
    ax.set_xlabel("job completion time (s, log scale)")
    ax.set_ylabel("fraction of finished jobs")
    ax.set_ylim(0, 1.02)
    ax.set_title("JCT CDF")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")


def _plot_shares(ax: Axes, results: Mapping[str, Metrics], resource: str | None) -> None:
    """Allocated share (solid) and, where measured, used share (dashed, same colour) over time."""
    unit, scale = _time_unit(results)
    for name, m in results.items():
        s = m.allocated_series
        frac = s.fractions.get(resource) if resource else None
        if frac is None or s.times.size == 0:
            ax.plot([], [], label=f"{name} (no data)")
            continue
        t0 = m.window[0] if m.window else 0.0
        avg = m.allocated.get(resource or "", 0.0)
        (line,) = ax.step((s.times - t0) / scale, 100 * frac, where="post",
                          label=f"{name} allocated (avg {100 * avg:.1f}%)")
        u = m.used_series.fractions.get(resource or "")
        if u is not None and m.used_series.times.size:
            ax.step((m.used_series.times - t0) / scale, 100 * u, where="post", linestyle="--",
                    color=line.get_color(), label=f"{name} used (avg {100 * m.used[resource or '']:.1f}%)")
    ax.set_xlabel(f"time since first submission ({unit})")
    ax.set_ylabel(f"share of {resource or 'resource'} capacity (%)")
    ax.set_ylim(0, 105)
    ax.set_title(f"{resource or 'resource'}: allocated (solid) and used (dashed) share over time")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")


def plot_comparison(results: Mapping[str, Metrics], path: str | Path,
                    title: str | None = "Policy comparison") -> Path:
    """Write a two-panel PNG (JCT CDF; GPU or first-resource allocated and used share) and return its path.

    Parent directories are created. Works without a display.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(12, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax_cdf, ax_util = fig.subplots(1, 2)
    _plot_cdf(ax_cdf, results)
    _plot_shares(ax_util, results, plot_resource(results))
    if title:
        fig.suptitle(title)
    fig.savefig(path, format="png", dpi=110)
    return path
