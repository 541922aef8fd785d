"""Gavel's .trace format, the Muri-artifact CSV format, heterogeneous GPU speeds and the named physics."""

from __future__ import annotations

import json
from importlib import resources as ilr
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohabit.policies import FIFO
from cohabit.sim.physics import MURI_OVERHEAD_S, PHYSICS, SimConfig, physics_config
from cohabit.sim.runner import simulate
from cohabit.sim.traces import TraceRowError, load_trace
from cohabit.sim.traces.gavel import FIELDS
from cohabit.spec.cluster import gavel_cluster, preset

ROOT = Path(__file__).resolve().parent.parent
GAVEL_TRACE = ROOT / "bench" / "reference" / "inputs" / "gavel_max_min_fairness.trace"
MURI_TRACE = ROOT / "bench" / "reference" / "inputs" / "muri_trace1.csv"

RESNET = "ResNet-18 (batch size 128)\tpython3 main.py --batch_size 128\timage_classification/cifar10\t--num_steps\t1\t{steps}\t{scale}\t1\t-1.000000\t{arrival}"
RESNET50_128 = "ResNet-50 (batch size 128)\tpython3 main.py\timagenet\t--num_steps\t1\t1000\t2\t1\t-1\t0"


def _raw() -> dict:
    return json.loads(ilr.files("cohabit.data").joinpath("profiles", "gavel_throughputs.json").read_text())


def _write(tmp_path: Path, *lines: str) -> Path:
    p = tmp_path / "t.trace"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_gavel_durations_come_from_the_v100_throughput(tmp_path: Path) -> None:
    raw = _raw()
    p = _write(tmp_path, RESNET.format(steps=36000, scale=1, arrival=0), RESNET.format(steps=5000, scale=2, arrival=7.5))
    load = load_trace(p, "gavel")
    assert [j.spec.id for j in load.jobs] == ["gavel-0", "gavel-1"]
    a, b = load.jobs
    v1 = raw["v100"]["('ResNet-18 (batch size 128)', 1)"]["null"]
    v2 = raw["v100"]["('ResNet-18 (batch size 128)', 2)"]["null"]
    assert a.truth.duration == pytest.approx(36000 / v1)
    assert b.truth.duration == pytest.approx(5000 / v2)
    assert b.spec.submit_time == 7.5 and b.spec.workers.count == 2 and b.spec.iterations == 5000
    k80 = raw["k80"]["('ResNet-18 (batch size 128)', 1)"]["null"]
    assert a.truth.gpu_speed == pytest.approx({"v100": 1.0, "p100": raw["p100"]["('ResNet-18 (batch size 128)', 1)"]["null"] / v1,
                                               "k80": k80 / v1})
    assert load.default_cluster == "gavel-v100-p100-k80"


def test_gavel_reads_the_reference_trace() -> None:
    load = load_trace(GAVEL_TRACE, "gavel")
    assert len(load.jobs) == 96
    assert max(j.spec.submit_time for j in load.jobs) == pytest.approx(46317)


@pytest.mark.parametrize(("line", "field", "text"), [
    ("a\tb\tc", None, "expected 10 tab-separated fields"),
    (RESNET.format(steps=0, scale=1, arrival=0), "total_steps", "integer in [1"),
    (RESNET.format(steps=10, scale=0, arrival=0), "scale_factor", "integer in [1"),
    (RESNET.format(steps=10, scale=1, arrival=-1), "arrival_time", ">= 0"),
    (RESNET.format(steps="1.5", scale=1, arrival=0), "total_steps", "an integer"),
    (RESNET.format(steps=10, scale=3, arrival=0), "job_type", "no measured throughput"),
    (RESNET.format(steps=10, scale=1, arrival=0).replace("ResNet-18 (batch size 128)", "Nope"), "job_type",
     "no measured throughput for 'Nope'"),
])
def test_gavel_errors_name_file_line_and_field(tmp_path: Path, line: str, field: str | None, text: str) -> None:
    p = _write(tmp_path, RESNET.format(steps=10, scale=1, arrival=0), line)
    with pytest.raises(TraceRowError) as e:
        load_trace(p, "gavel")
    assert e.value.line == 2 and e.value.column == field
    assert str(e.value).startswith(f"{p}:2: ") and text in str(e.value)


def test_gavel_skip_bad_rows_keeps_job_numbers(tmp_path: Path) -> None:
    p = _write(tmp_path, "bad", "", RESNET.format(steps=10, scale=1, arrival=0))
    load = load_trace(p, "gavel", skip_bad_rows=True)
    assert [j.spec.id for j in load.jobs] == ["gavel-1"] and len(load.skipped) == 1


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_gavel_mutated_lines_load_or_fail_cleanly(tmp_path_factory, data) -> None:
    """Property: a line with any field replaced loads as a valid job or raises TraceRowError naming its line."""
    fields = RESNET.format(steps=100, scale=1, arrival=0).split("\t")
    i = data.draw(st.integers(0, len(FIELDS) - 1))
    fields[i] = data.draw(st.one_of(st.text(max_size=10), st.sampled_from(["-1", "0", "1e400", "nan", "4", "2.5"])))
    p = tmp_path_factory.mktemp("g") / "m.trace"
    p.write_text(RESNET.format(steps=7, scale=1, arrival=0) + "\n" + "\t".join(fields) + "\n", encoding="utf-8",
                 errors="surrogatepass")
    try:
        load = load_trace(p, "gavel")
    except TraceRowError as e:
        assert e.line >= 2
        return
    for job in load.jobs:
        assert job.truth.duration > 0 and job.spec.workers.count >= 1


def test_a_job_runs_at_its_measured_speed_on_each_gpu_type(tmp_path: Path) -> None:
    """Heterogeneous physics: the same job on K80s takes v100 / k80 times as long as on V100s."""
    load = load_trace(_write(tmp_path, RESNET.format(steps=3600, scale=1, arrival=0)), "gavel")
    cfg = physics_config("gavel")
    jct = {}
    for gpu, counts in {"v100": (4, 0, 0), "p100": (0, 4, 0), "k80": (0, 0, 4)}.items():
        out = simulate(load.jobs, gavel_cluster(*counts), FIFO(), config=cfg)
        jct[gpu] = out.metrics.avg_jct
    speed = load.jobs[0].truth.gpu_speed
    assert jct["v100"] == pytest.approx(load.jobs[0].truth.duration)
    assert jct["p100"] == pytest.approx(jct["v100"] / speed["p100"])
    assert jct["k80"] == pytest.approx(jct["v100"] / speed["k80"])


def test_a_job_gavel_could_not_run_on_k80_is_kept_off_k80s(tmp_path: Path) -> None:
    load = load_trace(_write(tmp_path, RESNET50_128), "gavel")
    assert load.jobs[0].truth.gpu_speed["k80"] == 0
    only_k80 = simulate(load.jobs, gavel_cluster(0, 0, 4), FIFO(), config=physics_config("gavel"))
    assert only_k80.metrics.jobs_finished == 0 and only_k80.metrics.jobs_rejected == 1
    mixed = simulate(load.jobs, gavel_cluster(0, 2, 4, gpus_per_server=2), FIFO(), config=physics_config("gavel"))
    assert mixed.metrics.jobs_finished == 1


def test_gavel_preset_is_heterogeneous() -> None:
    cl = preset("gavel-v100-p100-k80")
    models = [n.labels["gpu_model"] for n in cl.nodes]
    assert cl.capacity["gpu"] == 108 and models.count("v100") == models.count("k80") == 9


# ------------------------------------------------------------------ Muri-artifact CSV
MURI_HEADER = "job_id,num_gpu,submit_time,iterations,model_name,batch_size,duration,interval,iteration_time"


def test_muri_format_reads_milliseconds_and_iteration_time(tmp_path: Path) -> None:
    p = tmp_path / "m.csv"
    p.write_text(MURI_HEADER + "\n0,2,201694000,1000,vgg16,16,9999000,0,250\n")
    job = load_trace(p, "muri").jobs[0]
    assert job.spec.submit_time == pytest.approx(201694)
    assert job.truth.duration == pytest.approx(1000 * 0.25)  # iterations x iteration_time, not `duration`
    assert load_trace(p, "muri").default_cluster == "muri-n8g8" and preset("muri-n8g8").capacity["gpu"] == 64
    p.write_text(MURI_HEADER + "\n0,2,0,1000,vgg16,16,1,0,-3\n")
    with pytest.raises(TraceRowError, match=r"m.csv:2: column 'iteration_time'"):
        load_trace(p, "muri")


def test_muri_reference_trace_loads() -> None:
    load = load_trace(MURI_TRACE, "muri")
    assert len(load.jobs) == 1494
    first = next(j for j in load.jobs if j.spec.id == "0")
    assert first.truth.duration == pytest.approx(5853661 * 0.490)


def test_muri_physics_charges_the_per_model_overhead_and_slowdown(tmp_path: Path) -> None:
    p = tmp_path / "m.csv"
    p.write_text(MURI_HEADER + "\n0,1,0,1000,a2c,16,1,0,100\n1,8,0,1000,resnet18,16,1,0,100\n")
    out = simulate(load_trace(p, "muri").jobs, preset("muri-n8g8"), FIFO(), config=physics_config("muri"))
    res = out.metrics.jobs
    jct = dict(zip(res.ids, res.jct))
    assert jct["0"] == pytest.approx(MURI_OVERHEAD_S[1]["a2c"] + 100 * 1.015)
    assert jct["1"] == pytest.approx(MURI_OVERHEAD_S[8]["resnet18"] + 100 * 1.015)
    plain = simulate(load_trace(p, "muri").jobs, preset("muri-n8g8"), FIFO(), config=SimConfig())
    assert plain.metrics.avg_jct == pytest.approx(100)


def test_unknown_physics_lists_the_known() -> None:
    assert set(PHYSICS) == {"cohabit", "muri", "gavel", "pollux-artifact"}
    with pytest.raises(ValueError, match="known: cohabit, muri, gavel, pollux-artifact"):
        physics_config("tiresias")


def test_cli_simulate_takes_a_physics_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cohabit.cli import app

    out = tmp_path / "g.json"
    res = CliRunner().invoke(app, ["simulate", "--trace", str(GAVEL_TRACE), "--format", "gavel", "--limit", "6",
                                   "--policy", "fifo", "--physics", "gavel", "--json", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["physics"] == "gavel" and data["cluster"] == "gavel-v100-p100-k80"
    assert data["policies"]["fifo"]["jobs_finished"] == 6 and "preemptions_per_job" in data["policies"]["fifo"]
    bad = CliRunner().invoke(app, ["simulate", "--trace", str(GAVEL_TRACE), "--format", "gavel", "--physics", "x"])
    assert bad.exit_code == 2 and "unknown physics 'x'; known: cohabit, muri, gavel" in bad.output
