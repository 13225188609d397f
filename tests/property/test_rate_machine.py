"""Rates held against the pure model (queue_model.RateRule): a Hypothesis state machine on a real
Valkey drives lanes under smooth and fixed rates (their own, or the default policy's), a
queue-wide rate and a default ceiling through claims, batches, completions, the passing of time
and the settings applied again as every process does at start. After every step: no window of
any lane or of the queue holds more claims than its rate allows (sliding windows for smooth
rates), no lane holds more than its ceiling, and a claim that answered nothing had a reason.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from queue_model import RateRule, is_spent, windows_over

from echomq import Item, Job, Policy, Queue, Rate
from echomq.engine import Empty, RateLimited

T = TypeVar("T")
GROUPS = ("a", "b", "c")
LEASE = 60.0
CEILING = 4

rules = st.builds(
    RateRule,
    max=st.integers(1, 3),
    window_ms=st.sampled_from([100, 250]),
    smooth=st.booleans(),
)


def rate_of(rule: RateRule) -> Rate:
    return Rate(rule.max, rule.window_ms / 1000, "smooth" if rule.smooth else "fixed")


@settings(max_examples=30, stateful_step_count=40, deadline=None)
class RateMachine(RuleBasedStateMachine):
    def __init__(self, url: str, name: str) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.queue = self._run(Queue.connect(url, name, pool_size=1, events=False))
        self.claims: dict[str, list[int]] = {g: [] for g in GROUPS}
        self.every: list[int] = []
        self.leased: list[Job] = []
        self.pending = dict.fromkeys(GROUPS, 0)
        self.lane_rules: dict[str, RateRule] = {}
        self.own: dict[str, Policy] = {}
        self.default = Policy()
        self.queue_rule: RateRule | None = None

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    def teardown(self) -> None:
        try:
            self._run(self.queue.pause())
            self._run(self.queue.obliterate(force=True))
            self._run(self.queue.close())
        finally:
            self.loop.close()

    async def _now(self) -> int:
        seconds, micros = await self.queue.wire.call("TIME")
        return int(seconds) * 1000 + int(micros) // 1000

    @initialize(
        default=rules,
        own=st.dictionaries(st.sampled_from(GROUPS), rules, max_size=2),
        queue_rule=st.none() | rules.map(lambda r: RateRule(r.max + 3, r.window_ms, r.smooth)),
    )
    def settle_rates(
        self, default: RateRule, own: dict[str, RateRule], queue_rule: RateRule | None
    ) -> None:
        self.default = Policy(rate=rate_of(default), limit=CEILING)
        self.own = {g: Policy(rate=rate_of(r)) for g, r in own.items()}
        self.lane_rules = {g: own.get(g, default) for g in GROUPS}
        self.queue_rule = queue_rule
        self._run(self.queue.apply_policies(self.own, default=self.default))
        if queue_rule is not None:
            rate = rate_of(queue_rule)
            self._run(self.queue.rate_limit(rate.max, rate.window, mode=rate.mode))

    @rule(group=st.sampled_from(GROUPS), n=st.integers(1, 4))
    def enqueue(self, group: str, n: int) -> None:
        self._run(self.queue.enqueue_many([Item(i, lane=group) for i in range(n)]))
        self.pending[group] += n

    @rule(n=st.integers(1, 4))
    def claim(self, n: int) -> None:
        before = self._run(self._now())
        got = self._run(self.queue.claim_batch(n, LEASE))
        after = self._run(self._now())
        if isinstance(got, list):
            for job in got:
                at = job.deadline_ms - int(LEASE * 1000)
                self.claims[job.lane].append(at)
                self.every.append(at)
                self.pending[job.lane] -= 1
                self.leased.append(job)
            return
        if isinstance(got, RateLimited):
            assert self.queue_rule is not None
            assert is_spent(sorted(self.every), self.queue_rule, before, after)
            return
        # Nothing claimable: every lane with work was at its ceiling or spent its rate (or the
        # queue's rate was spent while no lane was on the ring: the benched ones wait for upkeep).
        assert isinstance(got, Empty)
        if self.queue_rule is not None and is_spent(
            sorted(self.every), self.queue_rule, before, after
        ):
            return
        for group in GROUPS:
            if self.pending[group] == 0:
                continue
            held = sum(job.lane == group for job in self.leased)
            spent = is_spent(self.claims[group], self.lane_rules[group], before, after)
            assert held >= CEILING or spent, (group, held, self.claims[group])

    @precondition(lambda self: self.leased)
    @rule(pick=st.integers(0, 1 << 16))
    def complete(self, pick: int) -> None:
        job = self.leased.pop(pick % len(self.leased))
        assert self._run(self.queue.complete(job))

    @rule(ms=st.sampled_from([20, 60, 120]))
    def wait(self, ms: int) -> None:
        self._run(asyncio.sleep(ms / 1000))

    @rule()
    def apply_again(self) -> None:
        """What every process does at start: the settings in force, applied again."""
        assert self._run(self.queue.apply_policies(self.own, default=self.default)) == 0
        for group, policy in self.own.items():
            rate = policy.rate
            assert isinstance(rate, Rate)
            assert not self._run(self.queue.lane(group).rate(rate.max, rate.window, mode=rate.mode))
        if self.queue_rule is not None:
            rate = rate_of(self.queue_rule)
            assert not self._run(self.queue.rate_limit(rate.max, rate.window, mode=rate.mode))

    @invariant()
    def no_window_over_its_rate(self) -> None:
        for group, claims in self.claims.items():
            if group in self.lane_rules:
                assert windows_over(sorted(claims), self.lane_rules[group]) == [], group
        if self.queue_rule is not None:
            assert windows_over(sorted(self.every), self.queue_rule) == []

    @invariant()
    def no_lane_over_its_ceiling(self) -> None:
        for group in GROUPS:
            assert sum(job.lane == group for job in self.leased) <= CEILING


_examples = itertools.count()


@pytest.mark.timeout(600)
def test_no_window_holds_more_claims_than_its_rate(valkey_url: str, queue_name: str) -> None:
    def machine() -> RateMachine:
        return RateMachine(valkey_url, f"{queue_name[:100]}.r{next(_examples)}")

    run_state_machine_as_test(machine, settings=RateMachine.TestCase.settings)
