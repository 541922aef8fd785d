"""Model-parallel torch jobs as pipeline stages (one process per stage) in real execution:
migration of a stage between logical nodes at an iteration boundary, and MLFS deciding for
them through ``cohabit run``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cohabit.engine.backend import BackendEventKind as K
from cohabit.engine.ledger import Ledger
from cohabit.runtime.local import LocalBackend
from cohabit.runtime.workloads.torch_pipeline import split_blocks, stage_key
from cohabit.spec import ClusterSpec, Resources
from cohabit.spec.graph import TaskGraph
from cohabit.spec.job import JobSpec, TaskGroup

from runtime_helpers import ended, final_event, losses, no_orphans, wait_for  # noqa: F401

WORKLOAD = {"name": "torch-pipeline", "n_samples": 512, "seed": 3}


def pipeline_job(id: str, stages: int, iterations: int, submit: float = 0.0, cpu: float = 1.0) -> JobSpec:
    return JobSpec(id=id, submit_time=submit, architecture="allreduce",
                   workers=TaskGroup(count=stages, demand=Resources(cpu=cpu, mem_gb=0.5)),
                   graph=TaskGraph(partitions=[{"params": 1.0}] * stages, activation_mb=1.0), iterations=iterations,
                   workload=WORKLOAD, model="torch-pipeline")


def test_split_blocks_cuts_every_layer_once() -> None:
    assert split_blocks(4, 2) == [range(0, 2), range(2, 4)]
    cut = split_blocks(4, 4)
    assert [list(r) for r in cut] == [[0], [1], [2], [3]]
    with pytest.raises(ValueError):
        split_blocks(2, 3)


def test_moving_a_stage_keeps_the_loss_trajectory(tmp_path: Path) -> None:
    """Job ``b`` has stage 1 moved to another node at an iteration boundary (every stage
    checkpoints, the moved one restores there); it ends with exactly the weights of ``a``,
    which ran through, and the same held-out loss and accuracy."""
    cl = ClusterSpec.homogeneous("local", 4, Resources(cpu=2, mem_gb=4))
    led = Ledger(cl)
    a, b = pipeline_job("a", 3, 160), pipeline_job("b", 3, 160)
    vec = led.vector(a.workers.demand)
    with LocalBackend(cl, root=tmp_path, report_interval=0.05, checkpoint_interval=0) as be:
        be.launch(a, led.allocate("a", (0, 1, 2), [vec] * 3), 0.0, from_checkpoint=False)
        be.launch(b, led.allocate("b", (0, 1, 2), [vec] * 3), 0.0, from_checkpoint=False)
        seen = wait_for(be, lambda ev: any(e.job == "b" and e.kind is K.PROGRESS and e.data["iterations"] > 20
                                           for e in ev), 90)
        be.halt("b", be.now(), checkpoint=True)  # Migrate: checkpoint at the next boundary ...
        led.release("b")
        moved_at = be.store.latest("b").iteration
        stage_iters = {be.store.latest(stage_key("b", r)).iteration for r in range(3)}
        assert stage_iters == {moved_at} and 0 < moved_at < 160  # every stage saved the same boundary
        be.launch(b, led.allocate("b", (0, 3, 2), [vec] * 3), be.now(), from_checkpoint=True)  # ... stage 1 to node 3
        assert be.status["b"].nodes == (0, 3, 2)
        seen += wait_for(be, lambda ev: ended("a")(seen + ev) and ended("b")(seen + ev), 120)
        assert final_event(seen, "a").kind is K.FINISHED and final_event(seen, "b").kind is K.FINISHED
        restored = [t for t in be.timings if t["job"] == "b" and t["kind"] == "start" and t["restore_s"] is not None]
        assert sorted(t["rank"] for t in restored) == [0, 1, 2]
        import torch

        for r in range(3):
            (sa, ia), (sb, ib) = be.store.load(stage_key("a", r)), be.store.load(stage_key("b", r))
            assert ia.iteration == ib.iteration == 160
            assert sa["workload"]["model"]["stage"] == r
            for k, v in sa["workload"]["model"]["model"].items():
                assert torch.allclose(v, sb["workload"]["model"]["model"][k], rtol=1e-5, atol=1e-7), (r, k)
    la = losses(seen, "a")
    assert la[-1] < 0.5 * la[0]  # it trains
    # the final reports: the same mean loss and held-out accuracy, moved or not
    fa, fb = final_event(seen, "a").data["metrics"], final_event(seen, "b").data["metrics"]
    assert fa["accuracy"] == pytest.approx(fb["accuracy"]) and fa["test_loss"] == pytest.approx(fb["test_loss"], rel=1e-5)


def test_mlfs_decides_pipeline_jobs_through_cohabit_run(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cohabit.cli import app

    # half a core per stage: MLF-H places a task only where it leaves the node under h_r = 90 %
    jobs = [pipeline_job("p2", 2, 120, cpu=0.5).model_dump(mode="json", exclude_none=True),
            pipeline_job("p4", 4, 120, submit=1.0, cpu=0.5).model_dump(mode="json", exclude_none=True)]
    (tmp_path / "jobs.yaml").write_text(yaml.safe_dump({"jobs": jobs}))
    out = tmp_path / "run.json"
    res = CliRunner().invoke(app, ["run", str(tmp_path / "jobs.yaml"), "--policy", "mlfs", "--nodes", "4",
                                   "--workdir", str(tmp_path / "wd"), "--json", str(out)])
    assert res.exit_code == 0, res.output
    run = json.loads(out.read_text())["real"]["mlfs"]
    real = run["jobs"]
    for jid, stages in (("p2", 2), ("p4", 4)):
        assert real[jid]["state"] == "finished" and real[jid]["iterations"] == 120, real[jid]
        ranks = {t["rank"] for t in run["timings"] if t["job"] == jid and t["kind"] == "start"}
        assert ranks == set(range(stages))  # one process per stage
        assert real[jid]["metrics"]["accuracy"] > 0.5  # the stages trained the model together
