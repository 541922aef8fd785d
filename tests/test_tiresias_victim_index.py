"""Tiresias' victims indexed by node (issue 18, speed17a): :meth:`VictimIndex.near` answers what
:func:`victims_near` answers by walking every candidate, at every call of whole contended runs (consolidated jobs
preempting, demotions, victims paused earlier in a round, jobs reaching their minimum run time between rounds), and
the runs' results are those of the walk."""

from __future__ import annotations

import numpy as np
import pytest

from cohabit.policies.tiresias import Tiresias
from cohabit.policies.tiresias_preempt import FALLBACK, Rec, lower_gpus, victims_near
from cohabit.policies.tiresias_victims import VictimIndex
from cohabit.report.fingerprint import fingerprint
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace
from cohabit.spec import cluster_from_arg

CALLS: list[int] = []


class _Checked(Tiresias):
    """Tiresias whose index answers (the victims near a consolidated job's best nodes, the candidates' count and
    GPUs, the lower queues' GPUs) are checked against the victims list of that moment (``Tiresias._round_victims``'
    list: the victims paused earlier in the round have left the running tables)."""

    def decide(self, view):  # type: ignore[no-untyped-def]
        k = len(self.thresholds) + 1

        def now_list() -> list[Rec]:
            return [v for q in range(k - 1, 0, -1) for v in reversed(self._run[q].values())
                    if view.now - v.last_start >= self.min_run_time - 1e-6]

        real = (VictimIndex.near, VictimIndex.summary, VictimIndex.victim_gpus)

        def near(index, free, below, m, need, n):  # type: ignore[no-untyped-def]
            cands = [v for v in now_list() if v.q > below]
            assert n == len(cands)
            got = real[0](index, free, below, m, need, n)
            want = victims_near(free, cands, m, need)
            if got is FALLBACK:
                CALLS[1] += 1
            else:
                CALLS[0] += 1
                assert (got is None) == (want is None)
                assert got is None or [id(v) for v in got] == [id(v) for v in want]
            return got

        def summary(index, q):  # type: ignore[no-untyped-def]
            got = real[1](index, q)
            if got is not None:
                cands = [v for v in now_list() if v.q > q]
                held = 0.0
                for v in cands:
                    held += v.gpus
                CALLS[3] += 1
                assert got == (len(cands), held)
            return got

        def victim_gpus(index):  # type: ignore[no-untyped-def]
            got = real[2](index)
            if got is not None:
                CALLS[2] += 1
                assert lower_gpus(k, got) == lower_gpus(k, self._run_gpus, now_list())
            return got

        VictimIndex.near, VictimIndex.summary, VictimIndex.victim_gpus = near, summary, victim_gpus  # type: ignore
        try:
            return super().decide(view)
        finally:
            VictimIndex.near, VictimIndex.summary, VictimIndex.victim_gpus = real  # type: ignore[method-assign]


def _run(policy: Tiresias, n: int):  # type: ignore[no-untyped-def]
    jobs = load_trace("philly_82k", "philly", limit=n).jobs
    out = simulate(jobs, cluster_from_arg("philly-512"), policy)
    return fingerprint(out.result.record, out.metrics)


@pytest.mark.parametrize("gittins,min_run", [(False, 120.0), (True, 120.0), (False, 600.0)])
def test_the_index_answers_as_the_walk_at_every_call(gittins: bool, min_run: float) -> None:
    CALLS[:] = [0, 0, 0, 0]
    checked = _run(_Checked(gittins=gittins, min_run_time=min_run), 2500)
    assert min(CALLS[0], CALLS[2], CALLS[3]) > 100  # (the index answered that often, each time compared)
    plain = Tiresias(gittins=gittins, min_run_time=min_run)
    plain.index_nodes = 10 ** 6  # (no index: every call walks)
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


def test_the_index_is_kept_on_large_clusters_only() -> None:
    """philly-512 (64 nodes) keeps it; the Muri artifact's 8 nodes walk their few candidates."""
    jobs = load_trace("philly_82k", "philly", limit=50).jobs
    large, small = Tiresias(), Tiresias()
    simulate(jobs, cluster_from_arg("philly-512"), large)
    simulate(jobs, cluster_from_arg("muri-n8g8"), small)
    assert isinstance(large._victims, VictimIndex) and small._victims is None
