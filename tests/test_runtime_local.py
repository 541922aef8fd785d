"""LocalBackend with real processes: training, pause/resume/migrate, faults, cleanup."""

from __future__ import annotations

import os
import signal
import textwrap
import time

import numpy as np
import pytest

from cohabit.engine.backend import BackendEventKind as K
from cohabit.engine.ledger import Ledger
from cohabit.runtime.local import LocalBackend, node_cores
from cohabit.runtime.workloads import WorkloadContext, build, parse_config

from runtime_helpers import (  # noqa: F401
    allocate, cluster, ended, final_event, job, kill_and_recover, losses, no_orphans, wait_for,
)


def reference(workload: dict, iterations: int, threads: int | None = None) -> dict:
    """The model an uninterrupted in-process run with the same seed ends with."""
    if threads is not None:
        import torch

        old = torch.get_num_threads()
        torch.set_num_threads(threads)
    try:
        w = build(parse_config("ref", workload), WorkloadContext("ref", seed=workload.get("seed", 0),
                                                                 iterations=iterations))
        while not w.done:
            w.step()
        return w.state_dict()
    finally:
        if threads is not None:
            torch.set_num_threads(old)


def final_model(backend: LocalBackend, job_id: str) -> dict:
    got = backend.store.load(job_id)
    assert got is not None, f"no checkpoint for {job_id}"
    return got[0]["workload"]


def test_local_numpy_job_trains_to_lower_loss(tmp_path) -> None:
    cl = cluster(1)
    spec = job("mlr", {"name": "mlr"}, 3000)
    with LocalBackend(cl, root=tmp_path, report_interval=0.1) as be:
        be.launch(spec, allocate(cl, spec, (0,)), 0.0, from_checkpoint=False)
        events = wait_for(be, ended("mlr"))
        fin = final_event(events, "mlr")
        assert fin.kind is K.FINISHED and fin.data["iterations"] == 3000
        seen = losses(events, "mlr")
        assert len(seen) >= 2 and fin.data["metrics"]["loss"] < 0.7 * seen[0]
        assert fin.data["metrics"]["accuracy"] > 0.7
        prog = [e for e in events if e.kind is K.PROGRESS]
        assert all(e.data["iter_time"] > 0 and e.data["mem_mb"] > 0 for e in prog)
        assert be.status["mlr"].state == "finished" and be.pids() == []


def test_local_torch_job_trains_to_lower_loss(tmp_path) -> None:
    cl = cluster(1)
    spec = job("cnn", {"name": "torch-cnn", "n_samples": 1024}, 400)
    with LocalBackend(cl, root=tmp_path, report_interval=0.1) as be:
        be.launch(spec, allocate(cl, spec, (0,)), 0.0, from_checkpoint=False)
        events = wait_for(be, ended("cnn"))
        fin = final_event(events, "cnn")
        assert fin.kind is K.FINISHED
        seen = losses(events, "cnn")
        assert fin.data["metrics"]["loss"] < 0.5 * seen[0]
        assert fin.data["metrics"]["accuracy"] > 0.8


@pytest.mark.parametrize("workload, iterations, threads", [
    ({"name": "mlr", "data": "synthetic", "n_samples": 2000, "n_features": 20, "seed": 5, "lr": 0.05}, 8000, None),
    ({"name": "torch-mlp", "n_samples": 1024, "seed": 2}, 700, 1),
])
def test_local_pause_resume_and_migrate_equal_uninterrupted(tmp_path, workload, iterations, threads) -> None:
    cl = cluster(2)
    spec = job("j", workload, iterations)
    led = Ledger(cl)
    with LocalBackend(cl, root=tmp_path, report_interval=0.05, checkpoint_interval=0) as be:
        be.launch(spec, allocate(cl, spec, (0,), led), 0.0, from_checkpoint=False)
        wait_for(be, lambda ev: any(e.kind is K.PROGRESS and e.data["iterations"] > 5 for e in ev))
        be.halt("j", be.now(), checkpoint=True)  # Pause: checkpoint at the next iteration boundary
        led.release("j")
        paused_at = be.store.latest("j").iteration
        assert 0 < paused_at < iterations and be.pids() == []
        be.launch(spec, allocate(cl, spec, (1,), led), be.now(), from_checkpoint=True)  # Resume elsewhere
        wait_for(be, lambda ev: any(e.kind is K.PROGRESS for e in ev))
        be.halt("j", be.now(), checkpoint=True)  # Migrate = checkpoint, stop, restore on another node
        led.release("j")
        be.launch(spec, allocate(cl, spec, (0,), led), be.now(), from_checkpoint=True)
        events = wait_for(be, ended("j"))
        assert final_event(events, "j").kind is K.FINISHED
        starts = [t for t in be.timings if t["kind"] == "start"]
        assert [s["restored_iteration"] for s in starts][0] is None and all(
            s["restored_iteration"] is not None for s in starts[1:])
        assert starts[0]["interpreter_s"] is not None  # a fresh process ...
        assert all(s["interpreter_s"] is None for s in starts[1:])  # ... then warm spares, imports done
        halts = [t for t in be.timings if t["kind"] == "halt"]
        assert len(halts) == 2 and not any(h["timed_out"] for h in halts)
        got = final_model(be, "j")
    ref = reference(workload, iterations, threads)
    assert got["iteration"] == ref["iteration"] == iterations
    _assert_close(got["model"], ref["model"])


def _assert_close(a, b) -> None:
    if isinstance(a, dict):
        assert sorted(a) == sorted(b)
        for k in a:
            _assert_close(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        for x, y in zip(a, b, strict=True):
            _assert_close(x, y)
    elif hasattr(a, "detach"):
        import torch

        assert torch.allclose(a, b, rtol=1e-5, atol=1e-7)
    else:
        assert np.allclose(a, b, rtol=1e-7, atol=1e-10)


def test_local_killed_worker_restarts_from_checkpoint(tmp_path) -> None:
    cl = cluster(1)
    # small synthetic data: the in-process reference run stays fast even with multi-threaded BLAS
    workload = {"name": "mlr", "data": "synthetic", "n_samples": 2000, "n_features": 20, "seed": 1}
    spec = job("victim", workload, 15000)
    with LocalBackend(cl, root=tmp_path, report_interval=0.05, checkpoint_interval=0.05,
                      restart_backoff=0.1) as be:
        be.launch(spec, allocate(cl, spec, (0,)), 0.0, from_checkpoint=False)
        assert "SIGKILL" in kill_and_recover(be, "victim").reason
        got = final_model(be, "victim")
    # resuming from the periodic checkpoint recomputes exactly the lost iterations
    _assert_close(got["model"], reference(workload, 15000)["model"])


def test_local_out_of_retries_fails_with_the_reason(tmp_path) -> None:
    cl = cluster(1)
    spec = job("doomed", {"name": "lasso"}, 10**7)
    with LocalBackend(cl, root=tmp_path, max_restarts=0, report_interval=0.05) as be:
        be.launch(spec, allocate(cl, spec, (0,)), 0.0, from_checkpoint=False)
        wait_for(be, lambda ev: any(e.kind is K.PROGRESS for e in ev))
        os.kill(be.status["doomed"].pids[0], signal.SIGKILL)
        fin = final_event(wait_for(be, ended("doomed")), "doomed")
        assert fin.kind is K.FAILED
        assert "was killed by SIGKILL" in fin.data["reason"] and "gave up after 0 restart(s)" in fin.data["reason"]


def test_local_bad_workload_fails_at_once_naming_the_field(tmp_path) -> None:
    cl = cluster(1)
    bad_value = job("bad", {"name": "mlr", "data": "imagenet"}, 10)  # caught before the worker starts
    with LocalBackend(cl, root=tmp_path) as be:
        be.launch(bad_value, allocate(cl, bad_value, (0,)), 0.0, from_checkpoint=False)
        fin = final_event(wait_for(be, ended("bad")), "bad")
        assert fin.kind is K.FAILED and "workload.data must be one of sample, synthetic" in fin.data["reason"]
        assert be.status["bad"].restarts == 0  # a configuration error is not retried
        unknown = job("unknown", {"name": "resnet"}, 10)  # caught before any process starts
        be.launch(unknown, allocate(cl, unknown, (0,)), be.now(), from_checkpoint=False)
        fin = final_event(wait_for(be, ended("unknown")), "unknown")
        assert fin.kind is K.FAILED and "not a built-in" in fin.data["reason"]


def test_local_user_entry_workload_runs(tmp_path, monkeypatch) -> None:
    pkg = tmp_path / "userpkg"
    pkg.mkdir()
    (pkg / "counter.py").write_text(textwrap.dedent("""
        class Counter:
            def __init__(self, ctx, target):
                self.x, self.target = 0.0, target
            def step(self):
                self.x += 1.0
                return {"loss": abs(self.target - self.x)}
            def state_dict(self):
                return {"x": self.x}
            def load_state_dict(self, s):
                self.x = s["x"]
    """))
    monkeypatch.syspath_prepend(str(pkg))  # LocalBackend passes sys.path on to its tasks
    cl = cluster(1)
    spec = job("mine", {"entry": "counter:Counter", "target": 100.0}, 50)
    with LocalBackend(cl, root=tmp_path / "run") as be:
        be.launch(spec, allocate(cl, spec, (0,)), 0.0, from_checkpoint=False)
        fin = final_event(wait_for(be, ended("mine")), "mine")
        assert fin.kind is K.FINISHED and fin.data["iterations"] == 50
        assert final_model(be, "mine") == {"iteration": 50, "user": {"x": 50.0}}


def test_local_data_parallel_job_allreduces_and_survives_a_resize(tmp_path) -> None:
    cl = cluster(2)
    spec = job("dp", {"name": "torch-mlp", "n_samples": 2048}, 400, workers=2)
    led = Ledger(cl)
    with LocalBackend(cl, root=tmp_path, report_interval=0.1) as be:
        be.launch(spec, allocate(cl, spec, (0, 1), led), 0.0, from_checkpoint=False)
        events = wait_for(be, lambda ev: any(e.kind is K.PROGRESS and e.data["iterations"] > 20 for e in ev))
        assert len(be.status["dp"].pids) == 2
        prog = [e for e in events if e.kind is K.PROGRESS]
        assert all(e.data["comm_s"] > 0 for e in prog)  # gradients really travel between the ranks
        # Resize (Dorm): checkpoint, stop, re-create with another task count, resume
        be.halt("dp", be.now(), checkpoint=True)
        led.release("dp")
        at = be.store.latest("dp").iteration
        assert at > 20
        be.launch(spec, allocate(cl, spec, (1,), led), be.now(), from_checkpoint=True)
        events += wait_for(be, ended("dp"))
        assert be.status["dp"].nodes == (1,)
        fin = final_event(events, "dp")
        assert fin.kind is K.FINISHED and fin.data["iterations"] == 400
        restored = [t["restored_iteration"] for t in be.timings if t["kind"] == "start"]
        assert restored[-1] == at  # the single remaining worker continued from the 2-worker checkpoint
        assert fin.data["metrics"]["loss"] < 0.5 * losses(events, "dp")[0]


def test_local_close_kills_every_child(tmp_path) -> None:
    cl = cluster(2)
    led = Ledger(cl)
    be = LocalBackend(cl, root=tmp_path)
    for i in range(2):
        spec = job(f"long{i}", {"name": "lasso"}, 10**8)
        be.launch(spec, allocate(cl, spec, (i,), led), 0.0, from_checkpoint=False)
    pids = be.pids()
    assert len(pids) == 2
    be.close()
    time.sleep(0.1)
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # already reaped: gone


def test_local_node_cores_round_robin() -> None:
    from cohabit.spec import ClusterSpec, Resources

    cl = ClusterSpec.homogeneous("x", 3, Resources(cpu=1))
    assert node_cores(cl, [0, 1]) == [(0,), (1,), (0,)]
    wide = ClusterSpec.homogeneous("y", 2, Resources(cpu=3))
    assert node_cores(wide, [0, 1, 2, 3]) == [(0, 1, 2), (0, 1, 3)]
