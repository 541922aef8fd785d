"""Naive co-location's per-shape capacities kept across rounds (issue 18, speed21c): a round that has taken nothing
yet copies the caps of an earlier round (``naive.CapsMemo``) and recomputes only the nodes whose free room or
device holders changed since (``ClusterView.nodes_changed_since``, the ledger's node log). The caps must equal a
computation over every node at every use, and runs with and without the memo must be the same."""

from __future__ import annotations

import random

import pytest

from cohabit.engine import ledger as ledger_module
from cohabit.engine.ledger import Ledger
from cohabit.policies import naive
from cohabit.policies.naive import NaiveColocation
from cohabit.report.fingerprint import fingerprint
from cohabit.sim.runner import simulate
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import Resources, simple_job

from conftest import small_cluster


def _workload(seed: int, n: int = 70) -> list[TraceJob]:
    """Jobs of 0.25 to 4 GPUs with two CPU shapes, arriving in bursts on 3 x 4 GPUs: every GPU busy, guests
    time-share them, hosts end and free devices."""
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(n):
        t += rng.choice([0.0, 0.0, rng.uniform(0, 120)])
        g = rng.choice([0.25, 0.5, 1, 1, 1, 2, 4])
        dur = rng.uniform(20, 900)
        spec = simple_job(f"j{i}", g, submit_time=t, iterations=100, model=rng.choice(["resnet50", "vgg16", "bert"]),
                          cpu_per_gpu=rng.choice([2.0, 8.0]))
        out.append(TraceJob(spec, JobTruth(iterations=100, duration=dur, ref_workers=max(int(g), 1))))
    return out


def _run(seed: int, *, memo: bool, limit: int, backfill: bool, checked: list[int] | None = None) -> str:
    pol = NaiveColocation(max_jobs_per_gpu=limit, backfill=backfill)
    if not memo:
        pol._caps_memo = None  # type: ignore[assignment]
    real = naive._Devices._caps_for

    def caps_for(self, w):  # type: ignore[no-untyped-def]
        shape = real(self, w)
        if checked is not None:  # the caps as a computation over every node gives them now
            fresh = self._node_caps(shape.rest, shape.per_task, slice(None)).tolist()
            assert shape.cap == fresh, (self.view.now, shape.cap, fresh)
            checked[0] += 1
        return shape

    naive._Devices._caps_for = caps_for  # type: ignore[method-assign]
    try:
        out = simulate(_workload(seed), small_cluster(3, 4), pol, strict=True)
    finally:
        naive._Devices._caps_for = real  # type: ignore[method-assign]
    assert out.result.unfinished == {}
    return fingerprint(out.result.record, out.metrics)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("limit, backfill", [(2, False), (4, False), (2, True)])
def test_kept_caps_equal_a_full_computation_and_runs_are_unchanged(seed: int, limit: int, backfill: bool,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails if a kept shape's caps are not refreshed on the nodes changed since, if a round's own changes (a
    start, a co-location) are kept as the ledger's, or if the memo outlives a change the log did not track."""
    hits = [0]
    get = naive.CapsMemo.get

    def counted(self, view, key):  # type: ignore[no-untyped-def]
        out = get(self, view, key)
        hits[0] += out is not None
        return out

    monkeypatch.setattr(naive.CapsMemo, "get", counted)
    checked = [0]
    with_memo = _run(seed, memo=True, limit=limit, backfill=backfill, checked=checked)
    assert hits[0] > 0 and checked[0] > 0  # the memo was used (and checked)
    assert with_memo == _run(seed, memo=False, limit=limit, backfill=backfill)


def test_the_ledger_names_the_nodes_changed_since_a_mark(monkeypatch: pytest.MonkeyPatch) -> None:
    led = Ledger(small_cluster(4, 4))
    w = led.vector(Resources(gpu=1, cpu=1))
    assert w is not None
    mark = led.change_mark
    assert led.changed_since(mark) == set()
    led.allocate("a", [1, 2], [w, w])
    assert led.changed_since(mark) == {1, 2}
    later = led.change_mark
    led.allocate("b", [3], [w], share_gpus=True)
    led.release("a")
    assert led.changed_since(mark) == {1, 2, 3} and led.changed_since(later) == {1, 2, 3}
    led.room_changed()  # a change the log did not track: unknown
    assert led.changed_since(later) is None
    mark = led.change_mark
    monkeypatch.setattr(ledger_module, "NODE_LOG_MAX", 2)
    led.allocate("c", [0, 1, 2], [w, w, w])
    led.allocate("d", [3], [w])  # the log is emptied here: positions from before are void
    assert led.changed_since(mark) is None
