"""Gavel's Gandiva on its round mechanism, and the Gavel physics of job pairs sharing GPUs (issue 19)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from cohabit.data.gavel_table import pair_throughput, solo_throughputs
from cohabit.engine.record import EventKind
from cohabit.policies import make_policy
from cohabit.policies.gavel.gandiva import GavelGandiva
from cohabit.sim.physics import SimConfig, physics_config
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace
from cohabit.spec.cluster import gavel_cluster

LINE = "{kind}\tpython3 x.py\tdir\t--num_steps\t1\t{steps}\t{scale}\t1\t-1\t{arrival}"
R18 = "ResNet-18 (batch size 64)"  # on a V100 next to LM (batch size 5): its full speed; the LM at 0.54 of its own
LM = "LM (batch size 5)"


def _trace(tmp_path: Path, *jobs: tuple[str, int, int, float]) -> list:
    p = tmp_path / "t.trace"
    p.write_text("\n".join(LINE.format(kind=k, steps=s, scale=n, arrival=a) for k, s, n, a in jobs) + "\n")
    return load_trace(p, "gavel").jobs


def _run(jobs, cluster, policy: str = "gavel-gandiva", config: SimConfig | None = None):
    return simulate(jobs, cluster, make_policy(policy), config=config or physics_config("gavel"),
                    decision_period=360.0, first_round=0.0)


def _v100(key: tuple[str, int]) -> float:
    return solo_throughputs()["v100"][key]


def test_an_oversubscribed_gpu_runs_a_pair_at_gavels_measured_pair_throughputs(tmp_path: Path) -> None:
    # two one-GPU jobs on one V100: Gandiva packs them; each runs at its pair throughput until the
    # ResNet ends, then the LM alone at its own speed
    r_steps, l_steps = 24_000, 100_000
    jobs = _trace(tmp_path, (R18, r_steps, 1, 0.0), (LM, l_steps, 1, 0.0))
    pr, pl = pair_throughput("v100", (R18, 1), (LM, 1))
    out = _run(jobs, gavel_cluster(1, 0, 0))
    j = out.result.jobs
    t1 = r_steps / pr
    assert t1 < l_steps / pl  # the ResNet ends first
    assert j["gavel-0"].end_time == pytest.approx(t1, rel=1e-6)
    assert j["gavel-1"].end_time == pytest.approx(t1 + (l_steps - pl * t1) / _v100((LM, 1)), rel=1e-6)
    started = {e.job: e.data for e in out.result.record.of_kind(EventKind.STARTED)}
    assert started["gavel-1"]["colocated_with"] == ["gavel-0"]
    # Lucid's pair speeds (cohabit's own physics for shared GPUs) give other times
    lucid = _run(jobs, gavel_cluster(1, 0, 0), config=SimConfig(pair_speeds="lucid", checkpoint_s=0, restore_s=0))
    assert lucid.result.jobs["gavel-1"].end_time != pytest.approx(j["gavel-1"].end_time, rel=1e-3)


class _Spy(GavelGandiva):
    """Records, at each round, which running jobs time-share a GPU with which."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed=seed)
        self.seen: list[dict[str, set[str]]] = []

    def decide(self, view):  # type: ignore[override]
        self.seen.append(self._sharers(view))
        return super().decide(view)


@pytest.mark.parametrize("seed", range(4))
def test_a_pair_shares_exactly_its_partners_gpu(tmp_path: Path, seed: int) -> None:
    # 2 V100s on one server, three one-GPU jobs: the first runs alone on GPU 0, then the others arrive
    # and Gandiva pairs two of the three (at random). The pair's second job must time-share its
    # partner's GPU, not the other job's (the ledger alone would pick the lowest-numbered one)
    jobs = _trace(tmp_path, (R18, 50_000, 1, 0.0), (LM, 200_000, 1, 100.0), (LM, 150_000, 1, 100.0))
    spy = _Spy(seed)
    out = simulate(jobs, gavel_cluster(2, 0, 0, gpus_per_server=2), spy, config=physics_config("gavel"),
                   decision_period=360.0, first_round=0.0)
    assert out.metrics.jobs_finished == 3
    partner = {}
    for e in out.result.record.of_kind(EventKind.STARTED, EventKind.RESUMED):
        if e.data.get("colocated_with"):
            partner[e.job] = e.data["colocated_with"][0]
    assert partner, "no pair was formed on an oversubscribed cluster"
    shared = [s for s in spy.seen if s]
    assert shared
    for s in shared:
        for guest, lead in partner.items():
            if guest in s:
                assert s[guest] == {lead}


def test_pairs_of_multi_gpu_jobs_never_share(tmp_path: Path) -> None:
    # Gavel measured no pair throughput for multi-GPU jobs: such a pair is drawn but never runs; its jobs
    # run on the GPUs left over (priority 0) and still finish
    jobs = _trace(tmp_path, (R18, 30_000, 2, 0.0), (LM, 90_000, 2, 0.0))
    assert pair_throughput("v100", (R18, 2), (LM, 2)) == (0.0, 0.0)
    out = _run(jobs, gavel_cluster(2, 0, 0, gpus_per_server=2))
    assert out.metrics.jobs_finished == 2
    assert not [e for e in out.result.record if e.data and e.data.get("colocated_with")]


def test_no_packing_while_the_jobs_fit(tmp_path: Path) -> None:
    jobs = _trace(tmp_path, (R18, 24_000, 1, 0.0), (LM, 100_000, 1, 0.0))
    out = _run(jobs, gavel_cluster(2, 0, 0, gpus_per_server=2))
    assert not [e for e in out.result.record if e.data and e.data.get("colocated_with")]
    assert out.result.jobs["gavel-0"].end_time == pytest.approx(24_000 / _v100((R18, 1)), rel=1e-6)


# ------------------------------------------------------------------ the allocation, on a stand-in view
def _view(*jobs: tuple[str, str, int]) -> SimpleNamespace:
    """What ``GavelGandiva.allocation`` reads: jobs (id, model, GPUs) in arrival order."""
    views = {jid: SimpleNamespace(id=jid, seq=i, spec=SimpleNamespace(model=model), gpus=g)
             for i, (jid, model, g) in enumerate(jobs)}
    return SimpleNamespace(jobs=views, gpu_col=0, target_workers=lambda j: j.gpus,
                           demand_vector=lambda j: np.array([1.0]))


@pytest.mark.parametrize("seed", range(5))
def test_allocation_pairs_same_size_jobs_and_splits_the_cluster_equally(seed: int) -> None:
    view = _view(("a", R18, 1), ("b", LM, 2), ("c", R18, 2), ("d", LM, 1), ("e", R18, 1), ("f", LM, 2))
    pol = GavelGandiva(seed=seed)
    jobs = list(view.jobs.values())
    alloc = pol.allocation(view, jobs, {"v100": 2.0})
    pairs = [u for u in alloc if not isinstance(u, str) and alloc[u]["v100"] > 0]
    assert pairs, "9 GPUs asked of 2: Gandiva packs"
    for a, b in pairs:
        assert view.jobs[a].gpus == view.jobs[b].gpus and view.jobs[a].seq < view.jobs[b].seq
    combos = [u for u in alloc if alloc[u]["v100"] > 0]
    paired = {x for p in pairs for x in p}
    assert {u for u in combos if isinstance(u, str)} == {j.id for j in jobs} - paired
    m = len(combos)
    for u in combos:  # N / m / s, at most all of the unit's time
        s = view.jobs[u if isinstance(u, str) else u[0]].gpus
        assert alloc[u]["v100"] == pytest.approx(min(2.0 / m / s, 1.0))
    for x in paired:  # a paired job runs only through its pair
        assert alloc[x]["v100"] == 0.0
    # the next allocation keeps the pairs whose normalized throughput is at least 1 (and draws again among the rest)
    again = pol.allocation(view, jobs, {"v100": 2.0})
    good = {p for p in pairs if pol.normalized_throughput(view, view.jobs[p[0]], view.jobs[p[1]], {"v100": 2.0}) >= 1}
    assert good <= {u for u in again if not isinstance(u, str) and again[u]["v100"] > 0}


def test_allocation_drops_pairs_below_a_normalized_throughput_of_one_or_with_a_job_gone() -> None:
    rec = "Recommendation (batch size 512)"  # two of them on a V100: 0.35 of one job's throughput together
    view = _view(("a", rec, 1), ("b", rec, 1), ("c", R18, 1), ("d", LM, 1), ("e", R18, 1), ("f", LM, 1))
    pol = GavelGandiva()
    jobs = view.jobs
    assert pol.normalized_throughput(view, jobs["a"], jobs["b"], {"v100": 1.0}) == pytest.approx(0.3468, abs=1e-4)
    assert pol.normalized_throughput(view, jobs["c"], jobs["d"], {"v100": 1.0}) == pytest.approx(1.5435, abs=1e-4)
    assert pol.normalized_throughput(view, jobs["c"], jobs["d"], {"v100": 1.0, "k80": 1.0}) > 1.5435
    pol._partner = {"a": "b", "b": "a", "c": "d", "d": "c", "e": "f", "f": "e"}
    pol.keep_pairs(view, {"a", "b", "c", "d", "e"}, {"v100": 1.0})
    assert pol._partner == {"c": "d", "d": "c"}


def test_no_pairs_while_the_jobs_fit() -> None:
    view = _view(("a", R18, 1), ("b", LM, 1))
    alloc = GavelGandiva().allocation(view, list(view.jobs.values()), {"v100": 2.0})
    assert alloc["a"]["v100"] == alloc["b"]["v100"] == 1.0
    assert all(x == 0.0 for u, row in alloc.items() if not isinstance(u, str) for x in row.values())


def test_colocate_on_hosts_is_refused_when_no_host_holds_gpus(tmp_path: Path) -> None:
    from cohabit.engine.actions import Colocate, Start
    from cohabit.engine.loop import Scheduler
    from cohabit.policies.base import BasePolicy
    from cohabit.sim.backend import SimBackend

    class Once(BasePolicy):
        name = "once"

        def __init__(self) -> None:
            self.done = False

        def decide(self, view):  # type: ignore[override]
            if self.done:
                return [Start(j, (0,)) for j in view.pending]
            self.done = True  # gavel-2 is pending, so it holds no GPU to share
            return [Start("gavel-0", (0,)), Colocate(("gavel-1", "gavel-2"), (0,), on_hosts=True)]

    jobs = _trace(tmp_path, (R18, 1_000, 1, 0.0), (LM, 1_000, 1, 0.0), (LM, 1_000, 1, 0.0))
    sched = Scheduler(gavel_cluster(4, 0, 0), Once(), SimBackend(jobs, physics_config("gavel")))
    sched.run([j.spec for j in jobs])
    (rej,) = sched.record.of_kind(EventKind.ACTION_REJECTED)
    assert rej.data["action"] == "Colocate" and "none of the hosts" in rej.data["reason"]
