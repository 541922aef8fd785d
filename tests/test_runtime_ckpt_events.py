"""A restore that skips corrupt checkpoints, or starts over, is reported (issue 12: never silent)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from cohabit.engine.backend import BackendEventKind as K
from cohabit.runtime.local import LocalBackend

from runtime_helpers import allocate, cluster, ended, final_event, job, no_orphans, wait_for  # noqa: F401

WORKLOAD = {"name": "mlr", "data": "synthetic", "n_samples": 2000, "n_features": 20, "seed": 1}


def _corrupt(path) -> None:
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("corrupt_all", [False, True])
def test_restart_past_corrupt_checkpoints_is_recorded(tmp_path, corrupt_all: bool) -> None:
    cl = cluster(1)
    spec = job("victim", WORKLOAD, 15000)
    with LocalBackend(cl, root=tmp_path, report_interval=0.05, checkpoint_interval=0.05,
                      restart_backoff=1.0) as be:
        be.launch(spec, allocate(cl, spec, (0,)), 0.0, from_checkpoint=False)
        wait_for(be, lambda ev: len(be.store.paths("victim")) >= 2, 60.0)
        pid = be.status["victim"].pids[0]
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # dead (a zombie until the backend reaps it): no more writes
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().split(") ", 1)[1].startswith("Z"):
                        break
            except FileNotFoundError:
                break
            time.sleep(0.01)
        paths = be.store.paths("victim")
        for p in paths if corrupt_all else paths[:1]:
            _corrupt(p)
        events = wait_for(be, ended("victim"), 120.0)
        assert final_event(events, "victim").kind is K.FINISHED
        st = be.status["victim"]
        kinds = [t["kind"] for t in be.timings if t.get("job") == "victim"]
    assert st.restarts == 1
    if corrupt_all:
        assert "from_scratch" in kinds
        assert any(f"restarted from iteration 0 (all {len(paths)} checkpoint(s) corrupt)" in n
                   for n in st.checkpoint_events), st.checkpoint_events
    else:
        assert "checkpoint_fallback" in kinds and "from_scratch" not in kinds
        assert any("fell back past 1 corrupt checkpoint(s)" in n for n in st.checkpoint_events), st.checkpoint_events
