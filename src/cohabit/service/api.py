"""The REST API (FastAPI), versioned under ``/v1``; OpenAPI at ``/openapi.json``.

Every route but ``/healthz`` takes ``Authorization: Bearer TOKEN``. A tenant sees and touches
only its own jobs (another tenant's job answers 404, as a missing one); admin routes answer 403
to tenants. Errors are JSON: ``{"detail": ...}``; a bad job spec is 422 with one entry per
problem naming the file, line and field, exactly as the YAML loader reports them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Path, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from pydantic import BaseModel, Field

from ..policies.params import PolicyParamError
from ..spec.yamlio import SpecError
from .intake import parse_jobs
from .store import ACTIVE_STATES, TERMINAL_STATES, Caller, StoreError, sched_id

if TYPE_CHECKING:
    from .daemon import Service

MAX_BODY = 4 * 2**20
MAX_ID = 2**62
JobId = Annotated[int, Path(ge=1, le=MAX_ID, description="The job's id (its submission number).")]
STATES = ACTIVE_STATES + TERMINAL_STATES


class PolicyIn(BaseModel):
    policy: str = Field(min_length=1, max_length=200, description="NAME[:key=value...], as --policy takes.")


class TenantIn(BaseModel):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    weight: float = Field(default=1.0, gt=0, le=1e6)
    max_gpus: float | None = Field(default=None, ge=0, le=1e9)
    max_running: int | None = Field(default=None, ge=0, le=10**9)


class TenantPatch(BaseModel):
    weight: float | None = Field(default=None, gt=0, le=1e6)
    max_gpus: float | None = Field(default=None, ge=0, le=1e9)
    max_running: int | None = Field(default=None, ge=0, le=10**9)


def spec_error_detail(exc: SpecError) -> list[dict[str, Any]]:
    return [{"file": e.file, "line": e.line, "field": e.field, "msg": e.message, "text": e._one()}
            for e in (exc, *exc.others)]


async def caller(request: Request, authorization: Annotated[str | None, Header()] = None) -> Caller:
    """The tenant whose bearer token authorises this request (401 otherwise). Async, so that a
    known token (cached by the store) costs no hop to the thread pool; others are looked up there."""
    if not authorization or not authorization.startswith("Bearer "):
        raise HTTPException(401, "missing bearer token (Authorization: Bearer TOKEN)")
    store = request.app.state.service.store
    token = authorization[7:].strip()
    who = store.cached_caller(token)
    if who is None:
        who = await asyncio.to_thread(store.caller, token)
    if who is None:
        raise HTTPException(401, "unknown token")
    return who


async def admin(who: Annotated[Caller, Depends(caller)]) -> Caller:
    """The caller, if it is the administrator (403 otherwise)."""
    if not who.is_admin:
        raise HTTPException(403, "this route needs the admin token")
    return who


Who = Annotated[Caller, Depends(caller)]
Admin = Annotated[Caller, Depends(admin)]


def create_app(service: Service) -> FastAPI:
    store = service.store
    app = FastAPI(title="cohabit", version="1", description="A scheduler for ML training jobs, as a service.")
    app.state.service = service

    def found(job: dict[str, Any] | None, seq: int) -> dict[str, Any]:
        if job is None:
            raise HTTPException(404, f"no job {seq}")
        return job

    @app.get("/healthz")
    def healthz() -> JSONResponse:
        ok = service.alive and service.error is None
        body = {"ok": ok, "scheduler": "running" if ok else "stopped", "error": service.error,
                "recovered": service.feed.recovered}
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.post("/v1/jobs", status_code=201, responses={200: {"description": "idempotent replay"}, 422: {}})
    async def submit(request: Request, who: Who,
                     idempotency_key: Annotated[str | None, Header(max_length=200)] = None) -> JSONResponse:
        """Submit jobs: the YAML (or JSON) job file ``cohabit run`` takes, as the request body
        (``Content-Type: application/json`` takes a faster path for JSON, same checks and errors)."""
        body = await request.body()
        if len(body) > MAX_BODY:
            raise HTTPException(413, f"job file larger than {MAX_BODY} bytes")
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise HTTPException(422, [{"file": "<request>", "line": None, "field": None,
                                       "msg": "the body must be UTF-8 YAML or JSON"}]) from None
        try:
            specs = parse_jobs(text, request.headers.get("content-type"),
                               request.headers.get("x-file-name", "<request>")[:200])
        except SpecError as exc:
            return JSONResponse({"detail": spec_error_detail(exc)}, status_code=422)
        if not specs:
            raise HTTPException(422, [{"file": "<request>", "line": None, "field": "jobs", "msg": "no jobs"}])
        problems = service.check(specs)
        if problems:
            raise HTTPException(422, [{"field": "workload", "msg": p} for p in problems])
        jobs, created = await store.submit_async(who, specs, idempotency_key)
        return JSONResponse({"jobs": jobs, "created": created}, status_code=201 if created else 200)

    @app.get("/v1/jobs")
    def list_jobs(who: Who,
                  state: Annotated[str | None, Query(description=f"one of {', '.join(STATES)}")] = None,
                  tenant: Annotated[str | None, Query(max_length=64)] = None,
                  name: Annotated[str | None, Query(max_length=200)] = None,
                  after: Annotated[int, Query(ge=0, le=MAX_ID, description="cursor: jobs after this id")] = 0,
                  limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> dict[str, Any]:
        if state is not None and state not in STATES:
            raise HTTPException(422, [{"field": "state", "msg": f"expected one of {', '.join(STATES)}, got {state!r}"}])
        jobs = store.list_jobs(who, state=state, tenant=tenant, name=name, after=after, limit=limit)
        return {"jobs": jobs, "next": jobs[-1]["id"] if len(jobs) == limit else None}

    @app.get("/v1/jobs/{job_id}")
    def get_job(job_id: JobId, who: Who) -> dict[str, Any]:
        job = found(store.get_job(who, job_id), job_id)
        live = service.feed.snapshot.get("running", {}).get(sched_id(job_id))
        job["progress"] = live
        return job

    def _request(who: Caller, job_id: int, **kw: Any) -> dict[str, Any]:
        try:
            return found(store.request(who, job_id, **kw), job_id)
        except StoreError as exc:
            raise HTTPException(409, str(exc)) from None

    @app.post("/v1/jobs/{job_id}/cancel", status_code=202)
    def cancel(job_id: JobId, who: Who) -> dict[str, Any]:
        """Cancel a submitted, pending, running or paused job (a running one checkpoints first)."""
        return _request(who, job_id, cancel=True)

    @app.post("/v1/jobs/{job_id}/pause", status_code=202)
    def pause(job_id: JobId, who: Admin) -> dict[str, Any]:
        """Hold a job (admin): a running job is paused at a checkpoint; none is started until resumed."""
        return _request(who, job_id, hold=True)

    @app.post("/v1/jobs/{job_id}/resume", status_code=202)
    def resume(job_id: JobId, who: Admin) -> dict[str, Any]:
        return _request(who, job_id, hold=False)

    @app.get("/v1/jobs/{job_id}/logs", response_class=PlainTextResponse)
    async def logs(job_id: JobId, who: Who, tail: Annotated[int, Query(ge=0, le=100000)] = 100,
                   follow: bool = False, rank: Annotated[int, Query(ge=0, le=4096)] = 0) -> Any:
        """The task log of ``rank`` (last ``tail`` lines); ``follow`` streams new lines until the job ends."""
        found(await asyncio.to_thread(store.get_job, who, job_id), job_id)
        path = service.logs_dir / f"{sched_id(job_id)}.{rank}.log"
        head = _tail(path, tail)
        if not follow:
            return PlainTextResponse(head)

        async def stream() -> AsyncIterator[bytes]:
            yield head.encode()
            pos = path.stat().st_size if path.exists() else 0
            while True:
                if path.exists() and path.stat().st_size > pos:
                    with open(path, "rb") as f:
                        f.seek(pos)
                        chunk = f.read()
                    pos += len(chunk)
                    yield chunk
                job = await asyncio.to_thread(store.get_job, who, job_id)
                if job is None or job["state"] in TERMINAL_STATES:
                    return
                await asyncio.sleep(0.5)
        return StreamingResponse(stream(), media_type="text/plain")

    @app.get("/v1/queue")
    def queue(who: Who) -> dict[str, Any]:
        return {"jobs": store.queue(who)}

    @app.get("/v1/cluster")
    def cluster(who: Who) -> dict[str, Any]:
        snap = dict(service.feed.snapshot)
        if not who.is_admin:  # a tenant sees capacity and only its own running jobs
            snap["running"] = {k: v for k, v in snap.get("running", {}).items() if v["tenant"] == who.name}
            for k in ("pending", "paused", "held", "waiting_quota"):
                snap.pop(k, None)
        return snap

    @app.get("/v1/policy")
    def get_policy(who: Who) -> dict[str, Any]:
        return {"policy": store.policy(), "active": service.feed.policy_spec}

    @app.put("/v1/policy")
    def put_policy(body: PolicyIn, who: Admin) -> dict[str, Any]:
        """Switch the policy live (admin); the loop picks it up at its next turn."""
        from ..policies import make_policy
        try:
            p = make_policy(body.policy)
        except (PolicyParamError, ValueError) as exc:
            raise HTTPException(422, [{"field": "policy", "msg": str(exc)}]) from None
        if getattr(p, "uses_oracle", False):
            raise HTTPException(422, [{"field": "policy", "msg": "a live service has no oracle"}])
        store.set_policy(body.policy)
        return {"policy": body.policy}

    @app.get("/v1/whatif/state")
    def whatif_state(who: Admin) -> dict[str, Any]:
        """The live state a what-if simulation starts from (admin): cluster, active jobs, observations."""
        from .whatif import live_state
        jobs = [(j.seq, j.spec) for j, _ in store.active_jobs()]
        obs = service.feed.snapshot.get("observed", {"jobs": {}, "model_iter_time": {}})
        return live_state(service.cluster, jobs, obs, service.feed.policy_spec)

    @app.get("/v1/tenants")
    def tenants(who: Admin) -> dict[str, Any]:
        return {"tenants": store.tenants()}

    @app.post("/v1/tenants", status_code=201)
    def create_tenant(body: TenantIn, who: Admin) -> dict[str, Any]:
        """Create a tenant; its token is in this answer only (the store keeps its hash)."""
        try:
            token = store.create_tenant(body.name, weight=body.weight, max_gpus=body.max_gpus,
                                        max_running=body.max_running)
        except StoreError as exc:
            raise HTTPException(409, str(exc)) from None
        return {"name": body.name, "token": token}

    @app.patch("/v1/tenants/{name}")
    def patch_tenant(name: Annotated[str, Path(max_length=64)], body: TenantPatch, who: Admin) -> dict[str, Any]:
        fields = body.model_dump(exclude_unset=True)
        if "weight" in fields and fields["weight"] is None:
            raise HTTPException(422, [{"field": "weight", "msg": "expected a number > 0 (null clears only quotas)"}])
        try:
            return store.update_tenant(name, **fields)
        except StoreError as exc:
            raise HTTPException(404, str(exc)) from None

    return app


def _tail(path: Any, n: int) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return ""
    lines = data.decode("utf-8", "replace").splitlines(keepends=True)
    return "".join(lines[-n:]) if n else ""
