"""Tiresias' victims indexed by node (issue 18, speed17a): :meth:`VictimIndex.near` answers what
:func:`victims_near` answers by walking every candidate, at every call of whole contended runs (consolidated jobs
preempting, demotions, victims paused earlier in a round, jobs reaching their minimum run time between rounds), and
the runs' results are those of the walk."""

from __future__ import annotations

import numpy as np
import pytest

from cohabit.policies import tiresias_preempt
from cohabit.policies.tiresias import Tiresias
from cohabit.policies.tiresias_preempt import FALLBACK, Rec, lower_gpus, victims_near
from cohabit.policies.tiresias_victims import VictimIndex
from cohabit.report.fingerprint import fingerprint
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace
from cohabit.spec import cluster_from_arg

CALLS: list[int] = []


class _Checked(Tiresias):
    """Tiresias whose index answers are checked against the walk over the round's candidates."""

    def decide(self, view):  # type: ignore[no-untyped-def]
        real = tiresias_preempt.preempt_for

        def checked(rec, draft, victims, place, min_nodes, near_fn=None):  # type: ignore[no-untyped-def]
            if near_fn is not None:
                cands = [v for v in victims if v.q > rec.q]

                def near(free, below, m, need, n):  # type: ignore[no-untyped-def]
                    assert below == rec.q and n == len(cands)
                    got = near_fn(free, below, m, need, n)
                    want = victims_near(free, cands, m, need)
                    if got is not FALLBACK:
                        CALLS[0] += 1
                        assert (got is None) == (want is None)
                        if got is not None:
                            assert [id(v) for v in got] == [id(v) for v in want]
                    else:
                        CALLS[1] += 1
                    return got
                return real(rec, draft, victims, place, min_nodes, near)
            return real(rec, draft, victims, place, min_nodes)

        import cohabit.policies.tiresias as mod
        mod.preempt_for = checked  # type: ignore[assignment]
        real_gpus = VictimIndex.victim_gpus

        def victim_gpus(index: VictimIndex) -> list[float] | None:  # the victims list of now (paused: left _run)
            got = real_gpus(index)
            now, k = view.now, len(self.thresholds) + 1
            victims = [v for q in range(k - 1, 0, -1) for v in reversed(self._run[q].values())
                       if now - v.last_start >= self.min_run_time - 1e-6]
            if got is not None:
                CALLS[2] += 1
                assert lower_gpus(k, got) == lower_gpus(k, self._run_gpus, victims)
            return got

        VictimIndex.victim_gpus = victim_gpus  # type: ignore[method-assign]
        try:
            return super().decide(view)
        finally:
            mod.preempt_for = real
            VictimIndex.victim_gpus = real_gpus  # type: ignore[method-assign]


def _run(policy: Tiresias, n: int):  # type: ignore[no-untyped-def]
    jobs = load_trace("philly_82k", "philly", limit=n).jobs
    out = simulate(jobs, cluster_from_arg("philly-512"), policy)
    return fingerprint(out.result.record, out.metrics)


@pytest.mark.parametrize("gittins,min_run", [(False, 120.0), (True, 120.0), (False, 600.0)])
def test_the_index_answers_as_the_walk_at_every_call(gittins: bool, min_run: float) -> None:
    CALLS[:] = [0, 0, 0]
    checked = _run(_Checked(gittins=gittins, min_run_time=min_run), 2500)
    assert CALLS[0] > 100 and CALLS[2] > 100  # (the index answered that many calls, each compared with the walk)
    plain = Tiresias(gittins=gittins, min_run_time=min_run)
    plain._victims.min_run = -1.0  # (never used: every call walks)
    assert checked == _run(plain, 2500)


def _rec(job_id: str, placement: tuple[int, ...], n: int, gpus: float, q: int, seq: int) -> Rec:
    class _Job:
        pass
    job = _Job()
    job.id, job.placement, job.n_workers, job.seq = job_id, placement, n, seq  # type: ignore[attr-defined]
    rec = Rec(job, 0.0)  # type: ignore[arg-type]
    rec.gpus, rec.q, rec.running, rec.last_start, rec.run_seq = gpus, q, True, 0.0, seq
    return rec


def test_the_index_follows_starts_stops_moves_and_eligibility() -> None:
    """Jobs join once their minimum run time has passed (not before), leave when stopped, move with their queue;
    fractional shares make it fall back; a finished job's late heap entry is not indexed."""
    idx = VictimIndex(3, 100.0)
    a = _rec("a", (0, 0), 2, 2.0, 1, 1)
    b = _rec("b", (1,), 1, 1.0, 2, 2)
    c = _rec("c", (1, 2), 2, 2.0, 2, 3)
    c.last_start = 50.0
    recs = {r.job.id: r for r in (a, b, c)}
    for r in (a, b, c):
        idx.started(r)
    free = np.array([0.0, 0.0, 0.0])
    idx.advance(99.0, recs, 3)
    assert idx.near(free, 0, 1, 0.0, 0) == [] == victims_near(free, [], 1, 0.0)
    idx.advance(100.0, recs, 3)  # a and b (started at 0) join; c (at 50) not yet
    assert idx.near(free, 0, 1, 2.0, 2) == victims_near(free, [b, a], 1, 2.0) == [a]
    assert idx.near(free, 1, 1, 1.0, 1) == victims_near(free, [b], 1, 1.0) == [b]
    idx.advance(150.0, recs, 3)
    assert idx.near(free, 0, 2, 3.0, 3) == victims_near(free, [c, b, a], 2, 3.0)
    a.q, a.run_seq = 2, 4
    idx.moved(a)  # demoted: now the first victim of queue 2
    assert idx.near(free, 1, 1, 0.0, 3) == victims_near(free, [a, c, b], 1, 0.0) == [a]
    a.running = False
    idx.stopped(a)
    assert idx.near(free, 1, 1, 0.0, 2) == victims_near(free, [c, b], 1, 0.0) == [c, b]
    odd = _rec("d", (2, 2, 2), 3, 1.0, 2, 5)
    recs["d"] = odd
    idx.started(odd)
    idx.advance(200.0, recs, 3)
    assert idx.near(free, 1, 1, 0.0, 3) is FALLBACK  # (thirds of a GPU: no exact sums)
    assert idx.near(free, 2, 1, 0.0, 0) is not FALLBACK  # (queue 2's candidates are none of them)
    gone = _rec("e", (0,), 1, 1.0, 2, 6)
    idx.started(gone)
    idx.advance(200.0, recs, 3)  # (not one of the policy's jobs: never indexed)
    assert all("e" not in on for on in idx._on)
