"""Tiresias' victims near the best nodes (issue 18, speed15b): :func:`victims_near` sums each node's room from the
candidates' per-node GPUs only where whole numbers make every order of additions exact, and otherwise ranks as
:func:`_best_nodes` does (the candidates' workers added one by one, in order)."""

from __future__ import annotations

import numpy as np
import pytest

from cohabit.policies.tiresias import Tiresias
from cohabit.policies.tiresias_preempt import NearSums, Rec, _best_nodes, victims_near
from cohabit.report.fingerprint import fingerprint
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace
from cohabit.spec import cluster_from_arg


class _Job:  # what Rec reads of a JobView: its placement, worker count and arrival number
    def __init__(self, placement: tuple[int, ...], n_workers: int, seq: int) -> None:
        self.placement, self.n_workers, self.seq = placement, n_workers, seq


def _rec(placement: tuple[int, ...], n_workers: int, gpus: float, seq: int = 0) -> Rec:
    rec = Rec(_Job(placement, n_workers, seq), 0.0)  # type: ignore[arg-type]
    rec.gpus = gpus
    return rec


def _reference(free: np.ndarray, cands: list[Rec], m: int, need: float) -> list[Rec] | None:
    spreads = [v.spread() for v in cands]
    near = _best_nodes(free, spreads, m, need)
    return None if near is None else [v for v, (nodes, _, _) in zip(cands, spreads) if not near.isdisjoint(nodes)]


@pytest.mark.parametrize("seed", range(8))
def test_victims_near_ranks_as_best_nodes(seed):
    """Random clusters of 1-70 nodes (both of _best_nodes' paths), whole and fractional free counts and shares,
    parameter-server tasks past the workers, needs at, just over and under the best nodes' room."""
    rng = np.random.default_rng(seed)
    for _ in range(150):
        n = int(rng.integers(1, 71))
        whole = rng.random() < 0.7
        free = rng.integers(0, 9, size=n).astype(float) if whole else \
            rng.choice([0.0, 1.0, 0.5, 1 / 3, 2.0, 1e16], size=n)
        cands = []
        for seq in range(int(rng.integers(0, 30))):
            workers = int(rng.integers(1, 6))
            ps = int(rng.integers(0, 2))
            placement = tuple(int(x) for x in rng.integers(0, n, size=workers + ps))
            per = float(rng.choice([1.0, 2.0, 4.0] if rng.random() < 0.8 else [0.5, 1 / 3, 1e16]))
            cands.append(_rec(placement, workers, per * workers, seq))
        m = int(rng.integers(1, 5))
        for need in (0.0, float(rng.integers(0, 40)), 1e9):
            got = victims_near(free, cands, m, need)
            want = _reference(free, cands, m, need)
            assert (got is None) == (want is None)
            if got is not None:
                assert [id(v) for v in got] == [id(v) for v in want]


def test_victims_near_adds_in_order_where_whole_numbers_round():
    """1e16 is whole but too large: two workers' GPUs added one by one vanish (1e16 + 1 rounds back to 1e16), summed
    per node first they do not, and node 0 would tie node 1 and win it. The bound on the free counts keeps the
    one-by-one sums (fails if it is dropped)."""
    free = np.array([1e16, 1e16 + 2.0])
    on_first = _rec((0, 0), 2, 2.0)
    on_second = _rec((1,), 1, 0.0)
    assert victims_near(free, [on_first, on_second], 1, 0.0) == [on_second] == _reference(free, [on_first, on_second], 1, 0.0)


def test_victims_near_adds_fractions_in_order():
    """Thirds of a GPU added one by one on 1 free GPU make 1.9999999999999998, summed first 2.0 (a tie with node 1,
    which node 0 would win): fractional shares go worker by worker (fails if the whole-share check is dropped)."""
    free = np.array([1.0, 2.0])
    thirds = _rec((0, 0, 0), 3, 1.0)
    assert not thirds.spread()[2][0].is_integer()
    other = _rec((1,), 1, 0.0)
    assert victims_near(free, [thirds, other], 1, 0.0) == [other] == _reference(free, [thirds, other], 1, 0.0)


def test_victims_near_reads_a_new_placement():
    """A candidate placed again is read again (its per-node GPUs are kept per placement)."""
    free = np.array([0.0, 0.0, 0.0])
    rec = _rec((0,), 1, 4.0)
    assert victims_near(free, [rec], 1, 4.0) == [rec]
    rec.job.placement = (2,)
    first, second = _rec((0,), 1, 1.0), _rec((1,), 1, 2.0)
    assert victims_near(free, [first, second, rec], 1, 0.0) == [rec]  # (read as before: node 0 with 5 GPUs)
    assert victims_near(free, [first, second, rec], 1, 5.0) is None


class _CheckedSums(NearSums):
    """Every kept sum compared, at that moment, with the candidates' GPUs summed afresh from their placements."""

    calls = 0

    def sums(self, queue: int, cands: list[Rec], n_nodes: int) -> np.ndarray | None:
        got = super().sums(queue, cands, n_nodes)
        fresh = np.zeros(n_nodes)
        for v in cands:
            per: dict[int, float] = {}
            for i in v.job.placement[: v.job.n_workers]:
                per[i] = per.get(i, 0.0) + v.gpus / v.job.n_workers
            for i, x in per.items():
                fresh[i] += x
        assert got is not None and got.tolist() == fresh.tolist(), queue
        _CheckedSums.calls += 1
        return got


@pytest.mark.parametrize("kw", [{}, {"gittins": True}, {"min_run_time": 600.0}])
def test_kept_victim_sums_equal_fresh_sums(kw):
    """The victims' per-node GPUs kept across preemptions (:class:`NearSums`) equal a fresh sum at every call on the
    contended Philly run, and the run is the one without them (fails without the stop reports of ``_set_running``,
    and with a candidate that left, e.g. ended, not subtracted)."""
    jobs = load_trace("philly_82k", "philly", limit=2500).jobs
    _CheckedSums.calls = 0
    checked = Tiresias(**kw)
    checked._near = _CheckedSums()
    out = simulate(jobs, cluster_from_arg("philly-512"), checked)
    plain_out = simulate(jobs, cluster_from_arg("philly-512"), _FreshSums(**kw))
    assert _CheckedSums.calls > 100
    assert fingerprint(out.result.record, out.metrics) == fingerprint(plain_out.result.record, plain_out.metrics)


class _FreshSums(Tiresias):
    """Never keeps the victims' sums: each call of ``victims_near`` sums its candidates afresh."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self._near = _NoSums()


class _NoSums(NearSums):
    def sums(self, queue: int, cands: list[Rec], n_nodes: int) -> np.ndarray | None:
        return None


def test_no_kept_sums_on_a_small_cluster():
    """On the Muri artifact's 8 nodes the candidates are summed afresh (cheaper there than the kept sums' set
    differences): no sums are kept (fails if ``NEAR_NODES`` is dropped)."""
    jobs = load_trace("bench/reference/inputs/muri_trace1.csv", "muri").jobs[:400]
    policy = Tiresias()
    out = simulate(jobs, cluster_from_arg("muri-n8g8"), policy)
    assert out.metrics.preemptions > 50
    assert not policy._near._by_queue and not policy._near._stopped
