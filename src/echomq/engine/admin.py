"""The queue's admin plane: lane handles, queue-wide settings and cleanup.

Each verb is one Lua transition and refuses what would lose a leased job. :class:`echomq.Queue`
holds one and exposes its verbs; the plane knows the engine and the keyspace, not the queue.
"""

from __future__ import annotations

from collections.abc import Mapping

from echomq.engine import ids as _ids
from echomq.engine.checks import MAX_CEILING, count
from echomq.engine.keys import Keyspace, validate_group
from echomq.engine.lanes import DRAIN_BUDGET, Lane, drain_lanes
from echomq.engine.policies import Policy, fairness_args, policy_args, rate_value
from echomq.engine.publisher import Publisher
from echomq.engine.transitions import Engine
from echomq.errors import InvalidArgument


class Admin:
    """Queue-wide settings and cleanup of one queue (see :class:`echomq.Queue` for each verb)."""

    def __init__(self, engine: Engine, keys: Keyspace, events: Publisher | None = None) -> None:
        self._engine = engine
        self._keys = keys
        self._events = events

    def lane(self, group: str) -> Lane:
        return Lane(self._engine, self._keys, group, self._events)

    async def pause(self) -> None:
        await self._engine.configure(("paused", 1))

    async def resume(self) -> None:
        await self._engine.configure(("paused", ""))

    async def concurrency(self, ceiling: int | None) -> bool:
        value = "" if ceiling is None else count(ceiling, "ceiling", maximum=MAX_CEILING)
        return bool(await self._engine.configure(("concurrency", value)))

    async def ordered(self, on: bool) -> None:
        if not isinstance(on, bool):
            raise InvalidArgument("on", on, "must be True or False")
        await self._engine.configure(("ordered", 1 if on else ""))

    async def rate_limit(self, max: int | None, window: float | None, mode: str) -> bool:
        if max is None:
            return bool(await self._engine.configure(("max", "", "window", "", "mode", "")))
        most, window_ms = rate_value(max, window, mode).split(":")[:2]
        smooth = "smooth" if mode == "smooth" else ""
        return bool(
            await self._engine.configure(("max", most, "window", window_ms, "mode", smooth))
        )

    async def fairness(self, by: str, quantum: float | None) -> bool:
        return bool(await self._engine.configure(fairness_args(by, quantum)))

    async def apply_policies(
        self,
        policies: Mapping[str, Policy] | None,
        default: Policy | None,
        named: Mapping[str, Policy],
    ) -> int:
        return await self._engine.policy(policy_args(policies, default, named))

    async def drain(self, schedule: bool, results: bool = False) -> int:
        return await drain_lanes(self._engine, "", schedule, results)

    async def obliterate(self, force: bool) -> None:
        while await self._engine.obliterate(force, DRAIN_BUDGET):
            pass

    async def remove(self, id: str) -> bool:
        return await self._engine.remove(_ids.validate(id, "JOB", "job id"))

    async def reassign(self, id: str, group: str) -> bool:
        return await self._engine.reassign(
            _ids.validate(id, "JOB", "job id"), validate_group(group)
        )

    async def reprocess(self, id: str) -> bool:
        return await self._engine.reprocess(_ids.validate(id, "JOB", "job id"))
