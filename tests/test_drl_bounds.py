"""Lower bounds of Bao et al.'s world (sim.drl_bounds): the least cross-server share of a job and
the solo run time no placement can beat."""

from __future__ import annotations

import itertools

import pytest

from cohabit.sim.drl_bounds import min_cross_share, no_interference_world, solo_bound, solo_runtime
from cohabit.sim.drl_physics import Placed, cross_share
from cohabit.sim.drl_workload import DEMANDS, SERVER, generate
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import simulate
from cohabit.policies import make_policy
from cohabit.spec.cluster import preset


def brute_min_cross(model: str, allreduce: bool, w: int, p: int, servers: int) -> float:
    """Every assignment of the job's tasks to ``servers`` empty servers that fits: the least share."""
    w_cpu, w_mem, p_cpu, p_mem = DEMANDS[model]
    wd = (1.0, w_cpu + (1 if allreduce else 0), w_mem)
    pd = (0.0, p_cpu, p_mem)
    cap = (SERVER["gpu"], SERVER["cpu"], SERVER["mem_gb"])
    best = 1.0
    for assign in itertools.product(range(servers), repeat=w + p):
        used = [[0.0, 0.0, 0.0] for _ in range(servers)]
        for i, s in enumerate(assign):
            d = wd if i < w else pd
            for r in range(3):
                used[s][r] += d[r]
        if any(used[s][r] > cap[r] + 1e-9 for s in range(servers) for r in range(3)):
            continue
        workers, ps = {}, {}
        for i, s in enumerate(assign):
            (workers if i < w else ps)[s] = (workers if i < w else ps).get(s, 0) + 1
        best = min(best, cross_share(Placed(model, allreduce, workers, ps)))
    return best


@pytest.mark.parametrize("model,allreduce,w,p", [
    ("vgg-16", False, 2, 3), ("vgg-16", False, 3, 3), ("resnet-50", False, 3, 2), ("cnn-text-classification", False, 2, 3),
    ("seq2seq", False, 1, 3), ("vgg-16", True, 3, 0), ("cnn-text-classification", True, 4, 0), ("wlm", True, 2, 0),
])
def test_min_cross_share_is_the_least_over_every_feasible_placement(model, allreduce, w, p):
    """The closed form equals exhaustive search over all placements on 4 servers (CPU, memory and
    GPU binding: 2 VGG-16 workers leave room for only 2 of its parameter servers)."""
    assert min_cross_share(model, allreduce, w, p) == pytest.approx(brute_min_cross(model, allreduce, w, p, 4))


def test_solo_runtime_bounds_every_job_under_every_policy():
    """No job of a 30-server workload runs faster than its solo bound, whatever the policy; a job
    that fits on one server alone is bounded by its length alone exactly."""
    jobs = generate(4, arrival="uniform", seed=7, n_servers=30)
    cluster = preset("drl-30")
    for policy in ("lb", "lif-quad", "tetris"):
        for cfg in (None, SimConfig(interference=no_interference_world(30))):
            res = simulate(jobs, cluster, make_policy(policy), config=cfg)
            jr = res.metrics.jobs
            by_id = {j.spec.id: j for j in jobs}
            for i, s, e in zip(jr.ids, jr.start, jr.end):
                assert e - s >= solo_runtime(by_id[i]) * (1 - 1e-6), (policy, i)
    single = [j for j in jobs if j.spec.workers.count == 1]
    assert single
    from cohabit.sim.drl_physics import base_speed
    for j in single:
        p = 0 if j.spec.ps is None else j.spec.ps.count
        alone = j.truth.iterations / base_speed(j.truth.app, j.spec.architecture == "allreduce", 1, p)
        if min_cross_share(j.truth.app, j.spec.architecture == "allreduce", 1, p) == 0.0:
            assert solo_runtime(j) == pytest.approx(alone)
    assert solo_bound(jobs) == pytest.approx(sum(solo_runtime(j) for j in jobs) / len(jobs) / 1200.0)
