"""A PNG comparing policies: JCT CDF (log x) and utilization over time.

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

#: Time units for the utilization axis: (label, seconds per unit, use when the span is at least).
_TIME_UNITS = (("d", 86400.0, 4 * 86400.0), ("h", 3600.0, 4 * 3600.0), ("min", 60.0, 4 * 60.0), ("s", 1.0, 0.0))


def plot_format(path: str | Path) -> str:
    """The image format ``path``'s suffix names (``.svg`` -> ``svg``; no suffix: ``png``).

    Raises ``ValueError`` naming the suffix and the formats matplotlib can write.
    """
    suffix = Path(path).suffix.lower().lstrip(".")
    if not suffix:
        return "png"
    known = FigureCanvasAgg(Figure()).get_supported_filetypes()
    if suffix not in known:
        raise ValueError(f"cannot write a plot as {Path(path).suffix!r} ({str(path)!r}); "
                         f"give a file ending in one of: {', '.join('.' + k for k in sorted(known))}")
    return suffix


def plot_resource(results: Mapping[str, Metrics]) -> str | None:
    """The resource to plot: ``gpu`` if any result has it, else the first one seen."""
    names = [r for m in results.values() for r in m.utilization_series.fractions]
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


def _plot_utilization(ax: Axes, results: Mapping[str, Metrics], resource: str | None) -> None:
    unit, scale = _time_unit(results)
    for name, m in results.items():
        s = m.utilization_series
        frac = s.fractions.get(resource) if resource else None
        if frac is None or s.times.size == 0:
            ax.plot([], [], label=f"{name} (no data)")
            continue
        t0 = m.window[0] if m.window else 0.0
        avg = m.utilization.get(resource or "", 0.0)
        ax.step((s.times - t0) / scale, 100 * frac, where="post", label=f"{name} (avg {100 * avg:.1f}%)")
    ax.set_xlabel(f"time since first submission ({unit})")
    ax.set_ylabel(f"{resource or 'resource'} allocated (%)")
    ax.set_ylim(0, 105)
    ax.set_title(f"{resource or 'resource'} utilization over time")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")


def plot_comparison(results: Mapping[str, Metrics], path: str | Path,
                    title: str | None = "Policy comparison") -> Path:
    """Write a two-panel figure (JCT CDF; GPU or first-resource utilization) and return its path.

    The format is the one the suffix names (:func:`plot_format`: ``.png``, ``.svg``, ``.pdf``, ...).

    Parent directories are created. Works without a display.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(12, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax_cdf, ax_util = fig.subplots(1, 2)
    _plot_cdf(ax_cdf, results)
    _plot_utilization(ax_util, results, plot_resource(results))
    if title:
        fig.suptitle(title)
    fig.savefig(path, format=plot_format(path), dpi=110)
    return path
