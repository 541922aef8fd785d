"""Gandiva's planning scratch (issue 18, speed21b): a round's :class:`~cohabit.policies.placement.Draft` keeps
no column sums of the free room (a round reads none: no ``could_fit``, ``exhausted`` or ``Draft.place``), so its
reserves and give-backs skip the numpy reduction that would keep them; and the schedule is the one a draft with
the sums gives."""

from __future__ import annotations

from cohabit.engine.view import ClusterView
from cohabit.policies.gandiva import Gandiva
from cohabit.policies.gandiva_round import GandivaRound
from cohabit.policies.placement import Draft
from cohabit.report.fingerprint import fingerprint
from cohabit.sim.runner import simulate


class _WithSums(GandivaRound):
    """The round on a draft that keeps the column sums (the draft before this change)."""

    def __init__(self, policy: Gandiva, view: ClusterView, plan: list) -> None:  # type: ignore[type-arg]
        super().__init__(policy, view, plan)
        self.draft = Draft(view)


class _GandivaWithSums(Gandiva):
    round_class = _WithSums


def _run(policy: Gandiva):  # type: ignore[no-untyped-def]
    from cohabit.sim.traces import load_trace
    from cohabit.spec import cluster_from_arg

    jobs = load_trace("philly_82k", "philly", limit=2500).jobs
    out = simulate(jobs, cluster_from_arg("philly-512"), policy)
    return fingerprint(out.result.record, out.metrics)


def test_a_round_plans_on_a_draft_without_column_sums(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Every round's draft is made without sums (a read of them would raise), on a contended run that starts,
    packs, time-slices and migrates; the schedule equals the one on drafts that keep them. Fails when the round
    makes its draft with sums again."""
    made: list[Draft] = []
    real = GandivaRound.__init__

    def init(self, policy, view, plan):  # type: ignore[no-untyped-def]
        real(self, policy, view, plan)
        made.append(self.draft)

    monkeypatch.setattr(GandivaRound, "__init__", init)
    got = _run(Gandiva())
    monkeypatch.setattr(GandivaRound, "__init__", real)
    assert len(made) > 1000
    assert not any(d._sums for d in made)
    events = got["events"]
    assert events["paused"] > 100 and events["reallocated"] > 10  # (time-slicing and packing happened)
    assert got == _run(_GandivaWithSums())


class _CheckedPlace(GandivaRound):
    """Every affinity placement among several nodes compared with the ranking as numpy's stable lexsort gives it
    (the code before this change): affinity first, then an empty node, then the least room, then the index."""

    compared = 0
    ranks: set[int] = set()

    def place(self, rec):  # type: ignore[no-untyped-def]
        import numpy as np

        view, draft, job = self.view, self.draft, rec.job
        fit = draft.tasks_fit(view.demand_vector(job))
        whole = (fit >= rec.n).nonzero()[0]
        want = None
        if whole.size > 1 and job.spec.num_ps == 0:
            same = self.p._aff[whole, rec.ci] > 0
            empty = draft.free_now[whole, self.g] >= view.capacity[whole, self.g] - 1e-9
            rank = np.where(same, 0, np.where(empty, 1, 2))
            order = np.lexsort((fit[whole], rank))
            want = int(whole[order[0]])
            _CheckedPlace.ranks.add(int(rank[order[0]]))
        got = super().place(rec)
        if want is not None:
            assert got is not None and set(got) == {want}, (self.now, rec.id, got, want)
            _CheckedPlace.compared += 1
        return got


class _GandivaCheckedPlace(Gandiva):
    round_class = _CheckedPlace


def test_an_affinity_placement_is_the_ranking_of_the_lexsort() -> None:
    """The node a round's placement picks among several that take the whole job is the one the numpy ranking
    picks, on a contended run where each rank (affinity, empty node, any) decides some placements. Fails when
    the ranking drops the least-room key, or takes the last minimum instead of the first."""
    _CheckedPlace.compared, _CheckedPlace.ranks = 0, set()
    _run(_GandivaCheckedPlace())
    assert _CheckedPlace.compared > 500 and _CheckedPlace.ranks == {0, 1, 2}
