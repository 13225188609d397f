"""The lane machinery held against a small pure model: a Hypothesis state machine on a real Valkey.

It drives one real Queue through admission, claims, settles, lane and queue verbs and reaps, and
after every step reads the server's own state back: no job lost or duplicated, the ring holds
exactly the serviceable lanes (and the ring-weight counters sum their weights), ceilings hold,
an empty claim means nothing was claimable, no lane waits longer than the other lanes of its
priority band's weights allow (nor while a less urgent band is served), and a lane's backlog cap
(pending, leased and scheduled jobs) refuses exactly the admissions the model refuses, writing
nothing.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Coroutine
from typing import Any, Literal, TypeVar

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
from queue_model import DEFAULT_PRIORITY, GROUPS, Fairness, Model, text_of

from echomq.engine.options import JobOptions
from echomq.engine.policies import Policy
from echomq.engine.queue import Item, Queue
from echomq.engine.results import Empty, Failed, Job
from echomq.errors import LaneFull, StaleTokenError, StateError

#: What a claim finds before it: every band's ring and turn, and the lanes' credits.
Before = tuple[dict[int, list[str]], dict[int, dict[str, str]], dict[str, int]]

T = TypeVar("T")

# Long leases never expire within an example; short ones are expired before every reap.
LONG_LEASE = 60.0
SHORT_LEASE = 0.001

groups = st.sampled_from(GROUPS)
# Mostly the default band, so lanes rotate within one; sometimes a band above or below it.
priorities = st.sampled_from([DEFAULT_PRIORITY, DEFAULT_PRIORITY, DEFAULT_PRIORITY, 1, 8])
BANDS = range(10)
# An index into whatever the rule picks from (taken modulo its size); shrinks towards the first.
picks = st.integers(min_value=0, max_value=1 << 16)
# A job's cost in units, mostly the default (lane ceilings here are 1 to 3 units).
costs = st.sampled_from([1, 1, 1, 2, 3, 4])


# -- the machine ---------------------------------------------------------------------------------


@settings(max_examples=60, stateful_step_count=40, deadline=None)
class QueueMachine(RuleBasedStateMachine):
    """One real queue per example, and the model it must agree with after every step."""

    #: Seconds a completed row is kept (0: deleted); the kept-results machine overrides it.
    RESULT_TTL = 0.0

    def __init__(self, url: str, name: str) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.queue = self._run(
            Queue.connect(url, name, pool_size=1, events=False, result_ttl=self.RESULT_TTL)
        )
        self.is_keeping = self.RESULT_TTL > 0
        self.model = Model()
        self.fairness = Fairness()
        self.payloads = itertools.count()
        #: Each lane's debounce key → the job its last debounced call made or moved.
        self.debounced: dict[str, str] = {}

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    def teardown(self) -> None:
        try:
            leftover = self._run(self._obliterate())
            assert leftover == [], f"obliterate left keys behind: {leftover}"
        finally:
            try:
                self._run(self.queue.close())
            finally:
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
                self.loop.close()

    async def _obliterate(self) -> list[str]:
        await self.queue.pause()
        await self.queue.obliterate(force=True)
        cursor, found = b"0", []
        while True:
            pattern = self.queue.keys.root + "*"
            cursor, batch = await self.queue.wire.call("SCAN", cursor, "MATCH", pattern)
            found += [text_of(k) for k in batch]
            if cursor in (b"0", 0, "0"):
                return sorted(found)

    # -- reading the server ----------------------------------------------------------------------

    async def _snapshot(self) -> dict[str, Any]:
        """The queue's raw keys, decoded (the wake list is left out: it is a hint, not state)."""
        keys = self.queue.keys
        ended = sorted(self.model.completed | self.model.cancelled)
        ids = sorted(self.model.rows) + ended
        fixed = {
            "lanes": ("SMEMBERS", keys.root + "lanes"),
            "paused": ("SMEMBERS", keys.paused),
            "cooling": ("HKEYS", keys.cooling),
            "glimit": ("HGETALL", keys.glimit),
            "gactive": ("HGETALL", keys.gactive),
            "gextra": ("HGETALL", keys.gextra),
            "gweight": ("HGETALL", keys.gweight),
            "ringweight": ("HGETALL", keys.ringweight),
            "gcap": ("HGETALL", keys.gcap),
            "gscheduled": ("HGETALL", keys.gscheduled),
            "active": ("ZRANGE", keys.active, 0, -1, "WITHSCORES"),
            "dead": ("ZRANGE", keys.dead, 0, -1),
            "done": ("ZRANGE", keys.done, 0, -1, "WITHSCORES"),
            "schedule": ("ZRANGE", keys.schedule, 0, -1),
            "meta": ("HGETALL", keys.meta),
            "turn": ("HGETALL", keys.turn),
            "completed": ("HGET", keys.completed, "count"),
            "failed": ("HGET", keys.failed, "count"),
            "cancelled": ("HGET", keys.cancelled, "count"),
        }
        commands = [
            *fixed.values(),
            *[("LRANGE", keys.band_ring(p), 0, -1) for p in BANDS],
            *[("ZRANGE", keys.lane(g), 0, -1) for g in GROUPS],
            *[("HGETALL", keys.job(i)) for i in ids],
            *[("PEXPIRETIME", keys.job(i)) for i in ended],
        ]
        replies = await self.queue.wire.call_many(commands)
        raw = dict(zip(fixed, replies, strict=False))
        rings = {p: [text_of(g) for g in replies[len(fixed) + p]] for p in BANDS}
        rest = replies[len(fixed) + len(BANDS) :]
        expiries = rest[len(GROUPS) + len(ids) :]
        return {
            "ring": [g for p in reversed(BANDS) for g in rings[p]],
            "rings": {p: lanes for p, lanes in rings.items() if lanes},
            "lanes": {text_of(g) for g in raw["lanes"]},
            "paused": {text_of(g) for g in raw["paused"]},
            "cooling": {text_of(g) for g in raw["cooling"]},
            **{
                name: {text_of(k): int(v) for k, v in raw[name].items()}
                for name in (
                    "glimit",
                    "gactive",
                    "gextra",
                    "gweight",
                    "gcap",
                    "gscheduled",
                    "ringweight",
                )
            },
            "active": {text_of(i): int(score) for i, score in raw["active"]},
            "dead": {text_of(i) for i in raw["dead"]},
            "done": {text_of(i) for i, _ in raw["done"]},
            "done_scores": {text_of(i): int(score) for i, score in raw["done"]},
            "expiries": {i: int(ms) for i, ms in zip(ended, expiries, strict=True) if int(ms) > 0},
            "schedule": {text_of(i) for i in raw["schedule"]},
            "meta": {text_of(k): text_of(v) for k, v in raw["meta"].items()},
            "turn": {text_of(k): text_of(v) for k, v in raw["turn"].items()},
            "completed": int(raw["completed"] or 0),
            "failed": int(raw["failed"] or 0),
            "cancelled": int(raw["cancelled"] or 0),
            "lane": {g: [text_of(i) for i in rest[n]] for n, g in enumerate(GROUPS)},
            "rows": {
                i: {text_of(k): text_of(v) for k, v in row.items()}
                for i, row in zip(ids, rest[len(GROUPS) : len(GROUPS) + len(ids)], strict=True)
                if row
            },
        }

    def snapshot(self) -> dict[str, Any]:
        return self._run(self._snapshot())

    async def _server_ms(self) -> int:
        seconds, micros = await self.queue.wire.call("TIME")
        return int(seconds) * 1000 + int(micros) // 1000

    async def _until_server_ms(self, target_ms: int) -> None:
        """Wait on the engine's clock (the one leases use) until it reaches ``target_ms``."""
        while (now := await self._server_ms()) < target_ms:
            await asyncio.sleep((target_ms - now) / 1000)

    # -- admission -------------------------------------------------------------------------------

    @initialize(
        backlog=st.lists(st.tuples(groups, priorities, costs), max_size=12),
        weights=st.dictionaries(groups, st.integers(min_value=2, max_value=3), max_size=2),
        limits=st.dictionaries(groups, st.integers(min_value=1, max_value=3), max_size=2),
        by_cost=st.sampled_from([None, None, 1, 2]),
    )
    def preload(
        self,
        backlog: list[tuple[str, int, int]],
        weights: dict[str, int],
        limits: dict[str, int],
        by_cost: int | None,
    ) -> None:
        """Start most examples with work in several lanes, some weighted or capped, so claims,
        ceilings and fairness are exercised from the first step, not after a slow build-up;
        half of them fair by cost (quantum 1 or 2: below the dearer jobs', so dry visits)."""
        if by_cost is not None:
            self.fair_by("cost", by_cost)
        for group, weight in sorted(weights.items()):
            self.weigh_lane(group, weight)
        for group, ceiling in sorted(limits.items()):
            self.limit_lane(group, ceiling)
        if backlog:
            self.enqueue_many(backlog, None)

    def _refused(self, group: str, refused: LaneFull) -> None:
        """A full lane's refusal names the lane, its cap and the backlog the model counts."""
        assert self.model.is_full(group), f"lane {group!r} refused under its cap"
        expected = (group, self.model.cap(group), self.model.backlog(group))
        assert (refused.lane, refused.cap, refused.backlog) == expected

    @rule(group=groups, priority=priorities, cost=costs)
    def enqueue(self, group: str, priority: int, cost: int) -> None:
        payload = next(self.payloads)
        lane = None if group == "_" else group
        given = None if priority == DEFAULT_PRIORITY else priority
        spent = None if cost == 1 else cost
        if self.model.is_full(group):
            before = self.snapshot()
            with pytest.raises(LaneFull) as refused:
                self._run(self.queue.enqueue(payload, lane=lane, priority=given, cost=spent))
            self._refused(group, refused.value)
            assert self.snapshot() == before
            return
        verdict = self._run(self.queue.enqueue(payload, lane=lane, priority=given, cost=spent))
        assert verdict.kind == "enqueued"
        self.model.admit(verdict.id, group, payload, priority, cost)
        assert self._run(self.queue.state(verdict.id)) == "pending"

    @rule(group=groups, priority=priorities, cost=costs)
    def enqueue_later(self, group: str, priority: int, cost: int) -> None:
        """A job scheduled an hour out: never promoted here, counted by its lane's cap."""
        payload = next(self.payloads)
        enqueue = self.queue.enqueue_in(3600.0, payload, lane=group, priority=priority, cost=cost)
        if self.model.is_full(group):
            before = self.snapshot()
            with pytest.raises(LaneFull) as refused:
                self._run(enqueue)
            self._refused(group, refused.value)
            assert self.snapshot() == before
            return
        verdict = self._run(enqueue)
        assert verdict.kind == "scheduled"
        self.model.admit_later(verdict.id, group, payload, priority, cost)

    @rule(group=groups)
    def debounce(self, group: str) -> None:
        """A debounced call (an hour's quiet, so never due here): while its key's job waits
        and never ran, the call moves it and its payload becomes this one; otherwise it is a
        new scheduled job (refused by a full lane) and the key moves to it."""
        payload = next(self.payloads)
        options = JobOptions(lane=group, dedup_key=f"deb-{group}", debounce=3600.0)
        held = self.model.rows.get(self.debounced.get(group, ""))
        if held is not None and held.state == "scheduled" and held.attempts == 0:
            verdict = self._run(self.queue.admit(payload, options))
            assert (verdict.kind, verdict.id) == ("debounced", self.debounced[group])
            held.payload = payload
            return
        if self.model.is_full(group):
            before = self.snapshot()
            with pytest.raises(LaneFull) as refused:
                self._run(self.queue.admit(payload, options))
            self._refused(group, refused.value)
            assert self.snapshot() == before
            return
        verdict = self._run(self.queue.admit(payload, options))
        assert verdict.kind == "scheduled", verdict
        self.model.admit_later(verdict.id, group, payload)
        self.debounced[group] = verdict.id

    def _known_state(self, job_id: str) -> str:
        """What a duplicate of ``job_id`` must say its job is doing."""
        row = self.model.rows.get(job_id)
        if row is not None:
            return row.state
        return "cancelled" if job_id in self.model.cancelled else "completed"

    @precondition(lambda self: self.model.rows or (self.is_keeping and self.model.completed))
    @rule(pick=picks, group=groups)
    def enqueue_existing_id_is_duplicate(self, pick: int, group: str) -> None:
        """Any job with a row, a kept finished one included, full lane or not: the duplicate
        writes nothing and says the state the job was in."""
        known = sorted(self.model.rows)
        if self.is_keeping:
            known += sorted(self.model.completed | self.model.cancelled)
        job_id = known[pick % len(known)]
        before = self.snapshot()
        verdict = self._run(self.queue.enqueue("other", lane=group, id=job_id))
        assert (verdict.kind, verdict.id) == ("duplicate", job_id)
        assert verdict.state == self._known_state(job_id)
        assert self.snapshot() == before

    @rule(
        lanes=st.lists(st.tuples(groups, priorities, costs), min_size=1, max_size=8),
        duplicate=st.none() | picks,
    )
    def enqueue_many(self, lanes: list[tuple[str, int, int]], duplicate: int | None) -> None:
        items = [Item(payload=next(self.payloads), lane=g, priority=p, cost=c) for g, p, c in lanes]
        existing = sorted(self.model.rows)
        position = None
        if duplicate is not None and existing:
            position = duplicate % (len(items) + 1)
            twin = existing[duplicate % len(existing)]
            items.insert(position, Item(payload="other", lane=lanes[0][0], id=twin))
        verdicts = self._run(self.queue.enqueue_many(items))
        assert len(verdicts) == len(items)
        # One chunk: the items are admitted in input order, each against the lane as the ones
        # before it left it.
        for n, (item, verdict) in enumerate(zip(items, verdicts, strict=True)):
            assert item.lane is not None
            if n == position:
                assert (verdict.kind, verdict.id) == ("duplicate", item.id)
                assert verdict.state == self._known_state(verdict.id)
                continue
            if self.model.is_full(item.lane):
                assert (verdict.kind, verdict.reason) == ("rejected", "lane full"), verdict
                assert isinstance(verdict.error, LaneFull)
                self._refused(item.lane, verdict.error)
                assert self._run(self.queue.state(verdict.id)) == "absent"
                continue
            assert verdict.kind == "enqueued", verdict
            assert isinstance(item.payload, int)
            assert item.priority is not None
            self.model.admit(verdict.id, item.lane, item.payload, item.priority, item.cost or 1)

    # -- claims ----------------------------------------------------------------------------------

    async def _turn(self) -> Before:
        """Every band's ring and turn, and the lanes' credits (by cost), as the next claim finds
        them."""
        keys = self.queue.keys
        replies = await self.queue.wire.call_many(
            [("LRANGE", keys.band_ring(p), 0, -1) for p in BANDS]
            + [("HGETALL", keys.band_turn(p)) for p in BANDS]
            + [("HGETALL", keys.gdeficit)]
        )
        rings = {p: [text_of(g) for g in replies[p]] for p in BANDS}
        turns = {
            p: {text_of(k): text_of(v) for k, v in replies[len(BANDS) + p].items()} for p in BANDS
        }
        credits = {text_of(k): int(v) for k, v in replies[-1].items()}
        return rings, turns, credits

    def _walk(self, n: int, before: Before) -> list[tuple[str, list[str], int]]:
        """The turns a claim of ``n`` takes, from the rings and turns ``before`` it, the most
        urgent band first: each head lane gives what is left of its turn (all the rest when
        alone on its ring), clamped to its depth, its ceiling and its jobs of this band, then
        leaves the ring, moves to its next head's band (its band's jobs served), keeps its turn
        (the batch is full) or rotates. By cost, a turn lasts while the lane's credit does (a
        lane with none left gets quantum x weight and rotates: a dry visit), and the model's
        credits follow the walk."""
        model = self.model
        rings = {p: list(ring) for p, ring in before[0].items()}
        turns = {p: dict(turn) for p, turn in before[1].items()}
        credits = dict(before[2])
        by_cost = model.fair == "cost"
        quantum = model.quantum or model.costmax
        dry = 0
        want = n if model.concurrency is None else min(n, model.concurrency - len(model.active))
        lanes = {g: list(model.lanes[g]) for g in GROUPS}
        units = {g: model.units(g) for g in GROUPS}
        out: list[tuple[str, list[str], int]] = []
        taken = 0
        while taken < want and (bands := [p for p in BANDS if rings[p]]):
            band = max(bands)
            ring, turn = rings[band], turns[band]
            group, weight = ring[0], model.weight(ring[0])
            alone = len(ring) == 1
            credit = credits.get(group, quantum * weight)
            if by_cost and credit <= 0 and not alone and dry < 64:
                dry += 1
                credits[group] = credit + quantum * weight
                ring.append(ring.pop(0))
                continue
            take = want - taken
            ceiling = model.ceiling(group)
            inband = [i for i in lanes[group] if model.rows[i].priority >= band]
            take = min(take, len(inband))
            served = int(turn["served"]) if weight > 1 and turn.get("group") == group else 0
            if by_cost:
                if alone:
                    credit = quantum * weight
                elif not model.is_costed:
                    take = min(take, max(1, credit))
            elif take > 1 and len(ring) > 1:
                take = min(take, max(1, weight - served))  # a stale count still serves one
            heads, spent = [], 0
            for job_id in lanes[group][: max(take, 0)]:
                # In units: the heads that fit the ceiling (the first alone when none is used).
                cost = model.rows[job_id].cost
                if ceiling is not None and units[group] + cost > ceiling and units[group] > 0:
                    break
                heads.append(job_id)
                units[group] += cost
                spent += cost
                if by_cost and model.is_costed and not alone and spent >= credit:
                    break  # the credit is spent (the last head may overdraw it)
            assert heads, f"lane {group!r} is on band {band}'s ring but cannot serve"
            del lanes[group][: len(heads)]
            taken += len(heads)
            out.append((group, heads, band))
            turn_over = False
            if by_cost and not lanes[group]:
                credits.pop(group, None)  # an emptied lane starts afresh
            elif by_cost:
                credit = credit if alone else credit - spent
                if credit <= 0:
                    credit, turn_over = credit + quantum * weight, True
                credits[group] = credit
            fits = ceiling is None or (
                units[group] < ceiling
                and (not lanes[group] or units[group] + model.rows[lanes[group][0]].cost <= ceiling)
            )
            if not lanes[group] or not fits:
                ring.pop(0)
                turns[band] = {}
            elif len(heads) == len(inband):
                ring.pop(0)
                turns[band] = {}
                rings[model.rows[lanes[group][0]].priority].append(group)
            elif by_cost:
                if turn_over:
                    ring.append(ring.pop(0))
            elif weight > 1 and served + len(heads) < weight:
                turns[band] = {"group": group, "served": str(served + len(heads))}
            else:
                turns[band] = {} if weight > 1 else turn
                ring.append(ring.pop(0))
        return out

    def _claimed(
        self,
        jobs: list[Job],
        n: int,
        is_short: bool,
        before: Before,
    ) -> None:
        """Check a successful claim against the model and the ring and turn ``before`` it,
        then apply it turn by turn, as the single claims it stands for."""
        model = self.model
        assert model.is_claimable(), f"claimed {jobs} while the model has nothing claimable"
        turns = self._walk(n, before)
        expected = [(group, job_id) for group, ids, _ in turns for job_id in ids]
        assert [(j.lane, j.id) for j in jobs] == expected, "not the jobs the ring's turns give"
        by_id = {job.id: job for job in jobs}
        for group, ids, band in turns:
            assert group in model.serviceable(), f"claimed from {group!r}, not serviceable"
            assert model.band(group) == band, f"lane {group!r} served in band {band}"
            assert band == max(model.rings()), f"band {band} served before a more urgent one"
            for job_id in ids:
                job, row = by_id[job_id], model.rows[job_id]
                assert (job.attempts, job.payload) == (row.attempts + 1, row.payload)
                assert job.deadline_ms == jobs[0].deadline_ms, "a batch shares one lease"
                model.lease(job_id, job.deadline_ms, is_short)
                if model.fair is None:  # by cost, the walk itself is the check (_walk)
                    self.fairness.served(group, band)
            self.fairness.settle(model)
        for group in {group for group, _, _ in turns}:
            info = self._run(self.queue.lane(group).info())
            ceiling = model.ceiling(group)
            if ceiling is not None:
                # Past it only by one job alone (dearer than the whole ceiling).
                assert model.units(group) <= ceiling or info.active == 1, "past the ceiling"
        if model.concurrency is not None:
            assert len(model.active) <= model.concurrency, "a claim passed the queue ceiling"

    def _not_claimed(self, result: object) -> None:
        assert isinstance(result, Empty), f"expected empty, got {result!r}"
        # No lane has a rate budget here: an empty claim names a wait iff a lane cools (it
        # returns then), past the queue's own gates.
        model = self.model
        cools = bool(model.cooling) and not model.is_queue_paused and not model.is_at_ceiling()
        assert (result.retry_in is not None) is cools, result
        assert not self.model.is_claimable(), (
            f"claim answered empty while {sorted(self.model.serviceable())} are serviceable"
        )

    @rule(is_short=st.booleans())
    def claim(self, is_short: bool) -> None:
        before = self._run(self._turn())
        result = self._run(self.queue.claim(SHORT_LEASE if is_short else LONG_LEASE))
        if isinstance(result, Job):
            self._claimed([result], 1, is_short, before)
        else:
            self._not_claimed(result)

    @rule(times=st.integers(min_value=2, max_value=6))
    def claim_repeatedly(self, times: int) -> None:
        """Back-to-back claims, as a busy worker makes them: the rotation and the weights only
        show over runs of consecutive claims."""
        for _ in range(times):
            if not self.model.is_claimable():
                break
            self.claim(is_short=False)

    @rule(n=st.integers(min_value=1, max_value=4), is_short=st.booleans())
    def claim_batch(self, n: int, is_short: bool) -> None:
        before = self._run(self._turn())
        result = self._run(self.queue.claim_batch(n, SHORT_LEASE if is_short else LONG_LEASE))
        if isinstance(result, list):
            assert result, "a batch claim answered an empty list instead of empty"
            self._claimed(result, n, is_short, before)
        else:
            self._not_claimed(result)

    # -- settles ---------------------------------------------------------------------------------

    def _held(self, pick: int) -> tuple[str, int]:
        job_id = sorted(self.model.active)[pick % len(self.model.active)]
        return job_id, self.model.active[job_id].token

    def _complete(self, job_id: str, token: int) -> None:
        assert self._run(self.queue.complete(job_id, token)) is True
        self.model.complete(job_id)
        assert self._run(self.queue.state(job_id)) == self._finished_state

    def _retry(self, job_id: str, token: int, max_attempts: int, delay: float = 0.0) -> None:
        error = f"boom {token}"
        outcome = self._run(
            self.queue.retry(job_id, token, delay=delay, max_attempts=max_attempts, error=error)
        )
        if self.model.rows[job_id].cancel is not None:
            assert outcome == "cancelled"  # a cancel marked it: its failure is not retried
            self.model.release(job_id)
            self.model.end_cancelled(job_id)
            assert self._run(self.queue.state(job_id)) == self._end_state(job_id)
            return
        # No delays or reprocessing here: every attempt so far was a failure or a stall, but
        # for those a Cool gave back.
        failures = token - self.model.rows[job_id].grace
        assert outcome == ("dead" if failures >= max_attempts else "scheduled")
        self.model.release(job_id)
        if outcome == "dead":
            self.model.bury(job_id, error)
        else:
            self.model.rows[job_id].last_error = error
            if delay:
                self.model.rows[job_id].state = "scheduled"  # an hour out: never promoted here
            else:
                self.model.to_lane(job_id)
        info = self._run(self.queue.job(job_id))
        assert info is not None
        assert (info.state, info.last_error, info.attempts) == (
            "dead" if outcome == "dead" else "scheduled" if delay else "pending",
            error,
            token,
        )

    @precondition(lambda self: self.model.active)
    @rule(pick=picks)
    def complete(self, pick: int) -> None:
        self._complete(*self._held(pick))

    @precondition(lambda self: self.model.active)
    @rule(pick=picks, offset=st.sampled_from([-1, 1, 2]))
    def complete_with_wrong_token_is_refused(self, pick: int, offset: int) -> None:
        job_id, token = self._held(pick)
        wrong = token + offset if token + offset >= 1 else token + 1
        before = self.snapshot()
        with pytest.raises(StaleTokenError):
            self._run(self.queue.complete(job_id, wrong))
        assert self.snapshot() == before

    @precondition(lambda self: self.model.active)
    @rule(pick=picks, max_attempts=st.integers(min_value=1, max_value=3))
    def retry(self, pick: int, max_attempts: int) -> None:
        self._retry(*self._held(pick), max_attempts)

    @precondition(lambda self: self.model.active)
    @rule(pick=picks)
    def retry_later(self, pick: int) -> None:
        """A failure retried after an hour: the job leaves its lease for the schedule, and its
        lane's cap goes on counting it."""
        self._retry(*self._held(pick), 3, delay=3600.0)

    @precondition(lambda self: self.model.tokens)
    @rule(pick=picks, verb=st.sampled_from(["complete", "retry"]))
    def settle_with_old_token(self, pick: int, verb: str) -> None:
        """Replay any token ever handed out: current, superseded, reaped, retried, finished."""
        job_id, token = self.model.tokens[pick % len(self.model.tokens)]
        row = self.model.rows.get(job_id)
        if self.model.holds(job_id, token):
            # Leased, or reaped and claimed by nobody since: the one settle rule accepts it.
            if verb == "complete":
                self._complete(job_id, token)
            else:
                self._retry(job_id, token, 3)
            return
        before = self.snapshot()
        settle = (
            self.queue.complete(job_id, token)
            if verb == "complete"
            else self.queue.retry(job_id, token, delay=0, max_attempts=3)
        )
        expected = self._expected(job_id, token)
        if expected == "gone":
            assert row is None
            assert self._run(settle) == (False if verb == "complete" else "gone")
        elif expected == "stale":
            with pytest.raises(StaleTokenError):
                self._run(settle)
        else:  # this claim settled the job already (retried to its lane, dead, or completed)
            with pytest.raises(StateError):
                self._run(settle)
        assert self.snapshot() == before

    def _end_state(self, job_id: str) -> str:
        """What a finished job's state reads: its kept row's, or absent."""
        if not self.is_keeping:
            return "absent"
        return "cancelled" if job_id in self.model.cancelled else "completed"

    @property
    def _finished_state(self) -> str:
        """What a completed job's state reads: its kept row's, or absent."""
        return "completed" if self.is_keeping else "absent"

    def _expected(self, job_id: str, token: int) -> str:
        """What one settle of ``(job_id, token)`` must answer now, per the model."""
        row = self.model.rows.get(job_id)
        if self.model.holds(job_id, token):
            return "held"
        if row is None and self.is_keeping and job_id in self.model.completed_tokens:
            # The kept row of a completed job: as fenced as a live one.
            return "settled" if self.model.completed_tokens[job_id] == token else "stale"
        if row is None and self.is_keeping and job_id in self.model.cancelled_tokens:
            return "settled" if self.model.cancelled_tokens[job_id] == token else "stale"
        if row is None:
            return "gone"
        return "stale" if row.attempts != token else "settled"

    @precondition(lambda self: self.model.tokens)
    @rule(picks_=st.lists(picks, min_size=1, max_size=6))
    def complete_each(self, picks_: list[int]) -> None:
        """One batch call over old and current tokens, a job possibly twice: each job is
        fenced and answered on its own, in order, as if completed one after another."""
        tokens = self.model.tokens
        chosen = [tokens[p % len(tokens)] for p in picks_]
        jobs = [Job(job_id, None, token, "_", 0) for job_id, token in chosen]
        outcomes = self._run(self.queue.complete_each(jobs))
        for (job_id, token), outcome in zip(chosen, outcomes, strict=True):
            expected = self._expected(job_id, token)
            if expected == "held":
                assert outcome == "completed", (job_id, token, outcome)
                self.model.complete(job_id)
            else:
                assert outcome == expected, (job_id, token, outcome)
        for job_id in {job_id for job_id, _ in chosen} - set(self.model.rows):
            assert self._run(self.queue.state(job_id)) == self._end_state(job_id)

    @precondition(lambda self: self.model.tokens)
    @rule(picks_=st.lists(picks, min_size=1, max_size=6))
    def retry_each(self, picks_: list[int]) -> None:
        tokens = self.model.tokens
        chosen = [tokens[p % len(tokens)] for p in picks_]
        failures = [
            Failed(Job(job_id, None, token, "_", 0), f"boom {token}", 0.0, 3)
            for job_id, token in chosen
        ]
        outcomes = self._run(self.queue.retry_each(failures))
        for (job_id, token), outcome in zip(chosen, outcomes, strict=True):
            expected = self._expected(job_id, token)
            if expected != "held":
                assert outcome == expected, (job_id, token, outcome)
                continue
            if self.model.rows[job_id].cancel is not None:
                assert outcome == "cancelled", (job_id, token, outcome)
                self.model.release(job_id)
                self.model.end_cancelled(job_id)
                continue
            failures = token - self.model.rows[job_id].grace
            assert outcome == ("dead" if failures >= 3 else "scheduled"), (job_id, token, outcome)
            self.model.release(job_id)
            if outcome == "dead":
                self.model.bury(job_id, f"boom {token}")
            else:
                self.model.rows[job_id].last_error = f"boom {token}"
                self.model.to_lane(job_id)

    # -- time ------------------------------------------------------------------------------------

    @rule(max_stalled=st.integers(min_value=1, max_value=3))
    def reap(self, max_stalled: int) -> None:
        expired = {i: lease for i, lease in self.model.active.items() if lease.is_short}
        if expired:
            # A 1 ms lease: wait until the server clock has surely passed every short deadline.
            self._run(self._until_server_ms(max(lease.deadline_ms for lease in expired.values())))
        reaped = self._run(self.queue.reap(limit=1000, max_stalled=max_stalled))
        recovered, dead, ended = set(), set(), 0
        for job_id in expired:
            del self.model.active[job_id]
            row = self.model.rows[job_id]
            if row.cancel is not None:
                self.model.end_cancelled(job_id)  # marked: ended, never back in its lane
                ended += 1
                continue
            row.stalled += 1
            if row.stalled >= max_stalled:
                self.model.bury(job_id, "stalled")
                dead.add(job_id)
            else:
                self.model.to_lane(job_id)
                row.reaped = expired[job_id].token
                recovered.add(job_id)
        assert (set(reaped.recovered), set(reaped.dead)) == (recovered, dead)
        assert len(reaped.recovered) + len(reaped.dead) + ended == len(expired)

    @precondition(lambda self: self.model.rows or self.model.completed or self.model.cancelled)
    @rule(pick=picks)
    def cancel(self, pick: int) -> None:
        """Cancel any job: a pending one ends now, a leased one is marked (its failure or
        expired lease ends it), a finished one is left as it is."""
        model = self.model
        known = sorted(model.rows) + sorted(model.completed) + sorted(model.cancelled)
        job_id = known[pick % len(known)]
        row = model.rows.get(job_id)
        reason = f"stop {pick % 7}"
        answer = self._run(self.queue.cancel(job_id, reason))
        if row is None:
            assert answer.was == self._end_state(job_id), (job_id, answer)
        elif row.state == "active":
            assert answer.was == "active"
            row.cancel = reason  # a later cancel overwrites the reason
        elif row.state == "dead":
            assert answer.was == "dead"
        else:
            assert answer.was == row.state  # pending or scheduled: ended now
            model.end_cancelled(job_id)

    # -- lane and queue verbs --------------------------------------------------------------------

    @rule(group=groups)
    def pause_lane(self, group: str) -> None:
        assert self._run(self.queue.lane(group).pause()) is (group not in self.model.paused)
        self.model.paused.add(group)

    @rule(group=groups)
    def resume_lane(self, group: str) -> None:
        """Resume ends a pause and a cool alike."""
        was = group in self.model.paused or group in self.model.cooling
        assert self._run(self.queue.lane(group).resume()) is was
        self.model.paused.discard(group)
        self.model.cooling.discard(group)

    @rule(group=groups)
    def cool_lane(self, group: str) -> None:
        """A long cool (never ending within an example); again, it moves the end on."""
        changed = self._run(self.queue.lane(group).cool(60.0))
        if group not in self.model.cooling:
            assert changed
        self.model.cooling.add(group)

    @rule(group=groups)
    def uncool_lane(self, group: str) -> None:
        assert self._run(self.queue.lane(group).uncool()) is (group in self.model.cooling)
        self.model.cooling.discard(group)

    def _cool_briefly(self, group: str) -> None:
        """A brief cool: the lane is off the ring until its end, then back by promote alone
        (what every upkeep runs), with nobody calling uncool."""
        self.model.cooling.add(group)
        self.fairness.settle(self.model)  # it left the ring: it rejoins at the tail
        until = self._run(self.queue.lane(group).info()).cooling_until
        if until is not None:  # None: a loaded machine read it after its end, by promote or not
            assert group not in self._run(self.queue.ring())
            self._run(self._until_server_ms(round(until * 1000) + 1))
        self._run(self.queue.promote())
        self.model.cooling.discard(group)

    @precondition(lambda self: self.model.cooling)
    @rule(pick=picks)
    def cool_longer_is_not_shortened(self, pick: int) -> None:
        group = sorted(self.model.cooling)[pick % len(self.model.cooling)]
        assert not self._run(self.queue.lane(group).cool(0.01))

    @rule(group=groups)
    def cool_lane_briefly(self, group: str) -> None:
        if group in self.model.cooling:
            return  # a long cool in force: the brief one changes nothing (the rule above)
        assert self._run(self.queue.lane(group).cool(0.01))
        self._cool_briefly(group)

    @precondition(lambda self: self.model.active)
    @rule(pick=picks, is_long=st.booleans())
    def cool_job(self, pick: int, is_long: bool) -> None:
        """A handler's Cool: the leased job goes back to its lane unrun (an attempt given back)
        and its lane cools, in one step fenced by the token."""
        job_id, token = self._held(pick)
        row = self.model.rows[job_id]
        after = 60.0 if is_long else 0.01
        assert self._run(self.queue.cool(job_id, token, after=after, lane="?"))
        self.model.release(job_id)
        if row.cancel is not None:
            self.model.end_cancelled(job_id)  # a cancel marked it: it ends here
        else:
            row.grace += 1
            self.model.to_lane(job_id)
        if is_long:
            self.model.cooling.add(row.lane)
        elif row.lane not in self.model.cooling:
            self._cool_briefly(row.lane)

    @rule(group=groups, ceiling=st.none() | st.integers(min_value=1, max_value=3))
    def limit_lane(self, group: str, ceiling: int | None) -> None:
        # Idempotent: the engine answers whether the lane's own ceiling changed.
        changed = self._run(self.queue.lane(group).limit(ceiling))
        assert changed is (self.model.limits.get(group) != ceiling)
        if ceiling is None:
            self.model.limits.pop(group, None)
        else:
            self.model.limits[group] = ceiling
        self._slack(group)

    def _slack(self, group: str) -> None:
        """A ceiling lowered under the jobs in flight: they may exceed it until they settle."""
        self.model.limit_slack.pop(group, None)
        ceiling = self.model.ceiling(group)
        if ceiling is not None and self.model.units(group) > ceiling:
            self.model.limit_slack[group] = self.model.units(group)

    @rule(group=groups, weight=st.none() | st.integers(min_value=1, max_value=3))
    def weigh_lane(self, group: str, weight: int | None) -> None:
        changed = self._run(self.queue.lane(group).weight(weight))
        assert changed is (self.model.weights.get(group) != weight)
        if weight is None:
            self.model.weights.pop(group, None)
        else:
            self.model.weights[group] = weight
        self.fairness.weighted(group, self.model.weight(group))

    @rule(
        by=st.sampled_from(["count", "cost"]),
        quantum=st.none() | st.integers(min_value=1, max_value=3),
    )
    def fair_by(self, by: Literal["count", "cost"], quantum: int | None) -> None:
        """Fairness by claims or by cost (deficit round robin): a change starts every lane's
        credit afresh, and the count mode's waits start anew."""
        quantum = None if by == "count" else quantum
        changed = self._run(self.queue.fairness(by, quantum=quantum))
        fair = None if by == "count" else by
        assert changed is ((fair, quantum) != (self.model.fair, self.model.quantum))
        self.model.fair, self.model.quantum = fair, quantum
        if changed:
            assert self._run(self.queue.wire.call("EXISTS", self.queue.keys.gdeficit)) == 0
        self.fairness = Fairness()
        self.fairness.settle(self.model)

    @rule(group=groups, cap=st.none() | st.integers(min_value=1, max_value=4))
    def cap_lane(self, group: str, cap: int | None) -> None:
        """A lane's own backlog cap; lowered under its backlog, it refuses and evicts nothing."""
        changed = self._run(self.queue.lane(group).cap(cap))
        assert changed is (self.model.caps.get(group) != cap)
        if cap is None:
            self.model.caps.pop(group, None)
        else:
            self.model.caps[group] = cap

    @rule(
        ceiling=st.none() | st.integers(min_value=1, max_value=3),
        weight=st.none() | st.integers(min_value=1, max_value=3),
        cap=st.none() | st.integers(min_value=2, max_value=6),
    )
    def default_policy(self, ceiling: int | None, weight: int | None, cap: int | None) -> None:
        """The default lane policy: lanes without their own ceiling, weight or cap follow it in
        the claim (the cap: in admission) itself. Applied again (as every process does at
        start), it changes nothing."""
        model = self.model
        policy = Policy(limit=ceiling, weight=weight, cap=cap)
        changed = self._run(self.queue.apply_policies(default=policy))
        assert changed == (
            (model.default_limit != ceiling)
            + (model.default_weight != weight)
            + (model.default_cap != cap)
        )
        assert self._run(self.queue.apply_policies(default=policy)) == 0
        model.default_limit, model.default_weight, model.default_cap = ceiling, weight, cap
        for group in GROUPS:
            self._slack(group)
            self.fairness.weighted(group, model.weight(group))

    @rule(ceiling=st.none() | st.integers(min_value=1, max_value=5))
    def limit_queue(self, ceiling: int | None) -> None:
        self._run(self.queue.concurrency(ceiling))
        self.model.concurrency = ceiling
        self.model.concurrency_slack = len(self.model.active)

    # Biased towards running: a paused queue makes every claim empty, which tests little.
    @rule(is_paused=st.sampled_from([False, False, True]))
    def pause_queue(self, is_paused: bool) -> None:
        self._run(self.queue.pause() if is_paused else self.queue.resume())
        self.model.is_queue_paused = is_paused

    # -- invariants ------------------------------------------------------------------------------

    @invariant()
    def server_agrees_with_the_model(self) -> None:
        model, raw = self.model, self.snapshot()
        serviceable = model.serviceable()

        # Every job is in exactly one place; a leased job is in `active` and nowhere else.
        places: dict[str, list[str]] = {}
        for group, ids in raw["lane"].items():
            for job_id in ids:
                places.setdefault(job_id, []).append(f"lane {group}")
        for name in ("active", "dead", "schedule"):
            for job_id in raw[name]:
                places.setdefault(job_id, []).append(name)
        for job_id, where in places.items():
            assert job_id in model.rows, f"unknown or completed job {job_id} is in {where}"
            assert len(where) == 1, f"job {job_id} is in {where}"
        lost = set(model.rows) - set(places)
        assert not lost, f"jobs lost: {sorted(lost)}"

        # What a --burst worker waits for (one atomic read): a lease, or a job pending in a
        # lane that is not paused nor cooling on a queue that is not paused (scheduled jobs: an
        # hour out).
        waiting = any(
            model.lanes[g] and g not in model.paused and g not in model.cooling for g in GROUPS
        )
        expected = bool(model.active) or (waiting and not model.is_queue_paused)
        assert self._run(self.queue.has_work()) == expected

        # Lanes in mint order, leases with their deadlines, the dead, the rows.
        assert raw["lane"] == model.lanes
        assert raw["active"] == {i: lease.deadline_ms for i, lease in model.active.items()}
        assert raw["dead"] == model.dead
        scheduled = {i for i, row in model.rows.items() if row.state == "scheduled"}
        assert raw["schedule"] == scheduled
        assert raw["lanes"] == {g for g in GROUPS if model.lanes[g]}
        for job_id, row in model.rows.items():
            stored = raw["rows"].get(job_id)
            assert stored is not None, f"row of {job_id} is gone"
            assert (stored["state"], int(stored["attempts"]), stored["group"]) == (
                row.state,
                row.attempts,
                row.lane,
            ), job_id
            assert int(stored.get("stalled", 0)) == row.stalled
            assert stored.get("last_error") == row.last_error
            assert int(stored.get("grace", 0)) == row.grace
            assert stored["payload"] == str(row.payload)
            assert stored.get("prio") == (
                None if row.priority == DEFAULT_PRIORITY else str(row.priority)
            ), job_id
            assert stored.get("cost") == (None if row.cost == 1 else str(row.cost)), job_id
        for job_id in model.completed:
            if self.is_keeping:
                stored = raw["rows"].get(job_id)
                assert stored is not None, f"the kept row of {job_id} is gone"
                assert stored["state"] == "completed", (job_id, stored)
                assert int(stored["attempts"]) == model.completed_tokens[job_id], job_id
            else:
                assert job_id not in raw["rows"], f"completed job {job_id} still has a row"
        for job_id in model.cancelled:
            stored = raw["rows"].get(job_id)
            if self.is_keeping:
                assert stored is not None, f"the kept row of {job_id} is gone"
                assert stored["state"] == "cancelled", (job_id, stored)
                assert int(stored["attempts"]) == model.cancelled_tokens[job_id], job_id
            else:
                assert stored is None, f"cancelled job {job_id} still has a row"
        for job_id, row in model.rows.items():
            assert raw["rows"][job_id].get("cancel") == row.cancel, job_id
        ended = model.completed | model.cancelled
        assert raw["done"] == (ended if self.is_keeping else set())
        # The index is scored by each kept row's expiry, so a trim never drops a live row.
        assert raw["done_scores"] == raw["expiries"]

        # Lane settings, and in-flight counts that never pass a ceiling (unless it was lowered
        # under jobs already in flight: a ceiling gates claims, it never evicts leases).
        assert raw["paused"] == model.paused
        assert raw["cooling"] == model.cooling
        assert raw["glimit"] == model.limits
        assert raw["gweight"] == model.weights
        # The ring-weight counters (a shard's active weight per band, docs/concepts/shards.md):
        # per band, the own weights of its ringed lanes that have one, summed, and the count of
        # those on the default weight; a field at 0 is gone.
        counters: dict[str, int] = {}
        for band, ringed in raw["rings"].items():
            for group in ringed:
                field = f"own:{band}" if group in raw["gweight"] else f"count:{band}"
                counters[field] = counters.get(field, 0) + raw["gweight"].get(group, 1)
        assert raw["ringweight"] == counters, (raw["rings"], raw["gweight"])
        assert raw["gcap"] == model.caps
        assert raw["gscheduled"] == {g: model.scheduled(g) for g in GROUPS if model.scheduled(g)}
        gactive = {g: model.gactive(g) for g in GROUPS if model.gactive(g)}
        assert raw["gactive"] == gactive
        units = {g: model.units(g) for g in GROUPS}
        assert raw["gextra"] == {g: units[g] - gactive[g] for g in gactive if units[g] > gactive[g]}
        for group in GROUPS:
            limit = model.ceiling(group)
            if limit is None:
                continue
            if units[group] <= limit:
                model.limit_slack.pop(group, None)
            # Past the ceiling only under one it was lowered below, or by one job alone.
            assert (
                units[group] <= max(limit, model.limit_slack.get(group, 0))
                or gactive.get(group) == 1
            )
        if model.concurrency is not None:
            if len(model.active) <= model.concurrency:
                model.concurrency_slack = 0
            assert len(model.active) <= max(model.concurrency, model.concurrency_slack)

        # The rings hold exactly the serviceable lanes, each once, each on its head job's
        # band's ring — by the model, and by the server's own keys.
        assert len(raw["ring"]) == len(set(raw["ring"])), f"ring repeats a lane: {raw['ring']}"
        assert set(raw["ring"]) == serviceable, (
            f"ring {raw['ring']} but serviceable lanes are {sorted(serviceable)}"
        )
        assert {p: set(ring) for p, ring in raw["rings"].items()} == model.rings()
        by_server = {
            g
            for g in GROUPS
            if raw["lane"][g]
            and g not in raw["paused"]
            and g not in raw["cooling"]
            and (
                (ceiling := raw["glimit"].get(g, raw["meta"].get("dlimit"))) is None
                or (
                    (used := raw["gactive"].get(g, 0) + raw["gextra"].get(g, 0)) < int(ceiling)
                    and (
                        used == 0
                        or used + int(raw["rows"][raw["lane"][g][0]].get("cost", 1)) <= int(ceiling)
                    )
                )
            )
        }
        assert set(raw["ring"]) == by_server, (
            f"ring {raw['ring']}, by the server's keys {by_server}"
        )

        # Queue-wide settings and the read plane.
        expected_meta = {"paused": "1"} if model.is_queue_paused else {}
        if model.is_banded:
            expected_meta["banded"] = "1"
        if model.is_costed:
            expected_meta["costed"] = str(model.costmax)
        if model.fair is not None:
            expected_meta["fair"] = model.fair
        if model.quantum is not None:
            expected_meta["quantum"] = str(model.quantum)
        if model.concurrency is not None:
            expected_meta["concurrency"] = str(model.concurrency)
        if model.default_limit is not None:
            expected_meta["dlimit"] = str(model.default_limit)
        if model.default_weight is not None:
            expected_meta["dweight"] = str(model.default_weight)
        if model.default_cap is not None:
            expected_meta["dcap"] = str(model.default_cap)
        # meta `bands`: the bands other than the default whose ring may hold lanes (a claim
        # drops one it finds empty): every such ring that holds a lane is in it.
        bands = raw["meta"].pop("bands", "")
        assert {str(p) for p in raw["rings"] if p != DEFAULT_PRIORITY} <= set(bands), bands
        assert raw["meta"] == expected_meta
        assert (raw["completed"], raw["failed"]) == (len(model.completed), model.failed)
        counts = self._run(self.queue.counts())
        assert (counts.pending, counts.active, counts.scheduled, counts.dead) == (
            sum(len(ids) for ids in model.lanes.values()),
            len(model.active),
            len(scheduled),
            len(model.dead),
        )
        assert (counts.completed, counts.failed) == (len(model.completed), model.failed)
        assert counts.cancelled == raw["cancelled"] == model.cancel_count
        assert (counts.lanes, counts.ringed) == (len(raw["lanes"]), len(serviceable))
        infos = self._run(self.queue.lanes(GROUPS))
        for info in infos:
            group = info.lane
            assert (info.depth, info.active, info.limit, info.weight, info.paused) == (
                len(model.lanes[group]),
                model.gactive(group),
                model.ceiling(group) or 0,
                model.weight(group),
                group in model.paused,
            ), info
            assert (info.rate, info.rate_wait) == (None, 0)
            assert (info.cap, info.scheduled, info.backlog) == (
                model.cap(group) or 0,
                model.scheduled(group),
                model.backlog(group),
            ), info
            assert (info.cooling_until is not None, info.cooling > 0) == (
                group in model.cooling,
            ) * 2
        known = {info.lane for info in self._run(self.queue.lanes())}
        assert known == {
            g
            for g in GROUPS
            if model.lanes[g]
            or model.gactive(g)
            or g in model.paused
            or g in model.cooling
            or g in model.limits
            or g in model.weights
            or g in model.caps
            or model.scheduled(g)
        }

        self.fairness.settle(model)


_examples = itertools.count()


# A passing run takes ~10 s; a failing one then shrinks, replaying many step sequences against
# the server, which can outlast the suite's 120 s default and lose the minimal failing program.
@pytest.mark.timeout(600)
def test_queue_matches_its_model_through_every_transition(valkey_url: str, queue_name: str) -> None:
    def machine() -> QueueMachine:
        return QueueMachine(valkey_url, f"{queue_name[:100]}.m{next(_examples)}")

    run_state_machine_as_test(machine, settings=QueueMachine.TestCase.settings)


class KeepingMachine(QueueMachine):
    """The same machine on a queue that keeps completed rows (``result_ttl``): a kept row is
    fenced like a live one and in no lane, lease or dead set, only in ``done``."""

    RESULT_TTL = 3600.0


@pytest.mark.timeout(600)
def test_a_queue_keeping_results_matches_its_model(valkey_url: str, queue_name: str) -> None:
    def machine() -> KeepingMachine:
        return KeepingMachine(valkey_url, f"{queue_name[:100]}.k{next(_examples)}")

    run_state_machine_as_test(machine, settings=KeepingMachine.TestCase.settings)
