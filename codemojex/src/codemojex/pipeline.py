"""The game's pipeline composed once (part of the composition root): the four queues on one
wire, each built by its stage's producer API; the board, the notifier, the game's producers
(guesses, closes) and its two handlers; plus running consumers for as long as a block.

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

from codemojex.bot.api import commands_queue
from codemojex.domain import CodemojexError
from codemojex.game.api import Closer, GameQueues, Guesses
from codemojex.game.score import ScoreWorker
from codemojex.game.settle import SettleWorker
from codemojex.keyspace import Keyspace
from codemojex.notify.api import Notifier, notify_queue
from codemojex.notify.consumer import NotificationConsumer
from codemojex.notify.policy import NotifyOptions
from codemojex.notify.worker import NotifyWorker
from codemojex.store import Board, Store
from codemojex.store.kv import Valkey
from echomq import Buckets, Consumer, ConsumerOptions, EchoMQError, Minter, Queue, Tally, Wire
from echomq.testing import discard

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
class Pipeline:
    """Everything the ``cm`` and ``cm-settle`` consumers and the producers share."""

    store: Store
    keyspace: Keyspace
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
        (``await Minter.leased(wire).ready()``), so processes never share a node.
        """
        keyspace = Keyspace(prefix)
        game = GameQueues.on(wire, keyspace, minter)
        queues = Queues(
            game.score,
            game.settle,
            notify_queue(wire, keyspace, minter),
            commands_queue(wire, keyspace, minter),
        )
        board = Board(wire, keyspace.game)
        notifier = Notifier(queues.notify, minter)
        closer = Closer(store, queues.settle)
        return cls(
            store=store,
            keyspace=keyspace,
            queues=queues,
            minter=minter,
            board=board,
            notifier=notifier,
            closer=closer,
            guesses=Guesses(store, queues.score, minter),
            scorer=ScoreWorker(store, queues.score, board, notifier, closer),
            settler=SettleWorker(store, board, notifier, minter),
        )

    def score_consumer(
        self, options: ConsumerOptions | None = None, name: str = "score"
    ) -> Consumer:
        """A consumer of ``cm`` running the score worker."""
        return Consumer(self.queues.score, self.scorer, options, name=name)

    def notification_consumer(
        self,
        bot: Bot,
        options: ConsumerOptions | None = None,
        name: str = "notify",
        *,
        notify: NotifyOptions | None = None,
    ) -> NotificationConsumer:
        """A consumer of ``cm.notify`` sending through ``bot`` (the three layers); its
        ``counts`` are the worker's counters and ``run`` raises ``BadTokenError`` on a bad
        token. ``options`` default to ``NOTIFY_CONSUMER`` (batch claims, long leases)."""
        worker = NotifyWorker(bot, self.queues.notify, notify)
        return NotificationConsumer(worker, options, name=name)

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
        """Delete every queue and key of this deployment (see :func:`forget`)."""
        await forget(self.queues.wire, self.keyspace)

    def settle_consumer(
        self, options: ConsumerOptions | None = None, name: str = "settle"
    ) -> Consumer:
        """A consumer of ``cm-settle`` running the settle worker."""
        return Consumer(self.queues.settle, self.settler, options, name=name)


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
async def serving(consumers: Sequence[Consumer]) -> AsyncIterator[list[Tally]]:
    """Run ``consumers`` for the block; on exit stop them and wait for the jobs in hand.

    Yields the list their tallies are appended to once they have stopped.
    """
    tallies: list[Tally] = []
    runs = [asyncio.ensure_future(consumer.run()) for consumer in consumers]
    try:
        yield tallies
    finally:
        for consumer in consumers:
            consumer.stop()
        tallies.extend(await asyncio.gather(*runs))
