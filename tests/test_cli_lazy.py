"""``cohabit``'s start stays light: heavy sub-commands are mounted by name and imported on use."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from cohabit.cli import app
from cohabit.cli_lazy import LAZY_COMMANDS

HEAVY = ("scipy", "sqlalchemy", "fastapi", "torch", "alembic", "uvicorn")


def _loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport sys\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.split()


def test_importing_the_cli_and_its_help_load_no_heavy_library() -> None:
    assert _loaded_after("import cohabit.cli") == []
    help_run = ("from typer.testing import CliRunner\nfrom cohabit.cli import app\n"
                "r = CliRunner().invoke(app, ['--help'])\nassert r.exit_code == 0, r.output")
    assert _loaded_after(help_run) == []


def test_help_lists_every_lazy_command_with_its_docstring() -> None:
    out = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    for name in LAZY_COMMANDS:
        assert f" {name} " in out, name
    assert "Run cohabit as a long-running service" in out  # serve's docstring, read without importing it
    assert "Write MLFS's Philly-derived workload" in out


def test_lazy_commands_run_their_real_command(tmp_path) -> None:
    r = CliRunner().invoke(app, ["mlfs-workload", "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "--jobs" in r.output
    r = CliRunner().invoke(app, ["train", "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "mlfs-rl" in r.output
    out = tmp_path / "w.yaml"
    r = CliRunner().invoke(app, ["mlfs-workload", str(out), "--jobs", "3"])
    assert r.exit_code == 0, r.output
    assert out.exists()


def test_a_simulation_without_plot_or_fitting_policy_loads_neither_scipy_nor_matplotlib() -> None:
    """``cohabit simulate`` imports matplotlib only for ``--plot`` and scipy.optimize only where a model is
    fitted (loss curves, speed models): together ~0.8 CPU s of a whole process's start (docs/speed.md)."""
    run = ("from typer.testing import CliRunner\nfrom cohabit.cli import app\n"
           "r = CliRunner().invoke(app, ['simulate', '--trace', 'tiresias_480', '--limit', '30', '--policy', 'fifo,srtf'])\n"
           "assert r.exit_code == 0, r.output\nimport sys\nprint('matplotlib' if 'matplotlib' in sys.modules else '')")
    assert _loaded_after(run) == []


#: cohabit modules a CSV trace replay (``simulate --trace tiresias_480 --policy fifo,srtf``) does not import:
#: the other trace formats' parsers (synthetic generation, cohabit's YAML format, ...), the fitted models
#: (loss curves, speed models, Rotary's estimators) and PyYAML with cohabit's YAML loaders (no YAML is read).
#: Together ~40 ms of a whole process's start under ``PYTHONDONTWRITEBYTECODE`` (docs/speed.md, "Thirteenth session ... (speed17b)").
NOT_FOR_A_REPLAY = (
    "cohabit.sim.traces.alibaba", "cohabit.sim.traces.gavel", "cohabit.sim.traces.harmony",
    "cohabit.sim.traces.native", "cohabit.sim.traces.philly", "cohabit.sim.traces.synthetic",
    "cohabit.sim.harmony_workload", "cohabit.models.loss_curve", "cohabit.models.speed", "cohabit.models.similar",
    "cohabit.models.tee", "cohabit.models.tme", "cohabit.models.ttr",
    "yaml", "cohabit.spec.yamlio", "cohabit.spec.yamlparse",  # (no YAML file: a preset cluster, a CSV trace)
)


def test_a_csv_trace_replay_imports_neither_other_formats_nor_fitted_models_nor_yaml() -> None:
    run = ("from typer.testing import CliRunner\nfrom cohabit.cli import app\n"
           "r = CliRunner().invoke(app, ['simulate', '--trace', 'tiresias_480', '--limit', '30', '--policy', 'fifo,srtf'])\n"
           "assert r.exit_code == 0, r.output\nimport sys\n"
           f"print(' '.join(m for m in {NOT_FOR_A_REPLAY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", run], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == []


def test_lazily_exported_names_are_the_modules_own() -> None:
    """``cohabit.models`` and ``cohabit.sim.traces`` export the same objects as before, imported on first use."""
    import cohabit.models as models
    import cohabit.sim.traces as traces
    from cohabit.models import loss_curve, loss_fits, similar, speed, tee, tme, ttr
    from cohabit.sim.traces import synthetic

    for name in models.__all__:
        owner = {"LossCurve": loss_curve, "LossFits": loss_fits, "fit_loss_curve": loss_curve, "SpeedModel": speed,
                 "fit_speed": speed, "JobTraits": similar, "TEE": tee, "AccuracyCurve": tee, "TME": tme,
                 "TTR": ttr}[name]
        assert getattr(models, name) is getattr(owner, name)
    assert traces.generate is synthetic.generate and traces.write_tiresias_csv is synthetic.write_tiresias_csv
    import cohabit.spec as spec
    from cohabit.spec import cluster, errors, yamlio, yamlparse

    assert spec.SpecError is errors.SpecError is yamlio.SpecError is yamlparse.SpecError
    assert spec.cluster_from_arg is cluster.cluster_from_arg is yamlio.cluster_from_arg
    assert spec.load_cluster is yamlio.load_cluster and spec.load_jobs is yamlio.load_jobs
    for module in (models, traces, spec):
        try:
            module.no_such_name  # type: ignore[attr-defined]
        except AttributeError:
            pass
        else:
            raise AssertionError(f"{module.__name__}.no_such_name did not raise AttributeError")
