"""Periodic schedules without a server: tick arithmetic, the missed-tick policy, occurrence ids
(derived, stable, mint-ordered by tick, valid), cron in a time zone, and refused declarations."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Any

import pytest

from echomq import App, InvalidArgument
from echomq.engine.ids import MAX_SEQ, NODE_SHIFT, parse, unix_ms, validate
from echomq.tasks import Schedule
from echomq.tasks.periodic import missed_tick, name_hash, occurrence_id

TICK = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def at(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def schedule(**options: Any) -> Schedule:
    app = App(queue="q")

    @app.periodic(**options)
    async def beat() -> None:
        return None

    (found,) = app.schedules.values()  # named after the task: "schedule._locals_.beat"
    return found


def test_every_ticks_at_multiples_of_its_period_since_the_epoch() -> None:
    every = schedule(every=30.0)
    assert every.after(TICK) == TICK + 30_000
    assert every.after(TICK + 29_999) == TICK + 30_000
    assert every.at_or_before(TICK) == TICK
    assert every.at_or_before(TICK + 29_999) == TICK
    assert every.dedup_ttl == 86_400.0  # at least a day
    assert schedule(every=86_400.0 * 3).dedup_ttl == 86_400.0 * 6  # at least two periods


def test_missed_ticks_are_skipped_or_enqueued_once_and_a_new_schedule_missed_none() -> None:
    due = TICK + 5_000
    assert missed_tick("skip", due, TICK, None) is None
    assert missed_tick("once", due, TICK, None) == due  # the latest missed tick, once
    assert missed_tick("once", due, due, None) is None  # another scheduler enqueued it
    assert missed_tick("once", due, None, None) is None  # never ran: nothing was missed
    assert missed_tick("once", due, None, TICK + 1_000) == due  # overslept its planned tick
    assert missed_tick("skip", due, None, TICK + 1_000) is None


def test_occurrence_ids_are_valid_stable_and_mint_ordered_by_tick() -> None:
    ids = [occurrence_id(name, TICK + n * 1_000) for n in range(5) for name in ("a", "zz")]
    for id in ids:
        assert validate(id, "JOB") == id
    assert [unix_ms(id) for id in ids] == sorted(unix_ms(id) for id in ids)
    by_tick = sorted(ids, key=lambda id: (unix_ms(id), id))
    assert sorted(ids) == by_tick  # byte order is tick order
    # Stable across processes and releases (BLAKE2b, not the salted hash()): pinned.
    assert name_hash("beat") == 4_041_664
    assert occurrence_id("beat", TICK) == "JOB0JZGkP99jE0"
    assert name_hash("a") != name_hash("b")
    assert parse(occurrence_id("beat", TICK))[1] & ((1 << 22) - 1) == name_hash("beat")
    assert name_hash("beat") & MAX_SEQ >= 1 << (NODE_SHIFT - 1)  # above a minter's usual seq


def test_cron_ticks_in_its_time_zone_across_daylight_saving() -> None:
    paris = schedule(cron="0 9 * * *", tz="Europe/Paris")
    assert paris.after(at("2026-01-15T12:00:00+00:00")) == at("2026-01-16T08:00:00+00:00")
    assert paris.after(at("2026-07-15T12:00:00+00:00")) == at("2026-07-16T07:00:00+00:00")
    # 2026-03-29: Paris moves to UTC+2 at 01:00 UTC; that morning's 09:00 is 07:00 UTC.
    assert paris.after(at("2026-03-29T06:00:00+00:00")) == at("2026-03-29T07:00:00+00:00")
    assert paris.at_or_before(at("2026-03-29T07:00:00+00:00")) == at("2026-03-29T07:00:00+00:00")
    assert paris.at_or_before(at("2026-03-29T06:59:59+00:00")) == at("2026-03-28T08:00:00+00:00")
    five = schedule(cron="*/5 * * * *")
    assert five.tz == "UTC"
    assert five.after(TICK) == TICK + 300_000
    assert five.at_or_before(TICK + 299_999) == TICK
    assert schedule(cron="0 0 1 * *").dedup_ttl == 2 * 31 * 86_400.0


@pytest.mark.parametrize(
    ("options", "argument", "reason"),
    [
        ({}, "cron", "give cron="),
        ({"cron": "* * * * *", "every": 1.0}, "cron", "give cron="),
        ({"every": 0}, "every", "must be > 0"),
        ({"every": 0.5}, "every", "at least 1 s"),
        ({"every": 1.0001}, "every", "whole ms"),
        ({"every": 1.0, "tz": "Europe/Paris"}, "tz", "cron= schedules only"),
        ({"every": 1.0, "missed": "sometimes"}, "missed", "'skip' or 'once'"),
        ({"every": 1.0, "name": "no spaces"}, "name", "schedule's name"),
        ({"every": 1.0, "lane": ""}, "lane", "must be 1 to 1024 bytes"),
        ({"every": 1.0, "args": (1, 2)}, "args", "too many"),
        ({"cron": "0 9 * * *", "tz": "Mars/Olympus"}, "tz", "not a known IANA"),
        ({"cron": "61 * * * *"}, "cron", "not a cron expression"),
        ({"cron": "0 0 30 2 *"}, "cron", "not a cron expression"),
    ],
)
def test_a_bad_declaration_is_refused_naming_its_argument_and_registers_nothing(
    options: dict[str, Any], argument: str, reason: str
) -> None:
    app = App(queue="q")
    with pytest.raises(InvalidArgument, match=reason) as refused:

        @app.periodic(**options)
        async def beat() -> None:
            return None

    assert refused.value.argument == argument
    assert app.tasks == {}
    assert app.schedules == {}


def test_a_task_needs_its_arguments_at_declaration_and_schedule_names_are_unique() -> None:
    app = App(queue="q")

    @app.task(name="report")
    async def report(kind: str) -> str:
        return kind

    with pytest.raises(InvalidArgument, match="missing a required argument") as refused:
        app.periodic(every=60.0)(report)
    assert refused.value.argument == "args"
    app.periodic(every=60.0, name="hourly", kwargs={"kind": "h"})(report)
    with pytest.raises(InvalidArgument, match="schedule's name") as refused:
        app.periodic(every=60.0, name="no spaces", kwargs={"kind": "h"})(report)
    assert refused.value.argument == "name"
    app.periodic(every=86_400.0, name="daily", args=("d",), lane="reports")(report)
    assert app.schedules["daily"].call.payload == {"task": "report", "args": {"kind": "d"}}
    assert app.schedules["daily"].lane == app.schedules["daily"].call.lane == "reports"
    with pytest.raises(InvalidArgument, match="another schedule") as refused:
        app.periodic(every=60.0, name="hourly", kwargs={"kind": "h"})(report)
    assert refused.value.argument == "name"
    with pytest.raises(InvalidArgument, match="the task's queue") as refused:
        app.periodic(every=60.0, name="other", queue="elsewhere", args=("x",))(report)
    assert refused.value.argument == "queue"
    with pytest.raises(InvalidArgument, match="async function") as refused:
        app.periodic(every=60.0)(lambda: None)  # type: ignore[arg-type, return-value]
    assert refused.value.argument == "fn"
    assert list(app.tasks) == ["report"]


def test_cron_without_the_extra_is_refused_at_declaration_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "cronsim", None)  # import cronsim now raises ImportError
    with pytest.raises(InvalidArgument, match=r"echomq\[cron\]") as refused:
        schedule(cron="*/5 * * * *")
    assert refused.value.argument == "cron"
    assert schedule(every=5.0).after(TICK) == TICK + 5_000  # every= needs nothing


def test_a_schedule_of_a_plain_function_registers_its_task_on_the_queue_given() -> None:
    app = App(queue="q")

    @app.periodic(every=5.0, queue="maintenance", missed="once")
    async def sweep() -> int:
        return 1

    assert list(app.tasks.values()) == [sweep]
    assert sweep.queue == "maintenance"
    assert app.queue_names() == ["maintenance"]
    (sweeps,) = app.schedules.values()
    assert sweeps.name.endswith("._locals_.sweep")
    assert sweeps.missed == "once"
    assert sweeps.id_at(TICK) == occurrence_id(sweeps.name, TICK)
    assert datetime.fromtimestamp(TICK / 1000, UTC).year == 2026
