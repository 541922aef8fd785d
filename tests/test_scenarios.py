"""Default runs of the embedded traces: scheduling matters on them, and the offered load is reported."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cohabit.cli import app
from cohabit.policies import make_policy
from cohabit.sim.load import offered_load
from cohabit.sim.runner import simulate
from cohabit.sim.traces import EMBEDDED, load_trace
from cohabit.sim.traces.scenario import SCENARIOS, default_run, scale_arrivals
from cohabit.spec.cluster import PRESETS, preset

from conftest import small_cluster, trace_job

runner = CliRunner()

#: How much of each embedded trace the policy comparison simulates (kept to a few seconds):
#: (first N jobs or None for all, horizon as a fraction of the arrival span or None, policies).
#: Philly's first 5,000 jobs already queue on its default cluster; the Alibaba pods queue only
#: in the last eighth of their (compressed) arrivals, so that run stops at 90% of the span.
#: Harmony's PS jobs declare no lengths, so SRTF has nothing to order them by and equals FIFO
#: there: its trace is compared under FIFO and Harmony, the policies it was recorded for.
WINDOWS: dict[str, tuple[int | None, float | None, tuple[str, str]]] = {
    "tiresias_480": (None, None, ("fifo", "srtf")),
    "philly_82k": (5000, None, ("fifo", "srtf")),
    "pollux_workload-1": (None, None, ("fifo", "srtf")),
    "alibaba_openb": (None, 0.9, ("fifo", "srtf")),
    "harmony_80": (None, None, ("fifo", "harmony")),
    "drl_uniform": (None, None, ("lb", "tetris")),
    "drl_poisson": (None, None, ("lb", "tetris")),
    "drl_bursty": (None, None, ("lb", "tetris")),
}


def test_every_embedded_trace_has_a_default_run_on_a_known_preset() -> None:
    assert set(SCENARIOS) == set(EMBEDDED) == set(WINDOWS)
    for name, sc in SCENARIOS.items():
        assert sc.cluster in PRESETS, name
        assert sc.why, name


@pytest.mark.parametrize("name", sorted(EMBEDDED))
def test_policies_differ_and_queues_form_on_the_default_run(name: str) -> None:
    load = load_trace(name)
    cluster_name, scale, scenario = default_run(name, None, None, load.default_cluster)
    assert scenario is SCENARIOS[name]
    limit, horizon_frac, (a, b) = WINDOWS[name]
    jobs = scale_arrivals(load.jobs, scale)[:limit]
    submits = [j.spec.submit_time for j in jobs]
    horizon = math.inf if horizon_frac is None else min(submits) + horizon_frac * (max(submits) - min(submits))
    cluster = preset(cluster_name)
    first = simulate(jobs, cluster, make_policy(a), horizon=horizon).metrics
    second = simulate(jobs, cluster, make_policy(b), horizon=horizon).metrics
    assert first.jobs_finished > 0 and second.jobs_finished > 0
    assert first.avg_queueing_delay > 0, f"{name}: no job waits under {a} on {cluster_name}"
    assert first.avg_jct != pytest.approx(second.avg_jct, rel=1e-3), f"{name}: {a} and {b} give the same avg JCT"


@pytest.mark.parametrize("name", sorted(EMBEDDED))
def test_default_runs_offer_a_load_at_which_queues_can_form(name: str) -> None:
    load = load_trace(name)
    cluster_name, scale, _ = default_run(name, None, None, load.default_cluster)
    offered = offered_load(scale_arrivals(load.jobs, scale), preset(cluster_name))
    assert offered.value is not None and offered.value >= 0.4, offered.describe()


def test_offered_load_by_hand() -> None:
    # two 1-GPU jobs of 100 s and one 2-GPU job of 50 s (ref size = its size), arrivals over 40 s,
    # on 4 GPUs: (100 + 100 + 2 x 50) / (4 x 40) = 300 / 160
    jobs = [trace_job("a", 1, 100.0, 0.0), trace_job("b", 1, 100.0, 10.0), trace_job("c", 2, 50.0, 40.0)]
    got = offered_load(jobs, small_cluster(1, 4))
    assert (got.resource, got.demand_s, got.capacity, got.span_s) == ("gpu", 300.0, 4.0, 40.0)
    assert got.value == pytest.approx(300 / 160)
    assert "1.88" in got.describe()
    assert offered_load(jobs[:1], small_cluster(1, 4)).value is None  # one arrival: no span


def test_offered_load_of_profile_driven_jobs_uses_their_solo_time() -> None:
    # Pollux jobs have no trace duration: their seconds come from the measured profile at the
    # requested size, and a job's GPU-seconds grow with the GPUs it asks for.
    load = load_trace("pollux_workload-1")
    cl = preset("pollux")
    per_job = [offered_load([j], cl).demand_s for j in load.jobs[:20]]
    assert all(d > 0 and math.isfinite(d) for d in per_job)
    harmony = offered_load(load_trace("harmony_80").jobs, preset("harmony"))
    assert harmony.resource == "cpu" and harmony.value is not None and harmony.value > 0


def test_scale_arrivals_multiplies_submit_times_only() -> None:
    jobs = [trace_job("a", 1, 100.0, 0.0), trace_job("b", 1, 100.0, 30.0)]
    scaled = scale_arrivals(jobs, 0.5)
    assert [j.spec.submit_time for j in scaled] == [0.0, 15.0]
    assert [j.truth for j in scaled] == [j.truth for j in jobs]
    for bad in (0, -1.0, math.nan, math.inf, True):
        with pytest.raises(ValueError, match="arrival scale"):
            scale_arrivals(jobs, bad)  # type: ignore[arg-type]


def test_naming_a_cluster_runs_the_full_size_preset_at_recorded_arrivals() -> None:
    assert default_run("philly_82k", "philly", None, "philly")[:2] == ("philly", 1.0)
    assert default_run("alibaba_openb", "alibaba-openb", None, "alibaba-openb")[:2] == ("alibaba-openb", 1.0)
    assert default_run("alibaba_openb", None, 0.5, "alibaba-openb")[:2] == ("alibaba-openb-1in8", 0.5)
    assert default_run("my.csv", None, None, "tiresias") == ("tiresias", 1.0, None)
    assert len(preset("philly").nodes) == 313 and len(preset("alibaba-openb").nodes) == 1213


def test_cli_prints_and_writes_the_offered_load(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["simulate", "--trace", "philly_82k", "--limit", "200", "--policy", "fifo",
                              "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "offered GPU load" in res.output and "philly-800" in res.output
    data = json.loads(out.read_text())
    assert data["cluster"] == "philly-800" and data["arrival_scale"] == 1.0
    assert data["offered_load"]["resource"] == "gpu" and data["offered_load"]["value"] > 0
    res = runner.invoke(app, ["simulate", "--trace", "alibaba_openb", "--limit", "200", "--policy", "fifo",
                              "--cluster", "alibaba-openb", "--arrival-scale", "1", "--json", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert (data["cluster"], data["arrival_scale"]) == ("alibaba-openb", 1.0)
    res = runner.invoke(app, ["simulate", "--trace", "tiresias_480", "--arrival-scale", "0"])
    assert res.exit_code == 2 and "arrival scale" in res.output


def test_the_demos_synthetic_workload_separates_policies() -> None:
    # At the old 120 s mean gap every policy ended at the same 40.21 h makespan (the last long job).
    from cohabit.cli import demo_synthetic_jobs

    jobs = demo_synthetic_jobs(1000, 0)
    cluster = preset("tiresias")
    assert offered_load(jobs, cluster).value > 1.0
    runs = {p: simulate(jobs, cluster, make_policy(p)).metrics for p in ("fifo", "srtf", "tiresias")}
    assert len({round(m.makespan) for m in runs.values()}) == 3, {p: m.makespan for p, m in runs.items()}
    assert runs["fifo"].avg_queueing_delay > 0
    assert runs["srtf"].avg_jct < 0.8 * runs["fifo"].avg_jct


def test_the_smaller_presets_keep_what_the_traces_need() -> None:
    philly = preset("philly-800")
    assert philly.capacity["gpu"] == 800 and philly.nodes[0].capacity == preset("philly").nodes[0].capacity
    assert max(j.spec.num_gpus for j in load_trace("philly_82k").jobs) <= philly.capacity["gpu"]
    full, sample = preset("alibaba-openb"), preset("alibaba-openb-1in8")
    models = {n.labels["gpu_model"] for n in full.nodes}
    assert {n.labels["gpu_model"] for n in sample.nodes} == models
    assert {n.name for n in sample.nodes} < {n.name for n in full.nodes}
    for m in models:  # one node in eight of each model, rounded up
        n_full = sum(n.labels["gpu_model"] == m for n in full.nodes)
        assert sum(n.labels["gpu_model"] == m for n in sample.nodes) == -(-n_full // 8)


def test_alibaba_default_run_covers_the_busy_period_not_the_services_months(tmp_path: Path) -> None:
    """Without its horizon the default run's makespan was set by pods that run for up to 145 days
    (allocated GPU share ~2%); with it the run stops at 48 h, says so, reports the services still
    running (exit code 4: some job did not finish) and the allocated share is that of the busy period."""
    out = tmp_path / "a.json"
    res = runner.invoke(app, ["simulate", "--trace", "alibaba_openb", "--policy", "fifo", "--json", str(out)])
    assert res.exit_code == 4, res.output
    assert "horizon 48 h" in res.output and "still running at the horizon" in res.output
    data = json.loads(out.read_text())
    assert data["horizon"] == 48 * 3600.0
    fifo = data["policies"]["fifo"]
    assert fifo["makespan"] <= 48 * 3600.0
    assert fifo["allocated_share"]["gpu"] > 0.15
    # an explicit --horizon wins over the default run's
    res = runner.invoke(app, ["simulate", "--trace", "alibaba_openb", "--policy", "fifo", "--limit", "300",
                              "--horizon", "3600", "--json", str(out)])
    assert json.loads(out.read_text())["horizon"] == 3600.0
