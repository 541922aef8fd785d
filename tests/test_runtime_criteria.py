"""Completion criteria on real processes: a torch job stops when its criterion is met, or at its budget."""

from __future__ import annotations

from cohabit.engine.record import Event, EventKind
from cohabit.policies import make_policy
from cohabit.runtime.runner import run_local
from cohabit.spec import Resources
from cohabit.spec.job import JobSpec, TaskGroup

from runtime_helpers import cluster, no_orphans  # noqa: F401


def torch_job(jid: str, criteria: str, seed: int) -> JobSpec:
    return JobSpec(id=jid, model="torch-mlp", epochs=20, batch_size=32, criteria=criteria,
                   workers=TaskGroup(count=1, demand=Resources(cpu=1, mem_gb=0.5)),
                   workload={"name": "torch-mlp", "n_samples": 1200, "hidden": 16, "seed": seed})


ENDS = (EventKind.FINISHED, EventKind.STOPPED)


def ended_on_first_turn_at_or_after(record: list[Event], job: str, due: float) -> bool:
    """True when ``job`` ended on the loop's first turn at or after ``due`` (on its own clock).

    The loop stamps every event of a turn with that turn's clock reading and checks the time budgets
    that fell due in every turn, so a budget enforced on time leaves no event stamped in [due, end)
    before the end: the check holds however loaded the machine is, and fails when the budget is
    counted wrongly (a later turn ends the job, or it ends before ``due``). ``1e-6`` absorbs float
    rounding of the budget's sum of running intervals.
    """
    k, end = next((k, e) for k, e in enumerate(record) if e.job == job and e.kind in ENDS)
    return end.time >= due - 1e-6 and all(e.time < due + 1e-6 or e.time == end.time for e in record[:k])


def test_real_jobs_end_on_their_criteria(tmp_path, no_orphans) -> None:  # noqa: F811
    specs = [torch_job("reach", "accuracy >= 0.6 within 20 epochs", 1),
             torch_job("budget", "accuracy >= 0.999 within 2 epochs", 2)]
    out = run_local(specs, cluster(2), make_policy("rotary"), root=tmp_path, strict=True)
    ends = {e.job: e for e in out.result.record if e.kind in (EventKind.FINISHED, EventKind.STOPPED)}
    reach, budget = ends["reach"], ends["budget"]
    ipe = 960 // 32  # 1200 samples, 20% held out, batch 32
    # met long before its 20 declared epochs: finished, attained, checkpointed where it stopped
    assert reach.kind is EventKind.FINISHED and reach.data["attained"] is True
    assert reach.data["reached"] >= 0.6 and reach.data["heldout"] is not None
    assert 1 <= reach.data["epochs"] < 20 and out.status["reach"].iterations < 20 * ipe
    assert str(out.result.jobs["reach"].state) == "finished"
    # the 2-epoch budget runs out: stopped, not attained, judged on exactly 2 evaluations (the worker may
    # train a few more ~5 ms epochs before the halt reaches it: the halt is asynchronous)
    assert budget.kind is EventKind.STOPPED and budget.data["attained"] is False
    assert budget.data["evaluations"] == 2 and budget.data["epochs"] >= 2.0
    att = out.metrics.attainment
    assert att is not None and (att.jobs_with_criteria, att.attained) == (2, 1)


def test_real_jobs_end_on_convergence_runtime_and_deadline_criteria(tmp_path, no_orphans) -> None:  # noqa: F811
    """Convergence, ``run N epochs``, ``run Ns`` and ``within <seconds>`` on real torch processes."""
    specs = [torch_job("converge", "converge delta 0.05 within 40 epochs", 3),
             torch_job("epochs", "run 3 epochs", 4),
             torch_job("seconds", "run 3s", 5),
             torch_job("deadline", "accuracy >= 0.999 within 4s", 6)]
    # 4,000 declared epochs: far more than any of them may run (on a quiet machine 400 epochs took under
    # 4 s, so the deadline job ended its work before its deadline)
    specs = [s.model_copy(update={"epochs": 4000}) if s.id != "converge" else s for s in specs]
    out = run_local(specs, cluster(4), make_policy("fifo"), root=tmp_path, strict=True)
    rec = list(out.result.record)
    ends = {e.job: e for e in rec if e.kind in ENDS}
    starts = {e.job: e.time for e in rec if e.kind is EventKind.STARTED}
    ipe = 960 // 32
    # convergence: finished and attained at the first evaluation whose gain is below the delta
    conv = ends["converge"]
    assert conv.kind is EventKind.FINISHED and conv.data["attained"] is True
    n = conv.data["evaluations"]
    # every evaluation judged (none folded away by a slow poll): the n-th one is epoch n
    assert conv.data["epochs"] == float(n)
    series = [v for it, v in dict(out.result.jobs["converge"].metrics["accuracy"]).items() if it % ipe == 0]
    assert 2 <= n < 40 and len(series) == n
    assert series[-1] - series[-2] < 0.05
    assert all(b - a >= 0.05 for a, b in zip(series[:-2], series[1:-1]))  # not met earlier
    # run 3 epochs: finished, attained, judged on its third evaluation (epoch 3), far short of its 4,000
    ep = ends["epochs"]
    assert ep.kind is EventKind.FINISHED and ep.data["attained"] is True
    assert (ep.data["evaluations"], ep.data["epochs"]) == (3, 3.0)
    assert out.status["epochs"].iterations < 4000 * ipe
    # run 3s: finished, attained, by its runtime criterion, on the first turn after 3 s of running (never
    # paused), far short of its 4,000 declared epochs
    sec = ends["seconds"]
    assert sec.kind is EventKind.FINISHED and sec.data["attained"] is True
    assert sec.data["criterion_kind"] == "runtime" and sec.data["reason"].startswith("ran 3s")
    assert not any(e.kind is EventKind.PAUSED for e in rec if e.job == "seconds")
    assert ended_on_first_turn_at_or_after(rec, "seconds", starts["seconds"] + 3.0)
    assert out.status["seconds"].iterations < 4000 * ipe
    # within 4s of submission, never reached: stopped, not attained, at the deadline
    dl = ends["deadline"]
    assert dl.kind is EventKind.STOPPED and dl.data["attained"] is False
    assert dl.data["reason"].startswith("budget ran out before the criterion was met")
    # the budget counts from the spec's submit time (0), not from when the loop took the submission
    assert ended_on_first_turn_at_or_after(rec, "deadline", specs[3].submit_time + 4.0)
    assert out.status["deadline"].iterations < 4000 * ipe  # (under load it may be stopped before its first epoch)
    att = out.metrics.attainment
    assert att is not None and (att.jobs_with_criteria, att.attained) == (4, 3)
    assert {str(out.result.jobs[j].state) for j in ("converge", "epochs", "seconds")} == {"finished"}
    assert str(out.result.jobs["deadline"].state) == "stopped-early"
