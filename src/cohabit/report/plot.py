"""A figure comparing policies: the JCT CDF of all of them, and shares over time per policy.

Layout: the JCT CDF (log time axis with duration ticks) on top, its legend
outside the axes; below it one small panel per policy (small multiples, shared
axes) with that policy's allocated share (solid, filled) and used share (dashed,
where measured) of the plotted resource over time, so
that 17 policies do not tangle in one panel. Every policy keeps one style in
both parts (:func:`policy_styles`): a colour of its own and, past ten
policies, other line styles.

Uses matplotlib's object API with the Agg canvas directly, so it works headless
and never touches pyplot's global backend or figure registry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from matplotlib.figure import Figure, SubFigure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from .metrics import Metrics

#: Time units for the share-over-time axis: (label, seconds per unit, use when the span is at least).
_TIME_UNITS = (("d", 86400.0, 4 * 86400.0), ("h", 3600.0, 4 * 3600.0), ("min", 60.0, 4 * 60.0), ("s", 1.0, 0.0))
#: Candidate ticks of the JCT axis, in seconds: round durations from a second to a year.
_DURATION_TICKS = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600, 2 * 3600, 3 * 3600, 6 * 3600,
                   12 * 3600, 86400, 2 * 86400, 4 * 86400, 7 * 86400, 14 * 86400, 30 * 86400, 60 * 86400,
                   120 * 86400, 365 * 86400)
#: At most this many labelled ticks on the JCT axis.
_MAX_TICKS = 7
_LINE_STYLES = ("-", "--", ":", "-.")


@dataclass(frozen=True)
class LineStyle:
    """How one policy is drawn: a colour (hex) and a matplotlib line style."""

    color: str
    linestyle: str


def policy_styles(names: Sequence[str]) -> dict[str, LineStyle]:
    """A distinct colour per policy, in order, and a line style per group of colours.

    Up to 20 policies: ``tab10``'s ten colours with solid lines, then
    ``tab20b``'s five darkest (navy, olive, ochre, maroon, plum) dashed, then
    its five middle shades dash-dotted, so no two policies share a hue and a
    style. More policies take evenly spaced colours of ``turbo``, cycling four
    line styles.
    """
    n = len(names)
    if n <= 20:
        b = colormaps["tab20b"].colors
        palette = [to_hex(c) for c in colormaps["tab10"].colors] + [to_hex(c) for c in b[0::4]] + \
                  [to_hex(c) for c in b[2::4]]
        styles = ["-"] * 10 + ["--"] * 5 + ["-."] * 5
    else:
        palette = [to_hex(colormaps["turbo"](x)) for x in np.linspace(0.03, 0.97, n)]
        styles = [_LINE_STYLES[i % len(_LINE_STYLES)] for i in range(n)]
    return {name: LineStyle(palette[i], styles[i]) for i, name in enumerate(names)}


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


def short_duration(seconds: float) -> str:
    """A tick label: ``"30 s"``, ``"5 min"``, ``"2 h"``, ``"7 d"`` (no more than three significant digits)."""
    for unit, scale in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.3g} s"


def duration_ticks(lo: float, hi: float, max_ticks: int = _MAX_TICKS) -> list[float]:
    """Round durations within [lo, hi] for a log axis, at least 1/``max_ticks`` of its decades apart.

    Always at least two ticks (the ends themselves when no round duration lies between them).
    """
    if not (lo > 0 and hi > lo):
        return [lo] if lo > 0 else []
    gap = (math.log10(hi) - math.log10(lo)) / max_ticks
    ticks: list[float] = []
    for t in _DURATION_TICKS:
        if lo <= t <= hi and (not ticks or math.log10(t) - math.log10(ticks[-1]) >= gap):
            ticks.append(float(t))
    if len(ticks) < 2:
        ticks = sorted({*ticks, lo, hi})
        while len(ticks) > 2 and math.log10(ticks[1]) - math.log10(ticks[0]) < gap:
            ticks.pop(1)  # an end too close to the round tick between them
        while len(ticks) > 2 and math.log10(ticks[-1]) - math.log10(ticks[-2]) < gap:
            ticks.pop(-2)
    return ticks


def _plot_cdf(ax: Axes, results: Mapping[str, Metrics], styles: Mapping[str, LineStyle]) -> None:
    lo, hi = math.inf, 0.0
    for name, m in results.items():
        st = styles[name]
        jct = np.sort(m.jct_values[m.jct_values > 0])
        if jct.size == 0:
            ax.plot([], [], color=st.color, linestyle=st.linestyle, label=f"{name} (no finished jobs)")
            continue
        lo, hi = min(lo, float(jct[0])), max(hi, float(jct[-1]))
        y = np.arange(1, jct.size + 1) / jct.size
        ax.step(np.concatenate([[jct[0]], jct]), np.concatenate([[0.0], y]), where="post", label=name,
                color=st.color, linestyle=st.linestyle, linewidth=1.4)
    if hi > 0:
        ax.set_xscale("log")
        if hi > lo:
            ax.set_xlim(lo / 1.15, hi * 1.15)
        ax.xaxis.set_major_locator(FixedLocator(duration_ticks(lo / 1.15, hi * 1.15)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: short_duration(x)))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("job completion time (log scale)")
    ax.set_ylabel("fraction of finished jobs")
    ax.set_ylim(0, 1.02)
    ax.set_title("JCT CDF")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False,
              ncols=1 if len(results) <= 18 else 2, borderaxespad=0.0)


def _grid_shape(n: int) -> tuple[int, int]:
    """(rows, columns) of the small multiples: up to 4 per row, 6 when there are more than 8."""
    cols = n if n <= 4 else (4 if n <= 8 else 6)
    return max(1, math.ceil(n / max(cols, 1))), max(cols, 1)


def _plot_utilization_panel(ax: Axes, name: str, m: Metrics, resource: str | None, unit: float,
                            style: LineStyle) -> None:
    """One policy's allocated share over time (a filled step in its colour), its used share where
    measured (dashed, same colour) and the allocated mean as a dotted line."""
    s = m.allocated_series
    frac = s.fractions.get(resource) if resource else None
    if frac is None or s.times.size == 0:
        ax.set_title(f"{name}: no data", fontsize="small")
        return
    t = (s.times - (m.window[0] if m.window else 0.0)) / unit
    ax.fill_between(t, 100 * frac, step="post", color=style.color, alpha=0.35, linewidth=0)
    ax.step(t, 100 * frac, where="post", color=style.color, linewidth=1.0)  # the title names it: solid
    u = m.used_series.fractions.get(resource or "")
    used_avg = m.used.get(resource or "")
    if u is not None and m.used_series.times.size:
        tu = (m.used_series.times - (m.window[0] if m.window else 0.0)) / unit
        ax.step(tu, 100 * u, where="post", color=style.color, linestyle="--", linewidth=1.0)
    avg = 100 * m.allocated.get(resource or "", 0.0)
    ax.axhline(avg, color="black", linestyle=":", linewidth=0.8)
    used_txt = f", used {100 * used_avg:.1f}%" if used_avg is not None else ""
    ax.set_title(f"{name}: alloc {avg:.1f}%{used_txt}", fontsize="small")


def _plot_utilization(fig: SubFigure, results: Mapping[str, Metrics], resource: str | None,
                      styles: Mapping[str, LineStyle]) -> None:
    names = list(results)
    rows, cols = _grid_shape(len(names))
    axes = fig.subplots(rows, cols, sharex=True, sharey=True, squeeze=False)
    label, unit = _time_unit(results)
    for i, ax in enumerate(axes.flat):
        if i >= len(names):
            ax.set_visible(False)
            continue
        _plot_utilization_panel(ax, names[i], results[names[i]], resource, unit, styles[names[i]])
        ax.set_ylim(0, 105)
        ax.set_yticks([0, 50, 100])
        ax.grid(True, alpha=0.3)
        ax.tick_params(labelsize="small")
        ax.label_outer()
    what = resource or "resource"
    fig.suptitle(f"{what}: allocated (solid) and used (dashed) share over time, per policy "
                 "(dotted: average allocated)", fontsize="medium")
    fig.supxlabel(f"time since first submission ({label})", fontsize="small")
    fig.supylabel(f"share of {what} capacity (%)", fontsize="small")


def comparison_figure(results: Mapping[str, Metrics], title: str | None = "Policy comparison") -> Figure:
    """The comparison as a :class:`~matplotlib.figure.Figure` on an Agg canvas (see the module doc)."""
    styles = policy_styles(list(results))
    rows, _ = _grid_shape(len(results))
    cdf_h = 4.0 if len(results) <= 12 else 4.8
    util_h = 0.6 + 1.7 * rows
    fig = Figure(figsize=(13, cdf_h + util_h), layout="constrained")
    FigureCanvasAgg(fig)
    top, bottom = fig.subfigures(2, 1, height_ratios=[cdf_h, util_h])
    _plot_cdf(top.subplots(), results, styles)
    _plot_utilization(bottom, results, plot_resource(results), styles)
    if title:
        fig.suptitle(title)
    return fig


def plot_comparison(results: Mapping[str, Metrics], path: str | Path,
                    title: str | None = "Policy comparison") -> Path:
    """Write :func:`comparison_figure` and return its path.

    The format is the one the suffix names (:func:`plot_format`: ``.png``, ``.svg``, ``.pdf``, ...).

    Parent directories are created. Works without a display.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = comparison_figure(results, title)
    fig.savefig(path, format=plot_format(path), dpi=110)
    return path
