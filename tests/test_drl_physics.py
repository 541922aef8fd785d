"""Server-level interference of Bao et al.'s world (sim.drl_physics) and its workload generator."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cohabit.engine.ledger import Allocation, TaskSlot
from cohabit.sim.backend import SimBackend
from cohabit.sim.drl_physics import InterferenceWorld, Placed, comm_share, cross_share, enabled_for, speeds
from cohabit.sim.drl_workload import MODELS, drl_cluster, drl_job, generate, write
from cohabit.sim.physics import SimConfig
from cohabit.sim.runner import config_for
from cohabit.sim.traces import load_trace
from cohabit.spec.cluster import ClusterSpec, preset
from cohabit.spec.resources import Resources

CORES = {s: 8.0 for s in range(6)}
W = InterferenceWorld()


def solo(model: str, allreduce: bool = False) -> float:
    job = Placed(model, allreduce, {0: 1}, {} if allreduce else {0: 1})
    return speeds([job], CORES, W)[0]


def test_colocated_jobs_slow_each_other_by_model_pair():
    """Packing the paper's six 1-PS/1-worker jobs onto three servers slows every one (Fig. 1)."""
    dedicated = [Placed(m, False, {i: 1}, {i: 1}) for i, m in enumerate(MODELS)]
    packed = [Placed(m, False, {i // 2: 1}, {i // 2: 1}) for i, m in enumerate(MODELS)]
    alone, together = speeds(dedicated, CORES, W), speeds(packed, CORES, W)
    slow = [1 - b / a for a, b in zip(alone, together)]
    assert all(s > 0.05 for s in slow), slow
    assert 0.15 < sum(slow) / len(slow) < 0.5  # paper: 33% on average
    # model-dependent: ResNeXt-110 next to CPU-heavy CTC suffers more than next to VGG-16
    rx = "resnext-110"
    next_ctc = speeds([Placed(rx, False, {0: 1}, {0: 1}), Placed("cnn-text-classification", False, {0: 1}, {0: 1})],
                      CORES, W)[0]
    next_vgg = speeds([Placed(rx, False, {0: 1}, {0: 1}), Placed("vgg-16", False, {0: 1}, {0: 1})], CORES, W)[0]
    assert next_ctc < next_vgg < solo(rx)


def test_spreading_costs_communication_heavy_models_most():
    def spread_factor(model: str) -> float:
        apart = speeds([Placed(model, False, {0: 1}, {1: 1})], CORES, W)[0]
        return apart / solo(model)

    assert comm_share("vgg-16") > comm_share("cnn-text-classification")
    assert spread_factor("vgg-16") < spread_factor("cnn-text-classification") < 1.0


def test_cross_share_of_ps_and_ring_jobs():
    assert cross_share(Placed("vgg-16", False, {0: 2}, {0: 1})) == 0.0
    assert cross_share(Placed("vgg-16", False, {0: 1, 1: 1}, {0: 1})) == pytest.approx(0.5)
    assert cross_share(Placed("wlm", True, {0: 3}, {})) == 0.0
    assert cross_share(Placed("wlm", True, {0: 2, 1: 1}, {})) == pytest.approx(2 / 3)


def test_processor_sharing_when_real_cpu_use_exceeds_cores():
    crowd = [Placed("cnn-text-classification", False, {0: 1}, {0: 1}) for _ in range(6)]
    tight = speeds(crowd, {0: 4.0}, W)[0]
    roomy = speeds(crowd, {0: 64.0}, W)[0]
    assert tight < roomy


def test_world_is_switched_on_by_the_cluster_only():
    assert enabled_for(preset("drl")) and enabled_for(preset("drl-30"))
    assert len(preset("drl-30").nodes) == 30
    assert config_for(preset("drl")).interference is not None
    plain = ClusterSpec.homogeneous("plain", 6, Resources(cpu=8, gpu=2, mem_gb=48))
    assert config_for(plain).interference is None
    assert config_for(preset("tiresias")).interference is None


def _alloc(job_id: str, nodes: list[int], n_workers: int, gpu: int = 0) -> Allocation:
    slots = tuple(TaskSlot(node=n, devices=((gpu + i, 1.0),) if i < n_workers else ()) for i, n in enumerate(nodes))
    return Allocation(job=job_id, slots=slots, total=Resources())


def _finish_time(neighbour_node: int, cfg: SimConfig) -> float:
    """Finish time of a ResNeXt job on server 0 while a CTC job runs on ``neighbour_node``."""
    a = drl_job("a", "resnext-110", False, 1, 1, 1200.0, 0.0)
    b = drl_job("b", "cnn-text-classification", False, 1, 1, 100 * 1200.0, 0.0)
    be = SimBackend([a, b], cfg)
    be.launch(a.spec, _alloc("a", [0, 0], 1), 0.0, from_checkpoint=False)
    be.launch(b.spec, _alloc("b", [neighbour_node, neighbour_node], 1, gpu=1), 0.0, from_checkpoint=False)
    while True:
        t, events = be.advance(float("inf"))
        if any(e.job == "a" and e.kind.name == "FINISHED" for e in events):
            return t


def test_simulator_slows_a_job_when_another_shares_its_server():
    cfg = config_for(preset("drl"))
    alone = _finish_time(3, cfg)
    shared = _finish_time(0, cfg)
    assert alone == pytest.approx(1200.0, rel=1e-6)  # its length alone is what the generator asked for
    assert shared > alone * 1.2
    off = replace(cfg, interference=None)  # the same jobs without the world: no server-level coupling
    assert _finish_time(0, off) == pytest.approx(_finish_time(3, off))


def test_generator_follows_the_papers_settings(tmp_path):
    jobs = generate(40, arrival="uniform", seed=3)
    assert 40 <= len(jobs) <= 200
    arch = [j.spec.architecture for j in jobs]
    assert 0.3 < arch.count("ps") / len(arch) < 0.7
    for j in jobs:
        assert 1 <= j.spec.workers.count <= 3 and j.spec.model in MODELS
        assert (j.spec.num_ps == 0) == (j.spec.architecture == "allreduce")
        assert j.spec.num_ps <= 3
    per_interval = [0] * 40
    for j in jobs:
        per_interval[int(j.spec.submit_time // 1200)] += 1
    assert max(per_interval) <= 5 and min(per_interval) >= 1
    assert sum(per_interval) / 40 == pytest.approx(3, abs=0.6)
    big = generate(10, arrival="poisson", seed=3, n_servers=30)
    assert max(j.spec.workers.count for j in big) > 3
    path = tmp_path / "w.yaml"
    write(jobs, path)
    back = load_trace(str(path), "cohabit")
    assert back.default_cluster == "drl" and [j.spec for j in back.jobs] == [j.spec for j in jobs]


def test_bursty_arrivals_are_burstier_than_uniform():
    def dispersion(pattern: str) -> float:
        counts = [0] * 200
        for j in generate(200, arrival=pattern, seed=5):
            counts[int(j.spec.submit_time // 1200)] += 1
        mean = sum(counts) / len(counts)
        return sum((c - mean) ** 2 for c in counts) / len(counts) / mean

    assert dispersion("bursty") > 2 * dispersion("poisson") > 0
    with pytest.raises(ValueError, match="arrival pattern"):
        generate(3, arrival="weekly")
    assert drl_cluster(6).name == "drl"
