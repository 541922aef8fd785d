"""MLF-C (load control), the learning-curve model, the MLFS workload generator, MLF-RL's weights."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cohabit.engine.job import JobView
from cohabit.engine.state import JobState
from cohabit.models.mlfs_curve import packaged_curves, predict
from cohabit.policies import make_policy
from cohabit.policies.mlfs.control import LoadControl, effective_option
from cohabit.policies.mlfs.rl import MLFRL, Net, converged, load_weights
from cohabit.sim.mlfs_workload import generate
from cohabit.sim.runner import simulate
from cohabit.sim.traces import load_trace
from cohabit.sim.truth import JobTruth, TraceJob
from cohabit.spec import ClusterSpec, Resources

from test_mlfs_graph import graph_job


def test_curve_model_beats_last_value_on_held_out_families() -> None:
    curves = packaged_curves()
    errs, naive, none = [], [], 0
    for fam in ("alexnet", "lstm", "vgg"):
        for run in curves[fam][::10]:
            acc = run.accuracy
            m = 8  # 40 % of the 20 epochs observed
            p = predict(np.arange(1, m + 1) / 20, acc[:m], 1.0)
            if p is None:  # no saturating member fits (a falling curve): no prediction
                none += 1
                continue
            errs.append(abs(p.mean - acc[-1]))
            naive.append(abs(acc[m - 1] - acc[-1]))
    assert none <= 0.2 * (len(errs) + none)
    assert np.mean(errs) < 0.8 * np.mean(naive)
    assert np.mean(errs) < 0.05


def _job(option: str, may_change: bool = False, accuracy: float | None = 0.6) -> JobView:
    return JobView(graph_job(stop_option=option, stop_option_may_change=may_change, accuracy=accuracy), 0)


def test_option_switches_only_under_overload_when_allowed() -> None:
    assert effective_option(_job("max-iterations", True), overloaded=False) == "max-iterations"
    assert effective_option(_job("max-iterations", False), overloaded=True) == "max-iterations"
    assert effective_option(_job("max-iterations", True), overloaded=True) == "accuracy"
    assert effective_option(_job("max-iterations", True, accuracy=None), overloaded=True) == "optstop"
    assert effective_option(_job("optstop", True), overloaded=True) == "accuracy"


def test_verdicts_required_accuracy_and_optstop() -> None:
    ctl = LoadControl()
    job = _job("accuracy")
    job._metrics["accuracy"] = [(10.0, 0.3), (20.0, 0.5), (30.0, 0.61)]
    assert "required accuracy" in ctl.verdict(job, "accuracy")
    assert ctl.verdict(job, "max-iterations") is None
    flat = _job("optstop", accuracy=None)  # 100 iterations; a curve that has saturated
    flat._metrics["accuracy"] = [(i * 10.0, 0.7 - 0.3 * np.exp(-3 * i)) for i in range(1, 9)]
    assert "optstop" in LoadControl(epsilon=0.02).verdict(flat, "optstop")
    rising = _job("optstop", accuracy=None)
    rising._metrics["accuracy"] = [(i * 10.0, 0.1 + 0.05 * i) for i in range(1, 5)]
    assert LoadControl(epsilon=0.02).verdict(rising, "optstop") is None


ALEXNET0 = tuple(packaged_curves()["alexnet"][0].accuracy)  # a real learning curve, one value per epoch


def test_mlfs_stops_jobs_early_with_their_accuracy() -> None:
    cluster = ClusterSpec.homogeneous("t", 2, Resources(gpu=4, cpu=32, mem_gb=256, net_gbps=10))
    jobs = [TraceJob(graph_job(f"j{i}", partitions=1, iterations=3000, accuracy=0.55, stop_option="accuracy",
                               urgency=5.0),
                     JobTruth(iterations=3000, compute_s=1.0, accuracy=ALEXNET0)) for i in range(3)]
    out = simulate(jobs, cluster, make_policy("mlfs"))
    ends = [j for j in out.result.jobs.values()]
    assert all(j.state is JobState.STOPPED_EARLY for j in ends)
    assert all("accuracy 0." in j.reason for j in ends)
    assert all(j.end_time < 3000.0 for j in ends)
    plain = simulate(jobs, cluster, make_policy("mlfs-h"))
    assert all(j.state is JobState.FINISHED for j in plain.result.jobs.values())


def test_workload_follows_the_paper(tmp_path: Path) -> None:
    jobs = generate(60, seed=3)
    assert {j.spec.num_gpus for j in jobs} <= {1, 2, 4, 8, 16, 32}
    assert {j.spec.model for j in jobs} <= {"alexnet", "resnet", "mlp", "lstm", "svm"}
    for j in jobs:
        g = j.spec.graph
        assert g is not None and g.num_tasks == j.spec.num_gpus
        if j.spec.model == "svm":
            assert g.num_partitions == 1
        assert 50 <= g.exchange_mb <= 100 and 50 <= g.activation_mb <= 100
        assert 1 <= j.spec.urgency <= 10
        assert j.spec.deadline >= 1800.0
        assert j.truth.accuracy and j.truth.compute_s > 0
    subs = [j.spec.submit_time for j in jobs]
    assert subs == sorted(subs) and subs[-1] <= 7 * 86400
    path = tmp_path / "w.yaml"
    from cohabit.sim.mlfs_workload import write
    write(path, 10, seed=1)
    back = load_trace(path, "cohabit")
    assert len(back.jobs) == 10 and back.default_cluster == "mlfs"


def test_shipped_weights_load_and_decide() -> None:
    net, meta = load_weights()
    assert "command" in meta and "seed" in meta and "converged" in meta
    assert converged() is bool(meta["converged"])
    pol = make_policy("mlfs-rl")
    assert isinstance(pol, MLFRL)
    jobs = generate(12, seed=5, compress=200)
    out = simulate(jobs, ClusterSpec.homogeneous("t", 2, Resources(gpu=4, cpu=32, mem_gb=244, net_gbps=10)), pol)
    assert sum(1 for j in out.result.jobs.values() if j.state is JobState.FINISHED) >= 1


def test_net_scores_rank_by_its_weights() -> None:
    w1 = np.zeros((2, 14))
    w1[0, 0] = 1.0  # urgency feature
    net = Net(w1, np.zeros(2), np.array([1.0, 0.0]), 0.0)
    x = np.zeros((2, 14))
    x[1, 0] = 0.9
    assert np.argmax(net.scores(x)) == 1
    with pytest.raises(ValueError, match="bad MLF-RL weights"):
        Net.from_json({"w1": [[1.0]]})
    assert json.loads(json.dumps(net.to_json()))["b2"] == 0.0


def test_trainer_imitates_then_updates_and_reports(tmp_path: Path) -> None:
    from cohabit.learn.mlfs_rl import discounted, train
    r = np.array([1.0, 0.0, 2.0])
    assert discounted(r, eta=0.5, m=10) == pytest.approx([1.0 + 0.25 * 2.0, 0.5 * 2.0, 2.0])
    net, meta = train(jobs=18, seed=1, imitation_runs=1, imitation_epochs=20, pg_epochs=1, compress=2000,
                      batch=1, eval_runs=1, log=lambda s: None)
    assert net.w1.shape == (16, 14)
    assert meta["imitation_rounds"] >= 1 and len(meta["episode_rewards"]) == 1
    assert len(meta["held_out_scores"]) == 2 and meta["held_out_score_mlfh"] > 0  # after imitation, after epoch 1
    assert meta["converged"] is False  # one epoch cannot satisfy the criterion (min_epochs, window)


def test_convergence_criterion_is_a_settled_held_out_score() -> None:
    from cohabit.learn.mlfs_rl import is_converged
    assert not is_converged([10.0, 10.0, 10.0], window=3, tol=0.02)  # too few evaluations
    assert is_converged([5.0, 10.0, 10.1, 9.95, 10.05], window=3, tol=0.02)  # band 0.15 <= 2% of ~10
    assert not is_converged([5.0, 10.0, 10.4, 9.95, 10.05], window=3, tol=0.02)  # band 0.45 > 0.2
    assert not is_converged([10.0, 10.0, 10.0, 10.0, 5.0], window=3, tol=0.02)  # the last moved


def test_mlfs_switches_only_to_a_converged_network_at_least_as_good_as_mlf_h(tmp_path: Path) -> None:
    from cohabit.policies.mlfs import policy as mlfs_policy
    from cohabit.policies.mlfs import rl
    net, meta = load_weights()
    (tmp_path / "w.json").write_text(json.dumps(net.to_json()))

    def ready(**changes: object) -> bool:
        (tmp_path / "w.meta.json").write_text(json.dumps({**meta, **changes}))
        load_weights.cache_clear()
        return rl.switch_ready(str(tmp_path / "w.json"))

    assert not ready(converged=False, held_out_scores=[2.0], held_out_score_mlfh=1.0)
    assert not ready(converged=True, held_out_scores=[5.0, 0.9], held_out_score_mlfh=1.0)  # worse than MLF-H
    assert ready(converged=True, held_out_scores=[0.5, 1.0], held_out_score_mlfh=1.0)
    load_weights.cache_clear()
    # the shipped weights: mlfs runs whichever scheduler the rule picks for them
    expected = rl.MLFRL if rl.switch_ready() else mlfs_policy.MLFH
    assert type(make_policy("mlfs").inner) is expected
