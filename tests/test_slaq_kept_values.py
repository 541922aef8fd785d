"""SLAQ's waiting jobs' values kept between rounds (issue 18, eighteenth session; :mod:`cohabit.policies.slaq_values`):
a round over the free room and the whole queue of rigid jobs reads each waiting job's value kept from an earlier
round unless its table row was written since or the prior it read moved. Every such round is compared with the
round computed afresh on the same view (the same targets, order and values, bit for bit), and whole runs with and
without the kept values have equal fingerprints."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from cohabit.policies.slaq import SLAQ
from cohabit.report.fingerprint import fingerprint
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import simple_job

from conftest import small_cluster


def _workload(seed: int, elastic: bool, big: int = 4) -> list[TraceJob]:
    """80 jobs of 1 to 4 GPUs and three models (some declaring no length) arriving over three hours on 8 GPUs, so
    the queue stays long, jobs are paused and resumed, and finishes move each model's prior; with ``elastic``,
    a few may grow (their rounds are computed afresh). ``big``: the largest jobs' GPUs (8: the whole cluster, which
    wait pending through many rounds)."""
    rng = random.Random(seed)
    out = []
    for i in range(80):
        gpus = rng.choice([1, 1, 1, 2, big])
        kw: dict[str, object] = {}
        if elastic and gpus > 1 and rng.random() < 0.2:
            kw = {"n_min": 1, "n_max": gpus}
        iters = rng.randint(200, 3000)
        spec = simple_job(f"j{i}", gpus, submit_time=rng.uniform(0, 3 * 3600), model=rng.choice(["a", "b", "c"]),
                          iterations=iters if rng.random() < 0.6 else None, **kw)
        curve = (rng.uniform(2, 40), 1.0, rng.uniform(0.05, 0.5))
        out.append(TraceJob(spec, JobTruth(iterations=iters, duration=iters * rng.uniform(0.3, 2.0),
                                           ref_workers=gpus, loss_curve=curve)))
    return out


def _policy(keep: bool) -> SLAQ:
    pol = SLAQ(epoch=120.0, report_interval=30.0)
    pol.keep_values = keep
    return pol


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("elastic", [False, True])
def test_kept_queue_values_give_every_rounds_targets_and_the_same_run(seed: int, elastic: bool,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = _workload(seed, elastic)
    fresh = simulate(jobs, small_cluster(gpus=8), _policy(False))
    real = SLAQ._queue_targets
    seen = {"rounds": 0, "rows": 0}

    def checked(self: SLAQ, view, *args):  # type: ignore[no-untyped-def]
        got = real(self, view, *args)
        if got is not None:
            waiting = list(view.paused.values()) + list(view.pending.values())
            self.keep_values = False
            try:
                want = self.targets(view, waiting, full=False, waiting_tail=len(waiting))
                snap = self.models.snapshot(view, waiting, waiting_tail=len(waiting))
            finally:
                self.keep_values = True
            assert got == want, view.now
            ids, slots = self.models.queue_slots(view)
            kept = self._kept.value[np.asarray(slots)]
            assert np.array_equal(kept, self.unit_values(snap)), view.now  # bit for bit, NaN nowhere
            seen["rounds"] += 1
            seen["rows"] += len(ids)
        return got

    monkeypatch.setattr(SLAQ, "_queue_targets", checked)
    pol = _policy(True)
    kept = simulate(jobs, small_cluster(gpus=8), pol)
    assert fingerprint(kept.result.record, kept.metrics) == fingerprint(fresh.result.record, fresh.metrics)
    assert seen["rounds"] > (5 if elastic else 20)  # (a queue holding an elastic job is computed afresh)
    assert pol._kept.computed < seen["rows"] * (1 if elastic else 0.6)  # values read from the kept column




def test_a_value_is_computed_again_when_its_row_its_prior_or_the_capacity_moves() -> None:
    """:class:`QueueValues` on a per-job table of two waiting jobs: a kept value is read again only while its row,
    the prior it read (a pending job's: its model's mean time per iteration, which finishes move) and the
    capacity hold; after each moves, the value read is the one computed afresh, and it differs from the kept
    one (fails without the stamp, the prior or the capacity test, each checked)."""
    from types import SimpleNamespace

    from cohabit.policies.job_models import JobModels

    models = JobModels(recency=0.95, rates=True)
    w, z = models._row(np.array([1.0, 8.0, 64.0])), models._row(np.zeros(3))
    table = models._table
    slots = [table.add("p", 0, 1, 1, 0.0, math.nan, "m", w, z), table.add("q", 1, 2, 2, 5.0, 900.0, "m", w, z)]
    ids = ["p", "q"]
    view = SimpleNamespace(capacity=np.array([[8.0, 64.0, 512.0]] * 2), jobs={j: SimpleNamespace(id=j) for j in ids})
    pol = SLAQ()

    def fresh() -> np.ndarray:
        return pol.unit_values(models.table_snapshot(view, [view.jobs[j] for j in ids], slots))  # type: ignore[arg-type]

    first = pol._kept.read(models, view, ids, slots)  # type: ignore[arg-type]
    assert np.array_equal(first, fresh()) and pol._kept.computed == 2
    assert np.array_equal(pol._kept.read(models, view, ids, slots), first) and pol._kept.computed == 2  # kept
    models._iter_time_by_model["m"] = (3.0, 1)  # a finish of model m moved its prior
    moved = pol._kept.read(models, view, ids, slots)  # type: ignore[arg-type]
    assert np.array_equal(moved, fresh()) and not np.array_equal(moved, first)
    table.freeze(slots[1], 40.0, (0.25, 0.0, 0.0), (math.nan, math.nan, math.nan, 0.0, 0.0), prior=False)
    again = pol._kept.read(models, view, ids, slots)  # type: ignore[arg-type]
    assert np.array_equal(again, fresh()) and again[1] != moved[1]
    view.capacity = view.capacity * 2.0  # (the shares read the capacity)
    grown = pol._kept.read(models, view, ids, slots)  # type: ignore[arg-type]
    assert np.array_equal(grown, fresh()) and not np.array_equal(grown, again)
