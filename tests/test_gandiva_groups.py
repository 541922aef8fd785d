"""Gandiva's rounds by group (issue 18, :mod:`cohabit.policies.gandiva_queue`): visiting the waiting jobs
group by group, dropping a group once its later jobs can do nothing, parking a group whose same-class turn
failed until its class has no victim left, and keeping the victims in turn order without packed pairs
must give exactly the schedule of a round that visits every waiting job and every running job, as the
plain definition below does."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from cohabit.policies.gandiva import Gandiva
from cohabit.policies.gandiva_records import EPS, JobRec
from cohabit.policies.gandiva_round import GandivaRound
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import ClusterSpec, Resources, simple_job


class _PlainRound(GandivaRound):
    """The round as defined: every waiting job in key order, victims from the whole turn order."""

    def schedule(self, queue) -> None:  # type: ignore[no-untyped-def,override]
        p, g = self.p, self.g
        waiting = sorted((r for grp in queue.groups.values() for r in grp.recs), key=lambda r: r.key)
        unpacked = set(self.moved)
        left = []
        for rec in waiting:
            if rec.id in unpacked:
                continue
            lim = (float(self.draft.free[:, g].sum()) if g is not None else float("inf")) + EPS
            if lim >= rec.cls and self.place_free(rec):
                continue
            if p.packing and rec.whole and rec.pack_key not in self.failed_pack and p._idle.get(rec.ikey) \
                    and self.pack(rec):
                continue
            left.append(rec)
        if left:
            self._slice_plain(left)

    def _slice_plain(self, waiting: list[JobRec]) -> None:
        now, p = self.now, self.p
        done = []
        for r in p._run.values():  # every running job, in the order its turn started
            if now - r.turn_start < self.slice - EPS:
                break
            if r.id not in self.moved and r.id not in p._partner:
                done.append(r)
        by_class: dict[float, list[JobRec]] = defaultdict(list)
        for r in done:
            by_class[r.cls].append(r)
        taken: set[str] = set()
        bar = p.cross_class_after * self.slice - EPS
        for rec in waiting:
            if len(taken) == len(done):
                return
            same = [r for r in by_class.get(rec.cls, []) if r.id not in taken]
            cross = not same
            if cross and now - rec.wait_since < bar:
                continue
            key = (rec.shape, cross)
            if key in self.failed_turn:
                continue
            pool = [r for r in (done if cross else same) if r.id not in taken]
            got = self._take_turns(rec, iter(pool), key)
            if got is None:
                self.failed_turn.add(key)
                continue
            victims, placement = got
            for v in victims:
                taken.add(v.id)
                self._suspend(v, f"gandiva: time slice over, {rec.id} resumes")
            self._start(rec, placement)
            self.failed.clear()


class _Plain(Gandiva):
    round_class = _PlainRound


def _workload(seed: int, n: int) -> list[TraceJob]:
    """Jobs of 1, 2 and 4 GPUs, each size with a small and a large CPU demand (two shapes per class),
    a few models (packing), arriving in bursts: queues with several groups per class."""
    rng = random.Random(seed)
    jobs, t = [], 0.0
    for i in range(n):
        t += rng.choice((0.0, 0.0, 5.0, 90.0))
        gpus = rng.choice((1, 1, 2, 4))
        spec = simple_job(f"j{i}", gpus, submit_time=t, model=rng.choice(("resnet50", "vgg16", "lstm")),
                          cpu_per_gpu=rng.choice((2.0, 7.0)), iterations=rng.randint(200, 3000))
        jobs.append(TraceJob(spec, JobTruth(iterations=spec.iterations, duration=float(spec.iterations),
                                            ref_workers=gpus)))
    return jobs


CLUSTER = ClusterSpec.homogeneous("groups", 3, Resources(gpu=4, cpu=16, mem_gb=256))


def _events(out) -> list[tuple[float, str, str | None]]:  # type: ignore[no-untyped-def]
    return [(e.time, str(e.kind), e.job) for e in out.result.record]


@pytest.mark.parametrize("seed", [3, 11])
def test_rounds_by_group_give_the_plain_rounds_schedule(seed: int) -> None:
    jobs = _workload(seed, 90)
    cfg = SimConfig(checkpoint_s=2.0, restore_s=3.0)
    plain = simulate(jobs, CLUSTER, _Plain(), config=cfg)
    real = simulate(jobs, CLUSTER, Gandiva(), config=cfg)
    assert plain.metrics.preemptions > 50  # time-slicing across and within classes happens here
    assert _events(real) == _events(plain)
