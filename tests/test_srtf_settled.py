"""SRTF's settled rounds (issue 18): a round after one that paused nobody and found nobody worth pausing is
answered at once (no plan) while no job joined the waiting ones, the history kept its length, the free room is
the one that round's plan left and nobody can be paused; each such answer must be what the full round plans."""

from __future__ import annotations

import pytest

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
