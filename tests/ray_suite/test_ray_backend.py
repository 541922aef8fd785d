"""RayBackend on a 2-node local Ray cluster: training, pause/resume/migrate/resize, faults, lost nodes.

Runs inside the loopback-only namespace made by ``tests/test_runtime_ray.py``.
Node ``i`` of every test cluster is Ray node ``i`` (custom resource
``cohabit_node_<i>``), so moving a job between logical nodes moves it between
Ray nodes (raylets).
"""

from __future__ import annotations

import os
import time

import pytest

from cohabit.engine.backend import BackendEventKind as K
from cohabit.runtime.ray_backend import RayBackend

from ray_suite.conftest import node_args
from runtime_helpers import allocate, cluster, ended, final_event, job, kill_and_recover, losses, wait_for
from test_runtime_local import _assert_close, reference

pytestmark = pytest.mark.usefixtures("ray_cluster")
NUMPY = {"name": "mlr", "data": "synthetic", "n_samples": 2000, "n_features": 20, "seed": 1}
TORCH = {"name": "torch-mlp", "hidden": 16, "seed": 3}


def backend(tmp_path, nodes: int = 2, **kw) -> RayBackend:
    opts = {"report_interval": 0.1, "checkpoint_interval": 0.2, "restart_backoff": 0.1, **kw}
    return RayBackend(cluster(nodes), root=tmp_path, **opts)


def ray_nodes(be: RayBackend, job_id: str) -> set[str]:
    return {t.proc.ray_node for t in be._runs[job_id].tasks}


def final_model(be: RayBackend, job_id: str) -> dict:
    got = be.store.load(job_id)
    assert got is not None, f"no checkpoint for {job_id}"
    return got[0]["workload"]


def test_ray_torch_and_numpy_jobs_train_on_different_ray_nodes(tmp_path) -> None:
    with backend(tmp_path) as be:
        assert be.ray_node_of(0) != be.ray_node_of(1)
        specs = {"np": job("np", {"name": "mlr"}, 6000), "torch": job("torch", TORCH, 1500)}
        for node, spec in enumerate(specs.values()):
            be.launch(spec, allocate(be.cluster, spec, (node,)), 0.0, from_checkpoint=False)
        assert ray_nodes(be, "np") == {be.ray_node_of(0)} and ray_nodes(be, "torch") == {be.ray_node_of(1)}
        events = wait_for(be, lambda ev: ended("np")(ev) and ended("torch")(ev), timeout=90)
        for jid, spec in specs.items():
            fin = final_event(events, jid)
            assert fin.kind is K.FINISHED and fin.data["iterations"] == spec.iterations
            seen = losses(events, jid)
            assert seen and fin.data["metrics"]["loss"] < 0.8 * seen[0], (jid, seen, fin.data)
        assert be.pids() == []


# 30,000 numpy iterations: 6,000 once ended on a quiet machine before its first progress report after the
# resume, so it could not be migrated
@pytest.mark.parametrize("workload,iterations", [(NUMPY, 30000), (TORCH, 3000)], ids=["numpy", "torch"])
def test_ray_pause_resume_migrate_equal_uninterrupted(tmp_path, workload, iterations) -> None:
    spec = job("j", workload, iterations)
    with backend(tmp_path) as be:
        be.launch(spec, allocate(be.cluster, spec, (0,)), 0.0, from_checkpoint=False)
        wait_for(be, lambda ev: any(e.kind is K.PROGRESS for e in ev), timeout=60)
        be.halt("j", be.now(), checkpoint=True)  # pause
        paused_at = be.status["j"].checkpoint_iteration
        assert 0 < paused_at < iterations
        be.launch(spec, allocate(be.cluster, spec, (1,)), be.now(), from_checkpoint=True)  # resume on the other
        assert ray_nodes(be, "j") == {be.ray_node_of(1)}
        events = wait_for(be, lambda ev: ended("j")(ev) or any(
            e.kind is K.PROGRESS and e.data["iterations"] > paused_at for e in ev), 60)
        assert not ended("j")(events), "the job finished before it could be migrated: make it longer"
        be.halt("j", be.now(), checkpoint=True)  # migrate back to node 0
        be.launch(spec, allocate(be.cluster, spec, (0,)), be.now(), from_checkpoint=True)
        events = wait_for(be, ended("j"), timeout=90)
        assert final_event(events, "j").kind is K.FINISHED
        restored = [t["restored_iteration"] for t in be.timings if t["kind"] == "start"]
        assert restored[0] is None and restored[1] == paused_at and restored[2] > paused_at
        halts = [t for t in be.timings if t["kind"] == "halt"]
        assert len(halts) == 2 and not any(h["timed_out"] for h in halts)
        got = final_model(be, "j")
    ref = reference(workload, iterations, 1 if workload is TORCH else None)
    assert got["iteration"] == ref["iteration"] == iterations
    _assert_close(got["model"], ref["model"])


def test_ray_data_parallel_job_spans_ray_nodes_and_resizes(tmp_path) -> None:
    spec = job("dp", TORCH, 300, workers=2)
    with backend(tmp_path) as be:
        be.launch(spec, allocate(be.cluster, spec, (0, 1)), 0.0, from_checkpoint=False)
        assert ray_nodes(be, "dp") == {be.ray_node_of(0), be.ray_node_of(1)}
        events = wait_for(be, lambda ev: any(e.kind is K.PROGRESS for e in ev), timeout=60)
        assert any(e.data.get("comm_s", 0) > 0 for e in events if e.kind is K.PROGRESS)
        be.halt("dp", be.now(), checkpoint=True)
        at = be.status["dp"].checkpoint_iteration
        shrunk = job("dp", TORCH, 300, workers=1)  # Dorm's resize: save, stop, re-create with 1 task
        be.launch(shrunk, allocate(be.cluster, shrunk, (1,)), be.now(), from_checkpoint=True)
        events = wait_for(be, ended("dp"), timeout=90)
        fin = final_event(events, "dp")
        assert fin.kind is K.FINISHED and fin.data["iterations"] == 300
        restored = [t["restored_iteration"] for t in be.timings if t["kind"] == "start"]
        assert restored[-1] == at > 0


def test_ray_killed_actor_restarts_from_checkpoint(tmp_path) -> None:
    spec = job("victim", NUMPY, 15000)
    with backend(tmp_path, checkpoint_interval=0.05) as be:
        be.launch(spec, allocate(be.cluster, spec, (1,)), 0.0, from_checkpoint=False)
        assert "Ray actor failed" in kill_and_recover(be, "victim").reason
        got = final_model(be, "victim")
    _assert_close(got["model"], reference(NUMPY, 15000)["model"])


def test_ray_removed_node_evicts_its_job_which_resumes_elsewhere(tmp_path, ray_cluster) -> None:
    extra = ray_cluster.add_node(**node_args(2))  # a third Ray node, for logical node 2 only
    ray_cluster.wait_for_nodes()
    spec, bystander = job("lost", NUMPY, 15000), job("calm", NUMPY, 4000)
    with backend(tmp_path, nodes=3, checkpoint_interval=0.05) as be:
        assert be.ray_node_of(2) == extra.node_id
        be.launch(spec, allocate(be.cluster, spec, (2,)), 0.0, from_checkpoint=False)
        be.launch(bystander, allocate(be.cluster, bystander, (0,)), 0.0, from_checkpoint=False)
        before = wait_for(be, lambda ev: be.store.latest("lost") is not None and any(
            e.kind is K.PROGRESS and e.job == "lost" for e in ev), 60)
        assert (extra.node_id, "numpy") in be.warm_pids()  # a warm actor waits on every mapped Ray node
        ray_cluster.remove_node(extra)
        before += wait_for(be, ended("lost"), timeout=60)
        ev = final_event(before, "lost")
        assert ev.kind is K.EVICTED and "Ray node lost" in ev.data["reason"]
        assert 0 < ev.data["iterations"] < 15000
        assert be.ray_node_of(2) != extra.node_id  # remapped onto a survivor
        remap = next(t for t in be.timings if t["kind"] == "remap")
        assert 2 in remap["moved"]
        assert not any(ray_node == extra.node_id for ray_node, _ in be._pool)  # its warm actors were dropped
        # the scheduler would now place it again: resume it on logical node 2 (a surviving Ray node)
        be.launch(spec, allocate(be.cluster, spec, (2,)), be.now(), from_checkpoint=True)
        events = wait_for(be, lambda e: ended("lost")(e) and ended("calm")(before + e), timeout=90)
        assert final_event(events, "lost").kind is K.FINISHED
        assert final_event(before + events, "calm").kind is K.FINISHED  # the co-tenant on node 0 carried on
        assert be.status["calm"].restarts == 0
        got = final_model(be, "lost")
    _assert_close(got["model"], reference(NUMPY, 15000)["model"])


def test_ray_backend_under_a_policy_through_the_cli(tmp_path) -> None:
    import json

    import typer
    from typer.testing import CliRunner

    from cohabit.runtime.cli import run

    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        "jobs:\n"
        "  - {id: a, model: mlr, workers: {count: 1, demand: {cpu: 1, mem_gb: 0.5}}, iterations: 3000,\n"
        "     workload: {name: mlr, data: synthetic, n_samples: 1000, n_features: 10}}\n"
        "  - {id: b, model: mlr, workers: {count: 1, demand: {cpu: 1, mem_gb: 0.5}}, iterations: 2000,\n"
        "     submit_time: 0.5, workload: {name: mlr, data: synthetic, n_samples: 1000, n_features: 10}}\n"
    )
    app = typer.Typer()
    app.command("run")(run)
    app.command("noop")(lambda: None)
    out = tmp_path / "out.json"
    res = CliRunner().invoke(app, ["run", str(jobs), "--policy", "fifo", "--backend", "ray",
                                   "--ray-address", "auto", "--json", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["backend"] == "ray" and data["nodes"] == 2  # the cluster's alive Ray nodes
    assert {j["state"] for j in data["real"]["fifo"]["jobs"].values()} == {"finished"}


def test_ray_ps_job_spans_ray_nodes_and_migrates_to_the_reference_model(tmp_path) -> None:
    import numpy as np

    from cohabit.engine.ledger import Ledger
    from cohabit.runtime.ps import load_model
    from cohabit.runtime.ps.reference import run_in_process

    from test_runtime_ps_local import place, ps_job

    workload, iterations = {"name": "ps-lasso", "data": "synthetic", "n_samples": 2000, "seed": 4}, 800
    spec = ps_job("lasso", workload, iterations, workers=2, servers=1)
    with backend(tmp_path, checkpoint_interval=0) as be:
        led = Ledger(be.cluster)
        be.launch(spec, place(led, spec, (0, 1, 1)), 0.0, from_checkpoint=False)  # workers on both Ray nodes
        assert ray_nodes(be, "lasso") == {be.ray_node_of(0), be.ray_node_of(1)}
        events = wait_for(be, lambda ev: any(e.kind is K.PROGRESS and e.data["iterations"] > 10 for e in ev), 60)
        assert all(e.data["comm_s"] > 0 for e in events if e.kind is K.PROGRESS)
        before_move = losses(events, "lasso")  # reported before the halt: early in training at any load
        be.halt("lasso", be.now(), checkpoint=True)
        led.release("lasso")
        be.launch(spec, place(led, spec, (1, 0, 0)), be.now(), from_checkpoint=True)  # every task moves
        events = wait_for(be, ended("lasso"), timeout=90)
        assert final_event(events, "lasso").kind is K.FINISHED
        assert losses(events, "lasso"), "the moved job reports progress from its new nodes"
        assert before_move and final_event(events, "lasso").data["metrics"]["loss"] < before_move[0]
        it, model, _ = load_model(be.store.root, "lasso")
    ref, _, _ = run_in_process(workload, iterations=iterations, n_workers=2, n_servers=1)
    assert it == iterations
    np.testing.assert_allclose(model["w"], ref["w"], rtol=1e-9, atol=1e-12)


def test_ray_cluster_lost_fails_running_jobs_with_the_reason(tmp_path, monkeypatch) -> None:
    """Ray reports no alive node (the whole cluster went away): the running job is FAILED with the
    reason and its checkpoint stays; advance() does not raise."""
    spec = job("gone", NUMPY, 200_000)
    with backend(tmp_path) as be:
        be.launch(spec, allocate(be.cluster, spec, (0,)), 0.0, from_checkpoint=False)
        wait_for(be, lambda ev: any(e.kind is K.PROGRESS and e.job == "gone" for e in ev), timeout=60)
        monkeypatch.setattr(be._ray, "nodes", lambda: [])
        events = wait_for(be, ended("gone"), timeout=30)
        fin = final_event(events, "gone")
        assert fin.kind is K.FAILED and "Ray cluster lost" in fin.data["reason"], fin.data
        assert be.status["gone"].state == "failed"
        monkeypatch.undo()


def test_ray_resume_takes_the_warm_actor_of_its_node(tmp_path) -> None:
    spec = job("w", TORCH, 3000)
    with backend(tmp_path) as be:
        assert be.warm_pids() == {}  # the pool starts after the first launch of a kind, as LocalBackend's spares
        be.launch(spec, allocate(be.cluster, spec, (0,)), 0.0, from_checkpoint=False)
        wait_for(be, lambda ev: any(e.kind is K.PROGRESS for e in ev), timeout=60)
        pooled = be.warm_pids()
        assert set(pooled) == {(be.ray_node_of(0), "torch"), (be.ray_node_of(1), "torch")}
        assert all(len(pids) == 1 for pids in pooled.values())
        be.halt("w", be.now(), checkpoint=True)
        paused_at = be.status["w"].checkpoint_iteration
        be.launch(spec, allocate(be.cluster, spec, (1,)), be.now(), from_checkpoint=True)  # resume on Ray node 1
        wait_for(be, lambda ev: any(e.kind is K.PROGRESS and e.job == "w" for e in ev), timeout=60)
        (task,) = be._runs["w"].tasks
        assert task.proc.os_pid == pooled[(be.ray_node_of(1), "torch")][0]
        assert task.proc.ray_node == be.ray_node_of(1)
        refilled = be.warm_pids()[(be.ray_node_of(1), "torch")]  # replenished, with a new actor
        assert len(refilled) == 1 and refilled[0] != task.proc.os_pid
        events = wait_for(be, ended("w"), timeout=90)
        assert final_event(events, "w").kind is K.FINISHED
        restored = [t["restored_iteration"] for t in be.timings if t["kind"] == "start"]
        assert restored == [None, paused_at] and paused_at > 0
        got = final_model(be, "w")
        idle = [pid for pids in be.warm_pids().values() for pid in pids]
    ref = reference(TORCH, 3000, 1)
    assert got["iteration"] == ref["iteration"] == 3000
    _assert_close(got["model"], ref["model"])
    assert idle and not any(_alive(pid) for pid in idle), "close() left pooled actors running"


def test_ray_warm_actors_zero_starts_every_task_fresh(tmp_path) -> None:
    spec = job("cold", NUMPY, 300)
    with backend(tmp_path, warm_actors=0) as be:
        be.launch(spec, allocate(be.cluster, spec, (0,)), 0.0, from_checkpoint=False)
        assert final_event(wait_for(be, ended("cold"), timeout=60), "cold").kind is K.FINISHED
        assert be.warm_pids() == {}
    with pytest.raises(ValueError, match="warm_actors"):
        backend(tmp_path, warm_actors=-1)


def _alive(pid: int, timeout: float = 10.0) -> bool:
    """Whether process ``pid`` still runs ``timeout`` s from now (Ray kills actors asynchronously)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        time.sleep(0.1)
    return True


def test_ray_gpu_tasks_reserve_num_gpus_and_see_the_accelerator_ids_ray_gave_them(tmp_path, ray_cluster) -> None:
    import ray

    from cohabit.engine.ledger import Ledger
    from cohabit.spec import ClusterSpec, NodeSpec, Resources
    from cohabit.spec.job import JobSpec, TaskGroup

    # a third Ray node with two (logical) GPUs, for logical node 2 only; Ray hands out ids 0 and 1
    extra = ray_cluster.add_node(**node_args(2), num_gpus=2)
    ray_cluster.wait_for_nodes()
    try:
        cpu = Resources(cpu=1, mem_gb=2)
        cl = ClusterSpec(name="rg", nodes=(NodeSpec(name="c0", capacity=cpu), NodeSpec(name="c1", capacity=cpu),
                                           NodeSpec(name="g2", capacity=Resources(cpu=2, mem_gb=2, gpu=2))))
        demand = Resources(cpu=1, mem_gb=0.3, gpu=1)

        def gjob(id: str, gpu: bool) -> JobSpec:
            return JobSpec(id=id, architecture="single", iterations=8000, model="torch-mlp", workload=TORCH,
                           workers=TaskGroup(count=1, demand=demand if gpu else Resources(cpu=1, mem_gb=0.3)))

        ready: dict[str, dict] = {}
        gpu_free: list[float] = []
        with RayBackend(cl, root=tmp_path, report_interval=0.1,
                        listener=lambda j, m: ready.__setitem__(j, m) if m.get("type") == "ready" else None) as be:
            assert be.ray_node_of(2) == extra.node_id
            led = Ledger(cl)
            specs = [gjob("ga", True), gjob("gb", True), gjob("cpu", False)]
            for spec, node in zip(specs, (2, 2, 0)):
                be.launch(spec, led.allocate(spec.id, [node], [led.vector(spec.workers.demand)]), 0.0,
                          from_checkpoint=False)
            events = wait_for(be, lambda ev: all(j in ready for j in ("ga", "gb")), timeout=120)
            assert not any(ended(j)(events) for j in ("ga", "gb")), events
            gpu_free.append(ray.available_resources().get("GPU", 0.0))  # both GPU tasks hold theirs now
            events += wait_for(be, lambda ev: all(ended(j)(events + ev) for j in ("ga", "gb", "cpu")), timeout=120)
        assert all(final_event(events, j).kind is K.FINISHED for j in ("ga", "gb", "cpu"))
        assert gpu_free == [0.0]
        ids = [ready[j]["accelerator_ids"] for j in ("ga", "gb")]
        assert sorted(ids) == [["0"], ["1"]]  # one GPU each, different ones
        for j in ("ga", "gb"):  # the task process sees exactly the GPU Ray assigned
            assert ready[j]["cuda_visible_devices"] == ready[j]["accelerator_ids"][0]
        assert ready["cpu"]["accelerator_ids"] == [] and ready["cpu"]["cuda_visible_devices"] == ""
    finally:
        ray_cluster.remove_node(extra)
