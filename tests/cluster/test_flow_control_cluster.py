"""Issue 26's flow control on a real Valkey Cluster: priority bands, budgets in units, cooling
and fairness by work run unchanged there, and every key they write sits on the queue's slot."""

from __future__ import annotations

from collections.abc import Callable

from echomq.engine.keys import slot
from echomq.engine.options import JobOptions
from echomq.engine.queue import Queue
from echomq.engine.results import Job, RateLimited
from echomq.testing import discard
from echomq.wire.cluster import ClusterRouter


async def test_bands_costs_cooling_and_fairness_by_work_on_one_slot(
    router: ClusterRouter, spread: Callable[[ClusterRouter, int, str], list[str]]
) -> None:
    [name] = spread(router, 1, "flow")
    queue = Queue(name, router)
    try:
        # A high band is served first; the cooled lane waits; by cost, turns in units.
        await queue.fairness("cost")
        for lane, cost in (("heavy", 5), ("light", 1)):
            await queue.admit_many(
                [(f"{lane}{i}", JobOptions(lane=lane, cost=cost)) for i in range(4)]
            )
        await queue.admit("urgent", JobOptions(lane="vip", priority=9))
        await queue.admit("later", JobOptions(lane="cold"))
        assert await queue.lane("cold").cool(60.0)
        jobs = await queue.claim_batch(8, 30.0)
        assert isinstance(jobs, list)
        # heavy's visit: one cost-5 job (the quantum is the dearest cost, 5); light's: five
        # units, its four jobs; then heavy alone fills the batch.
        assert [j.lane for j in jobs] == ["vip", "heavy"] + ["light"] * 4 + ["heavy"] * 2
        assert "cold" not in {j.lane for j in jobs}
        for job in jobs:
            assert await queue.complete(job.id, job.attempts)

        # A cost-5 job spends a 10-unit rate in two claims: the third waits for the window.
        await queue.fairness("count")
        await queue.lane("heavy").rate(10, 60.0, mode="fixed")
        await queue.admit("heavy-more", JobOptions(lane="heavy", cost=5))
        first = await queue.claim(30.0)
        second = await queue.claim(30.0)
        assert isinstance(first, Job)
        assert isinstance(second, Job)
        assert {first.lane, second.lane} == {"heavy"}
        third = await queue.claim(30.0)
        assert not isinstance(third, Job) or third.lane != "heavy", third
        assert not isinstance(third, RateLimited)  # a lane's budget benches the lane alone

        owner = router.owner(slot(queue.keys.root)).address
        for address, node in router.nodes.items():
            held = await node.call("CLUSTER", "COUNTKEYSINSLOT", slot(queue.keys.root))
            assert (held > 0) == (address == owner), address
        assert await router.call("EXISTS", queue.keys.cooling) == 1
    finally:
        await discard(queue)
