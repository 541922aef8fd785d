"""Completion criteria enforced by the engine (Rotary §3.1.2): simulator, record, report, real runs."""

from __future__ import annotations

import pytest

from cohabit.engine.criteria import CriteriaBook, CriterionTracker
from cohabit.engine.record import EventKind
from cohabit.policies import FIFO
from cohabit.report.metrics import compute_metrics
from cohabit.report.table import comparison_table
from cohabit.runtime.status import split_heldout
from cohabit.sim.runner import simulate
from cohabit.sim.traces import native
from cohabit.sim.traces import TraceRowError, load_trace
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec.criteria import parse_criterion
from cohabit.spec.job import simple_job

from conftest import small_cluster

ACC = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.91, 0.92)
HELD = (0.48, 0.58, 0.66, 0.78, 0.82, 0.86, 0.9, 0.9)


def crit_job(jid: str, criteria: str | None, *, submit: float = 0.0, held: bool = True,
             iterations: int = 800) -> TraceJob:
    """A 1-GPU job of 8 epochs, 100 s each when alone (1 iteration/s)."""
    spec = simple_job(jid, 1, submit_time=submit, criteria=criteria)
    truth = JobTruth(iterations=iterations, duration=float(iterations), accuracy=ACC,
                     heldout_accuracy=HELD if held else None)
    return TraceJob(spec, truth)


def ends(out) -> dict[str, tuple[EventKind, float, dict]]:
    return {e.job: (e.kind, e.time, e.data) for e in out.result.record
            if e.kind in (EventKind.FINISHED, EventKind.STOPPED)}


def test_criteria_accuracy_target_ends_the_job_finished_at_the_epoch_it_is_met() -> None:
    out = simulate([crit_job("a", "accuracy >= 0.8 within 8 epochs")], small_cluster(1, 1), FIFO())
    kind, t, d = ends(out)["a"]
    assert kind is EventKind.FINISHED and t == pytest.approx(400.0)  # epoch 4 reaches 0.8, not 800 s
    assert d["attained"] is True and d["reached"] == pytest.approx(0.8) and d["epochs"] == 4
    assert d["heldout"] == pytest.approx(0.78) and d["false_attained"] is True  # held-out 0.78 < 0.8
    assert str(out.result.jobs["a"].state) == "finished"


def test_criteria_epoch_budget_runs_out_and_the_job_is_stopped_not_attained() -> None:
    out = simulate([crit_job("b", "accuracy >= 0.95 within 5 epochs")], small_cluster(1, 1), FIFO())
    kind, t, d = ends(out)["b"]
    assert kind is EventKind.STOPPED and t == pytest.approx(500.0)
    assert d["attained"] is False and d["false_attained"] is None and d["reached"] == pytest.approx(0.85)
    assert str(out.result.jobs["b"].state) == "stopped-early"


def test_criteria_convergence_and_runtime_criteria() -> None:
    jobs = [crit_job("c", "converge delta 0.02 within 8 epochs"), crit_job("r", "run 3 epochs")]
    out = simulate(jobs, small_cluster(1, 2), FIFO())
    e = ends(out)
    # 0.90 -> 0.91 is the first gain below 0.02 (epoch 7); held-out still gains 0.04 there: false
    assert e["c"][0] is EventKind.FINISHED and e["c"][1] == pytest.approx(700.0)
    assert e["c"][2]["false_attained"] is True
    assert e["r"][0] is EventKind.FINISHED and e["r"][1] == pytest.approx(300.0)
    assert e["r"][2]["attained"] is True and e["r"][2]["false_attained"] is False


def test_criteria_time_deadline_stops_a_job_still_waiting_for_a_gpu() -> None:
    jobs = [crit_job("first", None), crit_job("late", "accuracy >= 0.9 within 150s", submit=10.0)]
    out = simulate(jobs, small_cluster(1, 1), FIFO())
    e = ends(out)
    assert e["late"][0] is EventKind.STOPPED and e["late"][1] == pytest.approx(160.0)
    assert e["late"][2]["evaluations"] == 0 and e["late"][2]["attained"] is False
    assert "attained" not in e["first"][2]  # a job without criteria runs its whole length, as before
    assert e["first"][0] is EventKind.FINISHED and e["first"][1] == pytest.approx(800.0)


def test_criteria_job_whose_work_ends_first_is_finished_but_not_attained() -> None:
    out = simulate([crit_job("x", "accuracy >= 0.99 within 100 epochs")], small_cluster(1, 1), FIFO())
    kind, t, d = ends(out)["x"]
    assert kind is EventKind.FINISHED and t == pytest.approx(800.0) and d["attained"] is False
    assert d["reason"].startswith("its work ended before its criterion was met")


def test_criteria_attainment_is_reported_in_metrics_json_and_table() -> None:
    jobs = [crit_job("a", "accuracy >= 0.8 within 8 epochs"), crit_job("b", "accuracy >= 0.95 within 5 epochs"),
            crit_job("n", None)]
    out = simulate(jobs, small_cluster(1, 3), FIFO())
    m = compute_metrics(out.result.record, small_cluster(1, 3).capacity)
    a = m.attainment
    assert a is not None and (a.jobs_with_criteria, a.attained, a.false_attained) == (2, 1, 1)
    assert a.mean_reached == pytest.approx((0.8 + 0.85) / 2) and a.attained_times == [400.0]
    assert a.attained_by(399.0) == 0 and a.attained_by(400.0) == 1
    js = m.to_json()["attainment"]
    assert js["attained"] == 1 and js["by_kind"] == {"accuracy": {"jobs": 2, "attained": 1}}
    assert js["per_job"]["a"]["attained"] is True and js["per_job"]["b"]["attained"] is False
    assert js["per_job"]["a"]["heldout"] == pytest.approx(0.78) and "n" not in js["per_job"]
    table = comparison_table({"fifo": m})
    headers = " ".join(str(c.header) for c in table.columns)
    assert "tained" in headers and "attain" in headers


def test_criteria_no_attainment_without_criteria() -> None:
    out = simulate([crit_job("n", None)], small_cluster(1, 1), FIFO())
    m = compute_metrics(out.result.record, small_cluster(1, 1).capacity)
    assert m.attainment is None and "attainment" not in m.to_json()


def test_tracker_counts_an_epoch_once_when_reports_repeat_it() -> None:
    # a real worker repeats its latest evaluation in every progress report until the next epoch
    tr = CriterionTracker(parse_criterion("converge delta 0.01 within 10 epochs"), 0.0)
    assert tr.observe({"accuracy": 0.5, "epoch": 1.0}, 10)
    assert not tr.observe({"accuracy": 0.5, "epoch": 1.0}, 15)  # same evaluation: no gain of 0
    assert tr.verdict(1.0, 1.0) is None
    assert tr.observe({"accuracy": 0.6, "epoch": 2.0}, 20)
    assert tr.verdict(2.0, 2.0) is None and tr.series("accuracy") == [0.5, 0.6]
    assert tr.observe({"accuracy": 0.605, "epoch": 3.0}, 30)
    v = tr.verdict(3.0, 3.0)
    assert v is not None and v.attained


def test_tracker_run_duration_counts_running_time_and_within_counts_from_submission() -> None:
    run = CriterionTracker(parse_criterion("run 100s"), submit_time=0.0)
    assert run.verdict(now=500.0, run_time=99.0) is None  # waited 400 s: not running time
    assert run.verdict(now=501.0, run_time=100.0).attained
    dl = CriterionTracker(parse_criterion("accuracy >= 0.9 within 100s"), submit_time=50.0)
    assert dl.verdict(now=149.0, run_time=0.0) is None
    v = dl.verdict(now=150.0, run_time=0.0)
    assert v is not None and not v.attained


def test_book_keeps_heldout_values_out_of_the_tracker() -> None:
    book = CriteriaBook()
    spec = simple_job("h", 1, criteria="accuracy >= 0.7 within 5 epochs")
    tr = book.admit("h", spec)
    book.observe("h", {"iterations": 10, "metrics": {"accuracy": 0.75, "epoch": 1.0},
                       "heldout": {"accuracy": 0.6}})
    assert tr.series("accuracy") == [0.75] and 0.6 not in tr.series("accuracy")
    assert all(0.6 not in v for v in tr._values.values())
    out = book.outcome("h", attained=True)
    assert out["heldout"] == 0.6 and out["false_attained"] is True


def test_local_backend_moves_heldout_metrics_out_of_what_policies_see() -> None:
    got = split_heldout({"accuracy": 0.8, "heldout_accuracy": 0.7, "loss": 0.3})
    assert got == {"metrics": {"accuracy": 0.8, "loss": 0.3}, "heldout": {"accuracy": 0.7}}
    assert split_heldout({"loss": 1.0}) == {"metrics": {"loss": 1.0}}


def test_native_trace_reads_and_writes_accuracy_curves(tmp_path) -> None:
    jobs = [crit_job("a", "accuracy >= 0.8 within 8 epochs")]
    path = tmp_path / "t.yaml"
    native.dump(jobs, path)

    back = load_trace(path, "cohabit").jobs
    assert back[0].truth.accuracy == ACC and back[0].truth.heldout_accuracy == HELD
    assert str(back[0].spec.criteria) == "accuracy >= 0.8 within 8 epochs"
    path.write_text("jobs:\n  - id: a\n    gpus: 1\n    truth: {iterations: 10, accuracy: [0.5, x]}\n")
    with pytest.raises(TraceRowError, match=r"t.yaml:4.*truth.accuracy.*list of numbers"):
        load_trace(path, "cohabit")


def test_criteria_budget_running_out_as_the_work_ends_is_a_stop() -> None:
    # 5 epochs of work, a 5-epoch budget, a target never reached: the last evaluation and the end coincide
    job = TraceJob(simple_job("s", 1, criteria="accuracy >= 0.99 within 5 epochs"),
                   JobTruth(iterations=500, duration=500.0, accuracy=ACC[:5]))
    out = simulate([job], small_cluster(1, 1), FIFO())
    kind, t, d = ends(out)["s"]
    assert kind is EventKind.STOPPED and t == pytest.approx(500.0) and d["attained"] is False


def test_policies_never_see_heldout_values() -> None:
    seen: list[dict] = []

    class Spy(FIFO):
        def decide(self, view):
            for j in view.jobs.values():
                seen.append({k: [v for _, v in pts] for k, pts in j.metrics.items()})
                if j.criterion is not None:
                    seen.append({"tracked": j.criterion.series("accuracy")})
            return super().decide(view)

    simulate([crit_job("a", "accuracy >= 0.9 within 8 epochs")], small_cluster(1, 1), Spy())
    shown = [x for d in seen for v in d.values() for x in v]
    assert any(x in ACC for x in shown)  # the reported accuracy is visible...
    assert not set(HELD) - set(ACC) & set(shown)  # ...the held-out values are not
    assert all("heldout" not in k for d in seen for k in d)


def test_criteria_run_duration_wakes_the_loop_between_reports() -> None:
    # epochs end every 100 s; 'run 250s' ends the job at 250 s of running, between two evaluations
    out = simulate([crit_job("r", "run 250s", submit=5.0)], small_cluster(1, 1), FIFO())
    kind, t, d = ends(out)["r"]
    assert kind is EventKind.FINISHED and t == pytest.approx(255.0) and d["attained"] is True
