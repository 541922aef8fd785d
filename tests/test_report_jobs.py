"""Per-job results: each job's submit, start, end, JCT, queueing, preemptions and final state, in the JSON."""

from __future__ import annotations

import json
import math

import numpy as np
from typer.testing import CliRunner

from cohabit.cli import app
from cohabit.engine.record import EventKind as K
from cohabit.engine.record import Record
from cohabit.report import compute_metrics
from cohabit.spec import Resources

CAP = Resources(gpu=4)


def mixed_record() -> Record:
    r = Record()
    r.append(0, K.SUBMITTED, "a")
    r.append(1, K.SUBMITTED, "b")
    r.append(1, K.REJECTED, "b", reason="too big")
    r.append(2, K.SUBMITTED, "c")
    r.append(3, K.STARTED, "c", alloc={"gpu": 1}, nodes=[0])
    r.append(4, K.SUBMITTED, "d")
    r.append(5, K.STARTED, "a", alloc={"gpu": 2}, nodes=[0])
    r.append(9, K.FAILED, "c", reason="crash")
    r.append(10, K.PAUSED, "a")
    r.append(12, K.RESUMED, "a", alloc={"gpu": 2}, nodes=[0])
    r.append(14, K.PAUSED, "a")
    r.append(15, K.RESUMED, "a", alloc={"gpu": 2}, nodes=[0])
    r.append(20, K.FINISHED, "a")
    r.append(21, K.SUBMITTED, "e")
    r.append(22, K.STARTED, "e", alloc={"gpu": 1}, nodes=[0])
    r.append(30, K.FINISHED, "e")
    return r


def test_job_results_columns_from_the_record() -> None:
    m = compute_metrics(mixed_record(), CAP, horizon=40)
    j = m.jobs
    assert j is not None and len(j) == 5
    assert j.ids == ["a", "b", "c", "d", "e"]
    assert j.states == ["finished", "rejected", "failed", "pending", "finished"]
    assert j.submit.tolist() == [0, 1, 2, 4, 21]
    np.testing.assert_array_equal(j.start, [5, np.nan, 3, np.nan, 22])
    np.testing.assert_array_equal(j.end, [20, np.nan, 9, np.nan, 30])
    np.testing.assert_array_equal(j.jct, [20, np.nan, np.nan, np.nan, 9])
    np.testing.assert_array_equal(j.queueing, [5, np.nan, 1, np.nan, 1])
    assert j.preemptions.tolist() == [2, 0, 0, 0, 0]
    # the totals are the per-job values' means and counts
    assert m.avg_jct == np.nanmean(j.jct) and m.avg_queueing_delay == np.nanmean(j.queueing)
    assert m.preemptions == j.preemptions.sum()
    doc = m.to_json(jobs=True)["jobs"]
    assert doc == {"id": ["a", "b", "c", "d", "e"], "submit": [0, 1, 2, 4, 21], "start": [5, None, 3, None, 22],
                   "end": [20, None, 9, None, 30], "jct": [20, None, None, None, 9],
                   "queueing": [5, None, 1, None, 1], "preemptions": [2, 0, 0, 0, 0],
                   "state": ["finished", "rejected", "failed", "pending", "finished"]}
    assert "jobs" not in m.to_json()  # opt-in: benchmark JSONs stay small


def test_simulate_json_carries_per_job_results(tmp_path) -> None:
    out = tmp_path / "r.json"
    res = CliRunner().invoke(app, ["simulate", "--trace", "tiresias_480", "--limit", "40", "--policy", "fifo,srtf",
                                   "--json", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    for name, m in data["policies"].items():
        jobs = m["jobs"]
        assert set(jobs) == {"id", "submit", "start", "end", "jct", "queueing", "preemptions", "state"}
        assert all(len(v) == 40 for v in jobs.values()), name
        assert jobs["state"].count("finished") == m["jobs_finished"] == 40
        assert math.isclose(sum(jobs["jct"]) / 40, m["avg_jct"], rel_tol=1e-6)
        assert sum(jobs["preemptions"]) == m["preemptions"]
        assert all(abs(e - s - j) <= 2e-3 for s, e, j in zip(jobs["submit"], jobs["end"], jobs["jct"]))


def test_run_json_carries_per_job_results(tmp_path) -> None:
    """`cohabit run --json` (real execution) writes the same per-job block next to the real outcomes."""
    from types import SimpleNamespace

    from cohabit.runtime.cli import write_json
    from cohabit.spec.cluster import preset

    out = SimpleNamespace(metrics=compute_metrics(mixed_record(), CAP, horizon=40), status={}, timings={})
    path = tmp_path / "real.json"
    write_json(path, {"fifo": out}, jobs="jobs.yaml", cluster=preset("tiresias"))
    jobs = json.loads(path.read_text())["policies"]["fifo"]["jobs"]
    assert jobs["state"] == ["finished", "rejected", "failed", "pending", "finished"]
    assert jobs["preemptions"] == [2, 0, 0, 0, 0]
