"""The dashboard in headless Chromium (Debian's own binary, driven by Playwright): the lanes
table follows the engine live, the page's buttons act with the token from its URL, and an
action without the token is refused with 403 and changes nothing; a job's view follows its
progress and log lines."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from playwright.async_api import Browser, Page, expect

from echomq.dashboard import TOKEN_HEADER, create_app
from echomq.engine.queue import Item, Queue
from echomq.engine.sharded import ShardedQueue
from echomq.testing import claim_job, serve_app

TOKEN = "browser-test-token-0123456789abcdef"
WAIT_MS = 15_000  # generous: the machine is shared and the board refreshes every 0.2 s


@pytest.fixture
async def board(queue: Queue) -> AsyncIterator[str]:
    await queue.enqueue_many([Item(n, lane="loud") for n in range(3)] + [Item(0, lane="calm")])
    async with serve_app(create_app(queue.wire, [queue.name], TOKEN, interval=0.2)) as base:
        yield base


async def _open(browser: Browser, url: str) -> Page:
    page = await browser.new_page()
    await page.goto(url)
    return page


def _state(page: Page, group: str) -> object:
    return page.locator(f'tr[data-lane="{group}"] td.paused')


async def test_lanes_table_shows_a_lane_paused_through_the_api(
    browser: Browser, board: str, queue: Queue
) -> None:
    page = await _open(browser, f"{board}/?token={TOKEN}")
    await expect(_state(page, "loud")).to_have_text("live", timeout=WAIT_MS)
    await expect(page.locator('tr[data-lane="loud"] td.depth')).to_have_text("3")
    async with aiohttp.ClientSession() as http:
        url = f"{board}/api/queues/{queue.name}/lanes/loud/pause"
        async with http.post(url, headers={TOKEN_HEADER: TOKEN}) as response:
            assert response.status == 200
    await expect(_state(page, "loud")).to_have_text("paused", timeout=WAIT_MS)
    await expect(_state(page, "calm")).to_have_text("live")
    await expect(page.locator(".ring")).to_have_text("calm", timeout=WAIT_MS)
    await page.close()


async def test_page_buttons_act_with_the_token_from_the_url(
    browser: Browser, board: str, queue: Queue
) -> None:
    page = await _open(browser, f"{board}/?token={TOKEN}")
    await page.locator('tr[data-lane="calm"] button.pause').click(timeout=WAIT_MS)
    await expect(_state(page, "calm")).to_have_text("paused", timeout=WAIT_MS)
    assert (await queue.lane("calm").info()).paused
    page.once("dialog", lambda dialog: dialog.accept("4"))
    await page.locator('tr[data-lane="loud"] td.weight button').click()
    await expect(page.locator('tr[data-lane="loud"] td.weight')).to_contain_text(
        "4", timeout=WAIT_MS
    )
    assert (await queue.lane("loud").info()).weight == 4
    await page.close()


async def test_an_action_without_the_token_is_refused_with_403(
    browser: Browser, board: str, queue: Queue
) -> None:
    page = await _open(browser, f"{board}/")  # no ?token=: the page is read-only
    await expect(page.locator("#mode")).to_contain_text("read-only")
    await page.locator('tr[data-lane="loud"] button.pause').click(timeout=WAIT_MS)
    await expect(page.locator("#status")).to_contain_text("403", timeout=WAIT_MS)
    status = await page.evaluate(
        """async (path) => (await fetch(path, {method: "POST"})).status""",
        f"api/queues/{queue.name}/lanes/loud/pause",
    )
    assert status == 403
    assert not (await queue.lane("loud").info()).paused
    await expect(_state(page, "loud")).to_have_text("live")
    await page.close()


async def test_a_jobs_view_follows_its_progress_and_log_lines(
    browser: Browser, board: str, queue: Queue
) -> None:
    job = await claim_job(queue)
    await queue.progress(job, value={"done": 1, "of": 4}, log="started")
    page = await _open(browser, f"{board}/?job={job.id}")
    view = page.locator(f'section.job[data-job="{job.id}"]')
    await expect(view.locator(".progress")).to_have_text("1 of 4", timeout=WAIT_MS)
    await expect(view.locator("pre.log")).to_have_text("started")
    await queue.progress(job, value={"done": 3, "of": 4}, log="row 3 of 4")
    await expect(view.locator(".progress")).to_have_text("3 of 4", timeout=WAIT_MS)
    await expect(view.locator("pre.log")).to_have_text("started\nrow 3 of 4")
    await page.close()


@pytest.mark.parametrize("queue_kind", ["sharded"], indirect=True)
async def test_a_sharded_queues_shard_table_shows_each_shards_quota(
    browser: Browser, queue: ShardedQueue
) -> None:
    """The queue's concurrency is its budget; each shard's row its quota, one holding none
    marked (docs/operations/dashboard.md)."""
    placement = queue.placement_map
    lanes = [next(f"b{i}" for i in range(100) if placement.shard_of(f"b{i}") == k) for k in (0, 2)]
    await queue.enqueue_many(Item(n, lane=lane) for lane in lanes for n in range(2))
    await queue.concurrency(4)  # split over shards 0 and 2, whose lanes weigh alike
    async with serve_app(create_app(queue.wire, [queue.name], TOKEN, interval=0.2)) as base:
        page = await _open(browser, f"{base}/?token={TOKEN}")
        quota = page.locator('tr[data-shard="0"] td.quota')
        await expect(quota).to_have_text("c 2", timeout=WAIT_MS)
        await expect(page.locator('tr[data-shard="1"] td.quota.noquota')).to_have_text("c 0")
        budget = page.locator(".stat", has=page.locator("span", has_text="concurrency"))
        await expect(budget.locator("b")).to_have_text("4")  # not shard 0's 2
        await page.close()
