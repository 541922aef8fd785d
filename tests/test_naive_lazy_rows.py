"""Naive co-location's device model reads its rows straight from the ledger and the pristine draft (issue 18,
speed23a): ``naive._Devices`` makes its working arrays (the draft's free room handed out for writing, copies of
the ledger's device rows) only when a round writes rows back or needs whole arrays, or at once when the plan
started jobs already. Runs must equal runs whose every device model makes its arrays at once, and most rounds
must never make them."""

from __future__ import annotations

import pytest

from cohabit.policies import naive
from cohabit.policies.naive import NaiveColocation
from cohabit.report.fingerprint import fingerprint
from cohabit.sim.runner import simulate

from conftest import small_cluster
from test_naive_caps_memo import _workload


def _run(seed: int, limit: int, backfill: bool) -> str:
    out = simulate(_workload(seed, 90), small_cluster(3, 4), NaiveColocation(max_jobs_per_gpu=limit, backfill=backfill),
                   strict=True)
    assert out.result.unfinished == {}
    return fingerprint(out.result.record, out.metrics)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("limit, backfill", [(2, False), (3, False), (2, True)])
def test_rows_read_from_the_ledger_give_the_runs_of_arrays_made_at_once(seed: int, limit: int, backfill: bool,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails if a lazily read row differs from the arrays' row (which devices exist, the jobs and free share per
    device, the draft's free room), or if rows are not written back before the draft or a whole-array use."""
    built, made = [0], [0]
    init, make = naive._Devices.__init__, naive._Devices._make_arrays

    def counted_init(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        built[0] += 1
        init(self, *args, **kwargs)

    def counted_make(self):  # type: ignore[no-untyped-def]
        made[0] += 1
        make(self)

    monkeypatch.setattr(naive._Devices, "__init__", counted_init)
    monkeypatch.setattr(naive._Devices, "_make_arrays", counted_make)
    lazy = _run(seed, limit, backfill)
    assert built[0] > 0 and made[0] < built[0]  # (most rounds never made the arrays)

    def eager_init(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        init(self, *args, **kwargs)
        if not self._made:
            make(self)

    monkeypatch.setattr(naive._Devices, "__init__", eager_init)
    assert lazy == _run(seed, limit, backfill)
