"""Flow counting held against a small pure model: a Hypothesis state machine on a real Valkey.

One parent on a home queue waits for children on the home queue and on another; children are
completed, dead-lettered, reaped and run again, reprocessed after their death, and the other
queue's outbox is relayed, relayed again without removing (a crash between deliver and remove)
and redelivered. After every step the parent's row and its two hashes must say what the model
says: each child counted once, by its first settle that reached a waiting parent.
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
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from echomq import Job, Queue
from echomq.engine import Flow

T = TypeVar("T")
picks = st.integers(min_value=0, max_value=1 << 16)


@dataclass
class Model:
    """The parent and what it has been told; ``outbox`` holds the other queue's entries."""

    policy: dict[str, str] = field(default_factory=dict)  # child -> fail_parent | ignore
    away: set[str] = field(default_factory=set)  # children on the other queue
    parent: str = "waiting"  # waiting | pending | dead | absent (completed)
    results: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    outbox: list[tuple[str, bool]] = field(default_factory=list)

    def settled(self, child: str, ok: bool) -> None:
        if child in self.away:
            self.outbox.append((child, ok))
        else:
            self.tell(child, ok)

    def tell(self, child: str, ok: bool) -> None:
        if self.parent != "waiting" or child in self.results | self.failed:
            return
        (self.results if ok else self.failed).add(child)
        if not ok and self.policy[child] == "fail_parent":
            self.parent = "dead"
        elif len(self.results | self.failed) == len(self.policy):
            self.parent = "pending"


@settings(max_examples=40, stateful_step_count=30, deadline=None)
class FlowMachine(RuleBasedStateMachine):
    def __init__(self, url: str, name: str) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.home = self._run(Queue.connect(url, name, events=False))
        self.other = self._run(Queue.connect(url, name + "-b", events=False))
        self.model = Model()
        self.dead: list[tuple[Queue, str]] = []

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    def teardown(self) -> None:
        try:
            for queue in (self.home, self.other):
                self._run(queue.pause())
                self._run(queue.obliterate(force=True))
                left = self._run(queue.wire.call("KEYS", queue.keys.root + "*"))
                assert left == [], left
        finally:
            for queue in (self.home, self.other):
                self._run(queue.close())
            self.loop.close()

    @initialize(
        children=st.lists(
            st.tuples(st.booleans(), st.sampled_from(["fail_parent", "ignore"])),
            min_size=1,
            max_size=5,
        )
    )
    def admit(self, children: list[tuple[bool, str]]) -> None:
        nodes = [
            Flow(n, queue=self.other.name if away else None, on_failure=policy)  # type: ignore[arg-type]
            for n, (away, policy) in enumerate(children)
        ]
        ids = self._run(self.home.add_flow(Flow("parent", nodes)))
        self.parent = ids.id
        for node, (away, policy) in zip(ids.children, children, strict=True):
            self.model.policy[node.id] = policy
            if away:
                self.model.away.add(node.id)

    def _claim(self, queue: Queue, lease: float = 60.0) -> Job | None:
        job = self._run(queue.claim(lease=lease))
        return job if isinstance(job, Job) else None

    def _queue(self, pick: int) -> Queue:
        return (self.home, self.other)[pick % 2]

    @rule(pick=picks)
    def complete(self, pick: int) -> None:
        queue = self._queue(pick)
        job = self._claim(queue)
        if job is None:
            return
        assert self._run(queue.complete(job, result=job.payload))
        if job.id == self.parent:
            self.model.parent = "absent"
        else:
            self.model.settled(job.id, True)

    @rule(pick=picks)
    def fail(self, pick: int) -> None:
        queue = self._queue(pick)
        job = self._claim(queue)
        if job is None:
            return
        assert self._run(queue.retry(job, delay=0, max_attempts=1, error="boom")) == "dead"
        if job.id == self.parent:
            self.model.parent = "dead"
        else:
            self.dead.append((queue, job.id))
            self.model.settled(job.id, False)

    @rule(pick=picks)
    def reap_and_rerun(self, pick: int) -> None:
        queue = self._queue(pick)
        first = self._claim(queue, lease=0.001)
        if first is None:
            return
        while not self._run(queue.reap()).recovered:
            self._run(asyncio.sleep(0.002))
        again = self._claim(queue)
        assert again is not None
        assert again.id == first.id
        assert self._run(queue.complete(again, result=again.payload))
        assert not self._run(queue.complete(first))  # the first holder: its row is gone
        if again.id == self.parent:
            self.model.parent = "absent"
        else:
            self.model.settled(again.id, True)

    @rule(pick=picks)
    def reprocess(self, pick: int) -> None:
        if self.dead:
            queue, id = self.dead.pop(pick % len(self.dead))
            assert self._run(queue.reprocess(id))  # it runs, and settles, again

    @rule(crash=st.booleans())
    def relay(self, crash: bool) -> None:
        entries = self._run(self.other.wire.call("LRANGE", self.other.keys.outbox, 0, -1))
        delivered = self._run(self.other._deliver(entries))
        for child, ok in self.model.outbox:
            self.model.tell(child, ok)
        if not crash:
            # Delivered, or dropped: an entry whose parent has no row (and no mark that it is
            # still to be written) is dropped at the first relay (flows.md).
            self._run(self.other._forget(delivered))
            self.model.outbox.clear()

    @invariant()
    def parent_agrees(self) -> None:
        if not hasattr(self, "parent"):
            return
        keys, model = self.home.keys, self.model
        state, deps, results, failed = self._run(
            self.home.wire.call_many(
                [
                    ("HGET", keys.job(self.parent), "state"),
                    ("HGET", keys.job(self.parent), "deps"),
                    ("HKEYS", keys.flow_results(self.parent)),
                    ("HKEYS", keys.flow_failed(self.parent)),
                ]
            )
        )
        assert (state.decode() if state else "absent") in {
            "waiting": {"waiting"},
            "pending": {"pending", "active"},
            "dead": {"dead"},
            "absent": {"absent"},
        }[model.parent]
        outbox = self._run(self.other.wire.call("LLEN", self.other.keys.outbox))
        assert outbox == len(model.outbox)
        if model.parent == "absent":
            assert (results, failed) == ([], [])
            return
        assert {k.decode() for k in results} == model.results
        assert {k.decode() for k in failed} == model.failed
        if model.parent == "waiting":
            assert int(deps) == len(model.policy) - len(model.results | model.failed)
        else:
            assert deps is None


_examples = itertools.count()


@pytest.mark.timeout(600)
def test_a_parent_counts_each_child_once_whatever_the_order(
    valkey_url: str, queue_name: str
) -> None:
    def machine() -> FlowMachine:
        return FlowMachine(valkey_url, f"{queue_name[:100]}.f{next(_examples)}")

    run_state_machine_as_test(machine, settings=FlowMachine.TestCase.settings)
