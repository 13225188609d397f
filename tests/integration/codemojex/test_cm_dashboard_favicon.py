"""The dashboard ``codemojex up`` serves answers ``/favicon.ico`` with the game's icon (browsers
ask for it whatever the page links; it was a 404 in every log)."""

from __future__ import annotations

import aiohttp

from codemojex.up import FAVICON
from echomq.dashboard import create_app, serving

TOKEN = "favicon-test-token-0123456789"


async def test_the_dashboard_serves_a_favicon(valkey_url: str, queue_name: str) -> None:
    dashboard = create_app(valkey_url, [queue_name], TOKEN, favicon=FAVICON.read_bytes())
    async with (
        serving(dashboard, "127.0.0.1", 0) as base,
        aiohttp.ClientSession() as http,
        http.get(f"{base}/favicon.ico") as answer,
    ):
        assert answer.status == 200
        assert answer.content_type == "image/svg+xml"
        assert await answer.read() == FAVICON.read_bytes()
