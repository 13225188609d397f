"""The web side: FastAPI's lifespan owns the echomq App (its connection opens at start-up and
closes at shutdown); handlers enqueue and read results through task handles.

    ECHOMQ_URL=valkey://127.0.0.1:6379 uvicorn emailapp.web:api
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from echomq import InvalidArgument, ResultTimeout, TaskFailed

from .tasks import app, send_email


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    async with app:
        yield


api = FastAPI(lifespan=lifespan)


@api.exception_handler(InvalidArgument)
async def refused(_: Request, exc: InvalidArgument) -> JSONResponse:
    # echomq checks every argument before it writes anything: the client's input, not a 500.
    return JSONResponse({"argument": exc.argument, "reason": exc.reason}, status_code=422)


class Email(BaseModel):
    to: str
    subject: str


@api.post("/tenants/{tenant}/emails", status_code=202)
async def post_email(tenant: str, email: Email) -> dict[str, Any]:
    handle = await send_email.enqueue(tenant, email.to, email.subject)
    # The verdict is the engine's answer: enqueued, duplicate (same id or dedup key) or error.
    return {"id": handle.id, "verdict": handle.verdict.kind}


@api.get("/emails/{job_id}")
async def get_email(job_id: str, wait: float = 0.0) -> dict[str, Any]:
    handle = send_email.handle(job_id)
    try:
        result = await handle.result(timeout=wait) if wait > 0 else None
    except ResultTimeout:
        result = None
    except TaskFailed as failed:
        return {"id": job_id, "state": "dead", "error": failed.error}
    status = await handle.status()
    if status is None:
        raise HTTPException(404, f"no email job {job_id}")
    return {"id": job_id, "state": status.state, "result": result or status.result}
