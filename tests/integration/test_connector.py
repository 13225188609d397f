"""The pipelined connector against a real embedded Valkey: ordering, batching, errors, failures."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid

import pytest

from echomq.engine.keys import VERSION_KEY
from echomq.engine.scripts import Script, ScriptRegistry
from echomq.errors import (
    AuthError,
    ConnectError,
    Disconnected,
    ServerError,
    VersionFenceError,
    WireTimeout,
)
from echomq.wire.connector import WIRE_VERSION, Connector
from echomq.wire.pool import Pool
from echomq.wire.url import ConnectionOptions

# The wire's connector and pool on asyncio's event loop and on uvloop's (tests/conftest.py).
pytestmark = pytest.mark.every_loop


@pytest.fixture
async def conn(valkey_url: str):
    async with Connector(ConnectionOptions.from_url(valkey_url)) as connector:
        yield connector


async def test_replies_match_callers_under_ten_thousand_concurrent_calls(conn: Connector) -> None:
    async def worker(task: int) -> list[bytes]:
        calls = [conn.call("ECHO", f"{task}:{n}") for n in range(100)]
        return await asyncio.gather(*calls)

    results = await asyncio.gather(*(worker(task) for task in range(100)))
    for task, replies in enumerate(results):
        assert replies == [f"{task}:{n}".encode() for n in range(100)]


async def test_calls_issued_in_one_tick_go_out_in_one_write_after_the_first(
    conn: Connector,
) -> None:
    """An idle connection writes its first call at once (a sequential caller saves a loop
    turn); the rest of the tick is coalesced into one more write."""
    before = conn.writes
    replies = await asyncio.gather(*(conn.call("PING") for _ in range(1000)))
    assert replies == [b"PONG"] * 1000
    assert conn.writes - before == 2
    before = conn.writes
    for _ in range(3):
        assert await conn.call("PING") == b"PONG"
    assert conn.writes - before == 3


async def test_big_binary_values_round_trip(conn: Connector, queue_name: str) -> None:
    big = bytes(range(256)) * 4096  # 1 MiB holding every byte value, CRLF included
    key = f"{queue_name}:big"
    assert await conn.call("SET", key, big) == b"OK"
    assert await conn.call("GET", key) == big
    await conn.call("DEL", key)


async def test_error_reply_reaches_only_its_caller(conn: Connector, queue_name: str) -> None:
    key = f"{queue_name}:s"
    await conn.call("SET", key, "text")
    good1 = conn.call("ECHO", "a")
    bad = conn.call("HGET", key, "f")
    good2 = conn.call("ECHO", "b")
    assert await good1 == b"a"
    with pytest.raises(ServerError, match="WRONGTYPE") as info:
        await bad
    assert info.value.code == "WRONGTYPE"
    assert await good2 == b"b"
    replies = await conn.call_many([("ECHO", "x"), ("INCR", key), ("ECHO", "y")])
    assert replies[0] == b"x"
    assert isinstance(replies[1], ServerError)
    assert "not an integer" in replies[1].message
    assert replies[2] == b"y"
    await conn.call("DEL", key)


async def test_killed_socket_fails_in_flight_calls_then_reconnects(
    conn: Connector, valkey_url: str, queue_name: str
) -> None:
    client_id = await conn.call("CLIENT", "ID")
    in_flight = asyncio.ensure_future(conn.call_blocking(5, "BLPOP", f"{queue_name}:never", 5))
    async with Connector(ConnectionOptions.from_url(valkey_url)) as admin:
        # Wait until the server sees the BLPOP as blocked, then kill its socket.
        deadline = time.monotonic() + 5
        while b"cmd=blpop" not in await admin.call("CLIENT", "LIST", "ID", client_id):
            assert time.monotonic() < deadline, "BLPOP never reached the server"
            await asyncio.sleep(0.01)
        assert await admin.call("CLIENT", "KILL", "ID", client_id) == 1
    with pytest.raises(Disconnected, match="in flight; they may or may not have run"):
        await in_flight
    assert await conn.call("PING") == b"PONG"  # waits for the reconnect, then succeeds
    assert conn.reconnects == 1
    assert await conn.call("CLIENT", "ID") != client_id


async def test_wrong_password_is_a_typed_auth_error_naming_the_server(
    conn: Connector, valkey_url: str
) -> None:
    user = f"u{uuid.uuid4().hex[:8]}"
    await conn.call("ACL", "SETUSER", user, "on", ">right-secret", "~*", "+@all")
    try:
        opts = ConnectionOptions.from_url(valkey_url).replace(username=user, password="wrong")
        with pytest.raises(AuthError, match="authentication refused") as info:
            await Connector(opts).connect()
        assert info.value.address == opts.address
        assert opts.address in str(info.value)
        assert "wrong" not in str(info.value)  # the secret is never echoed
        async with Connector(opts.replace(password="right-secret")) as ok:
            assert await ok.call("ACL", "WHOAMI") == user.encode()
    finally:
        await conn.call("ACL", "DELUSER", user)


async def test_nothing_listening_is_a_typed_connect_error_within_the_timeout() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    opts = ConnectionOptions(port=port, connect_timeout=1.0)
    started = time.monotonic()
    with pytest.raises(ConnectError, match=f"cannot connect.*127.0.0.1:{port}"):
        await Connector(opts).connect()
    assert time.monotonic() - started < 1.5


async def test_script_flush_makes_the_next_call_reload_and_succeed(conn: Connector) -> None:
    script = Script.from_source("echo_first", "return {KEYS[1], ARGV[1]}")
    registry = ScriptRegistry([script])
    assert await registry.run(conn, script, ["k"], ["v"]) == [b"k", b"v"]
    loads = registry.loads
    await conn.call("SCRIPT", "FLUSH")
    assert await registry.run(conn, script, ["k2"], ["v2"]) == [b"k2", b"v2"]
    assert registry.loads == loads + 1
    await conn.call("SCRIPT", "FLUSH")
    replies = await registry.run_many(conn, [(script, ["a"], ["1"])] * 3)
    assert replies == [[b"a", b"1"]] * 3
    assert registry.loads == loads + 2  # one load serves the whole pipeline


async def test_version_fence_refuses_a_deployment_of_another_version(
    conn: Connector, valkey_url: str
) -> None:
    db = 7  # a database of its own, so no other test ever sees the foreign version
    other = ConnectionOptions.from_url(valkey_url).replace(db=db)
    async with Connector(other) as setter:
        assert await setter.call("GET", VERSION_KEY) == WIRE_VERSION.encode()
        await setter.call("SET", VERSION_KEY, "echomq:0-legacy")
    try:
        with pytest.raises(VersionFenceError, match="'echomq:0-legacy'") as info:
            await Connector(other).connect()
        assert info.value.expected == WIRE_VERSION
    finally:
        async with Connector(other, version_fence=None) as cleaner:
            await cleaner.call("DEL", VERSION_KEY)


async def test_pool_spreads_calls_round_robin_and_keeps_pipeline_order(valkey_url: str) -> None:
    async with Pool(ConnectionOptions.from_url(valkey_url), size=3) as pool:
        ids = await asyncio.gather(*(pool.call("CLIENT", "ID") for _ in range(6)))
        assert len(set(ids)) == 3
        assert ids[:3] == ids[3:]
        replies = await pool.call_many([("ECHO", str(n)) for n in range(500)])
        assert replies == [str(n).encode() for n in range(500)]


async def test_a_long_pipeline_goes_out_while_it_is_still_being_issued(conn: Connector) -> None:
    before = conn.writes
    chunks = [conn.call_many([("ECHO", "x" * 100)] * 100) for _ in range(20)]  # ~250 KiB
    assert conn.writes - before > 1  # written as the buffer filled, not once at the tick's end
    replies = [reply for chunk in chunks for reply in await chunk]
    assert replies == [b"x" * 100] * 2000


async def test_a_server_that_never_answers_the_handshake_is_a_typed_timeout() -> None:
    accepted: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # accept, never answer

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(WireTimeout, match=f"handshake timed out.*127.0.0.1:{port}"):
            await Connector(ConnectionOptions(port=port, connect_timeout=0.3)).connect()
    finally:
        for writer in accepted:
            writer.close()
            await writer.wait_closed()
        server.close()
        await server.wait_closed()


async def test_a_stalled_server_fails_calls_with_a_timeout_then_recovers(valkey_url: str) -> None:
    options = ConnectionOptions.from_url(valkey_url).replace(call_timeout=0.4)
    async with (
        Connector(options) as conn,
        Connector(ConnectionOptions.from_url(valkey_url)) as admin,
    ):
        assert await admin.call("CLIENT", "PAUSE", 1500, "ALL") == b"OK"
        with pytest.raises(WireTimeout, match=r"no reply within 0\.4s"):
            await conn.call("PING")
        assert await admin.call("PING") == b"PONG"  # answered once the pause is over
        deadline = time.monotonic() + 10
        while not conn.is_connected:  # reconnecting with backoff; no event to wait on
            assert time.monotonic() < deadline, "never reconnected"
            await asyncio.sleep(0.02)
        assert await conn.call("PING") == b"PONG"  # on a fresh socket
        assert conn.reconnects >= 1


#: A wait for one replica's fsync: the session's server has none, so it answers [0, 0] at once
#: the 10 ms are up (what it answers is not the point here: where it goes is).
REPLICA_WAIT = ("WAITAOF", 0, 1, 10)


async def test_a_replica_wait_goes_after_the_replies_of_its_writes_on_their_socket(
    conn: Connector, valkey_url: str, queue_name: str
) -> None:
    """A replica sent the wait with the writes answers with the offset it fsynced before them
    (one second late); so the wait goes out once their replies are in: still one wait for
    the pipelines of one write, on their socket, run after all of them."""
    key = f"{queue_name}:durable"
    address = next(
        field.split(b"=")[1] for field in (await conn.call("CLIENT", "INFO")).split()
        if field.startswith(b"addr=")
    )  # fmt: skip
    seen: list[bytes] = []
    options = ConnectionOptions.from_url(valkey_url)
    async with Connector(options, version_fence=None, on_push=lambda f: seen.append(f[1])) as tap:
        assert await tap.call("MONITOR") == b"OK"
        before = conn.writes
        uncork = conn.cork()
        first = conn.call_durable([("SET", key, 1), ("INCR", key)], REPLICA_WAIT)
        second = conn.call_durable([("INCR", key)], REPLICA_WAIT)
        uncork()
        assert await first == [b"OK", 2, [0, 0]]
        assert await second == [3, [0, 0]]
        assert conn.writes - before == 2  # the writes, then (their replies in) the wait
        deadline = time.monotonic() + 5
        while not any(b'"WAITAOF"' in line for line in seen):
            assert time.monotonic() < deadline, "the monitor never saw the wait"
            await asyncio.sleep(0.01)
    ran = [line.split(b"] ", 1)[1].split()[0] for line in seen if b" " + address + b"]" in line]
    assert ran == [b'"SET"', b'"INCR"', b'"INCR"', b'"WAITAOF"']
    await conn.call("DEL", key)


async def test_a_socket_lost_before_a_replica_wait_fails_every_pipeline_it_was_to_cover(
    conn: Connector, queue_name: str
) -> None:
    """The first pipeline's replies are in, the second's are not when the socket goes: the
    wait never went out, and neither pipeline is answered as if it had been confirmed."""
    key = f"{queue_name}:lost"
    own = await conn.call("CLIENT", "ID")
    uncork = conn.cork()
    first = conn.call_durable([("SET", key, 1)], REPLICA_WAIT)
    # The server answers its own kill, then closes the socket: the INCR never runs.
    second = conn.call_durable(
        [("CLIENT", "KILL", "ID", own, "SKIPME", "no"), ("INCR", key)], REPLICA_WAIT
    )
    uncork()
    for pending in (first, second):
        with pytest.raises(Disconnected):
            await asyncio.wait_for(pending, 5)
    assert await conn.call("GET", key) == b"1"  # after the reconnect
    await conn.call("DEL", key)
