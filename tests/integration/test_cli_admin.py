"""The ``echomq`` verbs against a real Valkey: tables for people, ``--json`` for scripts, clear
errors and non-zero exits for bad input, and a drain that asks first."""

from __future__ import annotations

import asyncio
import io
import json

import pytest
from cli_rig import Cli, cli_fixture  # noqa: F401 (the fixture registers)

from echomq.cli import main
from echomq.engine.policies import Fairness, Policies, Policy
from echomq.engine.queue import Item, Queue
from echomq.testing import claim_job


async def _dead_job(queue: Queue, error: str = "boom") -> str:
    await queue.enqueue({"n": 1}, lane="sick")
    job = await claim_job(queue)
    assert await queue.retry(job, max_attempts=1, error=error) == "dead"
    return job.id


async def test_stats_counts_jobs_per_state(queue: Queue, cli: Cli) -> None:
    await queue.enqueue_many([Item(n, lane="a") for n in range(2)] + [Item(9, lane="b")])
    ran = await cli("--json", "stats", queue.name)
    assert ran.code == 0
    stats = ran.json()
    assert (stats["pending"], stats["lanes"], stats["paused"]) == (3, 2, False)
    assert stats["limiter"]["max"] is None
    table = await cli("stats", queue.name)
    assert table.code == 0
    assert "pending" in table.out
    assert "3" in table.out


async def test_stats_reads_the_lane_policies_once(
    queue: Queue, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot ``stats`` shows holds the policies: they are not read a second time (on a
    sharded queue that would be every shard again)."""
    await queue.apply_policies(default=Policy(rate=(5, 1.0)))
    reads = 0
    read_policies = Queue.policies

    async def counted(self: Queue) -> Policies:
        nonlocal reads
        reads += 1
        return await read_policies(self)

    monkeypatch.setattr(Queue, "policies", counted)
    stats = (await cli("--json", "stats", queue.name)).json()
    assert stats["lane_default"] == {"rate": [5, 1.0, "smooth"]}
    assert reads == 1


async def test_lanes_lists_each_lane_as_a_table_and_as_json(queue: Queue, cli: Cli) -> None:
    await queue.enqueue_many([Item(n, lane="room-1") for n in range(3)] + [Item(0, lane="r2")])
    await queue.apply_policies(default=Policy(rate=(5, 1.0)), r2=Policy(limit=2))
    ran = await cli("--json", "lanes", queue.name)
    lanes = {lane["group"]: lane for lane in ran.json()}
    assert (lanes["room-1"]["depth"], lanes["r2"]["depth"]) == (3, 1)
    # The settings in force, and whether a policy names the lane.
    assert (lanes["room-1"]["rate"], lanes["room-1"]["rate_mode"]) == ([5, 1.0], "smooth")
    assert (lanes["r2"]["limit"], lanes["r2"]["policy"], lanes["room-1"]["policy"]) == (
        2,
        "named",
        "default",
    )
    stats = (await cli("--json", "stats", queue.name)).json()
    assert stats["lane_default"] == {"rate": [5, 1.0, "smooth"]}
    table = await cli("lanes", queue.name)
    assert "room-1" in table.out
    assert "depth" in table.out
    assert (await cli("--json", "ring", queue.name)).json() == ["room-1", "r2"]


async def test_pause_and_resume_one_lane(queue: Queue, cli: Cli) -> None:
    await queue.enqueue_many([Item(1, lane="a"), Item(2, lane="b")])
    ran = await cli("--json", "pause", queue.name, "a")
    assert ran.code == 0
    assert ran.json() == {"queue": queue.name, "lane": "a", "paused": True, "changed": True}
    assert (await queue.lane("a").info()).paused
    assert not (await queue.lane("b").info()).paused
    assert await queue.ring() == ["b"]
    again = await cli("--json", "pause", queue.name, "a")
    assert again.json()["changed"] is False
    assert (await cli("resume", queue.name, "a")).code == 0
    assert not (await queue.lane("a").info()).paused


async def test_cool_and_uncool_one_lane_show_in_the_lanes_table(queue: Queue, cli: Cli) -> None:
    await queue.enqueue_many([Item(1, lane="a"), Item(2, lane="b")])
    ran = await cli("--json", "cool", queue.name, "a", "60")
    assert ran.code == 0
    assert (ran.json()["changed"], ran.json()["cooling"] > 59) == (True, True)
    assert await queue.ring() == ["b"]
    lanes = {lane["group"]: lane for lane in (await cli("--json", "lanes", queue.name)).json()}
    assert (lanes["a"]["cooling"] > 59, lanes["b"]["cooling"]) == (True, 0)
    assert "cooling" in (await cli("lanes", queue.name)).out
    assert (await cli("cool", queue.name, "a", "0")).code == 2  # refused: must be > 0
    assert (await cli("--json", "uncool", queue.name, "a")).json()["changed"] is True
    assert set(await queue.ring()) == {"a", "b"}


async def test_pause_without_a_lane_pauses_the_whole_queue(queue: Queue, cli: Cli) -> None:
    await queue.enqueue(1)
    assert (await cli("pause", queue.name)).code == 0
    assert await queue.is_paused()
    assert not (await queue.lane("_").info()).paused
    assert (await cli("resume", queue.name)).code == 0
    assert not await queue.is_paused()


async def test_weight_and_limit_set_and_remove_lane_settings(queue: Queue, cli: Cli) -> None:
    await queue.enqueue(1, lane="a")
    assert (await cli("weight", queue.name, "a", "3")).code == 0
    assert (await cli("limit", queue.name, "a", "2")).code == 0
    info = await queue.lane("a").info()
    assert (info.weight, info.limit) == (3, 2)
    assert (await cli("limit", queue.name, "a", "none")).code == 0
    assert (await cli("weight", queue.name, "a", "none")).code == 0
    info = await queue.lane("a").info()
    assert (info.weight, info.limit) == (1, 0)


async def test_fairness_sets_the_mode_and_stats_shows_it(queue: Queue, cli: Cli) -> None:
    await queue.enqueue(1, lane="a")
    ran = await cli("--json", "fairness", queue.name, "time", "--quantum", "0.05")
    assert ran.code == 0
    assert ran.json()["changed"] is True
    assert await queue.fairness_in_force() == Fairness("time", 0.05)
    assert (await cli("--json", "stats", queue.name)).json()["fairness"] == {
        "by": "time",
        "quantum": 0.05,
    }
    assert (await cli("fairness", queue.name, "cost", "--quantum", "4")).code == 0
    assert await queue.fairness_in_force() == Fairness("cost", 4)
    refused = await cli("fairness", queue.name, "cost", "--quantum", "1.5")
    assert refused.code == 2  # bad input, named
    assert "invalid quantum 1.5: by cost, must be a whole number of units" in refused.err
    assert (await cli("fairness", queue.name, "count")).code == 0
    assert await queue.fairness_in_force() == Fairness()


@pytest.mark.parametrize("value", ["0", "-2", "three", "1.5"])
async def test_a_bad_number_is_refused_and_changes_nothing(
    queue: Queue, cli: Cli, value: str
) -> None:
    await queue.enqueue(1, lane="a")
    with pytest.raises(SystemExit) as exit_:
        await cli("weight", queue.name, "a", value)
    assert exit_.value.code == 2
    assert "expected an integer >= 1 or 'none'" in cli.capsys.readouterr().err
    assert (await queue.lane("a").info()).weight == 1


async def test_a_bad_lane_name_exits_2_with_the_reason(queue: Queue, cli: Cli) -> None:
    await queue.enqueue(1)
    ran = await cli("pause", queue.name, "x" * 1025)
    assert ran.code == 2
    assert "invalid lane" in ran.err


async def test_an_unknown_queue_exits_1_naming_the_server(
    cli: Cli, queue_name: str, valkey_url: str
) -> None:
    for argv in (["stats"], ["lanes"], ["pause"], ["drain", "--yes"]):
        ran = await cli(argv[0], f"{queue_name}-never", *argv[1:])
        assert ran.code == 1
        assert f"no queue named {queue_name}-never on {valkey_url}" in ran.err


async def test_the_global_options_work_after_the_verb_too(
    queue: Queue, capsys: pytest.CaptureFixture[str], valkey_url: str
) -> None:
    await queue.enqueue(1)
    code = await asyncio.to_thread(main, ["stats", queue.name, "--url", valkey_url, "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["pending"] == 1


async def test_dead_shows_the_last_error_and_reprocess_returns_the_job(
    queue: Queue, cli: Cli
) -> None:
    job_id = await _dead_job(queue, "boom: disk on fire")
    ran = await cli("--json", "dead", queue.name)
    assert ran.json() == [
        {"id": job_id, "group": "sick", "attempts": 1, "last_error": "boom: disk on fire"}
    ]
    table = await cli("dead", queue.name)
    assert job_id in table.out
    assert "disk on fire" in table.out
    assert (await cli("reprocess", queue.name, job_id)).code == 0
    assert await queue.state(job_id) == "pending"
    refused = await cli("reprocess", queue.name, job_id)  # pending now, not dead
    assert refused.code == 1
    assert "EMQSTATE" in refused.err


async def test_reprocess_and_remove_of_an_unknown_job_exit_1(queue: Queue, cli: Cli) -> None:
    await queue.enqueue(1)
    missing = queue.minter.mint("JOB")
    for verb in ("reprocess", "remove"):
        ran = await cli(verb, queue.name, missing)
        assert ran.code == 1
        assert f"no job {missing}" in ran.err
    malformed = await cli("remove", queue.name, "not-an-id")
    assert malformed.code == 2
    assert "invalid job id" in malformed.err


async def test_remove_deletes_a_dead_job_but_not_a_leased_one(queue: Queue, cli: Cli) -> None:
    job_id = await _dead_job(queue)
    assert (await cli("remove", queue.name, job_id)).code == 0
    assert await queue.state(job_id) == "absent"
    await queue.enqueue(2)
    leased = await claim_job(queue)
    ran = await cli("remove", queue.name, leased.id)
    assert ran.code == 1
    assert "EMQLOCK" in ran.err
    assert await queue.state(leased.id) == "active"


async def test_drain_asks_first_and_a_no_keeps_every_job(
    queue: Queue, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    await queue.enqueue_many([Item(n, lane=f"g{n % 3}") for n in range(6)])
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    ran = await cli("drain", queue.name)
    assert ran.code == 0
    assert "Delete 6 pending jobs" in ran.err
    assert (await queue.counts()).pending == 6
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # no answer at all is a no
    await cli("drain", queue.name)
    assert (await queue.counts()).pending == 6
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    ran = await cli("drain", queue.name)
    assert "drained: 6" in ran.out
    assert (await queue.counts()).pending == 0


async def test_drain_json_asks_on_stderr_and_prints_only_json(
    queue: Queue, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    await queue.enqueue_many(range(3))
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    ran = await cli("--json", "drain", queue.name)
    assert ran.json() == {"queue": queue.name, "drained": 0, "confirmed": False}
    assert "Delete 3 pending jobs" in ran.err
    monkeypatch.setattr("sys.stdin", io.StringIO("yes\n"))
    ran = await cli("--json", "drain", queue.name)
    assert ran.json() == {"queue": queue.name, "drained": 3, "confirmed": True}
    assert (await queue.counts()).pending == 0


async def test_drain_yes_skips_the_question(queue: Queue, cli: Cli) -> None:
    await queue.enqueue_many(range(4))
    await queue.enqueue_in(60, "later")
    ran = await cli("--json", "drain", queue.name, "--yes", "--schedule")
    assert ran.json() == {"queue": queue.name, "drained": 5, "confirmed": True}
    counts = await queue.counts()
    assert (counts.pending, counts.scheduled) == (0, 0)


async def test_job_shows_state_progress_and_the_last_log_lines(queue: Queue, cli: Cli) -> None:
    await queue.enqueue({"n": 1}, lane="a")
    job = await claim_job(queue)
    assert await queue.progress(job, value={"done": 2}, log=[f"step {n}" for n in range(12)])
    ran = await cli("--json", "job", queue.name, job.id, "--lines", "3")
    assert ran.code == 0, ran.err
    assert ran.json() == {
        "id": job.id,
        "state": "active",
        "attempts": 1,
        "group": "a",
        "progress": {"done": 2},
        "last_error": None,
        "log": ["step 9", "step 10", "step 11"],
    }
    ran = await cli("job", queue.name, job.id)
    assert ran.code == 0
    assert 'progress: {"done": 2}' in ran.out
    assert "  step 2\n" in ran.out
    assert "  step 1\n" not in ran.out  # the newest 10 lines
    assert await queue.complete(job)
    gone = await cli("job", queue.name, job.id)
    assert (gone.code, gone.err.strip()) == (
        1,
        f"echomq job: no job {job.id} in queue {queue.name}",
    )


async def test_cancel_ends_a_pending_job_and_says_what_it_was(queue: Queue, cli: Cli) -> None:
    verdict = await queue.enqueue({"n": 1})
    ran = await cli("--json", "cancel", queue.name, verdict.id, "--reason", "not needed")
    assert ran.code == 0, ran.err
    assert ran.json() == {
        "queue": queue.name,
        "job": verdict.id,
        "was": "pending",
        "outcome": "cancelled",
    }
    shown = await cli("--json", "job", queue.name, verdict.id)  # kept (--keep: a day)
    assert (shown.json()["state"], shown.json()["cancel"]) == ("cancelled", "not needed")
    again = await cli("cancel", queue.name, verdict.id)
    assert (again.code, again.out.strip()) == (
        0,
        f"queue: {queue.name}, job: {verdict.id}, was: cancelled, outcome: finished",
    )
    unknown = await cli("cancel", queue.name, "JOB0000000000a")
    assert unknown.code == 1
    assert "no job JOB0000000000a" in unknown.err
    long = await cli("cancel", queue.name, verdict.id, "--reason", "x" * 257)
    assert long.code == 2


async def test_shards_of_a_queue_of_one_slot_is_refused_as_bad_input(
    queue: Queue, cli: Cli
) -> None:
    """``echomq shards`` reads a sharded queue's directory (tests/integration/
    test_sharded_ops.py); a queue of one slot has none: exit 2, said plainly, nothing moved."""
    await queue.enqueue("one slot", lane="a")
    for argv in (["shards", queue.name], ["shards", queue.name, "move", "a", "1"]):
        refused = await cli(*argv)
        assert (refused.code, refused.out) == (2, "")
        assert refused.err.startswith(
            f"echomq shards: invalid queue {queue.name!r}: not a sharded queue"
        ), refused.err
    assert (await cli("shards", f"{queue.name}-none")).code == 1  # unknown: as every verb
    assert (await queue.counts()).pending == 1
