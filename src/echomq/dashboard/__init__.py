"""The echomq dashboard: a small Starlette app that shows queues live (server-sent events) and
lets an operator with the token pause, resume, weigh and limit lanes and reprocess or remove
dead jobs. ``GET /metrics`` serves the same queues to Prometheus.

Every request must name an allowed ``Host`` (loopback names, IP literals, the names given or
bound to) or gets 421 and reads nothing; an action's body is capped at 16 KiB (413 beyond).

Standalone it owns its connection (``create_app(url, …)``, served by ``echomq dashboard``);
mounted in another app it borrows one (``create_app(wire, …)``) and never closes it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Final

from echomq._extras import missing

try:
    import prometheus_client  # noqa: F401 (its /metrics: the dashboard extra brings it)
    from starlette.applications import Starlette
    from starlette.datastructures import Headers
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route
    from starlette.types import Receive, Scope, Send
except ImportError as exc:  # the dashboard is an extra
    raise ImportError(missing("dashboard", "echomq.dashboard")) from exc

from echomq.dashboard import _app
from echomq.dashboard._app import TOKEN_HEADER, Dashboard, LaneLabel
from echomq.dashboard._guard import MAX_BODY
from echomq.dashboard._hosts import Hosts
from echomq.dashboard._serve import serving
from echomq.engine.checks import count, ms
from echomq.engine.keys import Keyspace
from echomq.errors import InvalidArgument
from echomq.metrics import Metrics
from echomq.wire.pool import Pool, Wire
from echomq.wire.url import ConnectionOptions

__all__ = [
    "DEFAULT_FAVICON",
    "MAX_BODY",
    "MIN_TOKEN_LENGTH",
    "TOKEN_HEADER",
    "DashboardApp",
    "Hosts",
    "LaneLabel",
    "create_app",
    "serving",
]

#: A shorter token would be guessable by anyone who can reach the port.
MIN_TOKEN_LENGTH = 16


class _LaneRoute(Route):
    """A route whose ``{group:path}`` takes any lane name, percent-encoded in one segment or
    not: ``/`` as the path convertor allows, and newlines too, which its ``.*`` alone refuses."""

    def __init__(self, path: str, endpoint: Any, **options: Any) -> None:
        super().__init__(path, endpoint, **options)
        self.path_regex = re.compile(self.path_regex.pattern, re.DOTALL)


class DashboardApp(Starlette):
    """The dashboard's Starlette app; :meth:`close_streams` ends its event streams,
    :meth:`allow_host` adds a name to the ``Host`` allow-list."""

    def __init__(self, board: Dashboard, hosts: Hosts, **options: Any) -> None:
        super().__init__(**options)
        self._board = board
        self._hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Checked here rather than in a middleware so that it holds mounted under another app
        # too, before routing, so a refused request reads neither the engine nor its body.
        if scope["type"] in ("http", "websocket") and not self._hosts.allows(
            Headers(scope=scope).get("host")
        ):
            # 421 Misdirected Request, not 403: the request is addressed to a name this server
            # does not serve (403 here already means a missing or wrong token).
            refusal = JSONResponse(
                {"error": "this dashboard does not answer to that Host (see create_app(hosts=…))"},
                421,
            )
            await refusal(scope, receive, send)
            return
        await super().__call__(scope, receive, send)

    def allow_host(self, name: str) -> None:
        """Answer to ``name`` (a host name, with or without a port) from now on; ``serving``
        calls it with the host it binds."""
        self._hosts.allow(name)

    def close_streams(self) -> None:
        """End every open ``/events`` stream now (and any opened later). Call it when shutdown
        begins: servers wait for open responses, and an event stream never ends by itself.
        From a signal handler or another thread: ``loop.call_soon_threadsafe(app.close_streams)``.
        """
        self._board.closing.set()


def create_app(
    wire_or_url: Wire | str | ConnectionOptions,
    queues: Sequence[str],
    token: str,
    *,
    metrics: Metrics | None = None,
    interval: float = 1.0,
    dead: int = 50,
    lanes: int = 200,
    hosts: Sequence[str] = (),
    lane_label: LaneLabel | None = None,
    favicon: bytes | None = None,
) -> DashboardApp:
    """The dashboard of ``queues``.

    ``wire_or_url``: a URL (the app opens a connection at startup and closes it at shutdown)
    or an open wire that stays yours. ``token``: what POSTs must send in ``X-Dashboard-Token``.
    ``metrics``: the :class:`~echomq.metrics.Metrics` your consumers feed, to serve its
    registry (with your own counters) on ``/metrics``; by default one of its own. ``interval``:
    seconds between snapshots on ``/events``. ``dead``: dead letters shown per queue.
    ``lanes``: lanes shown per queue (paused ones first, then the busiest; a lane per user
    would otherwise make a page nobody can read). ``hosts``: the names the dashboard is reached
    by besides the loopback names and IP literals (a public name behind ``--host 0.0.0.0`` or a
    proxy); a request naming another ``Host`` gets 421 (DNS rebinding would otherwise let any web
    page read lane names and dead letters). ``lane_label``: an async callable given a queue's
    name and the lanes a frame shows, answering the labels it knows (``{lane: label}``: a
    tenant's name for its id), shown beside the names and in the ring; one that raises costs
    that frame its labels, nothing else. ``favicon``: the SVG served at ``/favicon.ico``
    (browsers ask for it whatever the page links), echomq's own by default.
    """
    if not isinstance(token, str) or len(token) < MIN_TOKEN_LENGTH:
        raise InvalidArgument("token", "<hidden>", f"needs at least {MIN_TOKEN_LENGTH} characters")
    if isinstance(queues, str) or not queues:
        raise InvalidArgument("queues", queues, "expected a non-empty list of queue names")
    ms(interval, "interval", positive=True)
    count(dead, "dead", minimum=0)
    count(lanes, "lanes")
    if isinstance(hosts, str):
        raise InvalidArgument("hosts", hosts, "expected a list of host names")
    if favicon is not None and (not isinstance(favicon, bytes) or not favicon):
        raise InvalidArgument("favicon", "<icon>", "expected the SVG's bytes")
    if lane_label is not None and not callable(lane_label):
        raise InvalidArgument("lane_label", lane_label, "expected an async callable or None")
    allowed = Hosts(hosts)
    owned: Pool | None = None
    if isinstance(wire_or_url, str | ConnectionOptions):
        options = (
            wire_or_url
            if isinstance(wire_or_url, ConnectionOptions)
            else ConnectionOptions.from_url(wire_or_url)
        )
        owned = Pool(options, 1)
        wire: Wire = owned
    else:
        wire = wire_or_url
    names = list(dict.fromkeys(queues))
    for name in names:
        Keyspace(name)  # validated now; each is opened as what it is (sharded or not) at first use
    board = Dashboard(
        wire,
        names,
        token,
        metrics,
        interval=float(interval),
        dead=dead,
        lanes=lanes,
        lane_label=lane_label,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if owned is not None:
            await owned.connect()
        try:
            yield
        finally:
            if owned is not None:
                await owned.close()

    lane = "/api/queues/{queue}/lanes/{group:path}"
    job = "/api/queues/{queue}/dead/{job}"
    routes = [
        Route("/", board.page),
        Route("/favicon.ico", _icon(DEFAULT_FAVICON if favicon is None else favicon)),
        Route("/api/snapshot", board.snapshot_json),
        Route("/events", board.events),
        Route("/metrics", board.metrics_text),
        Route("/api/queues/{queue}/jobs/{job}", board.job_json),
        _LaneRoute(f"{lane}/pause", board.action(_app.pause_lane), methods=["POST"]),
        _LaneRoute(f"{lane}/resume", board.action(_app.resume_lane), methods=["POST"]),
        _LaneRoute(f"{lane}/weight", board.action(_app.weight_lane), methods=["POST"]),
        _LaneRoute(f"{lane}/limit", board.action(_app.limit_lane), methods=["POST"]),
        Route(f"{job}/reprocess", board.action(_app.reprocess_job), methods=["POST"]),
        Route(f"{job}/remove", board.action(_app.remove_job), methods=["POST"]),
    ]
    # A mounted app's lifespan is not run by its host, which is why a borrowed wire needs none.
    return DashboardApp(
        board, allowed, routes=routes, lifespan=lifespan if owned is not None else None
    )


#: echomq's icon for its dashboard: a ring of lanes, as an SVG.
DEFAULT_FAVICON: Final = (
    b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">'
    b'<circle cx="8" cy="8" r="6" fill="none" stroke="#3b82f6" stroke-width="3"/></svg>'
)


def _icon(svg: bytes) -> Callable[[Request], Awaitable[Response]]:
    async def favicon(_request: Request) -> Response:
        return Response(svg, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})

    return favicon
