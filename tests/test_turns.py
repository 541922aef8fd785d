"""Turns that plan nothing are not taken (issue 18, speed18b).

The scheduler asks a policy with ``wants_turn(events)`` whether a turn the backend alone woke (no arrival,
wake-up, tick or timer due) needs a decision; Tiresias answers no after a round with nothing left to do when
only progress reports came, and its ``next_decision_time`` offers no wake-up for a demotion or a new
possible victim that cannot change its plan (``lazy_turns``). The schedule must be the one every turn gives:
the same fingerprint (every job's start and end, average JCT, makespan, every event count) but for the
count of decision rows."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from cohabit.engine.actions import Plan
from cohabit.engine.backend import BackendEvent
from cohabit.engine.record import EventKind
from cohabit.engine.view import ClusterView
from cohabit.policies.base import BasePolicy, place_in_order, waiting_jobs
from cohabit.policies.placement import Draft, consolidated_first
from cohabit.policies.tiresias import Tiresias
from cohabit.report.fingerprint import fingerprint
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace
from cohabit.spec import cluster_from_arg

from conftest import small_cluster, trace_job


class _Gate(BasePolicy):
    """Starts waiting jobs in order where they fit; declines every turn the backend alone woke, and asks for one
    wake-up at ``wake``."""

    name = "gate"

    def __init__(self, wake: float, hook: bool = True) -> None:
        self.wake = wake
        self.decided: list[float] = []
        self.asked: list[set[str]] = []
        if hook:
            self.wants_turn = self._wants_turn

    def _wants_turn(self, events: list[BackendEvent]) -> bool:
        self.asked.append({str(e.kind) for e in events})
        return False

    def next_decision_time(self) -> float | None:
        return self.wake if not self.decided or self.decided[-1] < self.wake else None

    def decide(self, view: ClusterView) -> Plan:
        self.decided.append(view.now)
        draft = Draft(view)

        def place(job):  # type: ignore[no-untyped-def]
            p = consolidated_first(draft, job, view.target_workers(job))
            return p if p is not None and draft.reserve(job, p) else None

        return place_in_order(view, waiting_jobs(view), place)


def _starts(out: Any) -> dict[str, float]:
    return {e.job: e.time for e in out.result.record if e.kind == EventKind.STARTED}


def test_a_turn_the_backend_alone_woke_is_decided_only_if_the_policy_wants_it() -> None:
    jobs = [trace_job("a", 4, 100.0, submit=0.0), trace_job("b", 4, 100.0, submit=10.0)]
    gate = _Gate(wake=500.0)
    out = simulate(jobs, small_cluster(1, 4), gate)
    # arrivals (0, 10) and the wake-up (500) are decided whatever the policy says; a's progress and end are not
    assert gate.decided == [0.0, 10.0, 500.0]
    assert _starts(out)["b"] == 500.0
    assert {"progress"} in gate.asked and any("finished" in kinds for kinds in gate.asked)
    assert out.result.record.kind_counts()[EventKind.DECISION] == 3
    # without the hook every turn decides: b starts when a ends
    plain = _Gate(wake=500.0, hook=False)
    out = simulate(jobs, small_cluster(1, 4), plain)
    assert _starts(out)["b"] < 500.0 and len(plain.decided) > 3


@cache
def _jobs(trace: str, fmt: str | None, limit: int | None) -> list[Any]:
    return load_trace(trace, fmt, limit=limit).jobs


def _run(policy: str, params: dict[str, object], trace: tuple[str, str | None, int | None, str]) -> dict[str, Any]:
    name, fmt, limit, cluster = trace
    pol = Tiresias(gittins=policy == "tiresias-gittins", **params)  # type: ignore[arg-type]
    out = simulate(_jobs(name, fmt, limit), cluster_from_arg(cluster), pol)
    return fingerprint(out.result.record, out.metrics)


PHILLY = ("philly_82k", "philly", 2000, "philly-512")
MURI = ("bench/reference/inputs/muri_trace1.csv", "muri", 300, "muri-n8g8")
T480 = ("tiresias_480", None, None, "tiresias")  # (the pinned trace: tests/test_sim_pins.py)
MURI_200 = ("bench/reference/inputs/muri_trace1.csv", "muri", 200, "muri-n8g8")  # (ping-pong: 53k rows already)


@pytest.mark.parametrize("policy,params,trace", [
    ("tiresias", {}, PHILLY),
    ("tiresias", {}, T480),
    ("tiresias-gittins", {}, T480),
    ("tiresias-gittins", {}, PHILLY),
    ("tiresias", {}, MURI),
    ("tiresias-gittins", {}, MURI),
    ("tiresias", {"min_run_time": 0.0}, MURI),
    ("tiresias", {"min_run_time": 600.0}, PHILLY),
    ("tiresias", {"starve_limit": None}, MURI),
    ("tiresias", {"promote_basis": "since_promotion"}, MURI_200),
    ("tiresias", {"thresholds": (1000.0, 3250.0, 7200.0)}, MURI),
])
def test_tiresias_skips_only_turns_that_change_nothing(policy: str, params: dict[str, object],
                                                       trace: tuple[str, str | None, int | None, str]) -> None:
    lazy = _run(policy, params, trace)
    eager = _run(policy, {**params, "lazy_turns": False}, trace)
    fewer = eager["events"]["decision"] - lazy["events"]["decision"]
    eager["events"]["decision"] = lazy["events"]["decision"]
    assert lazy == eager
    assert fewer > (0 if params.get("min_run_time") == 0.0 else eager["events"]["decision"] // 5)
