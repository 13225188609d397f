"""The connector under a storm of cut sockets, shaped like the fault drill of issue 31.

Many tasks call through one :class:`Connector` whose URL names database 1 and a user with a
password, while another client kills its socket every 50 ms. What must hold, whatever the cuts:

* no command runs before the handshake: nothing lands in database 0, no ``NOAUTH``, no RESP2
  reply (``HGETALL`` answers a dict, never a flat list);
* every call returns or raises a typed error (``EchoMQError``) within one deadline, its timeout
  counted once from the call, and nothing is left pending when the cuts stop.

The server is one of this module's own: it needs a password, which the session's server has not.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator

import pytest
import valkey

from echomq.engine.queue import Queue
from echomq.errors import EchoMQError, ServerError
from echomq.server import EmbeddedValkey, ServerOptions
from echomq.testing import discard
from echomq.wire.connector import Connector
from echomq.wire.url import ConnectionOptions

PASSWORD = "drill-admin-secret"
CALL_TIMEOUT = 1.0
#: A call's deadline is its timeout, counted once from the call; the slack covers a loaded host's
#: loop turns (2 shared cores), not another timeout.
SLACK = 0.75


@pytest.fixture(scope="module")
def guarded_server() -> Iterator[EmbeddedValkey]:
    with EmbeddedValkey(ServerOptions(password=PASSWORD)) as server:
        yield server


@pytest.fixture
async def admin(guarded_server: EmbeddedValkey) -> AsyncIterator[Connector]:
    async with Connector(ConnectionOptions.from_url(guarded_server.url)) as connector:
        yield connector


async def _drill_user(admin: Connector) -> tuple[str, str]:
    user = f"drill{uuid.uuid4().hex[:8]}"
    secret = uuid.uuid4().hex
    assert (
        await admin.call("ACL", "SETUSER", user, "on", f">{secret}", "~*", "&*", "+@all") == b"OK"
    )
    return user, secret


def _cut_every(url: str, user: str, interval: float, stop: threading.Event) -> int:
    """Kill ``user``'s sockets every ``interval`` from a thread of its own, so the storm keeps
    its rhythm however busy the callers keep the event loop."""
    cuts = 0
    with valkey.Valkey.from_url(url) as client:
        while not stop.wait(interval):
            cuts += int(client.execute_command("CLIENT", "KILL", "USER", user))
    return cuts


async def _one_round(admin: Connector, guarded_server: EmbeddedValkey, seconds: float) -> Counter:
    """One drill round; returns what the callers saw, by outcome."""
    user, secret = await _drill_user(admin)
    key = f"drill:{uuid.uuid4().hex}"
    hkey = f"{key}:h"
    opts = ConnectionOptions.from_url(guarded_server.url).replace(
        username=user, password=secret, db=1, call_timeout=CALL_TIMEOUT, connect_timeout=1.0
    )
    await admin.call("SELECT", 1)
    await admin.call("HSET", hkey, "f", "v")
    await admin.call("SELECT", 0)
    seen: Counter[str] = Counter()
    late: list[float] = []
    untyped: list[BaseException] = []
    stop = asyncio.Event()
    connector = await Connector(opts).connect()

    async def caller(n: int) -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                if n % 5:
                    await connector.call("INCR", key)
                    seen["incr"] += 1
                else:
                    reply = await connector.call("HGETALL", hkey)
                    seen["resp3" if isinstance(reply, dict) else "resp2"] += 1
            except EchoMQError as exc:
                seen[type(exc).__name__] += 1
                if "NOAUTH" in str(exc):
                    seen["noauth"] += 1
            except Exception as exc:  # the drill counts what no caller expects
                untyped.append(exc)
            took = time.monotonic() - started
            if took > CALL_TIMEOUT + SLACK:
                late.append(took)
            if n % 2:
                # Half the callers come back at scattered moments, as a web app's requests do,
                # so some arrive while a new socket is still being set up.
                await asyncio.sleep(random.random() / 500)

    callers = [asyncio.ensure_future(caller(n)) for n in range(200)]
    storm = threading.Event()
    killer = asyncio.ensure_future(
        asyncio.to_thread(_cut_every, guarded_server.url, user, 0.05, storm)
    )
    await asyncio.sleep(seconds)  # the length of the storm
    storm.set()
    stop.set()
    seen["cuts"] = await killer
    # Every caller ends its current call within one deadline of the storm's end.
    _, pending = await asyncio.wait(callers, timeout=CALL_TIMEOUT + SLACK + 1.0)
    for task in pending:
        task.cancel()
    await connector.close()
    seen["hung"] = len(pending)
    seen["late"] = len(late)
    seen["untyped"] = len(untyped)
    assert not untyped, f"untyped errors: {untyped[:3]!r}"

    await admin.call("SELECT", 0)
    seen["db0"] = await admin.call("EXISTS", key)
    await admin.call("SELECT", 1)
    landed = int(await admin.call("GET", key) or 0)
    await admin.call("DEL", key, hkey)
    await admin.call("SELECT", 0)
    # Every acknowledged INCR is in database 1 (more may be: a call cut after it ran).
    assert landed >= seen["incr"], (landed, seen)
    await admin.call("ACL", "DELUSER", user)
    return seen


async def test_no_call_runs_before_the_handshake_and_none_hangs_under_cuts(
    admin: Connector, guarded_server: EmbeddedValkey
) -> None:
    totals: Counter[str] = Counter()
    for _ in range(10):
        totals += await _one_round(admin, guarded_server, 0.8)
    assert totals["cuts"] >= 30, totals  # the storm really cut the socket again and again
    assert totals["incr"] > 0, totals  # and calls got through between the cuts
    assert totals["resp3"] > 0, totals
    assert totals["db0"] == 0, totals  # no write in the database the URL did not name
    assert totals["noauth"] == 0, totals  # no command before AUTH
    assert totals["resp2"] == 0, totals  # no command before HELLO 3
    assert totals["hung"] == 0, totals  # every call returned or raised after the storm
    assert totals["late"] == 0, totals  # and each within its one deadline


async def _spin_calls_until(connector: Connector, done: asyncio.Future[object], key: str) -> list:
    """Issue an ``INCR key`` at every turn of the event loop until ``done``; the outcomes."""
    calls: list[asyncio.Future[object]] = []
    while not done.done():
        calls.append(asyncio.ensure_future(connector.call("INCR", key)))
        await asyncio.sleep(0)  # one loop turn: a call lands in every turn of the handshake
    return await asyncio.gather(*calls, return_exceptions=True)


async def test_a_call_issued_at_every_loop_turn_waits_for_the_handshake(
    admin: Connector, guarded_server: EmbeddedValkey
) -> None:
    """Calls issued at every loop turn while the socket connects, and again while it reconnects
    after a kill: none reaches the server before ``AUTH`` and ``SELECT 1``."""
    user, secret = await _drill_user(admin)
    key = f"turns:{uuid.uuid4().hex}"
    opts = ConnectionOptions.from_url(guarded_server.url).replace(
        username=user, password=secret, db=1
    )
    connector = Connector(opts)
    try:
        outcomes = await _spin_calls_until(
            connector, asyncio.ensure_future(connector.connect()), key
        )
        killed = await admin.call("CLIENT", "KILL", "USER", user)
        assert killed == 1

        async def reconnected() -> None:
            while connector.reconnects == 0:
                await asyncio.sleep(0.005)  # polls a counter the connector keeps

        outcomes += await _spin_calls_until(connector, asyncio.ensure_future(reconnected()), key)
    finally:
        await connector.close()
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    # Calls issued before the first connect began refuse as never connected; none is NOAUTH.
    assert not [e for e in errors if "NOAUTH" in str(e)], errors[:3]
    ok = [o for o in outcomes if isinstance(o, int)]
    assert ok, outcomes[:5]
    await admin.call("SELECT", 0)
    assert await admin.call("EXISTS", key) == 0  # nothing in the database the URL did not name
    await admin.call("SELECT", 1)
    assert int(await admin.call("GET", key)) >= len(ok)
    await admin.call("DEL", key)
    await admin.call("SELECT", 0)
    await admin.call("ACL", "DELUSER", user)


async def test_waits_ride_out_cuts_until_their_deadline(
    admin: Connector, guarded_server: EmbeddedValkey
) -> None:
    """Waits on 2,000 finished jobs, 50 at a time, round after round for 1.5 s while the waiting
    queue's sockets are cut every 50 ms: every wait answers the completed row, none a
    ``Disconnected``."""
    user, secret = await _drill_user(admin)
    url = guarded_server.url.replace("://:", f"://{user}:").replace(PASSWORD, secret)
    name = f"t-cuts-{uuid.uuid4().hex[:8]}"
    waiting = await Queue.connect(url, name, result_ttl=60)
    settling = await Queue.connect(guarded_server.url, name, result_ttl=60)
    outcomes: list[object] = []
    try:
        verdicts = await settling.enqueue_many([{"n": n} for n in range(2000)])
        ids = [verdict.id for verdict in verdicts]
        while True:
            claimed = await settling.claim_batch(500)
            if not isinstance(claimed, list) or not claimed:
                break
            await settling.complete_many(claimed)
        storm = threading.Event()
        killer = asyncio.ensure_future(
            asyncio.to_thread(_cut_every, guarded_server.url, user, 0.05, storm)
        )
        storm_ends = time.monotonic() + 1.5  # the length of the storm
        while time.monotonic() < storm_ends:
            for start in range(0, len(ids), 50):
                outcomes += await asyncio.gather(
                    *(waiting.wait(job_id, timeout=30) for job_id in ids[start : start + 50]),
                    return_exceptions=True,
                )
        storm.set()
        cuts = await killer
    finally:
        await waiting.close()
        await discard(settling)
        await admin.call("ACL", "DELUSER", user)
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert errors == [], (len(errors), errors[:3])
    assert cuts >= 5  # the waits' sockets really were cut while they waited
    assert all(getattr(o, "state", None) == "completed" for o in outcomes), outcomes[:3]


async def test_a_wait_refused_its_channel_says_so_at_once(
    admin: Connector, guarded_server: EmbeddedValkey
) -> None:
    """A user with rights on keys but none on channels (Valkey's default for a new user): the
    wait's subscription is refused, and the wait raises the server's NOPERM, not a timeout."""
    user, secret = f"nochan{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    await admin.call("ACL", "SETUSER", user, "on", f">{secret}", "~*", "resetchannels", "+@all")
    url = guarded_server.url.replace("://:", f"://{user}:").replace(PASSWORD, secret)
    name = f"t-nochan-{uuid.uuid4().hex[:8]}"
    queue = await Queue.connect(url, name)
    producer = await Queue.connect(guarded_server.url, name)
    try:
        verdict = await producer.enqueue({"n": 1})
        started = time.monotonic()
        with pytest.raises(ServerError) as refused:
            await queue.wait(verdict.id, timeout=30)
        assert refused.value.code == "NOPERM"
        assert time.monotonic() - started < 3.0  # answered, not timed out (connect_timeout 3 s)
    finally:
        await queue.close()
        await discard(producer)
        await admin.call("ACL", "DELUSER", user)
