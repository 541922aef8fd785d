"""SRTF's settled rounds (issue 18): a round after one that paused nobody and found nobody worth pausing is
answered at once (no plan) while no job joined the waiting ones, the history kept its length, the free room is
the one that round's plan left and nobody can be paused; each such answer must be what the full round plans."""

from __future__ import annotations

import pytest

from cohabit.engine.actions import Stop
from cohabit.engine.view import ClusterView
from cohabit.policies.srtf import SRTF
from cohabit.report.fingerprint import fingerprint
from cohabit.sim.runner import simulate


class _Checked(SRTF):
    """Decides every round in full, and checks that each round the policy would have answered as settled plans
    nothing."""

    claimed = 0

    def decide(self, view: ClusterView):  # type: ignore[no-untyped-def]
        self._bound = None
        claim = self._settled is not None and self._settled_now(view, len(view.history))
        self._settled = None  # (the full round below)
        plan = super().decide(view)
        if claim:
            assert plan == [], (view.now, plan)
            _Checked.claimed += 1
        return plan


def _runs():  # type: ignore[no-untyped-def]
    from cohabit.sim.traces import load_trace
    from cohabit.spec import cluster_from_arg, preset

    yield load_trace("tiresias_480", "tiresias").jobs, preset("tiresias")  # declared lengths: preemptions
    yield load_trace("philly_82k", "philly", limit=500).jobs, cluster_from_arg("muri-n8g8")  # no lengths, queued


@pytest.mark.parametrize("case", [0, 1])
def test_a_settled_round_plans_what_the_full_round_plans(case: int) -> None:
    jobs, cluster = list(_runs())[case]
    _Checked.claimed = 0
    checked = simulate(jobs, cluster, _Checked())
    real = simulate(jobs, cluster, SRTF())
    assert _Checked.claimed > (10, 200)[case], _Checked.claimed
    assert fingerprint(checked.result.record, checked.metrics) == fingerprint(real.result.record, real.metrics)


class _StopsSome:
    """Stops a running job (one the plan leaves alone) every 25th round: room grows with no finish, so the history
    keeps its length."""

    _rounds = 0

    def decide(self, view: ClusterView):  # type: ignore[no-untyped-def]
        plan = super().decide(view)  # type: ignore[misc]
        self._rounds += 1
        if self._rounds % 25 == 0:
            planned = {a.job for a in plan}
            victim = next((j for j in view.running if j not in planned), None)
            if victim is not None:
                plan = [*plan, Stop(victim, reason="test: room without a finish")]
        return plan


class _Stopping(_StopsSome, SRTF):
    pass


class _CheckedStopping(_StopsSome, _Checked):
    pass


def test_a_round_is_not_settled_once_room_grew_without_a_finish() -> None:
    """The room rule alone: jobs stopped by the plan (not finished) give room back while the history keeps its
    length; the next round must see the room and start a waiting job (answered as settled, it would not)."""
    from cohabit.sim.traces import load_trace
    from cohabit.spec import cluster_from_arg

    jobs = load_trace("philly_82k", "philly", limit=300).jobs
    cluster = cluster_from_arg("muri-n8g8")
    _Checked.claimed = 0
    checked = simulate(jobs, cluster, _CheckedStopping())
    real = simulate(jobs, cluster, _Stopping())
    assert checked.metrics.jobs_finished < len(jobs) and _Checked.claimed > 100, _Checked.claimed
    assert fingerprint(checked.result.record, checked.metrics) == fingerprint(real.result.record, real.metrics)


class _CheckedHistory(SRTF):
    """At every round the policy answers as settled, checks that the same round with one more finished job in the
    history would not be: a longer history moves the waiting jobs' estimates (the mean finished run time) and with
    them who is worth pausing."""

    claimed = 0

    def _settled_now(self, view: ClusterView, n_history: int) -> bool:
        settled = super()._settled_now(view, n_history)
        if settled:
            kept = self._settled
            assert not super()._settled_now(view, n_history + 1), view.now
            self._settled = kept  # (a refusal may have dropped nothing, but keep the state as it was)
            _CheckedHistory.claimed += 1
        return settled


def test_a_round_is_not_settled_once_the_history_grew() -> None:
    """The history rule alone (in a simulation a finish also gives room back, so the room rule catches it too)."""
    jobs, cluster = list(_runs())[1]
    _CheckedHistory.claimed = 0
    simulate(jobs, cluster, _CheckedHistory())
    assert _CheckedHistory.claimed > 200
