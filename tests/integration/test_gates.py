"""Gates that hold through deploys (issue 24): settings applied again change nothing, a changed
rate grants no fresh budget, the smooth mode keeps every sliding window within its rate, and
lane policies (a default for every lane not named) are read by the claim itself."""

from __future__ import annotations

import asyncio

import pytest

from echomq import App, InvalidArgument, Item, Job, Policy, Queue, Rate
from echomq.engine import Empty, Policies, RateLimited

MODES = ["fixed", "smooth"]
LEASE = 30.0


async def claims(queue: Queue, n: int = 20) -> list[Job]:
    """Claim one at a time until nothing is claimable (at most ``n``)."""
    got: list[Job] = []
    for _ in range(n):
        job = await queue.claim(LEASE)
        if not isinstance(job, Job):
            break
        got.append(job)
    return got


async def fill(queue: Queue, group: str, n: int = 10) -> None:
    await queue.enqueue_many([Item(i, lane=group) for i in range(n)])


# -- idempotent settings ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_setting_a_lane_rate_again_grants_no_fresh_budget(queue: Queue, mode: str) -> None:
    lane = queue.lane("acme")
    assert await lane.rate(3, 60.0, mode=mode)  # type: ignore[arg-type]
    await fill(queue, "acme")
    assert len(await claims(queue)) == 3
    assert not await lane.rate(3, 60.0, mode=mode)  # type: ignore[arg-type]
    assert await claims(queue) == []
    info = await lane.info()
    assert (info.rate, info.rate_mode, info.depth) == ((3, 60.0), mode, 7)
    assert info.rate_wait > 50


@pytest.mark.parametrize("mode", MODES)
async def test_setting_the_queue_rate_again_grants_no_fresh_budget(queue: Queue, mode: str) -> None:
    assert await queue.rate_limit(3, 60.0, mode=mode)  # type: ignore[arg-type]
    await fill(queue, "_")
    assert len(await claims(queue)) == 3
    assert not await queue.rate_limit(3, 60.0, mode=mode)  # type: ignore[arg-type]
    assert isinstance(await queue.claim(LEASE), RateLimited)
    assert await queue.rate_limit_ttl() > 50


async def test_setting_limit_weight_and_concurrency_again_changes_nothing(queue: Queue) -> None:
    loud = queue.lane("loud")
    assert await loud.limit(2)
    assert await loud.weight(3)
    assert await queue.concurrency(50)
    await fill(queue, "loud", 6)
    await fill(queue, "calm", 3)
    first = await queue.claim(LEASE)
    assert isinstance(first, Job)
    assert first.lane == "loud"
    assert not await loud.limit(2)
    assert not await loud.weight(3)
    assert not await queue.concurrency(50)
    # The turn and the in-flight count carried on: one more of loud (its ceiling), then calm.
    assert [j.lane for j in await claims(queue, 3)] == ["loud", "calm", "calm"]
    assert (await loud.info()).active == 2


@pytest.mark.parametrize("mode", MODES)
async def test_a_changed_rate_counts_the_claims_already_made(queue: Queue, mode: str) -> None:
    lane = queue.lane("acme")
    await lane.rate(5, 60.0, mode=mode)  # type: ignore[arg-type]
    await fill(queue, "acme")
    assert len(await claims(queue, 3)) == 3
    assert await lane.rate(3, 60.0, mode=mode)  # type: ignore[arg-type]
    assert await claims(queue) == []  # 3 made, 3 allowed: no fresh window
    await lane.rate(4, 60.0, mode=mode)  # type: ignore[arg-type]
    assert len(await claims(queue)) == 1


@pytest.mark.parametrize(("before", "after"), [("fixed", "smooth"), ("smooth", "fixed")])
async def test_changing_the_rate_mode_grants_no_fresh_budget(
    queue: Queue, before: str, after: str
) -> None:
    lane = queue.lane("acme")
    await lane.rate(3, 60.0, mode=before)  # type: ignore[arg-type]
    await fill(queue, "acme")
    assert len(await claims(queue)) == 3
    assert await lane.rate(3, 60.0, mode=after)  # type: ignore[arg-type]
    assert await claims(queue) == []
    assert (await lane.info()).rate_wait > 50


async def test_removing_and_setting_a_rate_again_grants_no_fresh_budget(queue: Queue) -> None:
    lane = queue.lane("acme")
    await lane.rate(3, 60.0)
    await fill(queue, "acme")
    assert len(await claims(queue)) == 3
    await lane.rate(None)
    await lane.rate(3, 60.0)
    assert await claims(queue) == []


# -- smooth rates -----------------------------------------------------------------------------


async def test_a_smooth_rate_admits_the_next_claim_when_the_oldest_leaves_the_window(
    queue: Queue,
) -> None:
    await queue.rate_limit(2, 0.3)  # smooth by default
    await fill(queue, "_", 4)
    first, second = await claims(queue)
    limited = await queue.claim(LEASE)
    assert isinstance(limited, RateLimited)
    assert 0 < limited.wait <= 0.3
    await queue.rate_limit(2, 0.3, mode="fixed")  # a fixed window carries the same budget on
    assert isinstance(await queue.claim(LEASE), RateLimited)
    assert first.deadline_ms <= second.deadline_ms


@pytest.mark.parametrize(("mode", "admitted"), [("fixed", 2), ("smooth", 1)])
async def test_only_a_fixed_window_admits_a_second_budget_across_its_boundary(
    queue: Queue, mode: str, admitted: int
) -> None:
    """2 per 0.3 s: one claim at t0, one at ~t0 + 0.2 s, then two asked for at ~t0 + 0.35 s.
    A fixed window opened a new budget at t0 + 0.3 s (3 claims in 0.15 s); the sliding log lets
    one more in, as t0 has left the window and t0 + 0.2 s has not."""
    await queue.lane("acme").rate(2, 0.3, mode=mode)  # type: ignore[arg-type]
    await fill(queue, "acme", 5)
    assert len(await claims(queue, 1)) == 1
    await asyncio.sleep(0.2)  # the window's clock is the server's: nothing to wait on
    assert len(await claims(queue, 1)) == 1
    await asyncio.sleep(0.15)
    await queue.promote()  # the benched lane returns when its window (or oldest claim) ends
    batch = await queue.claim_batch(2, LEASE)
    assert isinstance(batch, list)
    assert len(batch) == admitted


async def test_a_smooth_lane_is_benched_until_its_next_slot(queue: Queue) -> None:
    await queue.lane("acme").rate(2, 60.0)
    await fill(queue, "acme", 3)
    await fill(queue, "other", 1)
    assert [j.lane for j in await claims(queue)] == ["acme", "other", "acme"]
    empty = await queue.claim(LEASE)
    assert isinstance(empty, Empty)
    assert empty.retry_in is not None
    assert empty.retry_in > 50
    assert await queue.ring() == []


async def test_a_smooth_claim_batch_is_clamped_to_the_rate(queue: Queue) -> None:
    await queue.lane("acme").rate(3, 60.0)
    await fill(queue, "acme")
    batch = await queue.claim_batch(10, LEASE)
    assert isinstance(batch, list)
    assert len(batch) == 3
    assert isinstance(await queue.claim_batch(10, LEASE), Empty)


async def test_rate_modes_and_bounds_are_checked(queue: Queue) -> None:
    with pytest.raises(InvalidArgument) as caught:
        await queue.lane("a").rate(5, 1.0, mode="sliding")  # type: ignore[arg-type]
    assert caught.value.argument == "mode"
    with pytest.raises(InvalidArgument) as caught:
        await queue.rate_limit(20_000, 1.0)  # a smooth log holds at most 10 000 claims
    assert caught.value.argument == "max"
    assert await queue.rate_limit(20_000, 1.0, mode="fixed")
    with pytest.raises(InvalidArgument):
        Rate(0, 1.0)
    with pytest.raises(InvalidArgument):
        Policy(limit=0)
    with pytest.raises(InvalidArgument):
        Policy(rate=(5,))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        await queue.apply_policies({"": Policy()})  # any text names a lane, but not none


# -- lane policies ----------------------------------------------------------------------------


async def test_lanes_without_settings_follow_the_default_policy_in_the_claim(queue: Queue) -> None:
    changed = await queue.apply_policies(
        default=Policy(rate=(2, 60.0), limit=5), acme=Policy(rate=Rate(1, 60.0, "fixed"))
    )
    assert changed == 3  # the default's rate and limit, acme's rate
    for group in ("acme", "globex", "initech"):
        await fill(queue, group, 4)
    served = [j.lane for j in await claims(queue)]
    assert sorted(served) == ["acme", "globex", "globex", "initech", "initech"]
    lanes = {lane.lane: lane for lane in await queue.lanes()}
    assert (lanes["globex"].rate, lanes["globex"].rate_mode, lanes["globex"].limit) == (
        (2, 60.0),
        "smooth",
        5,
    )
    assert (lanes["acme"].rate, lanes["acme"].rate_mode, lanes["acme"].limit) == (
        (1, 60.0),
        "fixed",
        5,
    )


async def test_applying_the_policies_in_force_again_changes_nothing(queue: Queue) -> None:
    policies = {"billing.eu@acme": Policy(limit=1), "acme": Policy(rate=(2, 60.0))}
    default = Policy(rate=(3, 60.0), weight=2)
    assert await queue.apply_policies(policies, default=default) > 0
    await fill(queue, "acme", 5)
    await fill(queue, "globex", 5)
    assert len(await claims(queue)) == 5  # acme 2, globex 3
    assert await queue.apply_policies(policies, default=default) == 0
    assert await claims(queue) == []
    assert await queue.policies() == Policies(
        default=Policy(rate=Rate(3, 60.0), weight=2),
        lanes={"acme": Policy(rate=Rate(2, 60.0)), "billing.eu@acme": Policy(limit=1)},
    )


async def test_a_lane_no_longer_named_follows_the_default_again(queue: Queue) -> None:
    await queue.apply_policies(default=Policy(limit=3), acme=Policy(limit=1))
    assert (await queue.lane("acme").info()).limit == 1
    await queue.apply_policies(default=Policy(limit=3))
    assert (await queue.lane("acme").info()).limit == 3
    assert (await queue.policies()).lanes == {}


async def test_a_default_limit_takes_lanes_with_work_off_the_ring(queue: Queue) -> None:
    await fill(queue, "acme", 3)
    assert len(await claims(queue, 1)) == 1
    await queue.apply_policies(default=Policy(limit=1))
    assert await queue.ring() == []
    assert await claims(queue) == []


async def test_an_app_applies_its_lane_policies_when_it_connects(
    valkey_url: str, queue_name: str, queue: Queue
) -> None:
    app = App(valkey_url, queue=queue_name)
    app.lanes({"queue": Policy(limit=1)}, default=Policy(rate=(4, 60.0)), acme=Policy(weight=2))
    async with app:
        assert (await queue.policies()).default == Policy(rate=(4, 60.0))
    assert set((await queue.policies()).lanes) == {"queue", "acme"}
    with pytest.raises(InvalidArgument):
        app.lanes(default=Policy(), **{"x" * 2000: Policy()})  # past the name bound


async def test_a_blocking_producer_applies_the_app_lane_policies(
    valkey_url: str, queue_name: str, queue: Queue
) -> None:
    app = App(valkey_url, queue=queue_name)
    app.lanes(acme=Policy(limit=2))

    @app.task(lane="tenant")
    async def work(tenant: str) -> None: ...

    try:
        await asyncio.to_thread(work.enqueue_sync, "acme")
        assert (await queue.lane("acme").info()).limit == 2
    finally:
        await app.close()


async def test_the_policies_of_the_gates_page(queue: Queue) -> None:
    # --8<-- [start:policies]
    policies = {"billing.eu@acme": Policy(limit=1)}  # any lane name, in a mapping
    await queue.apply_policies(
        policies,
        default=Policy(rate=(10, 1.0)),  # every tenant not named: at most 10 claims a second
        acme=Policy(rate=(5, 1.0), limit=2),  # acme: 5 a second (smooth), 2 at once
        globex=Policy(weight=3),  # globex: 3 claims per ring visit, and the default rate
        legacy=Policy(rate=Rate(100, 60.0, mode="fixed")),  # a fixed window, 100 a minute
    )
    # What every process of a deploy does at start: the policies in force, applied again.
    again = await queue.apply_policies(
        policies,
        default=Policy(rate=(10, 1.0)),
        acme=Policy(rate=(5, 1.0), limit=2),
        globex=Policy(weight=3),
        legacy=Policy(rate=Rate(100, 60.0, mode="fixed")),
    )
    assert again == 0  # nothing changed: no window restarted, no fresh budget
    await queue.enqueue("hello", lane="initech")  # a tenant no policy names
    (initech,) = await queue.lanes(["initech"])
    assert (initech.rate, initech.rate_mode) == (
        (10, 1.0),
        "smooth",
    )  # the default, read by the claim
    # --8<-- [end:policies]
    assert set((await queue.policies()).lanes) == {"billing.eu@acme", "acme", "globex", "legacy"}


async def test_a_large_fixed_window_converts_to_a_smooth_log(queue: Queue) -> None:
    """10 000 claims' worth of a fixed window become 10 000 log entries (in chunks)."""
    lane = queue.lane("big")
    await lane.rate(10_000, 60.0, mode="fixed")
    await queue.wire.call("SET", queue.keys.lane_limiter("big"), 10_000, "PX", 60_000)
    await fill(queue, "big", 2)
    assert await lane.rate(10_000, 60.0)
    assert await claims(queue) == []
    assert await queue.wire.call("LLEN", queue.keys.lane_claims("big")) == 10_000
