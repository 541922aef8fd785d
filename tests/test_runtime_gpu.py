"""GPU devices of real tasks: the ledger's devices become each task's CUDA_VISIBLE_DEVICES.

These run on CPU-only machines: the mapping and the environment a task process gets are checked in
real task processes; where torch has no CUDA the task trains on the CPU and says why.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from cohabit.engine import actions as A
from cohabit.engine.ledger import Ledger
from cohabit.policies.base import BasePolicy
from cohabit.runtime import devices as D
from cohabit.runtime.devices import DeviceMap, DeviceMapError
from cohabit.runtime.local import LocalBackend
from cohabit.runtime.runner import run_local
from cohabit.spec import ClusterSpec, Resources
from cohabit.spec.job import JobSpec, TaskGroup
from cohabit.spec.yamlio import loads_cluster

from runtime_helpers import no_orphans  # noqa: F401

CLUSTER_YAML = """
name: gpus
nodes:
  - {name: g0, capacity: {gpu: 2, cpu: 1, mem_gb: 2, gpu_mem_gb: 32}, labels: {gpu_ids: "6,7"}}
  - {name: g1, capacity: {gpu: 2, cpu: 1, mem_gb: 2, gpu_mem_gb: 32}}
"""
# node g0's devices are physical GPUs 6 and 7 (its label); g1's take the scheduler's own GPUs in turn,
# which the tests set to "3,2" through the scheduler's CUDA_VISIBLE_DEVICES
PHYSICAL = {(0, 0): "6", (0, 1): "7", (1, 0): "3", (1, 1): "2"}


def gpu_cluster(monkeypatch: pytest.MonkeyPatch) -> ClusterSpec:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,2")
    return loads_cluster(CLUSTER_YAML, "gpus.yaml")


def gpu_job(id: str, workload: dict, iterations: int, *, gpus: float, workers: int = 1,
            submit: float = 0.0) -> JobSpec:
    demand = Resources(cpu=1, mem_gb=0.25, gpu=gpus, gpu_mem_gb=gpus) if gpus else Resources(cpu=1, mem_gb=0.25)
    return JobSpec(id=id, submit_time=submit, architecture="single" if workers == 1 else "allreduce",
                   workers=TaskGroup(count=workers, demand=demand), iterations=iterations, workload=workload,
                   model=str(workload.get("name", "probe")))


# ------------------------------------------------------------------ the map
def test_device_map_labels_then_machine_gpus_then_flat_indices() -> None:
    cl = loads_cluster(CLUSTER_YAML, "gpus.yaml")
    assert DeviceMap.build(cl, machine=["3", "2"]).ids == PHYSICAL
    # more logical devices than GPUs: wrap around, as logical nodes share cores
    assert DeviceMap.build(cl, machine=["5"]).ids == {**PHYSICAL, (1, 0): "5", (1, 1): "5"}
    # no GPU on this machine: the unlabelled devices count 0, 1, ... (6 and 7 are g0's)
    assert DeviceMap.build(cl, machine=[]).ids == {**PHYSICAL, (1, 0): "0", (1, 1): "1"}
    named01 = loads_cluster(CLUSTER_YAML.replace('"6,7"', '"0,1"'), "gpus.yaml")
    assert DeviceMap.build(named01, machine=[]).ids == {(0, 0): "0", (0, 1): "1", (1, 0): "2", (1, 1): "3"}
    # the machine's GPUs that no label names go first; once none are left, all of them again
    assert DeviceMap.build(named01, machine=["0", "1", "2"]).ids == {(0, 0): "0", (0, 1): "1", (1, 0): "2",
                                                                      (1, 1): "2"}
    assert DeviceMap.build(named01, machine=["1", "0"]).ids == {(0, 0): "0", (0, 1): "1", (1, 0): "1",
                                                                 (1, 1): "0"}
    # gpu_ids= wins over the label; nodes by index or name
    m = DeviceMap.build(cl, {"g0": [1, 0], 1: "GPU-aa,GPU-bb"}, machine=["3", "2"])
    assert m.ids == {(0, 0): "1", (0, 1): "0", (1, 0): "GPU-aa", (1, 1): "GPU-bb"}


def test_device_map_visible_sets() -> None:
    m = DeviceMap.build(loads_cluster(CLUSTER_YAML, "gpus.yaml"), machine=["3", "2"])
    assert m.visible([(0, 1), (0, 0)]) == "7,6"  # in the slot's order
    assert m.visible([]) == ""  # a task with no GPU sees none
    assert m.of_pack((1, 1)) == "2"
    cpu_only = DeviceMap.build(ClusterSpec.homogeneous("c", 1, Resources(cpu=1, mem_gb=1)), machine=["0"])
    assert cpu_only.of_pack((0, 0)) == ""  # a CPU node's pack trains on its CPU: no GPU to see
    with pytest.raises(DeviceMapError, match=r"not in the cluster"):
        m.visible([(0, 2)])


@pytest.mark.parametrize("override, message", [
    ({"g0": "1"}, r"gpu_ids\['g0'\]: names 1 GPU id\(s\) \(1\) but the node has gpu: 2"),
    ({0: "1,1"}, r"GPU id '1' is already device 0 of node 'g0'"),
    ({"nope": "1,2"}, r"unknown node 'nope'"),
    ({5: "1,2"}, r"unknown node 5"),
    ({1: 7}, r"expected GPU ids"),
])
def test_device_map_errors_name_the_node_and_what_was_expected(override: dict, message: str) -> None:
    with pytest.raises(DeviceMapError, match=message):
        DeviceMap.build(loads_cluster(CLUSTER_YAML, "gpus.yaml"), override, machine=[])


def test_device_map_label_with_the_wrong_count_names_the_label() -> None:
    text = CLUSTER_YAML.replace('gpu_ids: "6,7"', 'gpu_ids: "6,7,8"')
    with pytest.raises(DeviceMapError, match=r"node 'g0': labels.gpu_ids: names 3 GPU id\(s\)"):
        DeviceMap.build(loads_cluster(text, "gpus.yaml"), machine=[])


def test_physical_gpus_from_the_environment_or_the_driver(tmp_path: Path) -> None:
    assert D.physical_gpus({"CUDA_VISIBLE_DEVICES": "2, 0"}, tmp_path / "none") == ["2", "0"]
    assert D.physical_gpus({"CUDA_VISIBLE_DEVICES": ""}, tmp_path / "none") == []
    proc = tmp_path / "gpus"
    proc.mkdir()
    for bus in ("0000:01:00.0", "0000:41:00.0"):
        (proc / bus).mkdir()
    assert D.physical_gpus({}, proc) == ["0", "1"]
    assert D.physical_gpus({}, tmp_path / "none") == []


# ------------------------------------------------------- device selection
def test_select_device_prefers_cuda_and_explains_the_cpu_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert D.select_device("4") == D.DeviceChoice("cuda:0", "4", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    got = D.select_device("4")
    assert got.device == "cpu" and got.visible == "4"
    assert got.note is not None and "CUDA_VISIBLE_DEVICES=4 assigned but" in got.note and "CPU" in got.note
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert D.select_device("") == D.DeviceChoice("cpu", "", None)  # no GPU given: nothing to explain


def test_device_memory_is_reported_on_cuda_only(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    asked = []

    def peak(device: object) -> int:
        asked.append(str(device))
        return 3 * 2**20 + 2**19

    monkeypatch.setattr(torch.cuda, "max_memory_allocated", peak)
    assert D.device_telemetry("cuda:0") == {"device_mem_mb": 3.5}
    assert asked == ["cuda:0"]
    assert D.device_telemetry("cpu") == {} and D.device_memory_mb("cpu") is None
    assert asked == ["cuda:0"]  # the CPU does not ask CUDA


def test_set_visible_sets_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert D.set_visible("5,6") is None
    import os

    assert os.environ["CUDA_VISIBLE_DEVICES"] == "5,6"
    assert D.set_visible(None) is None and os.environ["CUDA_VISIBLE_DEVICES"] == "5,6"


# --------------------------------------------- real task processes report their environment
PROBE = '''
import json, os
from pathlib import Path


class Probe:
    """Writes what its task process sees (CUDA_VISIBLE_DEVICES, the device it was told) and counts."""

    def __init__(self, ctx, out):
        # the environment the process was started with (/proc/self/environ) and the one it has now
        start = dict(kv.split("=", 1) for kv in Path("/proc/self/environ").read_text().split(chr(0)) if "=" in kv)
        Path(out, f"{ctx.job}.{ctx.rank}.json").write_text(json.dumps(
            {"visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "at_start": start.get("CUDA_VISIBLE_DEVICES"),
             "device": ctx.device, "pid": os.getpid()}))
        self.x = 0.0

    def step(self):
        self.x += 1.0
        return {"loss": 1.0 / self.x}

    def state_dict(self):
        return {"x": self.x}

    def load_state_dict(self, s):
        self.x = s["x"]
'''


class Recording(LocalBackend):
    """LocalBackend that remembers every launch's allocation (the ledger's device assignment)."""

    launched: dict[str, object]

    def launch(self, spec, alloc, now, *, from_checkpoint):  # type: ignore[no-untyped-def, override]
        self.launched[spec.id] = alloc
        super().launch(spec, alloc, now, from_checkpoint=from_checkpoint)


def test_each_task_process_gets_the_physical_ids_of_its_ledger_devices(tmp_path, monkeypatch) -> None:
    from cohabit.policies.fifo import FIFO

    cl = gpu_cluster(monkeypatch)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "gpuprobe.py").write_text(textwrap.dedent(PROBE))
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))  # LocalBackend passes sys.path on to its tasks
    out = tmp_path / "seen"
    out.mkdir()
    wl = {"entry": "gpuprobe:Probe", "out": str(out)}
    specs = [gpu_job("two", wl, 5, gpus=2), gpu_job("one", wl, 5, gpus=1),
             gpu_job("dp", wl, 5, gpus=1, workers=2), gpu_job("cpu", wl, 5, gpus=0)]
    Recording.launched = {}
    res = run_local(specs, cl, FIFO(), root=tmp_path / "run", strict=True, backend_cls=Recording)
    assert all(j.state == "finished" for j in res.result.jobs.values()), res.result.unfinished
    used: dict[str, set[str]] = {}
    for spec in specs:
        alloc = Recording.launched[spec.id]
        for rank, slot in enumerate(alloc.slots):  # type: ignore[attr-defined]
            seen = json.loads((out / f"{spec.id}.{rank}.json").read_text())
            expect = ",".join(PHYSICAL[(slot.node, d)] for d, _ in slot.devices)
            assert seen["visible"] == expect, (spec.id, rank, slot)
            assert seen["at_start"] == expect  # a new task process is started with it, too
            assert len([x for x in expect.split(",") if x]) == spec.workers.demand["gpu"]
            used.setdefault(spec.id, set()).update(x for x in expect.split(",") if x)
    assert used["cpu"] == set()  # a task without GPU demand sees no GPU at all
    assert len(used["two"]) == 2 and len(used["dp"]) == 2
    assert res.status["one"].cuda_visible_devices == ",".join(used["one"])
    assert res.status["one"].device == "cpu"  # a user workload with a GPU but CPU-only torch


def test_torch_job_on_a_gpu_slot_sees_its_gpu_and_falls_back_to_cpu_with_a_note(tmp_path, monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    cl = gpu_cluster(monkeypatch)
    wl = {"name": "torch-mlp", "n_samples": 256, "n_features": 8, "n_classes": 4, "hidden": 8, "batch_size": 16}
    first, second = gpu_job("first", wl, 60, gpus=1), gpu_job("second", wl, 3000, gpus=1)
    led = Ledger(cl)
    ready: dict[str, dict] = {}
    progress: list[dict] = []

    def listen(job_id: str, msg: dict) -> None:
        if msg.get("type") == "ready":
            ready[job_id] = msg
        elif msg.get("type") == "progress":
            progress.append(msg)

    with LocalBackend(cl, root=tmp_path, listener=listen, report_interval=0.05) as be:
        from runtime_helpers import ended, wait_for

        vec = led.vector(first.workers.demand)
        be.launch(first, led.allocate("first", [1], [vec]), 0.0, from_checkpoint=False)  # a fresh process
        wait_for(be, ended("first"))
        assert be._spares.has("torch"), "a warm torch spare was started after the first launch"
        spare_pid = be._spares.pids("torch")[0]
        led.release("first")
        # the spare was spawned before this job was known: its CUDA_VISIBLE_DEVICES comes with the config
        a2 = led.allocate("second", [0], [vec])
        be.launch(second, a2, be.now(), from_checkpoint=False)
        wait_for(be, ended("second"))
    assert ready["second"]["pid"] == spare_pid
    assert ready["first"]["cuda_visible_devices"] == "3"  # node 1 device 0
    assert ready["second"]["cuda_visible_devices"] == "6"  # node 0 device 0 (its label)
    if torch.cuda.is_available():  # pragma: no cover - on a GPU machine
        assert ready["second"]["device"] == "cuda:0"
        assert all(p.get("device_mem_mb", 0) > 0 for p in progress)
    else:
        assert ready["second"]["device"] == "cpu"
        assert "CUDA_VISIBLE_DEVICES=6 assigned but" in ready["second"]["device_note"]
        assert progress and all("device_mem_mb" not in p for p in progress)
        assert be.status["second"].device_note == ready["second"]["device_note"]


class PackOnDevice(BasePolicy):
    """Packs p and q on device (0, 1), then r and s (submitted later) on device (1, 1)."""

    name = "pack-on-devices"

    def decide(self, view):  # type: ignore[override]
        for jobs, device in ((("p", "q"), (0, 1)), (("r", "s"), (1, 1))):
            if all(j in view.pending for j in jobs):
                return [A.Pack(jobs, device)]
        return []


def test_a_pack_shares_its_one_device(tmp_path, monkeypatch) -> None:
    pytest.importorskip("torch")
    cl = gpu_cluster(monkeypatch)
    wl = {"name": "torch-mlp", "n_samples": 256, "n_features": 8, "n_classes": 4, "hidden": 8, "batch_size": 16}
    specs = [gpu_job("p", {**wl, "lr": 0.05}, 40, gpus=1), gpu_job("q", {**wl, "lr": 0.1}, 40, gpus=1),
             gpu_job("r", {**wl, "lr": 0.05}, 40, gpus=1, submit=2.0),
             gpu_job("s", {**wl, "lr": 0.1}, 40, gpus=1, submit=2.0)]
    ready: dict[str, dict] = {}
    out = run_local(specs, cl, PackOnDevice(), root=tmp_path, strict=True,
                    listener=lambda j, m: ready.__setitem__(j, m) if m.get("type") == "ready" else None)
    assert all(j.state == "finished" for j in out.result.jobs.values()), out.result.unfinished
    assert ready["p"]["pid"] == ready["q"]["pid"]  # one pack process
    assert ready["p"]["cuda_visible_devices"] == ready["q"]["cuda_visible_devices"] == "7"  # node 0 device 1
    # the second pack runs in the warm host, spawned before any device was known: it learns its GPU
    # from its members' configuration
    assert ready["r"]["pid"] == ready["s"]["pid"] != ready["p"]["pid"]
    assert ready["r"]["cuda_visible_devices"] == ready["s"]["cuda_visible_devices"] == "2"  # node 1 device 1


# ------------------------------------------------------------------ cohabit run --cluster
def _app():  # type: ignore[no-untyped-def]
    import typer

    from cohabit.runtime.cli import run

    app = typer.Typer(add_completion=False)
    app.command("run")(run)
    app.command("other")(lambda: None)
    return app


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_cohabit_run_on_a_gpu_cluster_yaml_reports_each_jobs_devices(tmp_path, monkeypatch) -> None:
    from typer.testing import CliRunner

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,2")  # the scheduler's own GPUs: node gpu-b's devices
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n" + "".join(
        f"  - {{id: g{i}, workers: {{count: 1, demand: {{gpu: {g}, gpu_mem_gb: 1, cpu: 1, mem_gb: 0.3}}}}, "
        f"iterations: 100,\n     workload: {{name: torch-mlp, n_samples: 256, hidden: 8}}}}\n"
        for i, g in enumerate((2, 2))))
    out = tmp_path / "out.json"
    cluster = tmp_path / "c.yaml"
    cluster.write_text(CLUSTER_YAML.replace('"6,7"', '"0,1"').replace("g0", "gpu-a").replace("g1", "gpu-b"))
    res = CliRunner().invoke(_app(), ["run", str(jobs), "--policy", "fifo", "--cluster", str(cluster),
                                      "--json", str(out)])
    assert res.exit_code == 0, res.output
    real = json.loads(out.read_text())["real"]["fifo"]["jobs"]
    assert {j: r["state"] for j, r in real.items()} == {"g0": "finished", "g1": "finished"}
    # each job holds a whole node's two GPUs: gpu-a's labelled 0,1 or gpu-b's 3,2 (from the environment)
    assert sorted(r["cuda_visible_devices"] for r in real.values()) == ["0,1", "3,2"]
    for r in real.values():
        assert r["device"] in ("cpu", "cuda:0")
        assert (r["device_note"] is not None) == (r["device"] == "cpu")


def test_cohabit_run_refuses_a_gpu_id_label_that_does_not_fit(tmp_path) -> None:
    from typer.testing import CliRunner

    bad = tmp_path / "c.yaml"
    bad.write_text(CLUSTER_YAML.replace('"6,7"', '"0"').replace("g0", "gpu-a"))
    res = CliRunner().invoke(_app(), ["run", str(EXAMPLES / "gpu_jobs.yaml"), "--policy", "fifo",
                                      "--cluster", str(bad)])
    assert res.exit_code == 2
    said = "".join(res.output.split())  # the console wraps long lines
    assert "node'gpu-a':labels.gpu_ids:names1GPUid(s)(0)butthenodehasgpu:2" in said and str(bad) in said
    assert "Traceback" not in res.output
    both = CliRunner().invoke(_app(), ["run", str(EXAMPLES / "gpu_jobs.yaml"), "--policy", "fifo",
                                       "--cluster", str(bad), "--nodes", "2"])
    assert both.exit_code == 2 and "not both" in both.output


def test_example_gpu_jobs_load_and_fit_the_example_gpu_cluster() -> None:
    from cohabit.runtime.runner import check_jobs
    from cohabit.spec.yamlio import load_cluster, load_jobs

    cl = load_cluster(EXAMPLES / "gpu_cluster.yaml")
    specs = load_jobs(EXAMPLES / "gpu_jobs.yaml")
    assert check_jobs(specs) == []
    led = Ledger(cl)
    assert all(led.ever_fits([led.vector(s.workers.demand)] * s.workers.count) is None for s in specs)
    assert all(s.workers.demand["gpu"] == 1 for s in specs)


# ------------------------------------------------------------------ bench/pack_step.py --device
def test_pack_step_bench_refuses_cuda_without_a_gpu_clearly(tmp_path) -> None:
    import subprocess
    import sys

    torch = pytest.importorskip("torch")
    script = Path(__file__).resolve().parents[1] / "bench" / "pack_step.py"
    out = tmp_path / "r.json"
    for device, message in (("tpu", "--device: expected cpu, cuda, cuda:N or auto, got 'tpu'"),
                            ("cuda:99", "--device cuda:99:")):
        r = subprocess.run([sys.executable, str(script), "--device", device, "--json", str(out)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
    if torch.cuda.is_available():  # pragma: no cover - a GPU machine runs the benchmark instead
        return
    r = subprocess.run([sys.executable, str(script), "--device", "cuda", "--json", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--device cuda: no CUDA device:" in r.stderr and torch.__version__ in r.stderr
    assert not out.exists()  # nothing measured, nothing written


# ------------------------------------------------------------------ device memory in telemetry
class _Alive:
    """A task process that is still running (what the backend polls)."""

    pid = 999_999_999

    def poll(self) -> None:
        return None

    def wait(self, timeout: float | None = None) -> int:
        return 0

    def terminate(self) -> None:
        pass

    kill = terminate


def test_backend_passes_device_memory_and_the_device_on_to_the_scheduler(tmp_path, monkeypatch) -> None:
    """What a task on a GPU reports (ready: device; progress: device_mem_mb) reaches the progress event the
    scheduler folds in and the job's status, as the worker sends it (here through a real socket)."""
    import socket

    from cohabit.engine.backend import BackendEventKind as K
    from cohabit.runtime.channel import Channel
    from cohabit.runtime.procs import Run, Task
    from cohabit.runtime.workloads import parse_config

    cl = gpu_cluster(monkeypatch)
    spec = gpu_job("g", {"name": "torch-mlp"}, 100, gpus=1)
    led = Ledger(cl)
    alloc = led.allocate("g", [0], [led.vector(spec.workers.demand)])
    mine, theirs = socket.socketpair()
    task_end = Channel(theirs)
    with LocalBackend(cl, root=tmp_path, prewarm=False) as be:
        be.begin_launch(spec, alloc)
        run = Run(spec, alloc, parse_config("g", spec.workload))
        run.tasks = [Task(0, 0, _Alive(), Channel(mine), tmp_path / "g.log")]  # type: ignore[arg-type]
        be._runs["g"] = run
        task_end.send({"type": "ready", "rank": 0, "iteration": 0, "total": 100, "device": "cuda:0",
                       "cuda_visible_devices": "6", "device_note": None})
        task_end.send({"type": "progress", "rank": 0, "iterations": 10, "total": 100, "iter_time": 0.01,
                       "compute_s": 0.01, "comm_s": 0.0, "metrics": {"loss": 1.0}, "mem_mb": 300.0,
                       "device_mem_mb": 42.5})
        t, events = be.advance(be.now() + 5.0)
        (ev,) = [e for e in events if e.kind is K.PROGRESS]
        assert ev.data["device_mem_mb"] == 42.5 and ev.data["mem_mb"] == 300.0
        st = be.status["g"]
        assert (st.device, st.cuda_visible_devices, st.device_mem_mb) == ("cuda:0", "6", 42.5)
        start = next(x for x in be.timings if x["kind"] == "start")
        assert start["device"] == "cuda:0" and start["cuda_visible_devices"] == "6"
        del be._runs["g"]  # the fake task has no process to stop
    task_end.close()


# ------------------------------------------------------------------ pack-aware Hyperband on a device
def test_hyperband_trains_and_packs_on_the_workloads_device(monkeypatch) -> None:
    """Every pack, data stream and model of a (pack-aware) Hyperband run is on ``Workload.device``. The
    device here is ``cpu:0``: the CPU, but a device object that differs from the default ``cpu``, so a
    place that ignores the workload's device shows up."""
    torch = pytest.importorskip("torch")
    from cohabit.pack import hyperband as H
    from cohabit.pack.models import make_digits, split

    dev = torch.device("cpu", 0)
    assert dev != torch.device("cpu")
    packs: list[object] = []
    real = H.PackedModel

    def recording(members, device="cpu", **kw):  # type: ignore[no-untyped-def]
        packs.append(torch.device(device))
        return real(members, device, **kw)

    monkeypatch.setattr(H, "PackedModel", recording)
    x, y = make_digits(300, seed=0)
    xt, yt, xv, yv = split(x, y, 0.2, seed=0)
    w = H.Workload("mlp3", xt, yt, xv, yv, unit_samples=16, seed=0, device=dev)
    assert w.stream.device == dev and w.x_val.device.type == "cpu"
    for kind, chooser in (("random", None), ("knn", H.make_chooser("knn", threshold=6.0, seed=0))):
        packs.clear()
        res = H.hyperband(w, 3, 3, packer=H.make_packer(kind, w, memory_limit=2 * 2**20, seed=0), seed=0,
                          memory_limit=2 * 2**20, chooser=chooser)
        assert packs and all(d == dev for d in packs), (kind, packs)
        assert 0 <= res.best.val_acc <= 1


def test_hyperband_command_names_its_device_and_refuses_cuda_without_a_gpu(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    import typer
    from typer.testing import CliRunner

    from cohabit.pack.cli import app

    parent = typer.Typer()
    parent.command("other")(lambda: None)
    parent.add_typer(app)
    out = tmp_path / "hb.json"
    args = ["hyperband", "--R", "3", "--samples", "300", "--unit", "16", "--pack", "random", "--memory-mb", "2"]
    r = CliRunner().invoke(parent, [*args, "--device", "cpu", "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["device"] == "cpu"
    if not torch.cuda.is_available():
        r = CliRunner().invoke(parent, [*args, "--device", "cuda"])
        assert r.exit_code == 2 and "no CUDA device" in " ".join(r.output.split())
