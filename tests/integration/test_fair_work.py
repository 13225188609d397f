"""Fairness by work (issue 26 part 3): deficit round robin on the ring, a lane's turn measured
in units (``fairness("cost")``) or in measured run time (``fairness("time")``) instead of
claims; weights scale the quantum; an emptied lane forgets its credit; bad settings are refused
by name before anything is written."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from echomq import InvalidArgument, Queue
from echomq.engine.options import JobOptions
from echomq.engine.results import Job
from echomq.engine.transitions import Success


async def flood(queue: Queue, lane: str, n: int, cost: int = 1) -> None:
    await queue.admit_many([(f"{lane}{i}", JobOptions(lane=lane, cost=cost)) for i in range(n)])


async def units_served(queue: Queue, claims: int, costs: dict[str, int]) -> Counter[str]:
    """Units per lane over ``claims`` single claims (each completed at once)."""
    served: Counter[str] = Counter()
    for _ in range(claims):
        job = await queue.claim(30.0)
        assert isinstance(job, Job), job
        served[job.lane] += costs[job.lane]
        assert await queue.complete(job.id, job.attempts)
    return served


async def test_by_cost_serves_equal_units_where_by_count_serves_equal_claims(
    queue: Queue,
) -> None:
    costs = {"heavy": 10, "light": 1}
    await flood(queue, "heavy", 40, cost=10)
    await flood(queue, "light", 400)
    by_count = await units_served(queue, 40, costs)
    assert by_count == {"heavy": 200, "light": 20}  # equal claims: 10x the units to heavy

    # --8<-- [start:modes]
    assert await queue.fairness("cost") is True  # turns in units: each job's `cost`
    assert await queue.fairness("cost") is False  # in force already: nothing written
    # --8<-- [end:modes]
    by_cost = await units_served(queue, 220, costs)
    # The default quantum is the dearest cost admitted (10): a visit is one heavy job or ten
    # light ones, so over whole rounds each lane gets the same units.
    assert abs(by_cost["heavy"] - by_cost["light"]) <= 10, by_cost


async def test_by_cost_weights_scale_each_visit(queue: Queue) -> None:
    await queue.fairness("cost", quantum=4)
    await queue.lane("big").weight(3)
    await flood(queue, "big", 200, cost=2)
    await flood(queue, "small", 200, cost=2)
    served = await units_served(queue, 160, {"big": 2, "small": 2})
    assert served["big"] + served["small"] == 320
    assert 2.7 <= served["big"] / served["small"] <= 3.3, served


async def test_a_batch_claim_takes_each_lanes_credit_in_turn(queue: Queue) -> None:
    await queue.fairness("cost")
    await flood(queue, "heavy", 5, cost=5)
    await flood(queue, "light", 50)
    jobs = await queue.claim_batch(12, 30.0)
    assert isinstance(jobs, list)
    # heavy's visit: 5 units (one job); light's: 5 units (five jobs); heavy again, light again.
    assert [j.lane for j in jobs] == ["heavy"] + ["light"] * 5 + ["heavy"] + ["light"] * 5


async def test_a_lane_with_debt_waits_dry_visits_while_others_serve(queue: Queue) -> None:
    await queue.fairness("cost", quantum=1)
    await flood(queue, "heavy", 3, cost=4)
    await flood(queue, "light", 20)
    lanes = [j.lane for j in await queue.claim_batch(10, 30.0)]  # type: ignore[union-attr]
    # heavy overdraws by 3 and needs three grants of 1 to be served again; light takes one a
    # visit meanwhile.
    assert lanes == ["heavy", "light", "light", "light", "light", "heavy"] + ["light"] * 4


async def test_an_emptied_lane_forgets_its_credit(queue: Queue) -> None:
    await queue.fairness("cost")
    await flood(queue, "a", 2, cost=3)
    await flood(queue, "b", 2)
    await queue.claim_batch(3, 30.0)
    assert await queue.wire.call("HEXISTS", queue.keys.gdeficit, "a") == 1
    await queue.claim_batch(10, 30.0)  # both lanes empty
    assert await queue.wire.call("HLEN", queue.keys.gdeficit) == 0


async def test_by_time_gives_lanes_the_same_lease_time(queue: Queue) -> None:
    """A lane whose jobs hold their lease 8x as long gets about the same lease time in all,
    not 8x: each lease's time is measured on the server clock and charged to its lane."""
    await queue.fairness("time", quantum=0.02)
    hold = {"slow": 0.04, "fast": 0.005}
    await flood(queue, "slow", 200)
    await flood(queue, "fast", 2000)
    held: Counter[str] = Counter()
    claims: Counter[str] = Counter()
    loop = asyncio.get_running_loop()
    until = loop.time() + 2.0
    while loop.time() < until:
        job = await queue.claim(30.0)
        assert isinstance(job, Job), job
        started = loop.time()
        await asyncio.sleep(hold[job.lane])  # the job's work: holding its lease this long
        assert await queue.complete(job.id, job.attempts)
        held[job.lane] += loop.time() - started
        claims[job.lane] += 1
    # By count the slow lane would hold ~8x the fast one's time; by time about the same.
    assert claims["fast"] > 3 * claims["slow"], claims
    assert 0.6 <= held["slow"] / held["fast"] <= 1.6, (held, claims)
    runs = await queue.wire.call("HGETALL", queue.keys.grun)
    assert runs, "the lanes' run times were learned"


async def test_fairness_refuses_bad_settings_by_name_before_writing(queue: Queue) -> None:
    before = await queue.wire.call("HGETALL", queue.keys.meta)
    cases: list[tuple[str, float | None, str]] = [
        ("weighted", None, "by"),
        ("count", 3, "quantum"),
        ("cost", 1.5, "quantum"),
        ("cost", 0, "quantum"),
        ("cost", 10**7, "quantum"),
        ("time", 0, "quantum"),
        ("time", -1.0, "quantum"),
        ("time", 7200.0, "quantum"),
    ]
    for by, quantum, argument in cases:
        with pytest.raises(InvalidArgument) as refused:
            await queue.fairness(by, quantum=quantum)  # type: ignore[arg-type]
        assert refused.value.argument == argument, (by, quantum)
    assert await queue.wire.call("HGETALL", queue.keys.meta) == before


async def test_back_to_count_clears_the_credits(queue: Queue) -> None:
    await queue.fairness("cost", quantum=2)
    await flood(queue, "a", 5)
    await flood(queue, "b", 5)
    await queue.claim_batch(3, 30.0)
    assert await queue.wire.call("HLEN", queue.keys.gdeficit) > 0
    assert await queue.fairness() is True
    assert await queue.wire.call("HLEN", queue.keys.gdeficit) == 0
    meta = await queue.wire.call("HGETALL", queue.keys.meta)
    assert b"fair" not in meta
    assert b"quantum" not in meta


async def test_by_time_a_settle_charges_the_handlers_time_when_the_consumer_measured_it(
    queue: Queue,
) -> None:
    """A complete that carries the handler's run time (``Success.ran_ms``: the consumer's
    measure) charges that; one that does not charges the time the lease was held."""
    await queue.fairness("time", quantum=1.0)
    await flood(queue, "told", 3)
    await flood(queue, "untold", 3)
    told, untold = await queue.claim(30.0), await queue.claim(30.0)
    assert isinstance(told, Job)
    assert isinstance(untold, Job)
    assert {told.lane, untold.lane} == {"told", "untold"}
    await asyncio.sleep(0.08)  # both leases are held 80 ms; told's handler ran 7 of them
    by_lane = {told.lane: told, untold.lane: untold}
    told, untold = by_lane["told"], by_lane["untold"]
    codes = await queue.engine.complete([Success(told.id, told.attempts, b"", ran_ms=7)])
    assert codes == [1]
    assert await queue.complete(untold.id, untold.attempts)
    runs = {
        k.decode(): int(v) for k, v in (await queue.wire.call("HGETALL", queue.keys.grun)).items()
    }
    assert runs["told"] == 7
    assert runs["untold"] >= 80
