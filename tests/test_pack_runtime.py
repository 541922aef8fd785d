"""Real packed execution: tiny torch jobs trained jointly in ONE process equal training them alone."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from cohabit.engine import actions as A  # noqa: E402
from cohabit.engine.record import EventKind  # noqa: E402
from cohabit.policies.base import BasePolicy  # noqa: E402
from cohabit.policies.pack import PackPolicy  # noqa: E402
from cohabit.runtime.checkpoint import CheckpointStore  # noqa: E402
from cohabit.runtime.runner import run_local  # noqa: E402
from cohabit.runtime.workloads import WorkloadContext, build, parse_config  # noqa: E402

from runtime_helpers import cluster, job, no_orphans  # noqa: E402,F401

ITERS = 120
# Packed and solo steps differ at float rounding (1e-7). This tiny MLP amplifies a 1e-7 change of one
# weight to 1e-6 after 600 steps but to 0.2 after 1200 (chaotic training), so runs stay <= 600 steps.
WL = {"name": "torch-mlp", "n_samples": 512, "n_features": 8, "n_classes": 4, "hidden": 16, "batch_size": 16,
      "seed": 3}


def solo_model(spec) -> dict:
    """The job trained alone, in this process, on the same workload (same batches, same rule)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = parse_config(spec.id, spec.workload)
        wl = build(cfg, WorkloadContext(job=spec.id, seed=cfg.seed, iterations=spec.iterations, epochs=None,
                                        batch_size=spec.batch_size, rank=0, world_size=1, threads=1))
        while not wl.done:
            wl.step()
        return wl.state_dict()["model"]["model"]
    finally:
        torch.set_num_threads(before)


def saved_model(root, job_id: str) -> tuple[dict, int]:
    state, info = CheckpointStore(root / "checkpoints").load(job_id)
    return state["workload"]["model"]["model"], info.iteration


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-5)


def test_pack_policy_runs_three_torch_jobs_in_one_process_equal_to_solo_training(tmp_path) -> None:
    specs = [job(f"lr{lr}", {**WL, "lr": lr}, ITERS) for lr in (0.05, 0.02, 0.1)]
    ready: dict[str, int] = {}

    def listen(job_id: str, msg: dict) -> None:
        if msg.get("type") == "ready":
            ready[job_id] = msg["pid"]

    out = run_local(specs, cluster(1, cpu=1), PackPolicy(), root=tmp_path, strict=True, checkpoint_interval=0.2,
                    report_interval=0.05, listener=listen)
    rec = out.result.record
    assert all(j.state == "finished" for j in out.result.jobs.values()), out.result.unfinished
    (packed,) = rec.of_kind(EventKind.PACKED)
    assert sorted(packed.data["members"]) == sorted(s.id for s in specs)
    assert len(ready) == 3 and len(set(ready.values())) == 1  # ONE process trained all three
    assert all(out.status[s.id].pids == () for s in specs)
    for s in specs:
        got, it = saved_model(tmp_path, s.id)
        assert it == ITERS
        assert_same(got, solo_model(s))
        # the loss dropped from ln(4) = 1.39 (uniform guesses over 4 classes at initialisation)
        assert out.status[s.id].metrics["loss"] < 0.9 and out.status[s.id].metrics["accuracy"] > 0.6


class PauseOneMember(BasePolicy):
    """Packs both jobs, pauses ``a`` after its first report and resumes it alone once ``b`` ends."""

    name = "pause-one"

    def __init__(self) -> None:
        self.stage = 0

    def decide(self, view):  # type: ignore[override]
        a = view.jobs.get("a")
        if self.stage == 0 and len(view.pending) == 2:
            self.stage = 1
            return [A.Pack(("a", "b"), (0, 0))]
        if self.stage == 1 and a is not None and a.reported_iterations > 0 and a.state == "running":
            self.stage = 2
            return [A.Pause("a")]
        if self.stage == 2 and "b" not in view.running and "a" in view.paused:
            self.stage = 3
            return [A.Resume("a", (0,))]
        return []


def test_a_paused_member_leaves_the_pack_and_resumes_alone_from_its_own_checkpoint(tmp_path) -> None:
    specs = [job("a", {**WL, "lr": 0.05}, ITERS * 5), job("b", {**WL, "lr": 0.1, "seed": 5}, ITERS)]
    out = run_local(specs, cluster(1, cpu=1), PauseOneMember(), root=tmp_path, strict=True,
                    checkpoint_interval=0.2, report_interval=0.05)
    rec = out.result.record
    assert all(j.state == "finished" for j in out.result.jobs.values()), out.result.unfinished
    assert [e.data["left"] for e in rec.of_kind(EventKind.UNPACKED)][0] == "a"
    paused = rec.of_kind(EventKind.PAUSED)
    assert [e.job for e in paused] == ["a"]
    (resumed,) = [e for e in rec.of_kind(EventKind.RESUMED) if e.job == "a"]
    assert "pack" not in resumed.data  # an ordinary worker continued it
    for s in specs:  # b kept training in the pack; a went pack -> checkpoint -> alone: both as if alone
        got, it = saved_model(tmp_path, s.id)
        assert it == s.iterations
        assert_same(got, solo_model(s))
