"""The game's pipeline composed once (part of the composition root): one echomq
:class:`~echomq.App` on a lent wire with each stage's tasks registered on it (``command``,
``score``, ``settle``, ``notify``), the four queues those tasks ride, the board, the notifier,
the game's producers (guesses, closes) and the workers' bodies; the workers themselves
(echomq :class:`~echomq.AppWorker` objects, each with its body in its state); plus running them for
as long as a block.

The application's composition root builds one :class:`Pipeline`; tests build one per test with
a ``prefix`` of their own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from aiogram import Bot
from sqlalchemy.exc import SQLAlchemyError

from codemojex.bot import tasks as bot_tasks
from codemojex.bot.worker import COMMAND_CONSUMER, CommandWorker
from codemojex.domain import CodemojexError
from codemojex.game import tasks as game_tasks
from codemojex.game.api import SCORER, SETTLER, Closer, Guesses
from codemojex.game.score import ScoreWorker
from codemojex.game.settle import SettleWorker
from codemojex.keyspace import Keyspace
from codemojex.notify import tasks as notify_tasks
from codemojex.notify.api import Notifier
from codemojex.notify.consumer import NotificationConsumer
from codemojex.notify.policy import NotifyOptions
from codemojex.notify.worker import NotifyWorker
from codemojex.store import Board, Store
from codemojex.store.kv import Valkey
from echomq import App, AppWorker, ConsumerOptions, EchoMQError, Queue
from echomq.consumers import Metronome, Tally
from echomq.engine import Buckets, Minter
from echomq.metrics import Observer
from echomq.testing import discard
from echomq.wire import Wire

log = logging.getLogger("codemojex.sweep")


@dataclass(frozen=True, slots=True)
class Queues:
    """The deployment's four queues, sharing a wire."""

    score: Queue
    settle: Queue
    notify: Queue
    commands: Queue

    @property
    def wire(self) -> Wire:
        """The wire the queues share (also the board's)."""
        return self.score.wire

    def all(self) -> tuple[Queue, Queue, Queue, Queue]:
        return (self.commands, self.score, self.settle, self.notify)


@dataclass(frozen=True, slots=True)
class Tasks:
    """The deployment's four tasks, one per queue, registered on one app."""

    command: bot_tasks.CommandTask
    score: game_tasks.ScoreTask
    settle: game_tasks.SettleTask
    notify: notify_tasks.NotifyTask


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Everything the workers and the producers share."""

    store: Store
    keyspace: Keyspace
    app: App
    tasks: Tasks
    queues: Queues
    minter: Minter
    board: Board
    notifier: Notifier
    closer: Closer
    guesses: Guesses
    scorer: ScoreWorker
    settler: SettleWorker

    @classmethod
    def build(cls, store: Store, wire: Wire, *, minter: Minter, prefix: str = "") -> Pipeline:
        """The pipeline on ``wire``; ``prefix`` goes before every queue name and Valkey key.

        ``minter`` mints every id of the game: one leased from the engine
        (``await Minter.leased(wire).ready()``), so processes never share a node. The app
        borrows both (closing it leaves them open); completed jobs keep no row.
        """
        keyspace = Keyspace(prefix)
        app = App(queue=keyspace.score_queue, wire=wire, minter=minter, result_ttl=0)
        game = game_tasks.register(app, keyspace)
        tasks = Tasks(
            command=bot_tasks.register(app, keyspace.commands_queue),
            score=game.score,
            settle=game.settle,
            notify=notify_tasks.register(app, keyspace.notify_queue),
        )
        queues = Queues(
            app.queue(keyspace.score_queue),
            app.queue(keyspace.settle_queue),
            app.queue(keyspace.notify_queue),
            app.queue(keyspace.commands_queue),
        )
        board = Board(wire, keyspace.game)
        notifier = Notifier(tasks.notify, minter)
        closer = Closer(store, tasks.settle)
        return cls(
            store=store,
            keyspace=keyspace,
            app=app,
            tasks=tasks,
            queues=queues,
            minter=minter,
            board=board,
            notifier=notifier,
            closer=closer,
            guesses=Guesses(store, tasks.score, minter),
            scorer=ScoreWorker(store, queues.score, board, notifier, closer),
            settler=SettleWorker(store, board, notifier, minter),
        )

    def score_consumer(
        self,
        options: ConsumerOptions | None = None,
        *,
        scorer: ScoreWorker | None = None,
        metronome: Metronome | None = None,
        observer: Observer | None = None,
    ) -> AppWorker:
        """A worker of ``cm`` running the ``score`` task with ``scorer`` (default: the
        pipeline's); ``metronome`` when it is one of a pool."""
        body = scorer or self.scorer
        return self._worker(self.queues.score, options, SCORER, body, metronome, observer)

    def settle_consumer(
        self,
        options: ConsumerOptions | None = None,
        *,
        settler: SettleWorker | None = None,
        observer: Observer | None = None,
    ) -> AppWorker:
        """A worker of ``cm-settle`` running the ``settle`` task with ``settler`` (default:
        the pipeline's)."""
        body = settler or self.settler
        return self._worker(self.queues.settle, options, SETTLER, body, None, observer)

    def notification_consumer(
        self,
        bot: Bot,
        options: ConsumerOptions | None = None,
        *,
        notify: NotifyOptions | None = None,
        observer: Observer | None = None,
    ) -> NotificationConsumer:
        """A worker of ``cm.notify`` sending through ``bot`` (the three layers); its
        ``counts`` are the sender's counters and ``run`` raises ``BadTokenError`` on a bad
        token. ``options`` default to ``NOTIFY_CONSUMER`` (batch claims, long leases)."""
        sender = NotifyWorker(bot, self.queues.notify, notify, notifier=self.notifier)
        return NotificationConsumer(self.app, sender, options, observer=observer)

    def command_consumer(
        self,
        worker: CommandWorker,
        options: ConsumerOptions | None = None,
        *,
        metronome: Metronome | None = None,
        observer: Observer | None = None,
    ) -> AppWorker:
        """A worker of ``cm.bot.commands`` running the ``command`` task with ``worker`` (share
        one per process: its lane locks keep a chat's updates in order across the pool)."""
        options = options or COMMAND_CONSUMER
        return self._worker(
            self.queues.commands, options, bot_tasks.COMMANDS, worker, metronome, observer
        )

    def _worker(
        self,
        queue: Queue,
        options: ConsumerOptions | None,
        key: str,
        body: object,
        metronome: Metronome | None,
        observer: Observer | None,
    ) -> AppWorker:
        """An AppWorker of the app serving ``queue`` alone, its task's body in its state
        under ``key``."""
        return AppWorker(
            self.app, [queue.name], options or ConsumerOptions(),
            observer=observer, state={key: body}, metronome=metronome,
        )  # fmt: skip

    async def sweep_forever(self, every: float = 5.0, older_than: float = 30.0) -> None:
        """The periodic sweeps, until cancelled: guesses charged but never enqueued (a crash
        between commit and enqueue) go out again, and expired games get their close."""
        while True:
            try:
                await self.guesses.resweep(older_than=older_than)
                await self.closer.sweep()
            except (CodemojexError, EchoMQError, SQLAlchemyError) as exc:
                log.warning("sweep failed (it runs again in %.1fs): %s", every, exc)
            await asyncio.sleep(every)

    async def forget(self) -> None:
        """Delete every queue and key of this deployment (see :func:`forget`), then
        :meth:`close`."""
        await forget(self.queues.wire, self.keyspace)
        await self.close()

    async def close(self) -> None:
        """Close the app: its queues' own connections (a worker's cancel subscription, result
        waits). The wire and the minter are the caller's, and stay open."""
        await self.app.close()


async def forget(wire: Wire, keyspace: Keyspace) -> None:
    """Delete every queue and key of the deployment ``keyspace`` names: its four queues, the
    game's own keys (:meth:`Keyspace.patterns`) and the notify queue's token buckets. For tests
    and flood runs: a live deployment loses everything."""
    for name in keyspace.queues:
        await discard(Queue(name, wire))
    # The buckets' key for one name, its name swapped for a wildcard: echomq spells the keys.
    buckets = Buckets(wire, keyspace.notify_queue).key("x").removesuffix("x") + "*"
    await Valkey(wire).delete_matching((*keyspace.patterns(), buckets))


@asynccontextmanager
async def serving(workers: Sequence[AppWorker]) -> AsyncIterator[list[Tally]]:
    """Run ``workers`` for the block; on exit stop them and wait for the jobs in hand.

    Yields the list their tallies (one per queue each served) are appended to once they have
    stopped.
    """
    tallies: list[Tally] = []
    runs = [asyncio.ensure_future(worker.run()) for worker in workers]
    try:
        yield tallies
    finally:
        for worker in workers:
            worker.stop()
        for served in await asyncio.gather(*runs):
            tallies.extend(served.values())
