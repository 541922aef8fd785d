"""SLAQ's rounds over the queue alone that walk the greedy's order only as far as the free room reaches (issue 18,
nineteenth session; :func:`cohabit.policies.slaq.first_fit_reach`): wherever it answers, its targets, order and
shrink are :func:`~cohabit.policies.slaq._allot`'s over every row, bit for bit, and whole runs with and without it
have equal fingerprints."""

from __future__ import annotations

import numpy as np
import pytest

from cohabit.policies import slaq as slaq_mod
from cohabit.policies.slaq import SLAQ, _allot, _TableRows, first_fit_reach
from cohabit.report.fingerprint import fingerprint
from cohabit.sim.runner import simulate

from conftest import small_cluster
from test_slaq_kept_values import _workload


def _full(values: np.ndarray, first: np.ndarray, free: np.ndarray, n_min: np.ndarray, seq: np.ndarray,
          ids: list[str]) -> tuple[dict[str, int], list[str], list[str]]:
    """:func:`_allot` of a queue of rigid rows (``cur`` 0, pending or paused)."""
    n = len(ids)
    ints = np.zeros((5, n), dtype=np.int64)
    ints[0], ints[2], ints[4] = seq, n_min, 2
    return _allot(values[:, None], first, first, free.copy(), _TableRows(ints), ids)


def _case(rng: np.random.Generator, n: int, free_gpus: float, ties: bool) -> tuple[np.ndarray, ...]:
    """A queue of ``n`` rigid rows of 1-8 GPUs (8 CPUs and 64 GB each), values with NaN, zeros, negatives and
    (``ties``) many equal ones; the free room ``free_gpus`` GPUs (and what a node's CPU and memory leave)."""
    gpus = rng.choice([1, 1, 1, 1, 2, 4, 8], size=n).astype(np.float64)
    first = np.stack([gpus, 8.0 * gpus, 64.0 * gpus], axis=1)
    values = rng.choice([0.5, 1.0, 2.0], size=n) if ties else rng.uniform(-0.2, 3.0, size=n)
    values[rng.random(n) < 0.05] = np.nan
    values[rng.random(n) < 0.05] = 0.0
    free = np.array([free_gpus, 8.0 * free_gpus + rng.integers(0, 9), 64.0 * free_gpus])
    return values, first, free, gpus.astype(np.int64), rng.permutation(n)


@pytest.mark.parametrize("seed", range(6))
def test_the_reach_gives_the_greedys_answer_over_every_row(seed: int) -> None:
    """Random queues (2 to 1,500 rows, so past the greedy's 512-entry scan; ties, NaN, values <= 0) and free
    rooms of 0 to 40 GPUs: wherever :func:`first_fit_reach` answers, it is :func:`_allot`'s answer, and it
    answers most rounds. Fails without the 512-entry test, without the work-conserving test, with the last
    maximum for the first on ties, and without the integer test (the last case below), each checked."""
    rng = np.random.default_rng(seed)
    answered = asked = 0
    for _ in range(300):
        n = int(rng.choice([2, 7, 40, 300, 600, 1500]))
        values, first, free, n_min, seq = _case(rng, n, float(rng.choice([0, 1, 2, 3, 5, 8, 12, 40])), rng.random() < 0.5)
        if rng.random() < 0.2:  # the best rows too large for the room: the walk passes over many of them
            big = np.argsort(-np.nan_to_num(values, nan=-1.0))[: int(rng.integers(1, n + 1))]
            first[big] *= 64.0
        ids = [f"j{i}" for i in range(n)]
        got = first_fit_reach(values, first, free, n_min, ids)
        asked += 1
        if got is not None:
            answered += 1
            assert got == _full(values, first, free, n_min, seq, ids)
    assert answered > asked // 2


def test_the_reach_stops_at_the_greedys_scan() -> None:
    """The one row that fits the room is entry 600 of the greedy's order (the 600 better ones too large) and the
    last to arrive: past the greedy's 512-entry scan and past the work-conserving pass's 512 rows, so nobody is
    admitted; a walk that does not stop at the scan takes it (fails without the 512-entry test, checked)."""
    n = 601
    values = np.linspace(3.0, 1.0, n)
    first = np.tile([16.0, 128.0, 1024.0], (n, 1))
    first[-1] = [1.0, 8.0, 64.0]
    free = np.array([1.0, 8.0, 64.0])
    ids = [f"j{i}" for i in range(n)]
    n_min = np.ones(n, dtype=np.int64)
    want = _full(values, first, free, n_min, np.arange(n), ids)
    assert want[1] == [] and not any(want[0].values())
    got = first_fit_reach(values, first, free, n_min, ids)
    assert got is None or got == want


def test_the_reach_asks_for_exact_sums() -> None:
    """Near ``2 ** 53`` a running sum (the greedy's prefix) and a running difference (a walk) round apart: the
    greedy takes four rows where a walk would take three; the reach must not answer there."""
    free = np.array([2.0 ** 53 + 2.0, 0.0, 0.0])
    first = np.array([[2.0 ** 53, 0, 0], [1.0, 0, 0], [1.0, 0, 0], [1.0, 0, 0]])
    values = np.array([4.0, 3.0, 2.0, 1.0])
    ids = ["a", "b", "c", "d"]
    n_min = np.ones(4, dtype=np.int64)
    want = _full(values, first, free, n_min, np.arange(4), ids)
    assert want[1] == ids  # (the greedy's four)
    assert first_fit_reach(values, first, free, n_min, ids) is None


@pytest.mark.parametrize("seed", range(3))
def test_runs_with_and_without_the_reach_are_the_same(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole seeded runs (80 jobs on 8 GPUs, a long queue) with ``reach_only`` on and off: equal fingerprints,
    and the reach answered rounds."""
    jobs = _workload(seed, False, big=8)

    def policy(reach: bool) -> SLAQ:
        pol = SLAQ(epoch=120.0, report_interval=30.0)
        pol.reach_only = reach
        return pol

    off = simulate(jobs, small_cluster(gpus=8), policy(False))
    answered = {"n": 0}
    real = slaq_mod.first_fit_reach

    def counted(*args):  # type: ignore[no-untyped-def]
        got = real(*args)
        answered["n"] += got is not None
        return got

    monkeypatch.setattr(slaq_mod, "first_fit_reach", counted)
    on = simulate(jobs, small_cluster(gpus=8), policy(True))
    assert fingerprint(on.result.record, on.metrics) == fingerprint(off.result.record, off.metrics)
    assert answered["n"] > 10
