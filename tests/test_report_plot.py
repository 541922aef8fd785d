"""plot_comparison writes a PNG headless, also for degenerate runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
