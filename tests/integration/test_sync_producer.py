"""The blocking producer: ``SyncQueue`` admits and reads as ``Queue`` does, from any thread, in
a forked child, through a killed connection and through TLS, against the real server."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from test_tls import tls_port, tls_url  # the stunnel rig in front of the session's server

from echomq import InvalidArgument, Item, Queue, SyncQueue, Verdict
from echomq.engine.keys import VERSION_KEY
from echomq.errors import Closed, ConnectError, VersionFenceError
from echomq.testing import claim_job, discard
from echomq.wire import WIRE_VERSION
from echomq.wire.blocking import pack
from echomq.wire.connector import Connector
from echomq.wire.url import ConnectionOptions

__all__ = ["tls_port", "tls_url"]  # fixtures, imported for this module's TLS test


@pytest.fixture
def sync_queue(valkey_url: str, queue_name: str) -> Iterator[SyncQueue]:
    with SyncQueue.connect(valkey_url, queue_name) as q:
        yield q


def kinds(verdicts: list[Verdict]) -> list[str]:
    return [v.kind for v in verdicts]


def _same_steps(
    enqueue: Callable[..., Any], enqueue_in: Callable[..., Any], enqueue_at: Callable[..., Any]
) -> list[Callable[[], Any]]:
    """One script of admissions, for either queue; each step's value is its verdict."""
    fixed = "JOB0000000000A"
    return [
        lambda: enqueue({"n": 1}),
        lambda: enqueue("x", id=fixed),
        lambda: enqueue("again", id=fixed),
        lambda: enqueue("d", dedup_key="k-1", lane="lane-a"),
        lambda: enqueue("d2", dedup_key="k-1"),
        lambda: enqueue("ttl", dedup_key="k-2", dedup_ttl=30),
        lambda: enqueue_in(60, "later"),
        lambda: enqueue_in(0, "now"),
        lambda: enqueue_at(time.time() + 60, "at"),
        lambda: enqueue_at(time.time() - 60, "past"),
    ]


async def test_verdicts_and_rows_match_the_async_queue(
    valkey_url: str, queue_name: str, queue: Queue
) -> None:
    twin = await Queue.connect(valkey_url, queue_name + "-twin")
    try:
        with SyncQueue.connect(valkey_url, queue_name + "-twin") as sq:
            sync = [step() for step in _same_steps(sq.enqueue, sq.enqueue_in, sq.enqueue_at)]
            steps = _same_steps(queue.enqueue, queue.enqueue_in, queue.enqueue_at)
            async_ = [await step() for step in steps]
            assert kinds(sync) == kinds(async_)
            assert kinds(sync) == [
                "enqueued", "enqueued", "duplicate", "enqueued", "duplicate", "enqueued",
                "scheduled", "enqueued", "scheduled", "enqueued",
            ]  # fmt: skip
            many = [Item(1), Item(2, lane="g"), Item(3, id="nope"), Item(4, delay=30), 5]
            sync_many, async_many = sq.enqueue_many(many), await queue.enqueue_many(many)
            assert kinds(sync_many) == kinds(async_many)
            assert kinds(sync_many) == ["enqueued", "enqueued", "error", "scheduled", "enqueued"]
            assert isinstance(sync_many[2].error, InvalidArgument)
            assert sq.enqueue_many([]) == []
            for mine, theirs in zip(sync, async_, strict=True):
                assert sq.state(mine.id) == await queue.state(theirs.id)
                info, other = sq.job(mine.id), await queue.job(theirs.id)
                assert info is not None
                assert other is not None
                assert (info.state, info.payload, info.lane) == (
                    other.state, other.payload, other.lane,
                )  # fmt: skip
                assert info == await twin.job(mine.id)  # the same row, read by both sides
            assert sq.job("JOB00000000000") is None
            assert sq.state("JOB00000000000") == "absent"
            assert (await twin.counts()).pending == (await queue.counts()).pending
    finally:
        await discard(twin)


async def test_a_job_enqueued_sync_is_claimed_by_the_async_queue(
    sync_queue: SyncQueue, queue: Queue
) -> None:
    verdict = sync_queue.enqueue({"to": "you"}, lane="tenant-7")
    job = await claim_job(queue)
    assert (job.id, job.payload, job.lane) == (verdict.id, {"to": "you"}, "tenant-7")
    assert sync_queue.state(verdict.id) == "active"
    assert await queue.complete(job)
    assert sync_queue.job(verdict.id) is None


async def test_a_subscriber_of_the_queue_hears_what_the_sync_producer_admits(
    sync_queue: SyncQueue, queue: Queue
) -> None:
    async with queue.subscribe() as events:
        one = sync_queue.enqueue("hello", lane="tenant-3")
        assert sync_queue.enqueue("again", id=one.id).kind == "duplicate"  # no event
        later, now = sync_queue.enqueue_many([Item(1, delay=60), Item(2)])
        heard = [await asyncio.wait_for(events.get(), 5) for _ in range(3)]
    assert heard == [
        {"event": "enqueued", "job": one.id, "group": "tenant-3"},
        {"event": "scheduled", "job": later.id},
        {"event": "enqueued", "job": now.id},
    ]


async def test_eight_threads_admit_every_job_exactly_once(
    sync_queue: SyncQueue, queue: Queue
) -> None:
    per_thread, verdicts, errors = 300, [], []

    def produce(n: int) -> None:
        try:
            mine = [sync_queue.enqueue(i, lane=f"t{n}") for i in range(per_thread)]
            mine += sync_queue.enqueue_many(range(per_thread))
            verdicts.extend(mine)
        except Exception as exc:  # surfaced below, with the thread's own traceback
            errors.append(exc)

    threads = [threading.Thread(target=produce, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert {v.kind for v in verdicts} == {"enqueued"}
    assert len({v.id for v in verdicts}) == len(verdicts) == 8 * 2 * per_thread
    assert (await queue.counts()).pending == len(verdicts)


def _client_id(sync_queue: SyncQueue) -> int:
    return int(sync_queue._process.router.call(sync_queue._slot, pack(("CLIENT", "ID"))))


async def test_a_fork_child_mints_its_own_ids_on_its_own_socket(
    sync_queue: SyncQueue, queue: Queue
) -> None:
    before = sync_queue.enqueue("before")
    parent_node = sync_queue._process.lease.minter.node
    parent_client = _client_id(sync_queue)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its ids (or its error) and leave without cleanup
        try:
            ids = [sync_queue.enqueue(f"child-{i}").id for i in range(50)]
            ids += [v.id for v in sync_queue.enqueue_many(range(50))]
            node = sync_queue._process.lease.minter.node
            client = _client_id(sync_queue)  # the connection the server sees the child on
            os.write(write, (f"{node} {client} " + " ".join(ids)).encode())
            sync_queue.close()
        except BaseException as exc:
            os.write(write, f"error {exc!r}".encode())
        finally:
            os._exit(0)
    os.close(write)
    parent_ids = [sync_queue.enqueue(f"parent-{i}").id for i in range(50)]
    with os.fdopen(read, "rb") as pipe:
        report = pipe.read().decode().split()
    _, status = os.waitpid(pid, 0)  # noqa: ASYNC222  # the child has written: it is leaving
    assert status == 0
    assert report[0] != "error", " ".join(report)
    child_node, child_client, child_ids = int(report[0]), int(report[1]), report[2:]
    assert child_node != parent_node
    parent_ids.append(sync_queue.enqueue("after").id)  # the parent's socket still speaks
    assert sync_queue._process.lease.minter.node == parent_node
    # The child spoke on a connection of its own; the parent's is the one it had before the
    # fork, never reopened (nothing the child did reached it).
    assert child_client != parent_client
    assert _client_id(sync_queue) == parent_client
    assert sync_queue._process.router.reconnects == 0
    every = [before.id, *parent_ids, *child_ids]
    assert len(set(every)) == len(every) == 1 + 51 + 100
    assert (await queue.counts()).pending == len(every)


async def test_a_killed_connection_reconnects_and_loses_nothing(
    sync_queue: SyncQueue, queue: Queue, valkey_url: str
) -> None:
    admitted = [sync_queue.enqueue(i) for i in range(10)]
    async with Connector(ConnectionOptions.from_url(valkey_url), version_fence=None) as admin:
        assert await admin.call("CLIENT", "KILL", "ID", _client_id(sync_queue)) == 1
        admitted.append(sync_queue.enqueue("after a kill"))
        assert await admin.call("CLIENT", "KILL", "ID", _client_id(sync_queue)) == 1
        admitted += sync_queue.enqueue_many(range(250))
        assert await admin.call("CLIENT", "KILL", "ID", _client_id(sync_queue)) == 1
        assert sync_queue.state(admitted[0].id) == "pending"
    assert sync_queue._process.router.reconnects == 3
    assert {v.kind for v in admitted} == {"enqueued"}
    assert (await queue.counts()).pending == len({v.id for v in admitted}) == 261


class Relay:
    """A TCP relay in front of the server that, when told, cuts a connection, refuses new ones
    or holds a publish back:

    * ``cut_next``: the next reply is swallowed and the client's connection cut (a call that
      ran on the server whose answer was lost in flight);
    * ``refuse_next``: that many new connections are closed as soon as they are accepted;
    * ``hold_publish``: the first write of a client carrying a ``PUBLISH`` (and all it sends
      after) waits in the relay until ``release`` is set; ``holding`` says it is held;
    * :meth:`silence`: the connections open now drop all they carry, both ways, and stay open
      (a partition, or a server gone without a word).
    """

    def __init__(self, upstream: ConnectionOptions) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"valkey://127.0.0.1:{self.port}/0"
        self.cut_next = threading.Event()
        self.cuts = 0
        self.refuse_next = 0
        self.refused = 0
        self.hold_publish, self.holding, self.release = (threading.Event() for _ in range(3))
        self.accepted = 0
        self.silenced: set[int] = set()
        threading.Thread(target=self._accept, daemon=True).start()

    def silence(self) -> None:
        self.silenced.update(range(self.accepted))

    def _accept(self) -> None:
        with contextlib.suppress(OSError):  # the listener closed: the test is over
            while True:
                client, _ = self.listener.accept()
                if self.refuse_next > 0:
                    self.refuse_next -= 1
                    self.refused += 1
                    client.close()
                    continue
                server = socket.create_connection((self.upstream.host, self.upstream.port))
                number, self.accepted = self.accepted, self.accepted + 1
                threading.Thread(
                    target=self._pump, args=(client, server, False, number), daemon=True
                ).start()
                threading.Thread(
                    target=self._pump, args=(server, client, True, number), daemon=True
                ).start()

    def _pump(self, source: socket.socket, sink: socket.socket, replies: bool, number: int) -> None:
        with contextlib.suppress(OSError), source, sink:
            try:
                while data := source.recv(65536):
                    if number in self.silenced:
                        continue
                    if replies and self.cut_next.is_set():
                        self.cut_next.clear()
                        self.cuts += 1
                        return  # the reply is dropped, the client cut
                    if not replies and self.hold_publish.is_set() and b"PUBLISH" in data:
                        self.hold_publish.clear()
                        self.holding.set()
                        self.release.wait(30)
                        self.holding.clear()
                    sink.sendall(data)
            finally:
                # Both ends hang up at once, as a server does: closing alone would leave the
                # other direction's pump blocked in recv, holding the connection open.
                for end in (source, sink):
                    with contextlib.suppress(OSError):
                        end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.release.set()
        self.listener.close()


@pytest.mark.parametrize("minted", [True, False], ids=["minted id", "given id"])
async def test_a_reply_lost_in_flight_is_sent_again_and_admits_once(
    valkey_url: str, queue_name: str, queue: Queue, minted: bool
) -> None:
    relay = Relay(ConnectionOptions.from_url(valkey_url))
    try:
        with SyncQueue.connect(relay.url, queue_name) as sq:
            sq.enqueue("warm")  # the id node leased, the script loaded
            relay.cut_next.set()
            given = None if minted else "JOB0000000000Z"
            verdict = sq.enqueue("lost reply", id=given)
            assert relay.cuts == 1
            assert sq._process.router.reconnects == 1
            # Our own first send landed: a minted id is nobody else's, so it is enqueued; a
            # given id may have been there before, so it stays what the server said.
            assert verdict.kind == ("enqueued" if minted else "duplicate")
            assert (await queue.counts()).pending == 2
            assert sq.job(verdict.id) is not None
    finally:
        relay.close()


async def test_a_batch_whose_replies_are_lost_answers_unknown_and_resends_safely(
    valkey_url: str, queue_name: str, queue: Queue
) -> None:
    relay = Relay(ConnectionOptions.from_url(valkey_url))
    try:
        with SyncQueue.connect(relay.url, queue_name) as sq:
            sq.enqueue("warm")
            relay.cut_next.set()
            lost = sq.enqueue_many([Item("first", lane="g"), Item({1}), *range(250)])
            assert relay.cuts == 1
            assert lost[1].kind == "error"  # refused before sending: not unknown
            unknown = [v for v in lost if v.kind == "unknown"]
            assert len(unknown) == 251
            assert all(v.id for v in unknown)  # each keeps the id it was sent with
            again = sq.enqueue_many([Item(n, id=v.id) for n, v in enumerate(unknown)])
            assert {v.kind for v in again} <= {"enqueued", "duplicate"}
            assert [v.id for v in again] == [v.id for v in unknown]
            assert (await queue.counts()).pending == 1 + 251
    finally:
        relay.close()


async def test_an_event_costs_its_enqueue_no_round_trip(
    valkey_url: str, queue_name: str, queue: Queue
) -> None:
    relay = Relay(ConnectionOptions.from_url(valkey_url))
    try:
        with SyncQueue.connect(relay.url, queue_name) as sq:
            async with queue.subscribe() as events:
                warm = sq.enqueue("warm")  # asks for listeners: there is one, events go out
                assert (await asyncio.wait_for(events.get(), 5))["job"] == warm.id
                relay.hold_publish.set()
                verdicts: list[Verdict] = []
                producer = threading.Thread(target=lambda: verdicts.append(sq.enqueue("heard")))
                producer.start()
                # It answers while its event's PUBLISH is still held in the relay: nothing waits
                # for the publish's reply (that cost a round trip, or a call timeout here).
                assert await asyncio.to_thread(relay.holding.wait, 5)
                await asyncio.to_thread(producer.join, 2.5)
                assert not producer.is_alive(), "the enqueue waited for its event's publish"
                relay.release.set()
                (heard,) = verdicts
                assert (await asyncio.wait_for(events.get(), 5))["job"] == heard.id
                # The publish's reply, read and dropped by the next calls, is nobody's answer.
                assert sq.state(heard.id) == "pending"
                one = sq.enqueue("one")
                many = sq.enqueue_many(range(3))  # a pipeline right behind an unread reply
                assert kinds([one, *many]) == ["enqueued"] * 4
                assert sq.state(many[-1].id) == "pending"
                got = [(await asyncio.wait_for(events.get(), 5))["job"] for _ in range(4)]
                assert got == [v.id for v in [one, *many]]
            assert sq._process.router.reconnects == 0
    finally:
        relay.close()


async def test_the_version_fence_refuses_another_deployment_and_a_new_thread_checks_it(
    valkey_url: str, queue_name: str
) -> None:
    db = 8  # a database of its own, so no other test ever sees the foreign version
    other = ConnectionOptions.from_url(valkey_url).replace(db=db)
    url = f"{valkey_url.rsplit('/', 1)[0]}/{db}"
    with SyncQueue.connect(url, queue_name) as sq:  # sets the fence in that database
        async with Connector(other, version_fence=None) as setter:
            assert await setter.call("GET", VERSION_KEY) == WIRE_VERSION.encode()
            await setter.call("SET", VERSION_KEY, "echomq:0-legacy")
        try:
            with pytest.raises(VersionFenceError, match="'echomq:0-legacy'"):
                SyncQueue.connect(url, queue_name)
            refused: list[BaseException] = []

            def new_thread() -> None:  # its own socket runs the fence in its handshake
                try:
                    sq.state("JOB00000000000")
                except BaseException as exc:
                    refused.append(exc)

            thread = threading.Thread(target=new_thread)
            thread.start()
            thread.join()
            assert [type(e) for e in refused] == [VersionFenceError]
        finally:
            async with Connector(other, version_fence=None) as cleaner:
                await cleaner.call("DEL", VERSION_KEY)


BAD_CALLS: list[tuple[str, Callable[[SyncQueue], Any]]] = [
    ("lane", lambda q: q.enqueue(1, lane="")),
    ("job id", lambda q: q.enqueue(1, id="JOB-not-an-id")),
    ("job id", lambda q: q.enqueue(1, id="USR0000000000A")),
    ("dedup key", lambda q: q.enqueue(1, dedup_key="")),
    ("dedup_ttl", lambda q: q.enqueue(1, dedup_key="k", dedup_ttl=-1)),
    ("payload", lambda q: q.enqueue({1, 2})),
    ("payload", lambda q: q.enqueue(float("nan"))),
    ("delay", lambda q: q.enqueue_in(-1, 1)),
    ("delay", lambda q: q.enqueue_in(float("inf"), 1)),
    ("when", lambda q: q.enqueue_at(time.time() * 1000, 1)),
    ("option", lambda q: q.enqueue_in(1, 1, colour="x")),
    ("ceiling", lambda q: q.configure_lane("g", limit=0)),
    ("max", lambda q: q.configure_lane("g", limit=5, rate=(0, 1.0))),
    ("window", lambda q: q.configure_lane("g", rate=(5, -1))),
    ("rate", lambda q: q.configure_lane("g", rate=5)),  # type: ignore[arg-type]
    ("lane", lambda q: q.configure_lane("", limit=1)),
    ("job id", lambda q: q.job("nope")),
    ("job id", lambda q: q.state("nope")),
    ("job id", lambda q: q.wait("nope")),
    ("timeout", lambda q: q.wait("JOB00000000000", timeout=-1)),
]


@pytest.mark.parametrize(("argument", "call"), BAD_CALLS)
def test_bad_input_names_the_argument_and_writes_nothing(
    sync_queue: SyncQueue, argument: str, call: Callable[[SyncQueue], Any]
) -> None:
    router = sync_queue._process.router
    pattern = f"emq:{{{sync_queue.name}}}:*"
    with pytest.raises(InvalidArgument) as refused:
        call(sync_queue)
    assert refused.value.argument == argument
    assert router.call(sync_queue._slot, pack(("KEYS", pattern))) == []


def test_enqueue_many_bounds_a_dedup_key_by_its_items_ttl(sync_queue: SyncQueue) -> None:
    first, again = sync_queue.enqueue_many(
        [Item(1, dedup_key="order-7", dedup_ttl=30), Item(2, dedup_key="order-7")]
    )
    assert (first.kind, again.kind, again.id) == ("enqueued", "duplicate", first.id)
    key = sync_queue.keys.dedup("order-7")
    ttl = sync_queue._process.router.call(sync_queue._slot, pack(("PTTL", key)))
    assert 0 < ttl <= 30_000


def test_enqueue_many_refuses_bad_items_in_place(sync_queue: SyncQueue) -> None:
    verdicts = sync_queue.enqueue_many([Item(1, lane=""), Item(2), {3}])
    assert kinds(verdicts) == ["error", "enqueued", "error"]
    assert [v.error.argument for v in verdicts if isinstance(v.error, InvalidArgument)] == [
        "lane",
        "payload",
    ]


async def test_configure_lane_sets_the_ceiling_and_the_rate(
    sync_queue: SyncQueue, queue: Queue
) -> None:
    sync_queue.configure_lane("tenant-1", limit=2, rate=(10, 1.5))
    sync_queue.configure_lane("tenant-1", limit=3)  # the rate is left as it is
    (lane,) = await queue.lanes(["tenant-1"])
    assert (lane.limit, lane.rate) == (3, (10, 1.5))


def _complete_later(url: str, name: str, result_ttl: float, how: str) -> None:
    async def settle() -> None:
        q = await Queue.connect(url, name, result_ttl=result_ttl, events=False)
        try:
            job = await claim_job(q)
            if how == "complete":
                await q.complete(job, result={"sum": 3})
            else:
                await q.retry(job, max_attempts=1, error="Boom: no")
        finally:
            await q.close()

    asyncio.run(settle())


@pytest.mark.parametrize("how", ["complete", "dead"])
def test_wait_returns_the_finished_row(sync_queue: SyncQueue, valkey_url: str, how: str) -> None:
    verdict = sync_queue.enqueue({"a": 1})
    # It settles while wait() blocks, or before: the row read after subscribing covers that.
    settler = threading.Thread(target=_complete_later, args=(valkey_url, sync_queue.name, 60, how))
    settler.start()
    info = sync_queue.wait(verdict.id, timeout=20)
    settler.join()
    assert info is not None
    if how == "complete":
        assert (info.state, info.result, info.payload) == ("completed", {"sum": 3}, {"a": 1})
    else:
        assert (info.state, info.last_error) == ("dead", "Boom: no")
    assert info.finished is not None
    assert sync_queue.wait(verdict.id, timeout=0) == info  # finished already: at once


def test_wait_times_out_and_answers_none_for_no_such_job(sync_queue: SyncQueue) -> None:
    verdict = sync_queue.enqueue("never done")
    started = time.monotonic()
    assert sync_queue.wait(verdict.id, timeout=0.2) is None
    assert 0.2 <= time.monotonic() - started < 5
    assert sync_queue.wait("JOB00000000000", timeout=30) is None


def _waits(admin: SyncQueue, client_name: str, *, subscribed: bool = True) -> list[int]:
    """The ids of the connections of waits (named ``<client name>-wait``) the server holds now:
    only those subscribed to a channel, unless ``subscribed`` is False."""
    listing = admin._process.router.call(None, pack(("CLIENT", "LIST")))
    lines = [f" {line} " for line in listing.decode().splitlines()]
    mine = [line for line in lines if f" name={client_name}-wait " in line]
    if subscribed:
        mine = [line for line in mine if " ssub=1 " in line]
    return [int(line.split()[0].split("=")[1]) for line in mine]


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)  # the server is asked again: there is no event for a new client


def _next_subscriber(admin: SyncQueue, client_name: str, previous: int | None) -> int:
    """The id of the one wait subscription there is, once it is not ``previous``."""
    _until(lambda: _waits(admin, client_name) not in ([], [previous]), "the wait did not subscribe")
    (subscriber,) = _waits(admin, client_name)
    return subscriber


def test_wait_survives_a_kill_of_its_subscription(valkey_url: str, queue_name: str) -> None:
    with SyncQueue.connect(f"{valkey_url}?name={queue_name}", queue_name) as sq:
        verdict = sq.enqueue("work")
        found: list[Any] = []
        waiter = threading.Thread(target=lambda: found.append(sq.wait(verdict.id, 20)))
        waiter.start()
        first = _next_subscriber(sq, queue_name, None)
        sq._process.router.call(None, pack(("CLIENT", "KILL", "ID", first)))
        _next_subscriber(sq, queue_name, first)
        _complete_later(valkey_url, queue_name, 60.0, "complete")
        waiter.join(20)
    assert len(found) == 1
    assert found[0] is not None
    assert found[0].state == "completed"


def test_a_wait_without_timeout_keeps_one_subscription_while_nothing_happens(
    valkey_url: str, queue_name: str
) -> None:
    url = f"{valkey_url}?name={queue_name}&call_timeout=0.5"
    with SyncQueue.connect(url, queue_name) as sq:
        verdict = sq.enqueue("slow")
        found: list[Any] = []
        waiter = threading.Thread(target=lambda: found.append(sq.wait(verdict.id)))
        waiter.start()
        seen: set[int] = set()
        quiet_until = time.monotonic() + 3  # six call timeouts with nothing on the channel
        while time.monotonic() < quiet_until:
            seen.update(_waits(sq, queue_name, subscribed=False))
            time.sleep(0.05)
        _complete_later(valkey_url, queue_name, 60.0, "complete")
        waiter.join(20)
    assert len(seen) == 1, f"the wait connected {len(seen)} times"
    (info,) = found
    assert info is not None
    assert info.state == "completed"


def test_a_wait_retries_a_refused_reconnect_however_often_it_was_cut_before(
    valkey_url: str, queue_name: str
) -> None:
    relay = Relay(ConnectionOptions.from_url(valkey_url))
    try:
        with SyncQueue.connect(f"{relay.url}?name={queue_name}", queue_name) as sq:
            verdict = sq.enqueue("work")
            found: list[Any] = []

            def wait() -> None:
                try:
                    found.append(sq.wait(verdict.id))
                except Exception as exc:  # surfaced below
                    found.append(exc)

            waiter = threading.Thread(target=wait)
            waiter.start()
            subscriber = None
            for cut in range(5):  # each cut is followed by a subscription the server confirms
                subscriber = _next_subscriber(sq, queue_name, subscriber)
                if cut == 4:
                    relay.refuse_next = 1  # a failover: the first reconnect finds nobody there
                sq._process.router.call(None, pack(("CLIENT", "KILL", "ID", subscriber)))
            _next_subscriber(sq, queue_name, subscriber)
            assert relay.refused == 1
            _complete_later(valkey_url, queue_name, 60.0, "complete")
            waiter.join(20)
    finally:
        relay.close()
    (info,) = found
    assert not isinstance(info, BaseException), repr(info)
    assert info.state == "completed"


def test_a_wait_whose_server_falls_silent_subscribes_again_and_sees_the_job_finish(
    sync_queue: SyncQueue, valkey_url: str, queue_name: str
) -> None:
    relay = Relay(ConnectionOptions.from_url(valkey_url))
    try:
        url = f"{relay.url}?name={queue_name}&call_timeout=0.3"
        with SyncQueue.connect(url, queue_name) as sq:
            verdict = sq.enqueue("work")
            found: list[Any] = []
            waiter = threading.Thread(target=lambda: found.append(sq.wait(verdict.id, 30)))
            waiter.start()
            _next_subscriber(sync_queue, queue_name, None)
            relay.silence()  # its subscription hears nothing more, and nothing says it is lost
            _complete_later(valkey_url, queue_name, 60.0, "complete")  # the message is lost
            waiter.join(10)
            assert not waiter.is_alive(), "the wait never noticed its link fell silent"
            assert relay.accepted == 3  # the queue's link, the silent one, and the wait's next
    finally:
        relay.close()
    (info,) = found
    assert info is not None
    assert info.state == "completed"


def test_a_wildcard_on_the_done_channel_makes_a_wait_read_its_row_again(
    sync_queue: SyncQueue,
) -> None:
    verdict = sync_queue.enqueue("obliterated")
    found: list[Any] = []
    waiter = threading.Thread(target=lambda: found.append(sync_queue.wait(verdict.id, 20)))
    waiter.start()
    call = functools.partial(sync_queue._process.router.call, sync_queue._slot)
    done = sync_queue.keys.done
    _until(lambda: call(pack(("PUBSUB", "SHARDNUMSUB", done)))[1] == 1, "the wait never subscribed")
    assert call(pack(("SPUBLISH", done, "*"))) == 1  # its row is still pending: it waits on
    waiter.join(0.3)
    assert waiter.is_alive()
    call(pack(("DEL", sync_queue.keys.job(verdict.id))))  # as obliterate does, without its id
    assert call(pack(("SPUBLISH", done, "*"))) == 1
    waiter.join(10)
    assert not waiter.is_alive(), "the wait did not read its row again on '*'"
    assert found == [None]


def test_a_refused_connect_raises_connect_error_and_nothing_from_a_finalizer() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # a free port, closed again: nothing listens there
    with pytest.raises(ConnectError):
        SyncQueue.connect(f"valkey://127.0.0.1:{port}/0", "nobody-there")
    gc.collect()  # the half-made links are finalized now, inside this test (warnings are errors)


async def test_rediss_through_a_tls_terminator(
    tls_url: str, queue_name: str, queue: Queue, tmp_path_factory: pytest.TempPathFactory
) -> None:
    ca = next(tmp_path_factory.getbasetemp().glob("tls*/ca.pem"))
    with SyncQueue.connect(f"{tls_url}?ca={ca}", queue_name) as sq:
        assert sq._process.router.seed.tls
        verdicts = [sq.enqueue(i) for i in range(20)] + sq.enqueue_many(range(300))
        assert {v.kind for v in verdicts} == {"enqueued"}
        assert sq.job(verdicts[0].id) is not None
        assert sq.wait(verdicts[0].id, timeout=0.05) is None  # a subscription's read times out
    assert (await queue.counts()).pending == 320


def test_close_gives_the_node_back_and_refuses_after(valkey_url: str, queue_name: str) -> None:
    q = SyncQueue.connect(valkey_url, queue_name)
    q.enqueue("x")
    node = q._process.lease.minter.node
    q.close()
    q.close()  # idempotent
    with pytest.raises(Closed):
        q.enqueue("y")
    with SyncQueue.connect(valkey_url, queue_name) as again:
        holder = again._process.router.call(None, pack(("HGET", "{emq}:nodes", node)))
        assert holder.startswith(b":")  # released: no owner
        asyncio.run(_discard(valkey_url, queue_name))


async def _discard(url: str, name: str) -> None:
    await discard(await Queue.connect(url, name))
