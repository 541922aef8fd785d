"""Rotary-DLT (Alg. 5, Alg. 6) and its baselines SRF, BCF, LAF, RR in the simulator."""

from __future__ import annotations

import math

import pytest

from cohabit.engine.record import EventKind
from cohabit.policies import make_policy
from cohabit.policies.rotary import RotaryDLT, job_traits
from cohabit.repository import JobRecord, JobRepository
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import ClusterSpec, NodeSpec, Resources
from cohabit.spec.job import JobSpec, TaskGroup

EPOCH_S = 100.0  # one epoch = 100 iterations of 1 s


def gpus(n: int = 1, mem_gb_per_gpu: float = 8.0) -> ClusterSpec:
    return ClusterSpec(name="t", nodes=(NodeSpec(name="n0", capacity=Resources(
        gpu=n, cpu=8 * n, mem_gb=64 * n, gpu_mem_gb=mem_gb_per_gpu * n)),))


def curve_to(target_epoch: int, n: int = 10, lo: float = 0.3, hi: float = 0.9) -> tuple[float, ...]:
    """Accuracy rising linearly to ``hi`` at ``target_epoch``, flat after."""
    return tuple(lo + (hi - lo) * min(e, target_epoch) / target_epoch for e in range(1, n + 1))


def job(jid: str, criteria: str, curve: tuple[float, ...], *, model: str = "m", submit: float = 0.0,
        params: int = 1_000_000, bs: int = 32) -> TraceJob:
    n = len(curve)
    spec = JobSpec(id=jid, submit_time=submit, model=model, batch_size=bs, epochs=n, iterations=100 * n,
                   criteria=criteria, workers=TaskGroup(count=1, demand=Resources(gpu=1, cpu=4, mem_gb=16)),
                   workload={"dataset": "d", "optimizer": "SGD", "lr": 0.01, "num_parameters": params})
    return TraceJob(spec, JobTruth(iterations=100 * n, duration=100.0 * n, accuracy=curve))


def repo_with(tmp_path, records: list[JobRecord]) -> str:
    path = tmp_path / "repo.sqlite"
    with JobRepository(path) as r:
        r.add_many(records)
    return str(path)


def history(model: str, target_epoch: int, mem: float | None = None, bs: int = 32, params: int = 1_000_000) -> JobRecord:
    return JobRecord(model=model, dataset="d", accuracy=curve_to(target_epoch, 20), num_parameters=params,
                     batch_size=bs, optimizer="SGD", learning_rate=0.01, peak_mem_mb=mem)


def starts(out) -> list[tuple[float, str]]:
    return [(e.time, e.job) for e in out.result.record if e.kind in (EventKind.STARTED, EventKind.RESUMED)]


def attained_at(out) -> dict[str, float]:
    return {e.job: e.time for e in out.result.record if e.kind is EventKind.FINISHED and e.data.get("attained")}


@pytest.fixture
def two_jobs(tmp_path):
    """'easy' attains at epoch 2, 'hard' at epoch 8; the repository knows both kinds of curve."""
    repo = repo_with(tmp_path, [history("easy", 2)] * 5 + [history("hard", 8)] * 5)  # TEE's top-5 per model
    jobs = [job("hard", "accuracy >= 0.9 within 10 epochs", curve_to(8), model="hard"),
            job("easy", "accuracy >= 0.9 within 10 epochs", curve_to(2), model="easy")]
    return repo, jobs


def test_rotary_efficiency_runs_the_job_closest_to_attainment_first(two_jobs) -> None:
    repo, jobs = two_jobs
    out = simulate(jobs, gpus(1), make_policy(f"rotary:threshold=0:repo={repo}"))
    assert starts(out)[0][1] == "easy"
    done = attained_at(out)
    assert done["easy"] == pytest.approx(2 * EPOCH_S)  # two epochs, never preempted
    assert done["hard"] > done["easy"]


def test_rotary_fairness_runs_the_job_furthest_from_attainment_first(two_jobs) -> None:
    repo, jobs = two_jobs
    out = simulate(jobs, gpus(1), make_policy(f"rotary:threshold=1:repo={repo}"))
    order = [j for _, j in starts(out)]
    assert order[0] == "hard"
    assert order[:4] == ["hard", "easy", "hard", "easy"]  # alternates epoch by epoch while the gap allows


def test_rotary_preempts_only_at_epoch_ends_with_a_checkpoint(two_jobs) -> None:
    repo, jobs = two_jobs
    out = simulate(jobs, gpus(1), make_policy(f"rotary:threshold=1:repo={repo}"))
    rec = list(out.result.record)
    pauses = [e for e in rec if e.kind is EventKind.PAUSED]
    assert pauses
    for p in pauses:
        last = [e for e in rec if e.job == p.job and e.kind is EventKind.PROGRESS and e.time <= p.time][-1]
        assert last.time == p.time and last.data["iterations"] % 100 == pytest.approx(0, abs=1e-6)


def test_rotary_switches_from_fairness_to_efficiency_at_the_threshold(two_jobs) -> None:
    repo, jobs = two_jobs
    pol = RotaryDLT(threshold=0.4, repo=repo)
    simulate(jobs, gpus(1), pol)
    assert pol.fair_decisions > 0 and pol.efficient_decisions > 0
    never = RotaryDLT(threshold=1.0, repo=repo)
    simulate(jobs, gpus(1), never)
    assert never.efficient_decisions == 0


def test_rotary_progress_per_criterion_type(tmp_path) -> None:
    log_curve = tuple(0.5 + 0.2 * math.log(e) for e in range(1, 11))  # TEE's model fits it exactly
    rec = JobRecord(model="m", dataset="d", accuracy=log_curve, num_parameters=1_000_000, batch_size=32,
                    optimizer="SGD", learning_rate=0.01)
    repo = repo_with(tmp_path, [rec] * 5)
    target = 0.5 + 0.2 * math.log(4) - 1e-9  # reached at epoch 4
    jobs = [job("run", "run 5 epochs", log_curve), job("acc", f"accuracy >= {target!r} within 10 epochs", log_curve),
            job("far", "accuracy >= 0.99 within 8 epochs", log_curve)]
    seen: dict[str, list[float]] = {}

    class Spy(RotaryDLT):
        def rank(self, view, js):
            for j in js:
                seen.setdefault(j.id, []).append(self.progress(view, j))
            return super().rank(view, js)

    simulate(jobs, gpus(3), Spy(repo=repo, threshold=1.0))
    assert seen["run"][0] == 0.0 and max(seen["run"]) == pytest.approx(4 / 5)  # e*/e before the last epoch
    # accuracy: TEE says epoch 4 -> phi = e*/min(4, 10) before attaining
    # (between epoch ends e* counts reported iterations: the first iteration is 1/100 epoch)
    acc = set(round(x, 4) for x in seen["acc"])
    assert {0.25, 0.5, 0.75} <= acc and max(acc) < 1.0 and 0.125 not in acc
    # 0.99 is never reached on this curve: progress toward the budget, e*/8
    far = set(round(x, 4) for x in seen["far"])
    assert {0.125, 0.25, 0.375} <= far


def test_rotary_random_estimator_is_seeded_and_ignores_the_data(two_jobs) -> None:
    repo, jobs = two_jobs
    a = simulate(jobs, gpus(1), make_policy(f"rotary:threshold=0:estimator=random:repo={repo}:seed=3"))
    b = simulate(jobs, gpus(1), make_policy(f"rotary:threshold=0:estimator=random:repo={repo}:seed=3"))
    assert starts(a) == starts(b)
    pol = RotaryDLT(estimator="random", repo=repo)
    assert pol._estimated_epochs.__doc__  # noqa: SLF001 - documented hook
    with pytest.raises(ValueError, match="estimator"):
        RotaryDLT(estimator="oracle")
    with pytest.raises(ValueError, match="threshold"):
        RotaryDLT(threshold=1.5)


def test_rotary_memory_check_keeps_a_job_that_would_not_fit_off_the_gpu(tmp_path) -> None:
    # TME: similar by model size; big models needed 12-14 GB at batch 32-64, small ones 2-3 GB
    repo = repo_with(tmp_path, [history("big", 2, mem=12_000.0, params=100_000_000),
                                history("big", 2, mem=14_000.0, bs=64, params=100_000_000),
                                history("small", 2, mem=2_000.0), history("small", 2, mem=3_000.0, bs=64)])
    jobs = [job("big", "accuracy >= 0.9 within 3 epochs", curve_to(2), model="big", params=100_000_000),
            job("small", "accuracy >= 0.9 within 3 epochs", curve_to(2), model="small")]
    out = simulate(jobs, gpus(2, mem_gb_per_gpu=8.0), RotaryDLT(repo=repo))
    started = {j for _, j in starts(out)}
    assert started == {"small"}  # big: ~12 GB x 1.05 > 8 GB per GPU, although a GPU is free
    assert str(out.result.jobs["big"].state) != "finished"
    out16 = simulate(jobs, gpus(2, mem_gb_per_gpu=16.0), RotaryDLT(repo=repo))
    assert {j for _, j in starts(out16)} == {"big", "small"}


def test_rotary_learns_from_finished_jobs_and_can_record_them(tmp_path) -> None:
    path = tmp_path / "r.sqlite"
    JobRepository(path).close()
    pol = RotaryDLT(repo=str(path), record=True)
    simulate([job("a", "accuracy >= 0.9 within 10 epochs", curve_to(3))], gpus(1), pol)
    assert len(pol.tee.history) == 1 and pol.tee.history[0].accuracy == curve_to(3)[:3]
    with JobRepository(path) as r:
        rows = r.records()
    assert len(rows) == 1 and rows[0].model == "m" and rows[0].source == "run"
    assert rows[0].timings and rows[0].timings[0].step_s == pytest.approx(1.0)
    with pytest.raises(ValueError, match="repo"):
        RotaryDLT(record=True)


def test_job_traits_read_the_spec() -> None:
    t = job_traits(job("a", "run 1 epochs", (0.5,), bs=64).spec)
    assert (t.model, t.dataset, t.batch_size, t.optimizer, t.learning_rate, t.num_parameters) == \
        ("m", "d", 64, "SGD", 0.01, 1_000_000)


@pytest.mark.parametrize("policy, jobs, first", [
    ("srf", [("long", "run 6 epochs"), ("acc", "accuracy >= 0.99 within 3 epochs"), ("short", "run 2 epochs")],
     ["short", "long"]),
    ("bcf", [("tight", "converge delta 0.0001 within 5 epochs"), ("run", "run 2 epochs"),
             ("loose", "converge delta 0.05 within 5 epochs")], ["loose", "tight"]),
    ("laf", [("high", "accuracy >= 0.95 within 5 epochs"), ("run", "run 2 epochs"),
             ("low", "accuracy >= 0.5 within 5 epochs")], ["low", "high"]),
])
def test_baselines_run_their_favoured_criteria_first(policy, jobs, first) -> None:
    trace = [job(j, c, curve_to(3, n=6)) for j, c in jobs]
    out = simulate(trace, gpus(1), make_policy(policy))
    assert [j for _, j in starts(out)][:2] == first


def test_round_robin_rotates_one_epoch_at_a_time() -> None:
    trace = [job(j, "run 3 epochs", curve_to(3, n=3)) for j in ("a", "b", "c")]
    out = simulate(trace, gpus(1), make_policy("rr"))
    assert [j for _, j in starts(out)] == ["a", "b", "c"] * 3
    assert all(e.data["attained"] for e in out.result.record if e.kind is EventKind.FINISHED)


def test_other_jobs_are_round_robin_under_the_baselines() -> None:
    trace = [job(j, "accuracy >= 0.99 within 2 epochs", curve_to(3, n=3)) for j in ("a", "b")]
    out = simulate(trace, gpus(1), make_policy("srf"))
    assert [j for _, j in starts(out)] == ["a", "b", "a", "b"]
    assert not math.isnan(out.metrics.makespan or math.nan)


def test_rotary_bad_repository_is_a_clear_error(tmp_path) -> None:
    from cohabit.policies import PolicyParamError

    with pytest.raises(PolicyParamError, match="no repository file at"):
        make_policy(f"rotary:repo={tmp_path / 'missing.sqlite'}")
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database")
    with pytest.raises(PolicyParamError, match="cannot read the repository"):
        make_policy(f"rotary:repo={bad}")
    fresh = tmp_path / "new.sqlite"
    make_policy(f"rotary:repo={fresh}:record=true")  # record=true starts a repository
    assert fresh.exists()
