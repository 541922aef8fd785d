"""Optimus' rounds of rigid jobs without the round's rows (``Optimus._rigid_round``, issue 18's twelfth
session): where every running job and every job admitted is rigid, the plan is that of the whole round
(snapshot, greedy, restart weighing, ``apply_targets``), at every round of runs that mix rigid and elastic
jobs; where an admitted job is elastic the round goes on from the same admission."""

from __future__ import annotations

import random

import pytest

from cohabit.policies.optimus import Optimus
from cohabit.policies.targets import apply_targets, balanced_placement, changed_rows
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import JobSpec, Resources, TaskGroup

from conftest import small_cluster

GPU = Resources(gpu=1, cpu=4, mem_gb=16)


def _jobs(seed: int, elastic: float) -> list[TraceJob]:
    """70 jobs of one to four GPUs over 3,000 s; a share ``elastic`` may grow by up to two workers."""
    rng = random.Random(seed)
    out = []
    for i in range(70):
        w = rng.choice([1, 1, 2, 3, 4])
        hi = w + rng.randint(1, 2) if rng.random() < elastic else w
        iters = rng.randint(100, 2000)
        spec = JobSpec(id=f"j{i}", submit_time=rng.uniform(0, 3000), architecture="allreduce",
                       workers=TaskGroup(count=w, demand=GPU), n_min=w, n_max=hi, iterations=iters)
        out.append(TraceJob(spec, JobTruth(iterations=iters, duration=float(iters) * rng.uniform(0.5, 2),
                                           ref_workers=w)))
    return out


class _Checked(Optimus):
    """Optimus whose every round is also planned the whole way (the rows of every running and admitted
    job), and compared."""

    def __init__(self) -> None:
        super().__init__(interval=120.0, report_interval=60.0)
        self.quick = self.handed_on = self.whole = 0

    def _round(self, view, *, full):  # type: ignore[override]
        seen = []
        real = self.models.admit_waiting

        def admit(*a, **k):  # (the admissions of both ways, compared below)
            out = real(*a, **k)
            seen.append(([j.id for j in out[0]], out[1].tobytes()))
            return out
        self.models.admit_waiting = admit  # type: ignore[method-assign]
        quick = self._rigid_round(view, full=full)
        snap, n = self._allocate(view, None, full=full)
        del self.models.admit_waiting
        if quick is not None:
            assert seen[0] == seen[1]  # the same jobs admitted and the same room left, from the same room
        ids, jobs = snap.ids, view.jobs
        shrink, grow = changed_rows(snap.state, snap.cur, n)
        want = apply_targets(view, dict(zip(ids, n.tolist())), [jobs[ids[i]] for i in grow.tolist()],
                             balanced_placement, reason="optimus: re-allocation",
                             shrink=[jobs[ids[i]] for i in shrink.tolist()])
        got = super()._round(view, full=full)
        assert got == want, (view.now, got, want)
        if isinstance(quick, list):
            self.quick += 1
            assert quick == want
        elif quick is None:
            self.whole += 1
        else:  # (the round went on from this admission: ``got`` above)
            self.handed_on += 1
        return got


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("elastic", [0.0, 0.3])
def test_a_round_of_rigid_jobs_plans_as_the_whole_round(seed: int, elastic: float) -> None:
    pol = _Checked()
    out = simulate(_jobs(seed, elastic), small_cluster(2, 4), pol)
    assert not out.result.unfinished
    assert pol.quick > 20  # rounds planned without rows
    if elastic:
        assert pol.whole + pol.handed_on > 0  # and rounds that needed them
    else:
        assert pol.whole == pol.handed_on == 0
