"""Any tenant name is a lane name and a dedup key: plus-addresses, spaces, emoji, quotes, braces,
newlines, backslashes, NUL and 1 KiB of UTF-8 go through admission, the claim, every per-lane
setting, events, the CLI, the dashboard and the metrics text exactly as given; bad names are
refused before anything is written. Runs on a single server and on the cluster, where a brace in
a lane name moving a key off the queue's slot would fail the scripts with CROSSSLOT."""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from collections import Counter
from typing import Any

import aiohttp
import pytest
import yarl
from prometheus_client.parser import text_string_to_metric_families

from echomq import App, InvalidArgument, Item, Job, Queue, SyncQueue
from echomq.cli import main
from echomq.dashboard import TOKEN_HEADER, create_app
from echomq.engine.keys import MAX_NAME_BYTES, slot
from echomq.metrics import Metrics, lane_of_label
from echomq.testing import serve_app

#: Names the old rule (``[A-Za-z0-9._:@-]{1,128}``) refused, and a few it took that sit close to
#: the keyspace's own suffixes and the metrics' fold label.
NAMES = [
    "billing+eu@acme.test",
    "Acme Corp",
    "Zürich 東京 🚀",
    "say \"hi\" and 'bye'",
    "{orders}",
    "a}{b",
    "tenants/eu/acme",
    "line\nbreak\r\ttab",
    "back\\slash\\n",
    "nul\x00byte",
    "a:pending",  # lane `a`'s pending key is g:a:pending; this one's is g:a:pending:pending
    "a",
    "-100123456",  # a Telegram chat id, as codemojex names its lanes
    "~other",  # the metrics label of lanes past max_lanes
    "[bold]markup[/bold]",
    "é" * 256,  # 512 bytes of UTF-8 in 256 characters
    "🚀" * 128,  # 512 bytes in 128 characters
    "x" * 512,
    "z" * (MAX_NAME_BYTES - 2) + "é",  # exactly the bound
]


async def _claim_all(queue: Queue, count: int) -> list[Job]:
    jobs: list[Job] = []
    while len(jobs) < count:
        batch = await queue.claim_batch(50)
        assert batch, f"claimed {len(jobs)} of {count}"
        jobs.extend(batch)
    return jobs


async def test_any_name_round_trips_through_admission_claim_and_lane_settings(
    queue: Queue,
) -> None:
    async with queue.subscribe() as events:
        singles = [await queue.enqueue(("one", n), lane=n, dedup_key=n) for n in NAMES]
        many = await queue.enqueue_many(
            [Item(("two", n), lane=n, dedup_key="2" + n[1:]) for n in NAMES]  # no byte more
        )
        assert {v.kind for v in singles + many} == {"enqueued"}
        again = await queue.enqueue_many([Item("dup", dedup_key=n) for n in NAMES])
        assert [(v.kind, v.id) for v in again] == [("duplicate", v.id) for v in singles]
        seen = [await asyncio.wait_for(events.get(), 5) for _ in range(2 * len(NAMES))]
    assert Counter(e["group"] for e in seen if "group" in e) == Counter(NAMES)

    for name in NAMES:
        assert slot(queue.keys.lane(name)) == slot(queue.keys.root)
        assert slot(queue.keys.dedup(name)) == slot(queue.keys.root)
        assert await queue.lane(name).depth() == 2
    lanes = {info.lane: info for info in await queue.lanes()}
    assert set(lanes) == set(NAMES)
    assert {info.depth for info in lanes.values()} == {2}
    assert set(await queue.ring()) == set(NAMES)

    for name in NAMES:
        lane = queue.lane(name)
        await lane.limit(1)
        await lane.weight(2)
        await lane.rate(1, 60.0)
    paused = NAMES[::2]
    live = [n for n in NAMES if n not in paused]
    for name in paused:
        assert await queue.lane(name).pause()
    lanes = {info.lane: info for info in await queue.lanes(NAMES)}
    assert {(i.limit, i.weight, i.rate) for i in lanes.values()} == {(1, 2, (1, 60.0))}
    assert {n for n, info in lanes.items() if info.paused} == set(paused)

    # One job per live lane (limit 1, rate 1), none from a paused one, each with its own group.
    jobs = await queue.claim_batch(100)
    assert Counter(job.lane for job in jobs) == Counter(live)
    assert {job.payload[1] for job in jobs} == set(live)
    assert not await queue.claim_batch(10)  # every live lane at its ceiling
    for job in jobs:
        assert await queue.complete(job)
    assert not await queue.claim_batch(10)  # the ceilings are free, the rate budgets spent
    benched = {info.lane for info in await queue.lanes(NAMES) if info.rate_wait > 0}
    assert benched == set(live)
    for name in NAMES:
        await queue.lane(name).rate(None)
        await queue.lane(name).limit(None)
    for name in paused:
        assert await queue.lane(name).resume()
    rest = await _claim_all(queue, 2 * len(NAMES) - len(jobs))
    assert Counter(job.lane for job in jobs + rest) == Counter(NAMES * 2)
    active = Counter(job.lane for job in rest)
    lanes = {info.lane: info for info in await queue.lanes(NAMES)}
    assert {n: (i.depth, i.active) for n, i in lanes.items()} == {n: (0, active[n]) for n in NAMES}


async def test_the_cli_dashboard_and_metrics_show_every_name_exactly(
    queue: Queue,
    valkey_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "4000")  # the table's width: no name cut to fit a terminal
    await queue.enqueue_many([Item(n, lane=n) for n in NAMES])

    def cli(*argv: str) -> str:
        capsys.readouterr()
        assert main(["--url", valkey_url, *argv]) == 0
        return capsys.readouterr().out

    shown = json.loads(await asyncio.to_thread(cli, "--json", "lanes", queue.name))
    assert {lane["group"] for lane in shown} == set(NAMES)
    assert set(json.loads(await asyncio.to_thread(cli, "--json", "ring", queue.name))) == set(NAMES)
    table = await asyncio.to_thread(cli, "lanes", queue.name)
    for name in NAMES:  # as is, or JSON-quoted when it holds a control character
        assert (name if name.isprintable() else json.dumps(name)) in table
    assert "\x00" not in table
    assert len(table.splitlines()) == len(NAMES) + 4  # rows kept whole: borders and the header
    paused = json.loads(await asyncio.to_thread(cli, "--json", "pause", queue.name, "a}{b"))
    assert (paused["lane"], paused["changed"]) == ("a}{b", True)
    assert json.loads(await asyncio.to_thread(cli, "--json", "pause", queue.name, "-100123456"))[
        "changed"
    ]

    broken = "line\nbreak\r\ttab"
    said = await asyncio.to_thread(cli, "pause", queue.name, broken)
    assert said == f"queue: {queue.name}, lane: {json.dumps(broken)}, paused: True, changed: True\n"

    token = "dashboard-token-for-tests-0123456789"
    app = create_app(queue.wire, [queue.name], token, interval=0.05, lanes=len(NAMES))
    async with serve_app(app) as base, aiohttp.ClientSession() as http:
        for name in ("billing+eu@acme.test", "line\nbreak\r\ttab", "tenants/eu/acme"):
            lane = urllib.parse.quote(name, safe="")
            url = yarl.URL(f"{base}/api/queues/{queue.name}/lanes/{lane}/pause", encoded=True)
            async with http.post(url, data=b"{}", headers={TOKEN_HEADER: token}) as response:
                assert response.status == 200, await response.text()
                assert (await response.json())["lane"] == name
        async with http.get(f"{base}/api/snapshot") as response:
            [board] = (await response.json())["queues"]
    assert {lane["group"] for lane in board["lanes"]} == set(NAMES)
    assert {lane["group"] for lane in board["lanes"] if lane["paused"]} == {
        "a}{b",
        "-100123456",
        "billing+eu@acme.test",
        "line\nbreak\r\ttab",
        "tenants/eu/acme",
    }

    text = (await Metrics([queue], max_lanes=len(NAMES)).render()).decode()
    [depth] = [f for f in text_string_to_metric_families(text) if f.name == "echomq_lane_depth"]
    labelled: dict[str | None, float] = {
        lane_of_label(s.labels["lane"]): s.value for s in depth.samples
    }
    assert labelled == {n: 1.0 for n in NAMES}


def _refusals() -> list[tuple[str, Any, str]]:
    over = "é" * (MAX_NAME_BYTES // 2) + "x"  # one byte over the bound, in fewer characters
    return [
        ("", "must be 1 to 1024 bytes of UTF-8, got 0"),
        (over, f"must be 1 to 1024 bytes of UTF-8, got {MAX_NAME_BYTES + 1}"),
        ("x" * (MAX_NAME_BYTES + 1), "must be 1 to 1024 bytes of UTF-8, got 1025"),
        ("tenant\ud800", "lone surrogate '\\ud800' at position 6"),
        (42, "must be a str, got int"),
        (b"acme", "must be a str, got bytes"),
    ]  # type: ignore[return-value]


@pytest.mark.parametrize(("name", "reason"), _refusals())
async def test_bad_names_are_refused_naming_the_argument_and_nothing_is_written(
    queue: Queue, name: Any, reason: str
) -> None:
    attempts = [
        ("lane", lambda: queue.enqueue("x", lane=name)),
        ("dedup key", lambda: queue.enqueue("x", dedup_key=name)),
        ("lane", lambda: queue.lanes([name])),
    ]
    for argument, attempt in attempts:
        with pytest.raises(InvalidArgument) as refused:
            await attempt()
        assert (refused.value.argument, reason in refused.value.reason) == (argument, True)
    with pytest.raises(InvalidArgument, match="lane"):
        queue.lane(name)
    [verdict] = await queue.enqueue_many([Item("x", lane=name)])
    assert verdict.kind == "error"
    assert isinstance(verdict.error, InvalidArgument)
    [verdict] = await queue.enqueue_many([Item("x", dedup_key=name)])
    assert verdict.kind == "error"
    counts = await queue.counts()
    assert (counts.pending, counts.lanes, counts.ringed) == (0, 0, 0)
    assert await queue.lanes() == []


def test_the_sync_queue_takes_any_name(valkey_url: str, queue_name: str) -> None:
    with SyncQueue.connect(valkey_url, queue_name) as sync:
        verdicts = [sync.enqueue(n, lane=n, dedup_key=n) for n in NAMES]
        assert {v.kind for v in verdicts} == {"enqueued"}
        assert [sync.enqueue("again", dedup_key=n).id for n in NAMES] == [v.id for v in verdicts]
        sync.configure_lane("billing+eu@acme.test", limit=1, rate=(5, 1.0))

    async def read() -> tuple[list[Any], list[Job]]:
        async with await Queue.connect(valkey_url, queue_name) as queue:
            try:
                lanes = await queue.lanes(["billing+eu@acme.test"])
                return lanes, await _claim_all(queue, len(NAMES))
            finally:
                await queue.pause()
                await queue.obliterate(force=True)

    [lane], jobs = asyncio.run(read())
    assert (lane.limit, lane.rate) == (1, (5, 1.0))
    assert sorted(job.lane for job in jobs) == sorted(NAMES)


async def test_a_task_lane_may_be_any_name_and_an_integer_stays_its_text(
    valkey_url: str, queue_name: str
) -> None:
    app = App(valkey_url, queue=queue_name)
    await app.connect()
    try:

        @app.task(lane="tenant", dedup=lambda tenant, n: f"{tenant} #{n}")
        async def work(tenant: Any, n: int) -> None: ...

        await work.enqueue("billing+eu@acme.test", 1)
        await work.enqueue(-100123456, 2)
        await work.using(lane="Zürich 東京 🚀").enqueue("x", 3)
        assert (await work.enqueue("billing+eu@acme.test", 1)).verdict.kind == "duplicate"
        queue = app.queue()
        groups = {lane.lane for lane in await queue.lanes()}
        assert groups == {"billing+eu@acme.test", "-100123456", "Zürich 東京 🚀"}
        with pytest.raises(InvalidArgument, match="lane"):
            await work.using(lane="").enqueue("x", 4)
    finally:
        await app.queue().pause()
        await app.queue().obliterate(force=True)
        await app.close()
