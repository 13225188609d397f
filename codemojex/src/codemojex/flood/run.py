"""Running the flood against the real engine: a temporary SQLite store, the game's pipeline on a
Valkey URL (queues and keys under a prefix of the run's own, deleted afterwards), the real score
and settle consumers, the notification path of :mod:`codemojex.flood.sending`; the players of
the plan submit through :meth:`Guesses.submit`, and the ``scored`` events time each guess.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from codemojex.domain import MAX_TOTAL, CodemojexError
from codemojex.flood.measure import GuessSample, percentile
from codemojex.flood.scenario import FloodOptions, Plan, PlayerPlan, RoomPlan, plan
from codemojex.flood.seeding import Seeded, discard_run, seed, unscored_count
from codemojex.flood.sending import SendCounts, Sending, open_sending
from codemojex.game.settle import Settled, SettleOutcome
from codemojex.pipeline import Pipeline, serving
from codemojex.store import open_store, sqlite_url
from echomq import ConnectionOptions, ConsumerOptions, Context, TaskOutcome
from echomq.engine import Minter, Subscription
from echomq.wire import Pool

log = logging.getLogger("codemojex.flood")


@dataclass(frozen=True, slots=True)
class Progress:
    """A live snapshot for the progress display; latencies in seconds (``nan`` before any)."""

    elapsed: float
    phase: str
    planned: int
    rooms: tuple[tuple[str, int, int], ...]
    """Per room: label, guesses submitted, guesses scored."""
    loud_p99: float
    quiet_p99: float
    sends: SendCounts


@dataclass(frozen=True, slots=True)
class Trace:
    """What a run observed; :mod:`codemojex.flood.measure` turns it into figures. Times are
    seconds since the start of play."""

    plan: Plan
    samples: tuple[GuessSample, ...]
    sends: tuple[float, ...]
    notifications: SendCounts
    expected_notifications: int
    """Notifications the game asked for: two per scored guess (the group's status, the
    player's own), one per crack, one per close, one per result."""
    unscored: int
    """Guesses the store still holds unscored at the end (0 when nothing was lost)."""
    refused: int
    closed: int
    elapsed: float
    flood: tuple[float, float]
    """When the loud room's flood began and when its last guess was submitted."""


ProgressCallback = Callable[[Progress], None]


def _percent(total: int) -> str:
    return f"{round(total * 100 / MAX_TOTAL)}%"


class _Run:
    """One run's state: receipts and scored times keyed by ``JOB`` id, closes, fan-out."""

    def __init__(self, plan: Plan, pipeline: Pipeline, seeded: Seeded) -> None:
        self.plan = plan
        self.pipeline = pipeline
        self.seeded = seeded
        self.t0 = time.perf_counter()
        self.t0_monotonic = time.monotonic()
        self.phase = "starting"
        self.submitted: dict[str, tuple[str, str, float, float]] = {}  # room, player, at, charged
        self.scored: dict[str, float] = {}
        self.claimed: dict[str, float] = {}
        self.refused = 0
        self.closed: set[str] = set()
        self.results = 0
        self.cracked = 0
        self.flood = (0.0, 0.0)

    def now(self) -> float:
        return time.perf_counter() - self.t0

    async def read_events(self, events: Subscription) -> None:
        async for event in events:
            kind = event.get("event")
            if kind == "scored":
                self.scored.setdefault(str(event["job"]), self.now())  # a redelivery says it again
            elif kind == "active":  # a claim: the first one is when the lane's turn came
                self.claimed.setdefault(str(event["job"]), self.now())

    async def submit(self, room: str, game: str, user: int, text: str) -> None:
        player = self.seeded.players[user]
        at = self.now()
        try:
            receipt = await self.pipeline.guesses.submit(game, player, text)
        except CodemojexError as error:
            self.refused += 1
            log.warning("flood guess refused: %s", error)
            return
        self.submitted[receipt.job] = (room, player, at, self.now())

    async def play_loud(self) -> None:
        loud = self.plan.loud
        await asyncio.sleep(max(0.0, self.plan.options.flood_at - self.now()))
        self.phase = "flood"
        started = self.now()
        game = self.seeded.games[loud.label]

        async def hammer(user: int, texts: tuple[str, ...]) -> None:
            for text in texts:  # back to back: the next as soon as the last is charged
                await self.submit(loud.label, game, user, text)

        await asyncio.gather(*(hammer(p.user, p.guesses) for p in loud.players))
        self.flood = (started, self.now())

    async def play_quiet(self) -> None:
        async def human(room: RoomPlan, member: PlayerPlan) -> None:
            for at, text in zip(member.at, member.guesses, strict=True):
                await asyncio.sleep(max(0.0, at - self.now()))  # a human's pace, by the plan
                await self.submit(room.label, self.seeded.games[room.label], member.user, text)

        await asyncio.gather(*(human(room, p) for room in self.plan.quiet for p in room.players))

    async def tell_results(self, run: Context, outcome: TaskOutcome) -> None:
        """After each settle (an ``after_job`` hook of the pipeline's app): each player of the
        closed game gets their result privately, the burst of notifications a finished game
        fans out."""
        settled = outcome.result
        if not isinstance(settled, Settled):
            return
        if settled.outcome is SettleOutcome.CLOSED or run.attempt > 1:
            room = self.seeded.room_of_game.get(settled.game)
            if room is not None and settled.game not in self.closed:
                over = f"🏁 {room.title} is over"
                for member in room.players:
                    player = self.seeded.players[member.user]
                    best = await self.pipeline.board.best(settled.game, player) or 0
                    mine = f"{over}: your best {_percent(best)}"
                    await self._tell(member.user, settled.game, mine)
                top = _percent(settled.top_score or 0)
                for watcher in room.watchers:
                    await self._tell(watcher, settled.game, f"{over}: the top score {top}")
                self.closed.add(settled.game)
                self.cracked += settled.top_score == MAX_TOTAL

    async def _tell(self, user: int, game: str, text: str) -> None:
        await self.pipeline.notifier.notify(user, text, dedup_key=f"result:{game}:{user}")
        self.results += 1

    def progress(self, sends: SendCounts) -> Progress:
        rooms = {room.label: [0, 0] for room in self.plan.rooms}
        loud: list[float] = []
        quiet: list[float] = []
        for job, (room, _, at, _) in list(self.submitted.items()):
            rooms[room][0] += 1
            scored = self.scored.get(job)
            if scored is not None:
                rooms[room][1] += 1
                (loud if room == self.plan.loud.label else quiet).append(scored - at)
        return Progress(
            self.now(),
            self.phase,
            self.plan.guesses,
            tuple((label, n[0], n[1]) for label, n in rooms.items()),
            percentile(loud, 99),
            percentile(quiet, 99),
            sends,
        )

    async def is_drained(self, sending: Sending) -> bool:
        if len(self.closed) < len(self.plan.rooms):
            return False
        # A scored event is at most once: when one is missing the store has the last word.
        is_heard = all(job in self.scored for job in self.submitted)
        if not is_heard and await unscored_count(self.pipeline.store) > 0:
            return False
        return sending.has_delivered(self.plan.private_chats)

    def trace(self, sending: Sending, counts: SendCounts, unscored: int) -> Trace:
        samples = tuple(
            GuessSample(room, player, at, charged, self.claimed.get(job), self.scored.get(job))
            for job, (room, player, at, charged) in self.submitted.items()
        )
        sends = tuple(at - self.t0_monotonic for at in sending.send_times())
        # Every room is a group: a scored guess updates the room's live status and tells its
        # player privately (two notifications); a crack is also announced to the room.
        scored = len(self.submitted) - unscored
        expected = 2 * scored + self.cracked + len(self.closed) + self.results
        return Trace(
            self.plan, samples, sends, counts, expected, unscored, self.refused,
            len(self.closed), self.now(), self.flood,
        )  # fmt: skip


async def _play(
    run: _Run, sending: Sending, progress: ProgressCallback | None, tick: float
) -> None:
    async def ticking() -> None:
        while True:
            if progress is not None:
                progress(run.progress(await sending.counts()))
            await asyncio.sleep(tick)

    options = run.plan.options
    ticker = asyncio.ensure_future(ticking())
    sweeper = asyncio.ensure_future(run.pipeline.sweep_forever(every=0.5))
    try:
        run.phase = "playing"
        await asyncio.gather(run.play_quiet(), run.play_loud())
        run.phase = "finale"
        loud = run.plan.loud
        await run.submit(loud.label, run.seeded.games[loud.label], loud.players[0].user,
                         loud.cracking_guess)  # fmt: skip
        run.phase = "draining"
        deadline = time.monotonic() + options.drain_timeout
        while not await run.is_drained(sending) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)  # no one event says "all of it is done"
        run.phase = "done"
        if progress is not None:
            progress(run.progress(await sending.counts()))
    finally:
        for task in (ticker, sweeper):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def run_flood(
    options: FloodOptions,
    url: str,
    *,
    progress: ProgressCallback | None = None,
    tick: float = 0.5,
    prefix: str | None = None,
) -> Trace:
    """Run the flood ``options`` describe on the Valkey at ``url`` and return what it observed.

    ``progress`` is called every ``tick`` seconds with a :class:`Progress`; ``prefix`` (default:
    a fresh one) goes before every queue and key, all of which are deleted afterwards.
    """
    the_plan = plan(options)
    prefix = prefix or f"flood-{uuid.uuid4().hex[:8]}."
    with tempfile.TemporaryDirectory(prefix="codemojex-flood-") as directory:
        store = await open_store(sqlite_url(Path(directory) / "flood.db"))
        pool = await Pool(ConnectionOptions.from_url(url), 2).connect()
        minter = Minter.leased(pool)
        await minter.ready()
        pipeline = Pipeline.build(store, pool, minter=minter, prefix=prefix)
        try:
            async with (
                open_sending(the_plan, pipeline) as sending,
                pipeline.queues.score.subscribe() as events,
            ):
                # Seeded last: the quiet games' deadlines count from here.
                run = _Run(the_plan, pipeline, await seed(the_plan, pipeline))
                reader = asyncio.ensure_future(run.read_events(events))
                consumers = [
                    pipeline.score_consumer(
                        ConsumerOptions(concurrency=options.score_concurrency, beat=0.2)
                    ),
                    pipeline.settle_consumer(ConsumerOptions(concurrency=2, beat=0.2)),
                    sending.consumer,
                ]
                pipeline.app.after_job(run.tell_results)
                try:
                    async with serving(consumers):
                        await _play(run, sending, progress, tick)
                finally:
                    reader.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await reader
                counts = await sending.counts()
            return run.trace(sending, counts, await unscored_count(store))
        finally:
            await discard_run(pipeline)
            await minter.release()
            await pool.close()
            await store.close()
