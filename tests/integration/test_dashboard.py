"""The dashboard app served by uvicorn against a real Valkey: what a snapshot shows, the live
event stream, and actions that need the token and refuse bad input without changing anything."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
import yarl
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.routing import Mount

from echomq.dashboard import DEFAULT_FAVICON, MAX_BODY, TOKEN_HEADER, create_app
from echomq.engine.policies import Policy, Rate
from echomq.engine.queue import Item, Queue
from echomq.engine.sharded import ShardedQueue
from echomq.errors import InvalidArgument
from echomq.metrics import Metrics
from echomq.testing import claim_job, serve_app
from echomq.wire.pool import Pool
from echomq.wire.url import ConnectionOptions

TOKEN = "dashboard-token-for-tests-0123456789"


@dataclass
class Board:
    base: str
    http: aiohttp.ClientSession
    queue: Queue

    async def get(self, path: str) -> Any:
        async with self.http.get(self.base + path) as response:
            assert response.status == 200, await response.text()
            return await response.json()

    async def post(
        self, path: str, body: Any = None, *, token: str | None = TOKEN, raw: bytes | None = None
    ) -> tuple[int, dict[str, Any]]:
        headers = {TOKEN_HEADER: token} if token is not None else {}
        data = raw if raw is not None else json.dumps(body or {}).encode()
        async with self.http.post(self.base + path, data=data, headers=headers) as response:
            return response.status, await response.json()

    def lane(self, group: str, verb: str) -> str:
        return f"/api/queues/{self.queue.name}/lanes/{group}/{verb}"

    def job(self, job_id: str, verb: str) -> str:
        return f"/api/queues/{self.queue.name}/dead/{job_id}/{verb}"


@pytest.fixture
async def board(queue: Queue) -> AsyncIterator[Board]:
    app = create_app(queue.wire, [queue.name], TOKEN, interval=0.05)
    async with serve_app(app) as base, aiohttp.ClientSession() as http:
        yield Board(base, http, queue)


async def _dead_job(queue: Queue, error: str) -> str:
    await queue.enqueue("x", lane="sick")
    job = await claim_job(queue)
    assert await queue.retry(job, max_attempts=1, error=error) == "dead"
    return job.id


async def test_snapshot_shows_counts_lanes_ring_limiter_and_dead_letters(board: Board) -> None:
    queue = board.queue
    await queue.rate_limit(50, 60.0)  # a window no loaded machine outlasts
    dead_id = await _dead_job(queue, "ValueError: <b>not html</b>")
    await queue.enqueue_many([Item(n, lane="loud") for n in range(4)] + [Item(0, lane="calm")])
    await queue.lane("loud").weight(3)
    await queue.lane("calm").limit(2)
    await queue.lane("calm").pause()
    snapshot = await board.get("/api/snapshot")
    [shown] = snapshot["queues"]
    assert shown["name"] == queue.name
    assert shown["counts"]["pending"] == 5
    assert shown["counts"]["dead"] == 1
    assert shown["counts"]["failed"] == 1
    lanes = {lane["group"]: lane for lane in shown["lanes"]}
    # Where a job enqueued now would stand: behind loud's 4, its pace from the one claim seen.
    eta = lanes["loud"].pop("eta")
    assert (eta["position"], eta["bound"]) == (4, "share")
    assert lanes["calm"]["eta"]["bound"] == "paused"
    assert lanes["loud"] == {
        "group": "loud", "depth": 4, "active": 0, "limit": 0, "weight": 3,
        "rate": None, "paused": False, "rate_wait": 0.0, "rate_mode": None, "cap": 0,
        "scheduled": 0, "cooling": 0.0, "cooling_until": None,
    }  # fmt: skip
    assert (lanes["calm"]["paused"], lanes["calm"]["limit"]) == (True, 2)
    assert shown["ring"] == ["loud"]
    assert shown["limiter"]["max"] == 50
    assert shown["limiter"]["window"] == 60.0
    assert shown["limiter"]["spent"] == 1  # the claim that made the dead job
    assert shown["limiter"]["mode"] == "smooth"
    assert shown["policies"] == {
        "default": {"rate": None, "limit": None, "weight": None, "cap": None},
        "named": [],
    }
    assert shown["dead"] == [
        {"id": dead_id, "group": "sick", "attempts": 1, "last_error": "ValueError: <b>not html</b>"}
    ]


async def test_snapshot_shows_the_lane_policies_in_force(board: Board) -> None:
    queue = board.queue
    await queue.apply_policies(
        default=Policy(rate=(10, 1.0)), acme=Policy(rate=Rate(5, 1.0, "fixed"), limit=2)
    )
    [shown] = (await board.get("/api/snapshot"))["queues"]
    assert shown["policies"] == {
        "default": {"rate": [10, 1.0, "smooth"], "limit": None, "weight": None, "cap": None},
        "named": ["acme"],
    }


async def test_events_stream_snapshots_with_rates_from_successive_counts(board: Board) -> None:
    await board.queue.enqueue("a")
    async with board.http.get(board.base + "/events") as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        events = []
        async for line in response.content:
            if line.startswith(b"data: "):
                events.append(json.loads(line[6:]))
            if len(events) == 2:
                break
    first, second = (event["queues"][0] for event in events)
    assert first["name"] == board.queue.name
    assert first["rates"]["completed"] is None  # one count is not a rate yet
    assert second["rates"]["completed"] == 0.0
    assert second["counts"]["pending"] == 1


async def test_page_is_served_and_reads_the_token_from_its_url(board: Board) -> None:
    async with board.http.get(board.base + "/") as response:
        assert response.status == 200
        html = await response.text()
    assert 'new EventSource("events")' in html
    assert "X-Dashboard-Token" in html


async def test_lane_actions_with_the_token_change_the_lane(board: Board) -> None:
    await board.queue.enqueue(1, lane="a")
    lane = board.queue.lane("a")
    assert await board.post(board.lane("a", "pause")) == (
        200,
        {"lane": "a", "paused": True, "changed": True},
    )
    assert (await lane.info()).paused
    assert (await board.post(board.lane("a", "resume")))[0] == 200
    assert not (await lane.info()).paused
    assert await board.post(board.lane("a", "weight"), {"value": 4}) == (
        200,
        {"lane": "a", "weight": 4},
    )
    assert await board.post(board.lane("a", "limit"), {"value": 2}) == (
        200,
        {"lane": "a", "limit": 2},
    )
    info = await lane.info()
    assert (info.weight, info.limit) == (4, 2)
    assert (await board.post(board.lane("a", "limit"), {"value": None}))[0] == 200
    assert (await lane.info()).limit == 0


async def test_dead_job_actions_reprocess_and_remove(board: Board) -> None:
    first = await _dead_job(board.queue, "boom")
    assert await board.post(board.job(first, "reprocess")) == (200, {"reprocessed": first})
    assert await board.queue.state(first) == "pending"
    second = await _dead_job(board.queue, "boom")
    assert await board.post(board.job(second, "remove")) == (200, {"removed": second})
    assert await board.queue.state(second) == "absent"


@pytest.mark.parametrize("token", [None, "", "wrong-token-of-the-same-kind-000000"])
async def test_every_action_without_the_token_is_403_and_changes_nothing(
    board: Board, token: str | None
) -> None:
    queue = board.queue
    await queue.enqueue(1, lane="a")
    dead_id = await _dead_job(queue, "boom")
    for path, body in (
        (board.lane("a", "pause"), None),
        (board.lane("a", "weight"), {"value": 5}),
        (board.lane("a", "limit"), {"value": 1}),
        (board.job(dead_id, "reprocess"), None),
        (board.job(dead_id, "remove"), None),
    ):
        status, answer = await board.post(path, body, token=token)
        assert status == 403
        assert TOKEN_HEADER in answer["error"]
    info = await queue.lane("a").info()
    assert (info.paused, info.weight, info.limit) == (False, 1, 0)
    assert await queue.state(dead_id) == "dead"
    await queue.lane("a").pause()
    assert (await board.post(board.lane("a", "resume"), token=token))[0] == 403
    assert (await queue.lane("a").info()).paused


@pytest.mark.parametrize(
    ("body", "raw", "message"),
    [
        ({"value": 0}, None, "weight"),
        ({"value": -3}, None, "weight"),
        ({"value": "three"}, None, "must be an integer >= 1 or null"),
        ({"value": True}, None, "must be an integer >= 1 or null"),
        ({"value": 1.5}, None, "must be an integer >= 1 or null"),
        ({}, None, 'expected {"value"'),
        (None, b"{not json", "must be a JSON object"),
        (None, b"[1, 2]", "must be a JSON object"),
        (None, b'{"value": "\xff"}', "must be a JSON object"),  # not UTF-8
        (None, b"[" * 5_000 + b"]" * 5_000, "nested too deep"),  # 10 KB, under the cap
        (None, b'{"value": ' + b"[" * 5_000, "nested too deep"),
    ],
)
async def test_a_bad_setting_is_400_with_the_reason_and_changes_nothing(
    board: Board, body: Any, raw: bytes | None, message: str
) -> None:
    await board.queue.lane("a").weight(2)
    status, answer = await board.post(board.lane("a", "weight"), body, raw=raw)
    assert status == 400
    assert message in answer["error"]
    assert (await board.queue.lane("a").info()).weight == 2


async def test_bad_names_and_ids_are_400_and_missing_things_404(board: Board) -> None:
    queue = board.queue
    await queue.enqueue(1)
    status, answer = await board.post(board.lane("x" * 1025, "pause"))
    assert (status, "invalid lane" in answer["error"]) == (400, True)
    status, answer = await board.post(board.job("not-an-id", "reprocess"))
    assert (status, "invalid job id" in answer["error"]) == (400, True)
    missing = queue.minter.mint("JOB")
    for verb in ("reprocess", "remove"):
        status, answer = await board.post(board.job(missing, verb))
        assert (status, answer["error"]) == (404, f"no job {missing} in queue {queue.name}")
    status, answer = await board.post(f"/api/queues/{queue.name}-other/lanes/a/pause")
    assert status == 404
    assert "no such queue" in answer["error"]


async def test_dead_job_actions_refuse_a_job_that_is_not_dead(board: Board) -> None:
    await board.queue.enqueue(1)
    leased = await claim_job(board.queue)
    waiting = (await board.queue.enqueue(2)).id
    for job_id, verb in ((leased.id, "remove"), (waiting, "remove"), (waiting, "reprocess")):
        status, _ = await board.post(board.job(job_id, verb))
        assert status == 409
    assert await board.queue.state(leased.id) == "active"
    assert await board.queue.state(waiting) == "pending"


async def test_metrics_are_served_on_the_same_app(board: Board) -> None:
    await board.queue.enqueue(1, lane="a")
    async with board.http.get(board.base + "/metrics") as response:
        assert response.status == 200
        text = await response.text()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    [depth] = families["echomq_lane_depth"].samples
    assert depth.labels == {"queue": board.queue.name, "lane": "a"}
    assert depth.value == 1


@pytest.mark.parametrize("queue_kind", ["sharded"], indirect=True)
async def test_a_sharded_queue_shows_as_one_with_a_row_per_shard(queue: ShardedQueue) -> None:
    """Opened by name as what it is: the figures are every shard's, the shard table sums to
    them, a lane's action reaches its shard, and /metrics carries the shards' family."""
    placement = queue.placement_map
    lanes = [f"d{i}" for i in range(9)]
    await queue.enqueue_many(Item(n, lane=lane) for i, lane in enumerate(lanes) for n in range(i))
    far = next(lane for lane in lanes[1:] if placement.shard_of(lane) == 2)
    await queue.rate_limit(9, 60.0)  # the queue-wide budget, split into per-shard quotas
    app = create_app(queue.wire, [queue.name], TOKEN, interval=0.05)
    async with serve_app(app) as base, aiohttp.ClientSession() as http:
        board = Board(base, http, queue)
        [shown] = (await board.get("/api/snapshot"))["queues"]
        assert shown["counts"]["pending"] == sum(range(9))
        assert {lane["group"] for lane in shown["lanes"]} == set(lanes[1:])
        shards = shown["shards"]
        assert [s["tag"] for s in shards] == list(placement.tags)
        for k, shard in enumerate(shards):
            mine = [i for i, lane in enumerate(lanes) if i and placement.shard_of(lane) == k]
            assert (shard["pending"], shard["lanes"], shard["weight"]) == (
                sum(mine),
                len(mine),
                len(mine),
            )
        # The limiter shown is the budget (shard 0's meta holds only its quota), the shards'
        # quotas sum to it.
        assert (shown["limiter"]["max"], shown["limiter"]["window"]) == (9, 60.0)
        assert shown["concurrency"] is None
        assert sum(s["rate_quota"] for s in shards) == 9
        assert [s["concurrency_quota"] for s in shards] == [None] * 3
        status, _ = await board.post(board.lane(far, "pause"))
        assert status == 200
        [info] = await Queue.lanes(queue.shards[2], [far])
        assert info.paused
        async with http.get(base + "/metrics") as response:
            text = await response.text()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    pending = [s for s in families["echomq_shard_jobs"].samples if s.labels["state"] == "pending"]
    assert sorted(s.labels["shard"] for s in pending) == ["0", "1", "2"]
    assert sum(s.value for s in pending) == sum(range(9))


async def test_an_app_given_a_url_opens_and_closes_its_own_connection(
    queue: Queue, valkey_url: str
) -> None:
    await queue.enqueue(1, lane="own")
    app = create_app(valkey_url, [queue.name], TOKEN)
    async with (
        serve_app(app) as base,
        aiohttp.ClientSession() as http,
        http.get(base + "/api/snapshot") as response,
    ):
        snapshot = await response.json()
    assert snapshot["queues"][0]["lanes"][0]["group"] == "own"


@pytest.mark.parametrize(
    ("queues", "token", "argument"),
    [
        (["q"], "short", "token"),
        ([], TOKEN, "queues"),
        ("q", TOKEN, "queues"),
        (["bad name"], TOKEN, "queue"),
    ],
)
def test_create_app_refuses_bad_arguments(queues: Any, token: str, argument: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        create_app("valkey://127.0.0.1:6379", queues, token)
    assert refused.value.argument.startswith(argument)
    assert "short" not in str(refused.value)  # a token, even a bad one, is never echoed


async def test_mounted_under_a_prefix_it_borrows_the_hosts_wire(queue: Queue) -> None:
    await queue.enqueue(1, lane="m")
    metrics = Metrics([queue])
    host = Starlette(
        routes=[Mount("/ops", app=create_app(queue.wire, [queue.name], TOKEN, metrics=metrics))]
    )
    async with serve_app(host) as base, aiohttp.ClientSession() as http:
        async with http.get(base + "/ops") as response:  # redirected to /ops/
            assert response.status == 200
            assert "EventSource" in await response.text()
        async with http.get(base + "/ops/api/snapshot") as response:
            assert (await response.json())["queues"][0]["lanes"][0]["group"] == "m"
        pause = f"{base}/ops/api/queues/{queue.name}/lanes/m/pause"
        async with http.post(pause, headers={TOKEN_HEADER: TOKEN}) as response:
            assert response.status == 200
    assert (await queue.lane("m").info()).paused
    assert await queue.ring() == []  # the wire is still open: the app did not close it


async def test_close_streams_ends_open_event_streams(queue: Queue) -> None:
    app = create_app(queue.wire, [queue.name], TOKEN, interval=30)
    async with (
        serve_app(app) as base,
        aiohttp.ClientSession() as http,
        http.get(base + "/events") as stream,
    ):
        assert (await stream.content.readline()).startswith(b"data: ")
        app.close_streams()
        rest = await asyncio.wait_for(stream.content.read(), 10)  # EOF, not 30 s later
        assert rest == b"\n"


async def test_a_lane_cap_keeps_paused_then_busiest_lanes_and_counts_the_rest(
    queue: Queue,
) -> None:
    await queue.enqueue_many(
        [Item(n, lane="busy") for n in range(5)]
        + [Item(n, lane="mid") for n in range(2)]
        + [Item(0, lane="idle")]
    )
    await queue.lane("held").pause()  # empty but paused: an operator must see it
    app = create_app(queue.wire, [queue.name], TOKEN, lanes=2)
    async with (
        serve_app(app) as base,
        aiohttp.ClientSession() as http,
        http.get(base + "/api/snapshot") as response,
    ):
        [shown] = (await response.json())["queues"]
    assert [lane["group"] for lane in shown["lanes"]] == ["busy", "held"]
    assert shown["lanes_hidden"] == 2


async def test_an_action_shows_in_the_next_frame_of_an_open_stream(board: Board) -> None:
    await board.queue.enqueue(1, lane="a")

    async def frames() -> Any:
        async for line in stream.content:
            if line.startswith(b"data: "):
                yield json.loads(line[6:])["queues"][0]

    async with board.http.get(board.base + "/events") as stream:
        reader = frames()
        assert (await anext(reader))["lanes"][0]["paused"] is False
        assert (await board.post(board.lane("a", "pause")))[0] == 200
        # Frames sent while the POST was in flight predate it; a later one must show it.
        async with asyncio.timeout(10):
            while not (await anext(reader))["lanes"][0]["paused"]:
                pass
        await reader.aclose()


async def test_an_engine_that_cannot_be_read_is_reported_not_hidden(valkey_url: str) -> None:
    pool = await Pool(ConnectionOptions.from_url(valkey_url), 1).connect()
    await pool.close()  # every read now fails with Closed
    app = create_app(pool, ["q"], TOKEN, interval=0.05)
    async with serve_app(app) as base, aiohttp.ClientSession() as http:
        async with http.get(base + "/api/snapshot") as response:
            assert response.status == 502
            assert "reading the engine failed" in (await response.json())["error"]
        async with http.get(base + "/metrics") as response:
            assert response.status == 502
        async with http.get(base + "/events") as stream:
            assert await stream.content.readline() == b"event: failure\n"
            assert b"closed" in (await stream.content.readline()).lower()


async def _raw_exchange(base: str, head: bytes, body: bytes) -> bytes:
    """Send ``head`` and ``body`` on a fresh connection, leave it open (the body unfinished,
    as far as the server knows), and return the status line the server answers with."""
    url = yarl.URL(base)
    reader, writer = await asyncio.open_connection(url.host, url.port)
    try:
        writer.write(head + body)
        await writer.drain()
        async with asyncio.timeout(10):  # a server reading the whole body would wait forever
            return await reader.readline()
    finally:
        writer.close()


async def test_a_body_over_the_cap_is_413_and_changes_nothing(board: Board) -> None:
    await board.queue.lane("a").weight(2)
    padded = b'{"value": 5, "pad": "' + b"x" * MAX_BODY + b'"}'
    status, answer = await board.post(board.lane("a", "weight"), raw=padded)
    assert status == 413
    assert str(MAX_BODY) in answer["error"]
    assert (await board.queue.lane("a").info()).weight == 2


async def test_a_declared_length_over_the_cap_is_413_before_any_of_the_body_arrives(
    board: Board,
) -> None:
    head = (
        f"POST {board.lane('a', 'weight')} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"{TOKEN_HEADER}: {TOKEN}\r\nContent-Length: 20000000\r\n\r\n"
    ).encode()
    assert (await _raw_exchange(board.base, head, b"")).split()[1] == b"413"


async def test_a_chunked_body_is_refused_once_past_the_cap_without_waiting_for_the_rest(
    board: Board,
) -> None:
    head = (
        f"POST {board.lane('a', 'weight')} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"{TOKEN_HEADER}: {TOKEN}\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    # One chunk just past the cap, and no last chunk: the body has no end the server could await.
    chunk = b"%x\r\n" % (MAX_BODY + 1) + b"x" * (MAX_BODY + 1) + b"\r\n"
    assert (await _raw_exchange(board.base, head, chunk)).split()[1] == b"413"
    assert (await board.queue.lane("a").info()).weight == 1


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8700", "127.0.0.1.evil.example"])
async def test_a_request_naming_another_host_is_421_and_reads_nothing(
    board: Board, host: str
) -> None:
    await board.queue.enqueue(1, lane="a")
    for path in ("/", "/api/snapshot", "/events", "/metrics"):
        async with board.http.get(board.base + path, headers={"Host": host}) as response:
            assert response.status == 421
            assert "Host" in (await response.json())["error"]
    pause = board.base + board.lane("a", "pause")
    headers = {"Host": host, TOKEN_HEADER: TOKEN}
    async with board.http.post(pause, headers=headers) as response:
        assert response.status == 421
    assert not (await board.queue.lane("a").info()).paused


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "localhost", "LOCALHOST:8700", "[::1]:1", "[::1]", "localhost.", "10.1.2.3"],
)
async def test_loopback_names_and_ip_addresses_are_served(board: Board, host: str) -> None:
    async with board.http.get(board.base + "/api/snapshot", headers={"Host": host}) as response:
        assert response.status == 200


async def test_the_hosts_it_is_given_are_served_too(queue: Queue) -> None:
    app = create_app(queue.wire, [queue.name], TOKEN, hosts=["Ops.Example.org"])
    async with serve_app(app) as base, aiohttp.ClientSession() as http:
        for host, status in (("ops.example.org:443", 200), ("example.org", 421)):
            async with http.get(base + "/api/snapshot", headers={"Host": host}) as response:
                assert response.status == status


@pytest.mark.parametrize("hosts", ["ops.example.org", ["ops example"], ["ops:x"], [""]])
def test_create_app_refuses_hosts_that_are_not_host_names(hosts: Any) -> None:
    with pytest.raises(InvalidArgument) as refused:
        create_app("valkey://127.0.0.1:6379", ["q"], TOKEN, hosts=hosts)
    assert refused.value.argument == "hosts"


async def test_lane_labels_show_what_the_application_calls_its_lanes(queue: Queue) -> None:
    """A labeller names the lanes a frame shows (a tenant's name for its id); one that raises
    costs that frame its labels, never the frame."""
    asked: list[tuple[str, list[str]]] = []
    failing = False

    # --8<-- [start:lane-label]
    async def names(queue_name: str, lanes: Sequence[str]) -> dict[str, str]:
        asked.append((queue_name, list(lanes)))
        if failing:
            raise RuntimeError("the store is down")
        return {"-1001": "Fruit Lovers (group)", "42": "Ada"}  # e.g. read from your database

    await queue.enqueue_many([Item(0, lane="-1001"), Item(1, lane="42"), Item(2, lane="7")])
    app = create_app(queue.wire, [queue.name], TOKEN, lane_label=names)
    # --8<-- [end:lane-label]
    async with serve_app(app) as base, aiohttp.ClientSession() as http:
        board = Board(base, http, queue)
        [shown] = (await board.get("/api/snapshot"))["queues"]
        assert shown["labels"] == {"-1001": "Fruit Lovers (group)", "42": "Ada"}
        assert asked[-1] == (queue.name, ["-1001", "42", "7"])
        failing = True
        [shown] = (await board.get("/api/snapshot"))["queues"]
    assert shown["labels"] == {}
    assert shown["counts"]["pending"] == 3  # the frame itself is whole
    with pytest.raises(InvalidArgument) as refused:
        create_app(queue.wire, [queue.name], TOKEN, lane_label="names")  # type: ignore[arg-type]
    assert refused.value.argument == "lane_label"


async def test_the_dashboard_serves_an_icon_of_its_own_or_the_apps(queue: Queue) -> None:
    """Browsers ask for /favicon.ico whatever the page links: never a 404 in the logs."""
    mine = b'<svg xmlns="http://www.w3.org/2000/svg"/>'
    for favicon, expected in ((None, DEFAULT_FAVICON), (mine, mine)):
        app = create_app(queue.wire, [queue.name], TOKEN, favicon=favicon)
        async with (
            serve_app(app) as base,
            aiohttp.ClientSession() as http,
            http.get(f"{base}/favicon.ico") as answer,
        ):
            assert answer.status == 200
            assert answer.content_type == "image/svg+xml"
            assert await answer.read() == expected
    with pytest.raises(InvalidArgument) as refused:
        create_app(queue.wire, [queue.name], TOKEN, favicon="icon.svg")  # type: ignore[arg-type]
    assert refused.value.argument == "favicon"
