"""``cohabit run``: SIGTERM checkpoints and cleans up; --resume continues; nothing discards checkpoints silently."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cohabit.runtime.checkpoint import CheckpointStore
from cohabit.runtime.usage import read_proc

from runtime_helpers import children
from service_helpers import wait_until

JOBS = ("jobs:\n  - {id: long, workers: {count: 1, demand: {cpu: 1}}, iterations: 200000, "
        "workload: {name: mlr, data: synthetic, n_samples: 2000, n_features: 20, seed: 1}}\n")


def _cohabit(args: list[str], tmp: Path, **kw) -> subprocess.Popen:
    env = {**os.environ, "COLUMNS": "200", "TMPDIR": str(tmp / "tmp")}
    (tmp / "tmp").mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "cohabit.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, **kw)


def _worker_cpu(pid: int) -> float:
    """The most CPU seconds any child process of ``pid`` (a ``cohabit run``: its workers) has used."""
    return max([(read_proc(c) or (0.0, 0.0))[0] for c in children(pid)], default=0.0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigterm_checkpoints_stops_and_resume_continues(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(JOBS)
    work = tmp_path / "work"
    # no periodic checkpoint during the test: a checkpoint past iteration 0 can only come from the SIGTERM halt
    proc = _cohabit(["run", str(jobs), "--policy", "fifo", "--workdir", str(work), "--checkpoint-interval", "100000"],
                    tmp_path)
    store = CheckpointStore(work / "fifo" / "checkpoints", fsync=False)
    try:
        # training: a worker of the run has spent a CPU second (its imports take ~0.15 s), a condition
        # rather than a sleep (on a loaded machine a worker could still be importing after 4 s)
        wait_until(lambda: _worker_cpu(proc.pid) >= 1.0, 120, "a worker to train (a CPU second)")
        assert store.latest("long") is None or store.latest("long").iteration == 0
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "interrupted" in err and "--resume" in err, err[-800:]
    kept = store.latest("long")
    assert kept is not None and kept.iteration > 0
    pids = [int(p) for p in os.popen("pgrep -f 'cohabit.runtime.worker'").read().split()]
    assert not any(_alive(p) and str(work) in Path(f"/proc/{p}/cmdline").read_text(errors="ignore")
                   for p in pids if Path(f"/proc/{p}/cmdline").exists())

    # running again without --resume must not delete the surviving checkpoint
    again = _cohabit(["run", str(jobs), "--policy", "fifo", "--workdir", str(work)], tmp_path)
    _, err = again.communicate(timeout=120)
    assert again.returncode == 2 and "--resume" in err and "--fresh" in err, err[-800:]
    assert store.latest("long") is not None and store.latest("long").iteration == kept.iteration

    # --resume continues from it (a shorter job file: the same job with fewer iterations left to run)
    jobs.write_text(JOBS.replace("iterations: 200000", f"iterations: {kept.iteration + 200}"))
    out = tmp_path / "r.json"
    res = _cohabit(["run", str(jobs), "--policy", "fifo", "--workdir", str(work), "--resume", "--json", str(out)],
                   tmp_path)
    _, err = res.communicate(timeout=300)
    assert res.returncode == 0, err[-800:]
    job = json.loads(out.read_text())["real"]["fifo"]["jobs"]["long"]
    assert job["state"] == "finished"
    assert any(f"resumed from the earlier run's checkpoint at iteration {kept.iteration}" in e
               for e in job["checkpoint_events"]), job


def test_sigterm_without_workdir_leaves_no_temporary_directory(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(JOBS)
    proc = _cohabit(["run", str(jobs), "--policy", "fifo", "--checkpoint-interval", "0.2"], tmp_path)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not list((tmp_path / "tmp").glob("cohabit-run-*/checkpoints/*/*.ckpt")):
            time.sleep(0.1)
        assert list((tmp_path / "tmp").glob("cohabit-run-*")), "the run never started"
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert not list((tmp_path / "tmp").glob("cohabit-run-*"))
