"""``cohabit run --resume`` continues pack members from their own checkpoints (not from iteration 0)."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from cohabit.policies.pack import PackPolicy  # noqa: E402
from cohabit.runtime.checkpoint import CheckpointStore  # noqa: E402
from cohabit.runtime.runner import local_cluster, run_local  # noqa: E402
from cohabit.spec.yamlio import load_jobs  # noqa: E402

from runtime_helpers import no_orphans  # noqa: E402,F401
from test_runtime_resume import _cohabit  # noqa: E402

JOB = ("  - {{id: {id}, workers: {{count: 1, demand: {{cpu: 1, mem_gb: 0.3}}}}, iterations: {iters},\n"
       "     workload: {{name: torch-mlp, n_samples: 512, n_features: 8, n_classes: 4, hidden: 16, "
       "batch_size: 16, seed: 3, lr: {lr}}}}}\n")
LRS = {"p0": 0.05, "p1": 0.1}


def _jobs_yaml(path: Path, iters: dict[str, int]) -> Path:
    path.write_text("jobs:\n" + "".join(JOB.format(id=j, iters=iters[j], lr=lr) for j, lr in LRS.items()))
    return path


def test_resume_continues_pack_members_from_their_own_checkpoints(tmp_path: Path) -> None:
    jobs = _jobs_yaml(tmp_path / "jobs.yaml", {j: 10**6 for j in LRS})
    work = tmp_path / "work"
    store = CheckpointStore(work / "pack" / "checkpoints", fsync=False)

    # 1. an interrupted run: both jobs train in one pack, checkpoint periodically, then SIGTERM
    proc = _cohabit(["run", str(jobs), "--policy", "pack", "--nodes", "1", "--workdir", str(work),
                     "--checkpoint-interval", "0.5"], tmp_path)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not all(
                (ck := store.latest(j)) is not None and ck.iteration > 0 for j in LRS):
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130 and "--resume" in err, err[-800:]
    assert len(list((work / "pack" / "logs").glob("pack-0-0-*.log"))) == 1  # they ran as a pack
    kept = {j: store.latest(j).iteration for j in LRS}  # type: ignore[union-attr]
    assert all(it > 0 for it in kept.values()), kept

    # 2. the pack members' checkpoints are seen: no silent restart without --resume or --fresh
    again = _cohabit(["run", str(jobs), "--policy", "pack", "--nodes", "1", "--workdir", str(work)], tmp_path)
    try:
        _, err = again.communicate(timeout=60)  # refused at once (a run that starts would train 10**6 steps)
    finally:
        if again.poll() is None:
            again.send_signal(signal.SIGTERM)
            again.communicate(timeout=60)
    assert again.returncode == 2 and "--resume" in err and "--fresh" in err, err[-800:]
    assert {j: store.latest(j).iteration for j in LRS} == kept  # type: ignore[union-attr]

    # 3. resume (as `cohabit run --resume` does): each member starts at its own checkpoint iteration
    # 3,000 more iterations: with 150 a member once finished on a quiet machine before its first progress
    # report (every 0.05 s)
    total = {j: kept[j] + 3000 for j in LRS}
    specs = load_jobs(_jobs_yaml(tmp_path / "rest.yaml", total))
    first: dict[str, dict[str, dict[str, Any]]] = {j: {} for j in LRS}  # each job's first message of each type
    packed_with: dict[str, set[str]] = {j: set() for j in LRS}

    def listen(job_id: str, msg: dict[str, Any]) -> None:
        first[job_id].setdefault(str(msg.get("type")), msg)
        packed_with[job_id].update(msg.get("packed_with", ()))

    out = run_local(specs, local_cluster(1), PackPolicy(), root=work / "pack", resume=True, listener=listen,
                    checkpoint_interval=0.5, report_interval=0.05, strict=True)
    assert all(j.state == "finished" for j in out.result.jobs.values()), out.result.unfinished
    for j in LRS:
        assert first[j]["ready"]["iteration"] == kept[j], first[j]["ready"]
        prog = first[j]["progress"]
        assert kept[j] < prog["iterations"] <= total[j], (kept[j], prog)
        assert packed_with[j] == set(LRS)  # resumed into one pack, not alone
        assert out.status[j].iterations == total[j]
        assert store.latest(j).iteration == total[j]  # type: ignore[union-attr]
        note = f"resumed from the earlier run's checkpoint at iteration {kept[j]}"
        assert note in out.status[j].checkpoint_events, out.status[j].checkpoint_events
    resumed = {t["job"]: t["checkpoint_iteration"] for t in out.timings if t["kind"] == "resumed"}
    assert resumed == kept
