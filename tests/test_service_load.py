"""Load and fuzz against the real daemon: 1,000 concurrent submissions from many async clients
(plus concurrent idempotent retries) give exactly 1,000 jobs; the API fuzzed from its own OpenAPI
schema (schemathesis, bounded) never answers 500 and the daemon stays up."""

from __future__ import annotations

import asyncio
import time

import httpx
import numpy as np
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from service_helpers import daemons, db_params, db_url, start_daemon, wait_until  # noqa: F401

N = 1000
CLIENTS = 50
# jobs that can never fit this CPU-only cluster: the scheduler admits and rejects each, no process starts
JOB = ("jobs:\n  - id: load-{i}\n    workers: {{count: 1, demand: {{cpu: 1, gpu: 1}}}}\n    iterations: 10\n"
       "    workload: {{name: mlr}}\n")


async def _client_run(url: str, token: str, ids: list[int], lat: list[float], k: int) -> list[int]:
    out = []
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120) as c:
        for i in ids:
            body = JOB.format(i=i)
            t0 = time.perf_counter()
            if i % 5 == 0:  # a retried submit: the same key twice at once
                rs = await asyncio.gather(*(c.post("/v1/jobs", content=body, headers={"Idempotency-Key": f"k{i}"})
                                            for _ in range(2)))
                assert sorted(r.status_code for r in rs) in ([200, 201], [201, 201]) or \
                    {r.status_code for r in rs} <= {200, 201}, [r.text for r in rs]
                got = {r.json()["jobs"][0]["id"] for r in rs}
                assert len(got) == 1, f"idempotent retry made two jobs: {got}"
            else:
                r = await c.post("/v1/jobs", content=body, headers={"Idempotency-Key": f"k{i}"})
                assert r.status_code == 201, r.text
                got = {r.json()["jobs"][0]["id"]}
            lat.append(time.perf_counter() - t0)
            out += list(got)
    return out


async def _load(url: str, token: str) -> tuple[list[int], list[float], float]:
    lat: list[float] = []
    chunks = [list(range(k, N, CLIENTS)) for k in range(CLIENTS)]
    t0 = time.perf_counter()
    res = await asyncio.gather(*(_client_run(url, token, ch, lat, k) for k, ch in enumerate(chunks)))
    return [i for r in res for i in r], lat, time.perf_counter() - t0


@pytest.mark.timeout(600)
@pytest.mark.parametrize("db", db_params())
def test_thousand_concurrent_submits_exactly_once(db, tmp_path, daemons) -> None:
    d = start_daemon(tmp_path / "state", db=db_url(db, tmp_path))
    daemons.append(d)
    ids, lat, wall = asyncio.run(_load(d.url, d.token))
    assert len(ids) == N and len(set(ids)) == N
    with d.client() as c:  # walk every page with the cursor: exactly N jobs
        seen, after = [], 0
        while True:
            page = c.get("/v1/jobs", params={"after": after, "limit": 137}).json()
            seen += [j["id"] for j in page["jobs"]]
            if page["next"] is None:
                break
            after = page["next"]
        assert sorted(seen) == sorted(ids)
        def states() -> dict[str, int]:
            out: dict[str, int] = {}
            after = 0
            while after is not None:
                page = c.get("/v1/jobs", params={"after": after, "limit": 1000}).json()
                for j in page["jobs"]:
                    out[j["state"]] = out.get(j["state"], 0) + 1
                after = page["next"]
            return out

        try:
            wait_until(lambda: states() == {"rejected": N}, 180, "the scheduler to see every job")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: states {states()}, health {httpx.get(d.url + '/healthz').text}") from None
    p50, p99 = np.percentile(lat, [50, 99]) * 1e3
    print(f"\n{db}: {N} submits by {CLIENTS} clients in {wall:.2f} s ({N / wall:.0f}/s); "
          f"latency p50 {p50:.1f} ms p99 {p99:.1f} ms")
    assert httpx.get(d.url + "/healthz").json()["ok"]
    d.stop()


@pytest.fixture(scope="module")
def fuzz_daemon(tmp_path_factory):
    d = start_daemon(tmp_path_factory.mktemp("fuzz") / "state")
    yield d
    d.stop()


@pytest.mark.timeout(600)
def test_fuzz_api_from_its_openapi_schema_never_500(fuzz_daemon) -> None:
    schema = schemathesis.openapi.from_url(fuzz_daemon.url + "/openapi.json")
    headers = {"Authorization": f"Bearer {fuzz_daemon.token}"}
    calls = 0
    for result in schema.get_all_operations():
        op = result.ok()

        @given(case=op.as_strategy())
        @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def check(case) -> None:
            nonlocal calls
            if case.query and case.query.get("follow"):
                case.query["follow"] = False  # a follow stream only ends with its job
            r = case.call(base_url=fuzz_daemon.url, headers=headers, timeout=30)
            calls += 1
            assert r.status_code < 500, f"{case.method} {case.formatted_path}: {r.status_code} {r.text[:300]}"

        check()
    assert calls > 100
    assert fuzz_daemon.proc.poll() is None and httpx.get(fuzz_daemon.url + "/healthz").json()["ok"]
