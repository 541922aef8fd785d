"""Sanity relations between the baselines that the papers' evaluations rely on (issue 3).

* SRTF with the oracle does not lose to FIFO on average JCT (480-job Philly-derived trace);
* Tiresias beats FIFO on average JCT on the same trace;
* DRF has the best Jain index over tenants among the policies that do not aim at fairness, on
  the multi-tenant workload of ``bench/baselines.py`` (four tenants, four demand shapes).

A policy that is not registered yet is skipped with a message saying so; any other failure fails.
"""

from __future__ import annotations

from functools import cache
from types import ModuleType

import pytest

from cohabit.policies import REGISTRY, make_policy
from cohabit.report import Metrics
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace
from cohabit.spec import preset

from conftest import load_bench

#: Registered policies whose objective is not fairness between jobs or tenants (JCT, packing,
#: placement, arrival order, model quality). Left out: drf itself, static (isolation), themis
#: (finish-time fairness), tiresias (least attained service) and gandiva (time slicing).
NON_FAIR = ("fifo", "fifo-backfill", "srtf", "tetris", "lb", "binpack", "naive", "optimus", "slaq")


def need(name: str) -> None:
    if name not in REGISTRY:
        pytest.skip(f"policy {name!r} is not registered yet (cohabit.policies.REGISTRY)")


@cache
def tiresias_480(name: str, oracle: bool = False) -> Metrics:
    load = load_trace("tiresias_480", "tiresias")
    return simulate(load.jobs, preset("tiresias"), make_policy(name, oracle=oracle), oracle=oracle).metrics


def bench() -> ModuleType:
    return load_bench("baselines")


def test_srtf_oracle_not_worse_than_fifo_on_average_jct() -> None:
    fifo, srtf = tiresias_480("fifo"), tiresias_480("srtf", oracle=True)
    assert fifo.jobs_finished == srtf.jobs_finished == 480
    assert srtf.avg_jct <= fifo.avg_jct


def test_tiresias_beats_fifo_on_average_jct() -> None:
    need("tiresias")
    fifo, tiresias = tiresias_480("fifo"), tiresias_480("tiresias")
    assert tiresias.jobs_finished == 480
    assert tiresias.avg_jct < fifo.avg_jct


def test_drf_has_the_best_tenant_jain_index_among_non_fair_policies() -> None:
    need("drf")
    jobs, cluster = bench().multi_tenant_workload()
    drf = simulate(jobs, cluster, make_policy("drf")).metrics
    assert drf.jobs_finished == len(jobs)
    others: dict[str, float] = {}
    for name in (n for n in NON_FAIR if n in REGISTRY):
        for oracle in (False, True):
            policy = make_policy(name, oracle=oracle)
            if oracle and not policy.uses_oracle:
                continue
            m = simulate(jobs, cluster, policy, oracle=oracle).metrics
            assert m.tenant_jain_fairness is not None
            others[policy.name] = m.tenant_jain_fairness
    assert drf.tenant_jain_fairness is not None
    assert drf.tenant_jain_fairness > max(others.values()), (drf.tenant_jain_fairness, others)
