"""One word for one concept: ``lane`` everywhere; ``group`` still works for one release, with a
``DeprecationWarning`` that names the new word, and the two together are refused."""

from __future__ import annotations

import dataclasses

import pytest

from echomq import InvalidArgument, Item, Job, JobOptions, Queue
from echomq.engine import Flow


async def test_group_keyword_still_admits_to_the_lane_and_warns(queue: Queue) -> None:
    with pytest.warns(DeprecationWarning, match="group= is deprecated: the word is lane="):
        verdict = await queue.enqueue("a", group="acme")
    with pytest.warns(DeprecationWarning, match="group="):
        later = await queue.enqueue_in(60.0, "b", group="acme")
    with pytest.warns(DeprecationWarning, match="group="):
        item = Item("c", group="acme")
    await queue.enqueue_many([item])
    assert (await queue.job(verdict.id)).lane == "acme"  # type: ignore[union-attr]
    assert (await queue.job(later.id)).lane == "acme"  # type: ignore[union-attr]
    assert (await queue.lane("acme").info()).depth == 2


async def test_lane_and_group_together_are_refused_before_any_write(queue: Queue) -> None:
    with (
        pytest.warns(DeprecationWarning, match="group="),
        pytest.raises(InvalidArgument) as refused,
    ):
        await queue.enqueue("a", lane="acme", group="acme")
    assert refused.value.argument == "group"
    assert (await queue.counts()).pending == 0


async def test_reading_group_warns_and_answers_the_lane(queue: Queue) -> None:
    await queue.enqueue("a", lane="acme")
    job = await queue.claim()
    assert isinstance(job, Job)
    with pytest.warns(DeprecationWarning, match="Job.group is deprecated: the word is Job.lane"):
        assert job.group == "acme"
    (info,) = await queue.lanes(["acme"])
    with pytest.warns(DeprecationWarning, match="LaneInfo.group"):
        assert info.group == info.lane == "acme"
    with pytest.warns(DeprecationWarning, match="Lane.group"):
        assert queue.lane("acme").group == "acme"


async def test_reassign_takes_the_lane_and_still_the_old_keyword(queue: Queue) -> None:
    verdict = await queue.enqueue("a", lane="acme")
    assert await queue.reassign(verdict.id, "zen")
    with pytest.warns(DeprecationWarning, match="group="):
        assert await queue.reassign(verdict.id, group="beta")
    info = await queue.job(verdict.id)
    assert info is not None
    assert info.lane == "beta"
    with pytest.raises(InvalidArgument) as refused:
        await queue.reassign(verdict.id)
    assert refused.value.argument == "lane"


def test_flows_and_items_take_the_lane_and_stay_replaceable() -> None:
    with pytest.warns(DeprecationWarning, match="group="):
        flow = Flow("p", group="acme")
    assert flow == Flow("p", lane="acme")
    item = Item("x", lane="acme")
    assert dataclasses.replace(item, id="JOB0KHTOWnGLuC").options == JobOptions(
        lane="acme", id="JOB0KHTOWnGLuC"
    )
