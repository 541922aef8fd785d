"""The information barrier: nothing a policy can reach leads to the simulator's ground truth."""

from __future__ import annotations

import gc
import types

import numpy as np
import pytest

from cohabit.engine.oracle import Oracle
from cohabit.engine.view import ClusterView
from cohabit.policies import FIFO, SRTF, make_policy
from cohabit.sim.backend import SimBackend
from cohabit.sim.physics import POLLUX_ARTIFACT
from cohabit.sim.pollux_goodput import PolluxWork
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace
from cohabit.sim.truth import JobTruth, TraceJob

from conftest import small_cluster, trace_job

FORBIDDEN = (SimBackend, JobTruth, TraceJob, Oracle, PolluxWork)


def reachable(*roots: object, limit: int = 200_000) -> list[object]:
    """Every object reachable from ``roots`` through references (gc.get_referents), bounded.

    Modules, classes and functions are not followed: they are the program's shared code,
    not per-run data (a policy importing the simulator module is caught by the import test).
    """
    seen: set[int] = set()
    out: list[object] = []
    stack = list(roots)
    while stack and len(out) < limit:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        out.append(obj)
        if isinstance(obj, (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType)):
            continue
        if isinstance(obj, np.ndarray) and obj.base is not None and not isinstance(obj.base, np.ndarray):
            continue
        stack.extend(gc.get_referents(obj))
    return out


class Spy(FIFO):
    """FIFO that keeps every view and job it was shown, to walk them afterwards."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[object] = []

    def decide(self, view: ClusterView):  # type: ignore[override]
        self.seen.append(view)
        self.seen.extend(view.jobs.values())
        return super().decide(view)

    def on_finish(self, job, view) -> None:
        self.seen.append(job)


def test_view_and_jobs_do_not_reach_ground_truth() -> None:
    jobs = [trace_job(f"j{i}", 1 + i % 2, 50 + 10 * i, submit=i * 5) for i in range(6)]
    spy = Spy()
    simulate(jobs, small_cluster(2, 2), spy)
    leaks = [o for o in reachable(spy, *spy.seen) if isinstance(o, FORBIDDEN)]
    assert spy.seen, "the spy must have been called"
    assert leaks == []


def test_the_walk_would_find_a_leak() -> None:
    # the check can fail: a view that did hold the backend is caught
    backend = SimBackend([trace_job("x", 1, 10)])
    holder = {"oops": backend}
    assert any(isinstance(o, SimBackend) for o in reachable(holder))


def test_oracle_policy_is_refused_without_explicit_permission() -> None:
    jobs = [trace_job("a", 1, 10)]
    with pytest.raises(ValueError, match="--oracle"):
        simulate(jobs, small_cluster(1, 1), SRTF(use_oracle=True))


def test_non_oracle_policy_never_gets_the_oracle_even_if_allowed() -> None:
    policy = make_policy("fifo", oracle=True)
    spy_jobs = [trace_job("a", 1, 10)]
    simulate(spy_jobs, small_cluster(1, 1), policy, oracle=True)
    assert not any(isinstance(o, FORBIDDEN) for o in reachable(policy))


def pollux_jobs(tmp_path) -> list[TraceJob]:  # type: ignore[no-untyped-def]
    """Jobs of the Pollux applications: the oracle holds a true work model (PolluxWork) for each."""
    path = tmp_path / "pollux.csv"
    path.write_text("name,time,application,num_replicas,batch_size\nn1,0,ncf,1,32768\nn2,30,ncf,1,32768\n"
                    "n3,0,ncf,2,32768\n")
    return load_trace(str(path), "pollux").jobs


def test_plain_optimus_never_gets_the_true_work_model_even_if_the_oracle_is_allowed(tmp_path) -> None:
    """cohabit's optimus learns remaining work and speed from reports; with --oracle allowed it still
    holds nothing of the truth (optimus-oracle is the variant that reads it)."""
    policy = make_policy("optimus", oracle=True)
    out = simulate(pollux_jobs(tmp_path), small_cluster(1, 4), policy, config=POLLUX_ARTIFACT, oracle=True)
    assert out.metrics.jobs_finished == 3 and not policy.uses_oracle
    assert not any(isinstance(o, FORBIDDEN) for o in reachable(policy))


def test_only_a_policy_declaring_the_oracle_gets_the_work_model(tmp_path) -> None:
    jobs = pollux_jobs(tmp_path)
    with pytest.raises(ValueError, match="--oracle"):
        simulate(jobs, small_cluster(1, 4), make_policy("optimus-oracle"), config=POLLUX_ARTIFACT)
    policy = make_policy("optimus-oracle")
    simulate(jobs, small_cluster(1, 4), policy, config=POLLUX_ARTIFACT, oracle=True)
    held = reachable(policy)
    assert any(isinstance(o, Oracle) for o in held) and any(isinstance(o, PolluxWork) for o in held)


def test_policies_cannot_mutate_what_they_see() -> None:
    seen: dict[str, object] = {}

    class Meddler(FIFO):
        def decide(self, view):  # type: ignore[override]
            if view.pending and "done" not in seen:
                seen["done"] = True
                with pytest.raises(ValueError):
                    view.free[0, 0] = 1e9  # read-only array
                with pytest.raises(TypeError):
                    view.pending["x"] = None  # type: ignore[index]
                job = next(iter(view.pending.values()))
                with pytest.raises(AttributeError):
                    job.state = "finished"  # type: ignore[misc]
            return super().decide(view)

    simulate([trace_job("a", 1, 10)], small_cluster(1, 1), Meddler())
    assert seen["done"]


def sim_imports(source: str, package: list[str]) -> list[str]:
    """Imports of ``cohabit.sim`` in ``source``, a module of ``package`` (e.g. ["cohabit", "policies"])."""
    import ast

    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - (node.level - 1)] if node.level else []
            names = [".".join(base + ([node.module] if node.module else []))]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out += [n for n in names if n == "cohabit.sim" or n.startswith("cohabit.sim.")]
    return out


def test_policy_modules_do_not_import_the_simulator() -> None:
    import pathlib

    import cohabit.policies as pol

    root = pathlib.Path(pol.__file__).parent
    offenders = {}
    for path in root.rglob("*.py"):
        package = ["cohabit", "policies", *path.relative_to(root).parts[:-1]]
        found = sim_imports(path.read_text(), package)
        if found:
            offenders[str(path.relative_to(root))] = found
    assert offenders == {}


def test_the_import_check_catches_direct_and_relative_imports() -> None:
    pol, dorm = ["cohabit", "policies"], ["cohabit", "policies", "dorm"]
    assert sim_imports("import cohabit.sim.physics", pol) == ["cohabit.sim.physics"]
    assert sim_imports("from ..sim.backend import SimBackend", pol) == ["cohabit.sim.backend"]
    assert sim_imports("from ...sim import truth", dorm) == ["cohabit.sim"]
    assert sim_imports("from ..engine.view import ClusterView\n# cohabit.sim in a comment", pol) == []
    assert sim_imports("from .sim import x", pol) == []  # cohabit.policies.sim, not the simulator


def test_telemetry_read_mid_segment_holds_exactly_the_reports_made_up_to_now() -> None:
    """Grid reports are folded in when a policy says it reads them (``wants_reports``): a read then
    sees every report at a grid time up to now and none later (no future point, whatever the turn);
    on turns where it does not ask, the reports wait (they cost nothing until read)."""
    reads: list[tuple[float, bool, list[tuple[float, float]], float]] = []

    class Reader(FIFO):
        report_interval = 60.0
        tick_interval = 25.0

        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def wants_reports(self, view):  # type: ignore[no-untyped-def]
            self.calls += 1
            return self.calls % 2 == 0

        def decide(self, view):  # type: ignore[override]
            for job in view.running.values():
                reads.append((view.now, self.calls % 2 == 0, list(job.metrics.get("loss", [])), job.report_time))
            return super().decide(view)

    out = simulate([trace_job("a", 1, 1000)], small_cluster(1, 1), Reader())
    assert out.metrics.jobs_finished == 1
    first = out.result.jobs["a"].metrics["loss"][0][0]  # iterations at the first-iteration report
    asked = [r for r in reads if r[1]]
    assert len(asked) > 10
    behind = 0
    for now, wanted, points, report_time in reads:
        grid = [60.0 * k for k in range(1, int(now // 60.0) + 1)]  # grid times up to now (all before 1000 s)
        if wanted:
            assert len(points) == 1 + len(grid), now
            assert report_time == (grid[-1] if grid else report_time)
        else:
            behind += len(points) < 1 + len(grid)
        assert len(points) <= 1 + len(grid) and report_time <= now  # never a report after now
        assert all(x <= first + now for x, _ in points)
    assert behind > 5  # reports waited on turns that did not ask for them
