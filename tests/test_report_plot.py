"""plot_comparison writes a PNG headless, also for degenerate runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from cohabit.engine.record import EventKind as K
from cohabit.engine.record import Record
from cohabit.report import Metrics, compute_metrics, plot_comparison
from cohabit.report.plot import plot_resource
from cohabit.spec import Resources

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(n_jobs: int, cap: Resources) -> Metrics:
    r = Record()
    for i in range(n_jobs):
        r.append(10.0 * i, K.SUBMITTED, f"j{i}")
        r.append(10.0 * i + 1, K.STARTED, f"j{i}", alloc={"gpu": 1, "cpu": 2}, nodes=[0])
    for i in range(n_jobs):
        r.append(10.0 * n_jobs + 100.0 * i, K.FINISHED, f"j{i}")
    return compute_metrics(r, cap)


def test_plot_writes_non_empty_png(tmp_path: Path) -> None:
    cap = Resources(gpu=8, cpu=16)
    results = {"fifo": run(5, cap), "srtf": run(8, cap), "none": compute_metrics(Record(), cap)}
    out = plot_comparison(results, tmp_path / "sub" / "cmp.png", title="test")
    assert out == tmp_path / "sub" / "cmp.png"
    data = out.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000


def test_plot_with_only_empty_results(tmp_path: Path) -> None:
    out = plot_comparison({"x": compute_metrics(Record(), Resources(cpu=1))}, str(tmp_path / "e.png"))
    assert out.stat().st_size > 0


def test_plot_prefers_gpu_else_first_resource() -> None:
    assert plot_resource({"a": run(1, Resources(cpu=4, gpu=2))}) == "gpu"
    assert plot_resource({"a": run(1, Resources(cpu=4))}) == "cpu"
    assert plot_resource({}) is None


def test_plot_is_headless_and_lazy() -> None:
    """Importing cohabit.report does not import matplotlib; plotting needs no display."""
    code = (
        "import sys, os; os.environ.pop('DISPLAY', None)\n"
        "import cohabit.report as r\n"
        "assert 'matplotlib' not in sys.modules, 'eager matplotlib import'\n"
        "from cohabit.engine.record import Record\n"
        "from cohabit.spec import Resources\n"
        "p = r.plot_comparison({'a': r.compute_metrics(Record(), Resources(gpu=1))}, sys.argv[1])\n"
        "assert p.stat().st_size > 0\n"
    )
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, "-c", code, str(Path(d) / "p.png")], check=True, timeout=60)


def test_plot_styles_are_distinct_for_many_policies() -> None:
    from cohabit.report.plot import policy_styles

    for n in (17, 20, 23):
        names = [f"p{i}" for i in range(n)]
        styles = policy_styles(names)
        colours = [s.color for s in styles.values()]
        assert len(set(colours)) == n, n
        assert len({(s.color, s.linestyle) for s in styles.values()}) == n
    assert len({s.linestyle for s in policy_styles([f"p{i}" for i in range(17)]).values()}) >= 2


def test_plot_with_17_policies_uses_distinct_colours_small_multiples_and_an_outside_legend() -> None:
    from matplotlib.colors import to_hex

    from cohabit.report.plot import comparison_figure

    cap = Resources(gpu=8, cpu=16)
    results = {f"policy-{i}": run(2 + i % 5, cap) for i in range(17)}
    fig = comparison_figure(results, title="t")
    fig.canvas.draw()
    axes = [ax for ax in fig.get_axes() if ax.get_visible()]
    cdf = next(ax for ax in axes if ax.get_title() == "JCT CDF")
    lines = [ln for ln in cdf.get_lines() if ln.get_label() in results]
    assert len(lines) == 17 and len({to_hex(ln.get_color()) for ln in lines}) == 17
    panels = [ax for ax in axes if ax is not cdf]
    assert len(panels) == 17  # one utilization panel per policy
    assert sorted(ax.get_title().split(":")[0] for ax in panels) == sorted(results)
    legend = cdf.get_legend()
    renderer = fig.canvas.get_renderer()
    lb, ab = legend.get_window_extent(renderer), cdf.get_window_extent(renderer)
    assert lb.x0 >= ab.x1  # the legend is right of the plot area, covering no data


def _overlaps(boxes) -> bool:
    boxes = sorted(boxes, key=lambda b: b.x0)
    return any(a.x1 > b.x0 for a, b in zip(boxes, boxes[1:]))


def test_jct_axis_tick_labels_do_not_overlap_over_any_range() -> None:
    """Harmony's JCTs (half an hour to half a day) once got overlapping minor-tick labels on the log axis."""
    from cohabit.report.plot import comparison_figure

    for lo, hi in ((1600.0, 60000.0), (5.0, 3 * 86400.0), (100.0, 180.0), (3600.0, 3601.0), (1.0, 1e8)):
        r = Record()
        jcts = np.geomspace(lo, hi, 40)
        for i in range(40):
            r.append(0.0, K.SUBMITTED, f"j{i}")
        for i in range(40):
            r.append(0.0, K.STARTED, f"j{i}", alloc={"gpu": 0.1}, nodes=[0])
        for i, t in enumerate(jcts):
            r.append(float(t), K.FINISHED, f"j{i}")
        m = compute_metrics(r, Resources(gpu=8))
        fig = comparison_figure({"a": m, "b": m})
        fig.set_size_inches(7, 7)  # narrower than the default: crowding shows sooner
        fig.canvas.draw()
        cdf = next(ax for ax in fig.get_axes() if ax.get_title() == "JCT CDF")
        renderer = fig.canvas.get_renderer()
        labels = [t for t in cdf.get_xticklabels(which="both") if t.get_text() and t.get_visible()]
        inside = [t for t in labels if cdf.get_xlim()[0] <= t.get_position()[0] <= cdf.get_xlim()[1]]
        assert len(inside) >= 2, (lo, hi, [t.get_text() for t in labels])
        assert all(re.fullmatch(r"\d+(\.\d+)? (s|min|h|d)", t.get_text()) for t in inside), \
            [t.get_text() for t in inside]  # durations a reader knows, not 2×10³ s
        assert not _overlaps([t.get_window_extent(renderer) for t in inside]), (lo, hi)
