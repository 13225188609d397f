"""The dashboard's routes: the page, snapshots (one-off and as server-sent events), /metrics,
and the token-checked actions on lanes and dead jobs.

Reads are open (``echomq dashboard`` binds 127.0.0.1) to the hosts ``_guard`` allows; every POST
needs ``X-Dashboard-Token``. A custom header also defeats cross-site form posts: a browser cannot
add one without CORS.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from importlib import resources
from typing import Any

from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)

from echomq.dashboard._guard import MAX_BODY, BodyTooLarge, json_object
from echomq.engine.opening import open_queue
from echomq.engine.queue import Queue
from echomq.engine.snapshot import read_snapshot
from echomq.errors import EchoMQError, InvalidArgument, LockedError, StateError
from echomq.metrics import Metrics
from echomq.wire.pool import Wire

log = logging.getLogger("echomq.dashboard")

#: What an application calls its lanes: given a queue's name and the lanes a frame shows, the
#: labels it knows (a tenant's name for its id); the dashboard shows them beside the names.
LaneLabel = Callable[[str, Sequence[str]], Awaitable[Mapping[str, str]]]

TOKEN_HEADER = "X-Dashboard-Token"  # noqa: S105 (a header name, not a secret)
#: Log lines a job's view shows unless ``?lines=`` says otherwise, and the most it may ask.
LOG_SHOWN = 20
MAX_LOG_SHOWN = 100

Action = Callable[[Queue, Request, dict[str, Any]], Awaitable[dict[str, Any]]]


class Rates:
    """Per-second rates from successive counts of each queue, over the last ``span`` seconds
    (one instance per event stream). A span of several samples smooths the fixed-window
    limiter's bursts at window edges, which a rate between two samples would show as spikes."""

    def __init__(self, span: float = 5.0) -> None:
        self.span = span
        self._seen: dict[str, collections.deque[tuple[float, int, int, int]]] = {}

    def update(self, queue: dict[str, Any], now: float) -> dict[str, float | None]:
        """``queue``: one queue of a snapshot as JSON (its ``name`` and ``counts``)."""
        c = queue["counts"]
        seen = self._seen.setdefault(queue["name"], collections.deque())
        seen.append((now, c["completed"], c["failed"], c["pending"]))
        while len(seen) > 2 and now - seen[1][0] >= self.span:
            seen.popleft()
        first = seen[0]
        elapsed = now - first[0]
        if elapsed <= 0:
            return {"completed": None, "failed": None, "backlog": None}
        return {
            "completed": max(c["completed"] - first[1], 0) / elapsed,  # obliterate resets them
            "failed": max(c["failed"] - first[2], 0) / elapsed,
            "backlog": (c["pending"] - first[3]) / elapsed,
        }


class Dashboard:
    """The handlers, bound to the queues they show."""

    def __init__(
        self,
        wire: Wire,
        names: Sequence[str],
        token: str,
        metrics: Metrics | None,
        *,
        interval: float,
        dead: int,
        lanes: int,
        lane_label: LaneLabel | None = None,
    ) -> None:
        self.wire = wire
        self.names = list(names)
        self.lane_label = lane_label
        self._token = token
        # None: its own, fed the queues once they are opened.
        self._owns_metrics = metrics is None
        self.metrics = metrics if metrics is not None else Metrics([])
        # Each queue as its keys say (sharded or not), opened at the first request that needs
        # them (the wire may connect only at startup); a failed open is tried again next time.
        self._queues: dict[str, Queue] | None = None
        self._opening = asyncio.Lock()
        self.interval = interval
        self.dead = dead
        self.lanes = lanes
        # Open streams share reads: one in flight at a time, reused for half an interval.
        self._latest: tuple[float, list[dict[str, Any]]] | None = None
        self._reading: asyncio.Future[list[dict[str, Any]]] | None = None
        # Set on shutdown: an event stream never ends by itself, and servers wait for open
        # responses before they stop.
        self.closing = asyncio.Event()

    def __repr__(self) -> str:  # the token stays out of reprs and logs
        return f"Dashboard(queues={self.names!r})"

    async def queues(self) -> dict[str, Queue]:
        """The queues shown, by name: each opened once, as what it is (``open_queue``: a
        sharded queue as a whole, with its shards)."""
        if self._queues is None:
            async with self._opening:
                if self._queues is None:
                    opened = await asyncio.gather(
                        *(open_queue(name, self.wire, events=False) for name in self.names)
                    )
                    self._queues = dict(zip(self.names, opened, strict=True))
                    if self._owns_metrics:
                        self.metrics.queues = list(opened)
        return self._queues

    # -- reads ---------------------------------------------------------------------------------

    async def page(self, request: Request) -> Response:
        html = resources.files(__package__).joinpath("page.html").read_text(encoding="utf-8")
        return HTMLResponse(html, headers={"Cache-Control": "no-store"})

    async def read(self) -> list[dict[str, Any]]:
        """Every queue now, as JSON, with at most ``lanes`` lanes each (paused and busiest
        first, shown by name) and ``lanes_hidden`` saying how many were left out."""
        queues = await self.queues()
        snaps = await asyncio.gather(*(read_snapshot(q, dead=self.dead) for q in queues.values()))
        shown = []
        for snap in snaps:
            kept = sorted(snap.lanes, key=lambda lane: (not lane.paused, -lane.depth - lane.active))
            kept = sorted(kept[: self.lanes], key=lambda lane: lane.lane)
            shown.append(
                {
                    **dataclasses.replace(snap, lanes=kept).as_json(),
                    "lanes_hidden": len(snap.lanes) - len(kept),
                    "labels": await self._labels(
                        snap.name, [lane.lane for lane in kept], snap.ring
                    ),
                }
            )
        return shown

    async def _labels(self, queue: str, lanes: list[str], ring: list[str]) -> dict[str, str]:
        """What the application calls the lanes shown (a tenant's name for its id); a labeller
        that fails costs the labels of this frame, never the frame."""
        if self.lane_label is None:
            return {}
        names = list(dict.fromkeys([*lanes, *ring]))
        try:
            found = await self.lane_label(queue, names)
        except Exception as exc:
            log.warning(
                "dashboard: lane_label failed for %s: %s: %s", queue, type(exc).__name__, exc
            )
            return {}
        return {name: str(found[name]) for name in names if found.get(name)}

    async def shared_read(self) -> list[dict[str, Any]]:
        """:meth:`read`, shared by every open stream: the engine sees about two reads per
        interval however many pages are open."""
        now = time.monotonic()
        if self._latest is not None and now - self._latest[0] < self.interval / 2:
            return self._latest[1]
        if self._reading is None:
            self._reading = asyncio.ensure_future(self.read())
            self._reading.add_done_callback(self._read_done)
        return await asyncio.shield(self._reading)

    def _read_done(self, reading: asyncio.Future[list[dict[str, Any]]]) -> None:
        self._reading = None
        if not reading.cancelled() and reading.exception() is None:
            self._latest = (time.monotonic(), reading.result())

    async def snapshot_json(self, request: Request) -> Response:
        try:
            return JSONResponse({"at": time.time(), "queues": await self.read()})
        except EchoMQError as exc:
            return JSONResponse({"error": f"reading the engine failed: {exc}"}, 502)

    async def events(self, request: Request) -> Response:
        return StreamingResponse(
            self._stream(request),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def _stream(self, request: Request) -> AsyncIterator[str]:
        rates = Rates()
        while not self.closing.is_set() and not await request.is_disconnected():
            try:
                queues = await self.shared_read()
            except EchoMQError as exc:
                yield f"event: failure\ndata: {json.dumps({'error': str(exc)})}\n\n"
            else:
                now = time.monotonic()
                body = {
                    "at": time.time(),
                    "queues": [{**q, "rates": rates.update(q, now)} for q in queues],
                }
                yield f"data: {json.dumps(body, separators=(',', ':'))}\n\n"
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.closing.wait(), self.interval)

    async def job_json(self, request: Request) -> Response:
        """One job's view: its state, attempts, lane, progress and error, and the newest
        ``?lines=`` (1 … 100, default 20) lines of its log, oldest first."""
        if request.path_params["queue"] not in self.names:
            return JSONResponse({"error": "no such queue on this dashboard"}, 404)
        job_id = request.path_params["job"]
        try:
            queue = (await self.queues())[request.path_params["queue"]]
            lines = _lines(request.query_params.get("lines"))
            info = await queue.job(job_id)  # the id is checked first: a bad one reads nothing
            if info is None:
                return JSONResponse({"error": f"no job {job_id} in queue {queue.name}"}, 404)
            logs = await queue.logs(job_id, lines)
        except InvalidArgument as exc:
            return JSONResponse({"error": str(exc)}, 400)
        except EchoMQError as exc:
            return JSONResponse({"error": f"reading the engine failed: {exc}"}, 502)
        return JSONResponse(
            {
                "id": info.id,
                "state": info.state,
                "attempts": info.attempts,
                "group": info.lane,
                "progress": info.progress,
                "last_error": info.last_error,
                "stalled": info.stalled,
                "finished": info.finished,
                "logs": logs,
            },
            headers={"Cache-Control": "no-store"},
        )

    async def metrics_text(self, request: Request) -> Response:
        try:
            await self.queues()  # its own metrics read the queues as opened
            return await self.metrics.endpoint(request)
        except EchoMQError as exc:  # a failed scrape, not stale numbers
            return PlainTextResponse(f"reading the engine failed: {exc}\n", 502)

    # -- actions -------------------------------------------------------------------------------

    def action(self, run: Action) -> Callable[[Request], Awaitable[Response]]:
        """Wrap an action: token first, then the queue, the body, and errors as 4xx."""

        async def endpoint(request: Request) -> Response:
            given = request.headers.get(TOKEN_HEADER, "")
            if not hmac.compare_digest(given.encode(), self._token.encode()):
                return JSONResponse({"error": f"missing or wrong {TOKEN_HEADER}"}, 403)
            if request.path_params["queue"] not in self.names:
                return JSONResponse({"error": "no such queue on this dashboard"}, 404)
            try:
                queue = (await self.queues())[request.path_params["queue"]]
                body = await json_object(request)
                answer = await run(queue, request, body)
                self._latest = None  # the streams' next frame shows the change
                return JSONResponse(answer)
            except BodyTooLarge:
                return JSONResponse({"error": f"the body is over {MAX_BODY} bytes"}, 413)
            except _NotFound as exc:
                return JSONResponse({"error": str(exc)}, 404)
            except InvalidArgument as exc:
                return JSONResponse({"error": str(exc)}, 400)
            except (_Conflict, StateError, LockedError) as exc:
                return JSONResponse({"error": str(exc)}, 409)
            except EchoMQError as exc:
                return JSONResponse({"error": str(exc)}, 502)

        return endpoint


class _NotFound(Exception):
    """The queue exists but the job does not: 404."""


class _Conflict(Exception):
    """The job is in the wrong state for the action: 409."""


def _lines(given: str | None) -> int:
    if given is None:
        return LOG_SHOWN
    if not given.isdigit() or not 1 <= int(given) <= MAX_LOG_SHOWN:
        raise InvalidArgument("lines", given, f"must be an integer in [1, {MAX_LOG_SHOWN}]")
    return int(given)


def _setting(body: dict[str, Any]) -> int | None:
    if "value" not in body:
        raise InvalidArgument("value", None, 'expected {"value": <integer >= 1 or null>}')
    value = body["value"]
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise InvalidArgument("value", value, "must be an integer >= 1 or null")
    return value


async def pause_lane(queue: Queue, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    lane = queue.lane(request.path_params["group"])
    return {"lane": lane.lane, "paused": True, "changed": await lane.pause()}


async def resume_lane(queue: Queue, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    lane = queue.lane(request.path_params["group"])
    return {"lane": lane.lane, "paused": False, "changed": await lane.resume()}


async def weight_lane(queue: Queue, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    lane = queue.lane(request.path_params["group"])
    value = _setting(body)
    await lane.weight(value)
    return {"lane": lane.lane, "weight": value}


async def limit_lane(queue: Queue, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    lane = queue.lane(request.path_params["group"])
    value = _setting(body)
    await lane.limit(value)
    return {"lane": lane.lane, "limit": value}


async def reprocess_job(queue: Queue, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    job = request.path_params["job"]
    if not await queue.reprocess(job):
        raise _NotFound(f"no job {job} in queue {queue.name}")
    return {"reprocessed": job}


async def remove_job(queue: Queue, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    job = request.path_params["job"]
    state = await queue.state(job)
    if state == "absent":
        raise _NotFound(f"no job {job} in queue {queue.name}")
    if state != "dead":
        raise _Conflict(f"job {job} is {state}, not dead: only dead jobs are removed here")
    await queue.remove(job)
    return {"removed": job}
