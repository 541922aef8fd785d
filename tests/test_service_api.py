"""The REST API against the real daemon (``cohabit serve`` as a process on a loopback port), on
SQLite and on PostgreSQL: submit / status / cancel / pause / logs / policy, 422 with the YAML
loader's file, line and field, tenants (404 across tenants, 403 on admin routes), quotas, and the
CLI client with ``--json``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from service_helpers import daemons, db_params, db_url, mlr_jobs, start_daemon, wait_until  # noqa: F401

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module", params=db_params())
def daemon(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"svc-{request.param}")
    d = start_daemon(tmp / "state", db=db_url(request.param, tmp))
    yield d
    d.stop()
    assert d.proc.returncode is not None


def job_state(c, jid):
    return c.get(f"/v1/jobs/{jid}").json()


def test_health_and_openapi(daemon) -> None:
    import httpx
    h = httpx.get(daemon.url + "/healthz").json()
    assert h["ok"] is True
    spec = httpx.get(daemon.url + "/openapi.json").json()
    assert {"/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/cancel", "/v1/jobs/{job_id}/logs", "/v1/queue",
            "/v1/cluster", "/v1/policy", "/v1/tenants"} <= set(spec["paths"])
    mode = oct((daemon.state_dir / "admin.token").stat().st_mode & 0o777)
    assert mode == "0o600"


def test_submit_runs_to_the_end_with_status_logs_and_events(daemon) -> None:
    with daemon.client() as c:
        r = c.post("/v1/jobs", content=mlr_jobs(2, 300, prefix="fin"), headers={"content-type": "application/yaml"})
        assert r.status_code == 201, r.text
        ids = [j["id"] for j in r.json()["jobs"]]
        done = wait_until(lambda: all(job_state(c, i)["state"] == "finished" for i in ids) and ids, 90,
                          "both jobs to finish")
        assert done
        j = job_state(c, ids[0])
        assert j["iterations"] == 300 and j["start_time"] >= j["submit_time"] and j["end_time"] >= j["start_time"]
        kinds = [e["kind"] for e in j["events"]]
        assert kinds[0] == "submitted" and "started" in kinds and kinds[-1] == "finished"
        assert j["checkpoint"]["iteration"] == 300
        as_json = json.dumps(yaml.safe_load(mlr_jobs(1, 50, prefix="js")))  # JSON: the fast path
        r = c.post("/v1/jobs", content=as_json, headers={"content-type": "application/json"})
        assert r.status_code == 201, r.text
        assert (r.json()["jobs"][0]["name"], r.json()["jobs"][0]["total_iterations"]) == ("js0", 50)
        log = c.get(f"/v1/jobs/{ids[0]}/logs", params={"tail": 50}).text
        assert "launch" in log


def test_bad_spec_is_422_with_line_and_field(daemon) -> None:
    bad = "jobs:\n  - id: a\n    workers: {count: 1, demand: {cpu: 1}}\n    iterations: -5\n"
    with daemon.client() as c:
        r = c.post("/v1/jobs", content=bad, headers={"x-file-name": "mine.yaml"})
        assert r.status_code == 422
        d = r.json()["detail"][0]
        assert d["file"] == "mine.yaml" and d["line"] == 4 and d["field"] == "jobs[0].iterations"
        assert "greater than or equal to 1" in d["msg"]
        r = c.post("/v1/jobs", content="jobs:\n  - id: a\n    workers: {count: 1, demand: {cpu: 1}}\n"
                                      "    iterations: 5\n    workload: {name: no-such-workload}\n")
        assert r.status_code == 422 and "no-such-workload" in r.text
        # the same file as JSON (the fast path steps aside): the loader's line and field
        as_json = '{"jobs": [\n {"id": "a", "workers": {"count": 1, "demand": {"cpu": 1}},\n  "iterations": -5}]}'
        r = c.post("/v1/jobs", content=as_json, headers={"content-type": "application/json", "x-file-name": "m.json"})
        assert r.status_code == 422
        d = r.json()["detail"][0]
        assert (d["file"], d["line"], d["field"]) == ("m.json", 3, "jobs[0].iterations")
        assert c.get("/v1/jobs", params={"state": "bogus"}).status_code == 422
        assert c.get("/v1/jobs/0").status_code == 422 and c.get("/v1/jobs/999999").status_code == 404


def test_tenants_see_only_their_jobs_and_admin_routes_are_403(daemon) -> None:
    import httpx
    with daemon.client() as adm:
        ta = adm.post("/v1/tenants", json={"name": "alice"}).json()["token"]
        tb = adm.post("/v1/tenants", json={"name": "bob"}).json()["token"]
        assert adm.post("/v1/tenants", json={"name": "bob"}).status_code == 409
    with daemon.client(ta) as a, daemon.client(tb) as b:
        jid = a.post("/v1/jobs", content=mlr_jobs(1, 200000, prefix="a")).json()["jobs"][0]["id"]
        assert b.get(f"/v1/jobs/{jid}").status_code == 404
        assert b.post(f"/v1/jobs/{jid}/cancel").status_code == 404
        assert b.get(f"/v1/jobs/{jid}/logs").status_code == 404
        assert jid not in [j["id"] for j in b.get("/v1/jobs").json()["jobs"]]
        assert jid in [j["id"] for j in a.get("/v1/jobs").json()["jobs"]]
        for method, path, body in (("PUT", "/v1/policy", {"policy": "srtf"}), ("GET", "/v1/tenants", None),
                                   ("POST", f"/v1/jobs/{jid}/pause", None), ("POST", "/v1/tenants", {"name": "x"})):
            assert a.request(method, path, json=body).status_code == 403, path
        assert a.post(f"/v1/jobs/{jid}/cancel").status_code == 202
        wait_until(lambda: job_state(a, jid)["state"] == "cancelled", 60, "the cancel")
    assert httpx.get(daemon.url + "/v1/jobs").status_code == 401
    assert httpx.get(daemon.url + "/v1/jobs", headers={"Authorization": "Bearer nope"}).status_code == 401


def test_quota_keeps_extra_jobs_pending_with_reason(daemon) -> None:
    with daemon.client() as adm:
        tok = adm.post("/v1/tenants", json={"name": "carol", "max_running": 1}).json()["token"]
    with daemon.client(tok) as c:
        ids = [j["id"] for j in c.post("/v1/jobs", content=mlr_jobs(2, 200000, prefix="q")).json()["jobs"]]
        wait_until(lambda: job_state(c, ids[0])["state"] == "running", 60, "the first job to run")
        second = wait_until(lambda: (s := job_state(c, ids[1]))["pending_reason"] == "QuotaExceeded" and s, 30,
                            "QuotaExceeded")
        assert second["state"] == "pending"
        c.post(f"/v1/jobs/{ids[0]}/cancel")
        wait_until(lambda: job_state(c, ids[1])["state"] == "running", 60, "the second job once under quota")
        c.post(f"/v1/jobs/{ids[1]}/cancel")
        wait_until(lambda: job_state(c, ids[1])["state"] == "cancelled", 60, "the cancel")


def test_admin_pause_resume_and_idempotent_submit(daemon) -> None:
    with daemon.client() as c:
        h = {"Idempotency-Key": "once"}
        r1 = c.post("/v1/jobs", content=mlr_jobs(1, 200000, prefix="p"), headers=h)
        r2 = c.post("/v1/jobs", content=mlr_jobs(1, 200000, prefix="p"), headers=h)
        assert (r1.status_code, r2.status_code) == (201, 200) and r1.json()["jobs"] == r2.json()["jobs"]
        jid = r1.json()["jobs"][0]["id"]
        wait_until(lambda: job_state(c, jid)["state"] == "running", 60, "running")
        assert c.post(f"/v1/jobs/{jid}/pause").status_code == 202
        wait_until(lambda: job_state(c, jid)["state"] == "paused", 60, "paused")
        wait_until(lambda: job_state(c, jid)["checkpoint"] is not None, 10, "the pause checkpoint")
        assert c.post(f"/v1/jobs/{jid}/resume").status_code == 202
        j = wait_until(lambda: (s := job_state(c, jid))["state"] == "running"
                       and "resumed" in [e["kind"] for e in s["events"]] and s, 60, "resumed")
        assert j["runs"] == 2 and [e["kind"] for e in j["events"]].count("resumed") == 1
        c.post(f"/v1/jobs/{jid}/cancel")
        wait_until(lambda: job_state(c, jid)["state"] == "cancelled", 60, "the cancel")
        assert c.post(f"/v1/jobs/{jid}/cancel").status_code == 409  # already ended


def test_policy_switch_live(daemon) -> None:
    with daemon.client() as c:
        assert c.put("/v1/policy", json={"policy": "nope"}).status_code == 422
        assert c.put("/v1/policy", json={"policy": "srtf:preempt_margin=1"}).status_code == 200
        wait_until(lambda: c.get("/v1/policy").json()["active"] == "srtf:preempt_margin=1", 30, "the switch")
        c.put("/v1/policy", json={"policy": "fifo"})


def test_cli_client_json(daemon, tmp_path) -> None:
    env = {**os.environ, "COHABIT_URL": daemon.url, "COHABIT_TOKEN": daemon.token}
    f = tmp_path / "jobs.yaml"
    f.write_text(mlr_jobs(1, 300, prefix="cli"))

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cohabit.cli", *args], env=env, capture_output=True, text=True,
                              timeout=60)

    sub = cli("submit", str(f), "--json")
    assert sub.returncode == 0, sub.stderr
    jid = json.loads(sub.stdout)["jobs"][0]["id"]
    st = json.loads(cli("status", str(jid), "--json").stdout)
    assert st["id"] == jid and st["name"] == "cli0"
    assert jid in [j["id"] for j in json.loads(cli("queue", "--json").stdout)["jobs"]] or st["state"] == "finished"
    wi = cli("whatif", "--policy", "fifo,srtf", "--json")
    assert wi.returncode == 0, wi.stderr
    assert [r["policy"] for r in json.loads(wi.stdout)["results"]] == ["fifo", "srtf"]
    top = json.loads(cli("top", "--json").stdout)
    assert set(top) == {"cluster", "queue"} and top["cluster"]["nodes"]
    wait_until(lambda: json.loads(cli("status", str(jid), "--json").stdout)["state"] == "finished", 90, "finish")
    assert "launch" in json.loads(cli("logs", str(jid), "--json").stdout)["log"]
    follow = cli("logs", str(jid), "-f")  # following an ended job prints its log and returns
    assert follow.returncode == 0 and "launch" in follow.stdout
    gone = cli("status", "987654", "--json")
    assert gone.returncode == 1 and "404" in gone.stderr and "Traceback" not in gone.stderr
    down = subprocess.run([sys.executable, "-m", "cohabit.cli", "queue"], capture_output=True, text=True, timeout=60,
                          env={**env, "COHABIT_URL": "http://127.0.0.1:9"})
    assert down.returncode == 2 and "cannot reach" in down.stderr and "Traceback" not in down.stderr


@pytest.mark.parametrize("args, needle", [
    (("--policy", "nope"), "unknown policy 'nope'"),
    (("--cluster", "/nonexistent/c.yaml"), "/nonexistent/c.yaml"),
    (("--db", "mysql://x"), "--db: expected a sqlite:/// or postgresql:// URL"),
    (("--port", "0"), "--port: expected 1..65535"),
    (("--sqlite-sync", "off"), "--sqlite-sync: expected 'normal' or 'full', got 'off'"),
])
def test_serve_bad_flags_fail_clearly(tmp_path, args, needle) -> None:
    r = subprocess.run([sys.executable, "-m", "cohabit.cli", "serve", "--state-dir", str(tmp_path / "s"), *args],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and needle in " ".join(r.stderr.split()) and "Traceback" not in r.stderr
