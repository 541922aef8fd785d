"""``cohabit serve --backend ray`` end to end, inside the loopback-only namespace that
``tests/test_service_ray.py`` makes: the daemon starts its own one-node Ray (object store 100 MB,
no dashboard, usage statistics off), runs two small real jobs to the end, is killed with ``kill -9``
while two longer jobs run, and after a restart on the same store every job is accounted for: each
finished exactly once, the interrupted ones resumed from their checkpoints (not from iteration 0);
no task actor of the killed daemon is alive once the new one has recovered. (That a job resumed on
Ray ends with an uninterrupted run's model is tests/ray_suite's; tests/test_service_crash.py checks
it across kill -9 with the local backend.)"""

from __future__ import annotations

import os

import pytest
from sqlalchemy import select

from cohabit.service.db import EventRow
from cohabit.service.store import Store

from service_helpers import Daemon, mlr_jobs, start_daemon, wait_until

pytestmark = pytest.mark.skipif(os.environ.get("COHABIT_RAY_NETNS") != "1",
                                reason="runs only inside a loopback-only network namespace (tests/test_service_ray.py)")
RAY = ("--backend", "ray", "--checkpoint-interval", "0.5")
LONG = 150000  # ~20 s of training on a quiet machine: still running at its first checkpoints, when it is killed


def _jobs(c, ids: list[int]) -> dict[int, dict]:
    return {i: c.get(f"/v1/jobs/{i}").json() for i in ids}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_serve_on_ray_runs_jobs_and_accounts_for_every_job_after_kill9(tmp_path) -> None:
    state = tmp_path / "state"
    daemons: list[Daemon] = []
    try:
        d = start_daemon(state, nodes=2, extra=RAY, timeout=240)
        daemons.append(d)
        with d.client() as c:
            small = [j["id"] for j in c.post("/v1/jobs", content=mlr_jobs(2, 300, prefix="small")).json()["jobs"]]
            done = wait_until(lambda: (js := _jobs(c, small)) and all(j["state"] == "finished" for j in js.values())
                              and js, 180, "the two small jobs to finish on Ray")
            for j in done.values():
                assert j["iterations"] == 300 and j["runs"] == 1, j
            log = c.get(f"/v1/jobs/{small[0]}/logs", params={"tail": 50}).text
            assert "ray node" in log, log  # the task ran as a Ray actor

            long_ = [j["id"] for j in c.post("/v1/jobs", content=mlr_jobs(2, LONG, prefix="long")).json()["jobs"]]
            running = wait_until(lambda: (js := _jobs(c, long_)) and all(
                j["state"] == "running" and (j["checkpoint"] or {}).get("iteration", 0) > 0 for j in js.values())
                and js, 180, "both long jobs to run and checkpoint")
        store = Store(f"sqlite:///{state / 'cohabit.db'}")
        old_pids = [p for a in store.allocations().values() for p in a["pids"]]
        store.close()
        assert len(old_pids) == 2 and all(p > 0 for p in old_pids), old_pids  # the actors' real pids
        d.kill9()
        assert all(j["state"] == "running" for j in running.values())

        d = start_daemon(state, nodes=2, extra=RAY, timeout=240)
        daemons.append(d)
        with d.client() as c:
            health = wait_until(lambda: (h := c.get("/healthz").json())["recovered"] and h, 60, "the recovery")
            assert health["recovered"]["resumed"] == 2, health
            alive = [p for p in old_pids if _alive(p)]
            assert not alive, f"task actors of the killed daemon alive after the recovery: {alive}"
            every = small + long_
            final = wait_until(lambda: (js := c.get("/v1/jobs").json()["jobs"]) and all(
                j["state"] == "finished" for j in js) and js, 240, "every job to finish after the restart")
            assert sorted(j["id"] for j in final) == sorted(every)  # none lost, none doubled
            for j in _jobs(c, long_).values():
                assert j["iterations"] == LONG and j["runs"] == 2, j  # launched once per daemon
        store = Store(f"sqlite:///{state / 'cohabit.db'}")
        with store.session() as s:
            for jid in long_:
                evs = [(e.kind, e.data) for e in s.scalars(select(EventRow).where(EventRow.job == f"j{jid}")
                                                           .order_by(EventRow.id))]
                kinds = [k for k, _ in evs]
                assert kinds.count("submitted") == kinds.count("finished") == kinds.count("resumed") == 1, kinds
                after = [data for k, data in evs[kinds.index("resumed"):] if k == "progress"]
                assert after and after[0]["iterations"] > 0, "resumed from iteration 0, not from its checkpoint"
        store.close()
    finally:
        for x in daemons:
            x.stop()
