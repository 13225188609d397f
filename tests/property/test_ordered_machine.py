"""Ordered lanes held against a small pure model: a Hypothesis state machine on a real Valkey.

Two consumers (two connections) claim from one ordered queue while jobs are admitted to a few
lanes, completed, retried (at once, later, or to death), deferred and reaped. After every step:
each lane has at most one job leased, its holder is the one the model expects, a claim leases
the holder or the oldest job of a lane nothing holds, an empty claim means no lane could serve,
and each lane's jobs finished (completed or dead) in admission order.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from echomq.engine.queue import Queue
from echomq.engine.results import Job
from echomq.testing import server_ms, wait_for_server_ms

T = TypeVar("T")
GROUPS = ("a", "b", "c")
SHORT_LEASE = 0.001  # expired before every reap
LONG_LEASE = 60.0
picks = st.integers(min_value=0, max_value=1 << 16)


@dataclass
class Lane:
    """The model of one ordered lane: its unfinished jobs in admission order, and its holder."""

    waiting: list[str] = field(default_factory=list)
    holder: str | None = None


@dataclass
class Held:
    """A job the model knows to be out of its lane: leased (with a lease) or scheduled."""

    lane: str
    lease: Job | None = None
    is_short: bool = False
    run_at_ms: int = 0  # scheduled: due once the server clock is past it


@settings(max_examples=40, stateful_step_count=30, deadline=None)
class OrderedMachine(RuleBasedStateMachine):
    def __init__(self, url: str, name: str) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.consumers = [
            self._run(Queue.connect(url, name, events=False)),
            self._run(Queue.connect(url, name, events=False)),
        ]
        self.queue = self.consumers[0]
        self._run(self.queue.ordered(True))
        self.lanes = {g: Lane() for g in GROUPS}
        self.out: dict[str, Held] = {}  # leased or scheduled jobs
        self.attempts: dict[str, int] = {}
        self.payloads = itertools.count()

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    def teardown(self) -> None:
        try:
            self._run(self.queue.pause())
            self._run(self.queue.obliterate(force=True))
        finally:
            for queue in self.consumers:
                self._run(queue.close())
            self.loop.close()

    # -- the model's view ---------------------------------------------------------------------

    def _next_of(self, g: str) -> str | None:
        """The job lane g would serve now, or None (empty, or held by a job out of the lane)."""
        lane = self.lanes[g]
        if lane.holder is not None:
            return None if lane.holder in self.out else lane.holder
        return lane.waiting[0] if lane.waiting else None

    def _leased(self) -> list[str]:
        return sorted(i for i, held in self.out.items() if held.lease is not None)

    def _finish(self, id: str) -> None:
        g = self.out.pop(id).lane
        lane = self.lanes[g]
        # Finished in admission order: the lane's holder is always its oldest unfinished job.
        assert lane.holder == id == lane.waiting[0], f"{id} finished before {lane.waiting[0]}"
        lane.holder = None
        lane.waiting.pop(0)

    # -- rules ----------------------------------------------------------------------------------

    @rule(g=st.sampled_from(GROUPS))
    def enqueue(self, g: str) -> None:
        verdict = self._run(self.queue.enqueue(next(self.payloads), lane=g))
        self.lanes[g].waiting.append(verdict.id)
        self.attempts[verdict.id] = 0

    @rule(who=st.sampled_from([0, 1]), is_short=st.booleans())
    def claim(self, who: int, is_short: bool) -> None:
        lease = SHORT_LEASE if is_short else LONG_LEASE
        job = self._run(self.consumers[who].claim(lease))
        heads = {g: self._next_of(g) for g in GROUPS}
        if not isinstance(job, Job):
            assert set(heads.values()) == {None}, f"empty claim while {heads} could serve"
            return
        assert heads[job.lane] == job.id, f"leased {job.id}, lane {job.lane} serves {heads}"
        self.attempts[job.id] += 1
        assert job.attempts == self.attempts[job.id]
        self.lanes[job.lane].holder = job.id
        self.out[job.id] = Held(job.lane, job, is_short)

    @precondition(lambda self: self._leased())
    @rule(pick=picks, who=st.sampled_from([0, 1]))
    def complete(self, pick: int, who: int) -> None:
        id = self._leased()[pick % len(self._leased())]
        job = self.out[id].lease
        assert job is not None
        assert self._run(self.consumers[who].complete(job))
        self._finish(id)

    @precondition(lambda self: self._leased())
    @rule(pick=picks, delay_ms=st.sampled_from([0, 2, 5]), is_death=st.booleans())
    def retry(self, pick: int, delay_ms: int, is_death: bool) -> None:
        id = self._leased()[pick % len(self._leased())]
        held = self.out[id]
        assert held.lease is not None
        outcome = self._run(
            self.queue.retry(
                held.lease, delay=delay_ms / 1000, max_attempts=1 if is_death else 1000, error="e"
            )
        )
        after = self._run(server_ms(self.queue))
        if is_death:
            assert outcome == "dead"
            self._finish(id)
        elif delay_ms == 0:
            assert outcome == "scheduled"
            del self.out[id]  # back in its lane, still its holder
        else:
            self.out[id] = Held(held.lane, run_at_ms=after + delay_ms)

    @precondition(lambda self: self._leased())
    @rule(pick=picks, delay_ms=st.sampled_from([2, 5]))
    def defer(self, pick: int, delay_ms: int) -> None:
        id = self._leased()[pick % len(self._leased())]
        held = self.out[id]
        assert held.lease is not None
        assert self._run(self.queue.delay(held.lease, delay=delay_ms / 1000))
        self.out[id] = Held(held.lane, run_at_ms=self._run(server_ms(self.queue)) + delay_ms)

    @rule()
    def promote(self) -> None:
        due = [i for i, held in self.out.items() if held.lease is None]
        if due:
            self._run(wait_for_server_ms(self.queue, max(self.out[i].run_at_ms for i in due)))
        assert self._run(self.queue.promote()) == len(due)
        for id in due:
            del self.out[id]  # back in its lane, still its holder

    @rule()
    def reap(self) -> None:
        short = [i for i, held in self.out.items() if held.lease is not None and held.is_short]
        if short:
            deadline = max(self.out[i].lease.deadline_ms for i in short)  # type: ignore[union-attr]
            self._run(wait_for_server_ms(self.queue, deadline))
        reaped = self._run(self.queue.reap(max_stalled=1000))
        assert sorted(reaped.recovered) == sorted(short)
        for id in short:
            del self.out[id]  # back at the head of its lane, still its holder

    # -- invariants -----------------------------------------------------------------------------

    @invariant()
    def one_leased_per_lane_and_the_holders_agree(self) -> None:
        keys = self.queue.keys
        active, holders = self._run(
            self.queue.wire.call_many(
                [("ZRANGE", keys.active, 0, -1), ("HGETALL", keys.root + "holders")]
            )
        )
        groups = [self.out[i.decode()].lane for i in active]
        assert len(groups) == len(set(groups)), f"two leased in one lane: {groups}"
        expected = {g: lane.holder for g, lane in self.lanes.items() if lane.holder}
        assert {k.decode(): v.decode() for k, v in holders.items()} == expected


_examples = itertools.count()


@pytest.mark.timeout(600)
def test_an_ordered_queue_matches_its_model(valkey_url: str, queue_name: str) -> None:
    from hypothesis.stateful import run_state_machine_as_test

    def machine() -> OrderedMachine:
        return OrderedMachine(valkey_url, f"{queue_name[:100]}.o{next(_examples)}")

    run_state_machine_as_test(machine, settings=OrderedMachine.TestCase.settings)
