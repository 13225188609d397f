"""Flows on the engine (docs/guides/flows.md): a parent waits for its children, receives their
results, and follows each child's failure policy; grandchildren; children on other queues
through the outbox; each child counted once however often it completes or is delivered."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from echomq import InvalidArgument, Job, Queue
from echomq.engine import Children, Empty, Flow
from echomq.engine.flows import plan
from echomq.errors import StaleTokenError
from echomq.testing import discard


async def _claim(queue: Queue, lease: float = 30.0) -> Job:
    job = await queue.claim(lease=lease)
    assert isinstance(job, Job), job
    return job


async def _deps(queue: Queue, id: str) -> int | None:
    left = await queue.wire.call("HGET", queue.keys.job(id), "deps")
    return None if left is None else int(left)


async def _fail(queue: Queue, job: Job, error: str = "boom") -> None:
    assert await queue.retry(job, delay=0, max_attempts=1, error=error) == "dead"


@pytest.fixture
async def other(valkey_url: str, queue_name: str) -> AsyncIterator[Queue]:
    """A second queue (on a cluster, most likely another slot)."""
    q = await Queue.connect(valkey_url, queue_name + "-b")
    yield q
    await discard(q)


async def test_a_parent_waits_for_every_child_then_gets_their_results(queue: Queue) -> None:
    ids = await queue.add_flow(
        Flow("parent", [Flow(f"child {n}") for n in range(3)], lane="reports")
    )
    assert ids.kind == "enqueued"
    assert len(ids.ids) == 4
    parent, kids = ids.id, [c.id for c in ids.children]
    assert await queue.state(parent) == "waiting"
    assert await queue.state(kids[0]) == "pending"
    counts = await queue.counts()
    assert (counts.pending, counts.waiting) == (3, 1)
    claimed = [await _claim(queue) for _ in kids]
    assert sorted(j.id for j in claimed) == sorted(kids)
    assert isinstance(await queue.claim(), Empty)  # the parent is in no lane
    for job in claimed[:2]:
        await queue.complete(job, result={"n": job.payload})
    assert (await queue.state(parent), await _deps(queue, parent)) == ("waiting", 1)
    await queue.complete(claimed[2], result={"n": claimed[2].payload})
    assert await queue.state(parent) == "pending"
    job = await _claim(queue)
    assert (job.id, job.payload, job.lane) == (parent, "parent", "reports")
    children = await queue.children(parent)
    assert children.ids == tuple(kids)
    assert children.ordered() == [{"n": f"child {n}"} for n in range(3)]
    assert children.failed == {}
    assert await queue.complete(job)
    assert await queue.children(parent) == Children()  # gone with the row


async def test_a_dead_child_fails_its_parent_by_default(queue: Queue) -> None:
    ids = await queue.add_flow(Flow("parent", [Flow("a"), Flow("b")]))
    a, b = await _claim(queue), await _claim(queue)
    await _fail(queue, a, "ValueError: bad a")
    info = await queue.job(ids.id)
    assert info is not None
    assert info.state == "dead"
    assert info.last_error == f"child {a.id} failed: ValueError: bad a"
    assert {d.id for d in await queue.dead()} == {a.id, ids.id}
    await queue.complete(b, result=1)  # the sibling still completes; the parent stays dead
    assert await queue.state(ids.id) == "dead"
    assert isinstance(await queue.claim(), Empty)


async def test_an_ignored_child_is_recorded_and_the_parent_runs(queue: Queue) -> None:
    ids = await queue.add_flow(
        Flow("parent", [Flow("a", on_failure="ignore"), Flow("b", on_failure="ignore")])
    )
    a, b = await _claim(queue), await _claim(queue)
    await _fail(queue, a, "TimeoutError: slow")
    assert await queue.state(ids.id) == "waiting"
    await queue.complete(b, result="fine")
    assert (await _claim(queue)).id == ids.id
    children = await queue.children(ids.id)
    assert children.failed == {a.id: "TimeoutError: slow"}
    assert children.results == {b.id: "fine"}
    assert children.ordered() == [None, "fine"]


async def test_a_grandchild_completes_up_to_the_root(queue: Queue) -> None:
    ids = await queue.add_flow(Flow("root", [Flow("mid", [Flow("leaf")])]))
    mid, leaf = ids.children[0].id, ids.children[0].children[0].id
    assert await queue.state(mid) == "waiting"
    job = await _claim(queue)
    assert job.id == leaf
    await queue.complete(job, result="leaf result")
    job = await _claim(queue)
    assert job.id == mid
    assert (await queue.children(mid)).results == {leaf: "leaf result"}
    await queue.complete(job, result="mid result")
    assert (await _claim(queue)).id == ids.id
    assert (await queue.children(ids.id)).ordered() == ["mid result"]


@pytest.mark.parametrize("mid_policy", ["fail_parent", "ignore"])
async def test_a_grandchild_failure_reaches_the_root_by_its_parents_policy(
    queue: Queue, mid_policy: str
) -> None:
    ids = await queue.add_flow(
        Flow("root", [Flow("mid", [Flow("leaf")], on_failure=mid_policy)])  # type: ignore[arg-type]
    )
    mid, leaf = ids.children[0].id, ids.children[0].children[0].id
    await _fail(queue, await _claim(queue), "boom")
    mid_info = await queue.job(mid)
    assert mid_info is not None
    assert mid_info.state == "dead"
    assert mid_info.last_error == f"child {leaf} failed: boom"
    if mid_policy == "fail_parent":
        root = await queue.job(ids.id)
        assert root is not None
        assert root.state == "dead"
        assert root.last_error == f"child {mid} failed: child {leaf} failed: boom"
    else:
        assert (await _claim(queue)).id == ids.id
        assert (await queue.children(ids.id)).failed == {mid: f"child {leaf} failed: boom"}


async def test_a_child_reaped_and_rerun_counts_once(queue: Queue) -> None:
    ids = await queue.add_flow(Flow("parent", [Flow("a"), Flow("b")]))
    first = await _claim(queue, lease=0.001)
    while not (await queue.reap()).recovered:  # the lease ends on the server's clock
        await asyncio.sleep(0.002)
    again = await _claim(queue)
    assert again.id == first.id
    assert again.attempts == 2
    with pytest.raises(StaleTokenError):
        await queue.complete(first, result="first run")  # the reaped holder, too late
    assert await queue.complete(again, result="second run")
    assert not await queue.complete(first, result="first run")  # gone with its row
    assert await _deps(queue, ids.id) == 1
    assert await queue.state(ids.id) == "waiting"
    assert (await queue.children(ids.id)).results == {first.id: "second run"}


async def test_a_child_completing_after_its_death_was_counted_counts_once(queue: Queue) -> None:
    ids = await queue.add_flow(
        Flow("parent", [Flow("a", on_failure="ignore"), Flow("b"), Flow("c")])
    )
    a = await _claim(queue)
    await _fail(queue, a)
    assert await _deps(queue, ids.id) == 2
    assert await queue.reprocess(a.id)  # dead, back in its lane: it runs and completes again
    rerun = await _claim(queue)
    assert rerun.id == a.id
    assert await queue.complete(rerun, result="late")
    assert await _deps(queue, ids.id) == 2  # the guard: a was counted at its death
    for _ in range(2):
        await queue.complete(await _claim(queue))
    assert (await _claim(queue)).id == ids.id


async def test_admitting_a_flow_again_is_a_duplicate(queue: Queue) -> None:
    flow = Flow("p", [Flow("a", id="JOB00000000001"), Flow("b")], id="JOB00000000000")
    first = await queue.add_flow(flow)
    again = await queue.add_flow(Flow("p", [Flow("a", id="JOB00000000001")], id="JOB00000000000"))
    assert (first.kind, again.kind) == ("enqueued", "duplicate")
    assert (await queue.counts()).pending == 2
    assert await _deps(queue, first.id) == 2


@pytest.mark.parametrize(
    ("flow", "argument"),
    [
        (Flow("p", [Flow(n) for n in range(1001)]), "children"),
        (Flow("p", [Flow("a", on_failure="retry")]), "on_failure"),  # type: ignore[arg-type]
        (Flow("p", [Flow("a", lane="")]), "lane"),
        (Flow("p", [Flow("a", id="JOB00000000001"), Flow("b", id="JOB00000000001")]), "id"),
        (Flow("p", [Flow({1, 2})]), "payload"),
        (Flow("p", [Flow("a", queue="bad name")]), "queue name"),
        (Flow("p", ["a"]), "children"),  # type: ignore[list-item]
    ],
)
async def test_a_bad_flow_is_refused_before_any_write(
    queue: Queue, flow: Flow, argument: str
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        await queue.add_flow(flow)
    assert refused.value.argument == argument
    assert await queue.wire.call("KEYS", queue.keys.root + "*") == []


async def test_a_deep_flow_is_refused(queue: Queue) -> None:
    flow = Flow("leaf")
    for _ in range(33):
        flow = Flow("up", [flow])
    with pytest.raises(InvalidArgument, match="32 deep"):
        await queue.add_flow(flow)


async def test_removing_a_waiting_parent_deletes_its_keys(queue: Queue) -> None:
    ids = await queue.add_flow(Flow("parent", [Flow("a"), Flow("b")]))
    await queue.complete(await _claim(queue), result="r")
    assert await queue.remove(ids.id)
    assert await queue.state(ids.id) == "absent"
    assert await queue.complete(await _claim(queue))  # its orphan completes, telling no one
    assert await queue.wire.call("KEYS", queue.keys.root + "flow:*") == []
    assert await queue.wire.call("ZCARD", queue.keys.waiting) == 0


async def test_a_child_on_another_queue_is_relayed_through_its_outbox(
    queue: Queue, other: Queue
) -> None:
    ids = await queue.add_flow(Flow("parent", [Flow("local"), Flow("remote", queue=other.name)]))
    remote = await _claim(other)
    assert not other.relay_due
    await other.complete(remote, result={"from": other.name})
    assert other.relay_due  # a consumer runs its upkeep now, however busy it is
    assert await other.wire.call("LLEN", other.keys.outbox) == 1
    assert await _deps(queue, ids.id) == 2  # not yet: the relay delivers it
    await other.upkeep()
    assert not other.relay_due
    assert await other.wire.call("LLEN", other.keys.outbox) == 0
    assert await _deps(queue, ids.id) == 1
    await queue.complete(await _claim(queue), result="here")
    assert (await _claim(queue)).id == ids.id
    assert (await queue.children(ids.id)).ordered() == ["here", {"from": other.name}]


async def test_a_delivery_repeated_after_a_crash_counts_once(queue: Queue, other: Queue) -> None:
    ids = await queue.add_flow(
        Flow("parent", [Flow("r1", queue=other.name), Flow("r2", queue=other.name)])
    )
    await other.complete(await _claim(other), result=1)
    entries = await other.wire.call("LRANGE", other.keys.outbox, 0, -1)
    assert len(await other._deliver(entries)) == 1  # delivered; the relay dies before removing
    assert await _deps(queue, ids.id) == 1
    assert await other.relay() == 1  # the next relay delivers it again, and removes it
    assert await _deps(queue, ids.id) == 1
    assert await queue.state(ids.id) == "waiting"
    await other.complete(await _claim(other), result=2)
    await other.relay()
    assert await queue.state(ids.id) == "pending"


async def test_a_failed_remote_child_fails_its_parent_through_the_outbox(
    queue: Queue, other: Queue
) -> None:
    ids = await queue.add_flow(Flow("parent", [Flow("remote", queue=other.name)]))
    remote = await _claim(other)
    await _fail(other, remote, "remote boom")
    await other.relay()
    info = await queue.job(ids.id)
    assert info is not None
    assert info.state == "dead"
    assert info.last_error == f"child {remote.id} failed: remote boom"


async def test_obliterate_leaves_no_flow_key_behind(queue: Queue, other: Queue) -> None:
    await queue.add_flow(Flow("p", [Flow("a"), Flow("b", [Flow("c")])]))
    await other.add_flow(Flow("q", [Flow("far", queue=queue.name)]))
    jobs = {job.payload: job for job in [await _claim(queue) for _ in range(3)]}
    assert set(jobs) == {"a", "c", "far"}
    await queue.complete(jobs["a"], result="x")  # a result on a waiting parent
    await queue.complete(jobs["far"], result="y")  # an outbox entry for the other queue
    assert await queue.wire.call("LLEN", queue.keys.outbox) == 1
    await queue.pause()
    await queue.obliterate(force=True)
    assert await queue.wire.call("KEYS", queue.keys.root + "*") == []


async def test_draining_the_queue_takes_its_waiting_parents(queue: Queue) -> None:
    ids = await queue.add_flow(Flow("p", [Flow("a"), Flow("b", [Flow("c")])]))
    await queue.complete(await _claim(queue), result="x")
    assert await queue.drain() == 3  # the leaf left, and the two waiting parents
    for id in ids.ids:
        assert await queue.state(id) == "absent"
    assert await queue.wire.call("KEYS", queue.keys.root + "flow:*") == []


async def test_admitting_a_flow_announces_its_parents_and_leaves(queue: Queue) -> None:
    async with queue.subscribe() as events:
        ids = await queue.add_flow(Flow("p", [Flow("a"), Flow("b", [Flow("c")])]))
        seen = [await asyncio.wait_for(events.get(), 5) for _ in range(4)]
    waiting = {ids.id, ids.children[1].id}
    assert {(e["event"], e["job"]) for e in seen} == {
        *(("waiting", id) for id in waiting),
        *(("enqueued", id) for id in set(ids.ids) - waiting),
    }


async def test_a_cancelled_child_is_a_failed_child_and_a_waiting_parent_can_be_cancelled(
    queue: Queue,
) -> None:
    failing = await queue.add_flow(Flow("parent", [Flow("a"), Flow("b")]))
    a = failing.children[0].id
    assert (await queue.cancel(a, reason="not needed")).outcome == "cancelled"
    info = await queue.job(failing.id)
    assert info is not None
    assert (info.state, info.last_error) == ("dead", f"child {a} failed: cancelled: not needed")
    ignoring = await queue.add_flow(
        Flow("parent", [Flow("c", on_failure="ignore"), Flow("d", on_failure="ignore")])
    )
    c, d = (child.id for child in ignoring.children)
    await queue.cancel(c)
    assert (await queue.state(ignoring.id), await _deps(queue, ignoring.id)) == ("waiting", 1)
    assert (await queue.children(ignoring.id)).failed == {c: "cancelled: "}
    assert (await queue.cancel(ignoring.id)).outcome == "cancelled"  # waiting: cancelled now
    assert await queue.state(ignoring.id) in ("cancelled", "absent")
    assert (await queue.cancel(d)).outcome == "cancelled"  # its news reaches no one
    assert (await queue.counts()).waiting == 0


@pytest.mark.parametrize("ending", ["removed", "cancelled", "drained"])
async def test_an_entry_for_a_parent_that_is_gone_is_dropped_at_the_first_relay(
    queue: Queue, other: Queue, ending: str
) -> None:
    ids = await queue.add_flow(Flow("parent", [Flow("remote", queue=other.name)]))
    if ending == "removed":
        assert await queue.remove(ids.id)
    elif ending == "cancelled":  # on a queue that keeps no results: its row goes at once
        assert (await queue.cancel(ids.id)).outcome == "cancelled"
    else:
        assert await queue.drain() == 1
    assert await queue.state(ids.id) == "absent"
    await other.complete(await _claim(other), result=1)
    assert await other.relay() == 1  # done with at once, not kept 60 s for a parent to come
    assert await other.wire.call("LLEN", other.keys.outbox) == 0
    assert not await other.has_work()


async def test_an_entry_whose_parent_is_still_being_admitted_is_kept_until_it_is(
    queue: Queue, other: Queue
) -> None:
    # A -> B -> A: the root's queue (A) is written first, so the grandchild on A exists before
    # its parent on B; its entry must wait for that parent instead of being dropped.
    leaf = Flow("leaf", queue=queue.name)
    flow = Flow("root", [Flow("middle", [leaf], queue=other.name)])
    await queue.minter.ready()
    laid = plan(flow, queue.name, queue.codec, lambda: queue.minter.mint("JOB"))
    assert list(laid.writes) == [queue.name, other.name]
    await queue._expect_parents(laid)
    assert (await queue.engine.flow([n.args() for n in laid.writes[queue.name]]))[0]
    await queue.complete(await _claim(queue), result="leaf")
    assert await queue.relay() == 0  # kept: its parent's queue is not written yet
    assert await queue.has_work()
    assert (await other.engine.flow([n.args() for n in laid.writes[other.name]]))[0]
    assert await queue.relay() == 1
    middle = laid.ids.children[0].id
    assert await other.state(middle) == "pending"
    assert (await other.children(middle)).ordered() == ["leaf"]
    assert await other.wire.call("KEYS", other.keys.root + "flow:*:expected") == []
