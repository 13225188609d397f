"""The game's pipeline composed once: the queues on one wire, the board, the notifier, the
services (guesses, closes) and the two handlers, plus running consumers for as long as a block.

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

from codemojex.domain import CodemojexError
from codemojex.services import Closer, GameQueues, Guesses, Notifier
from codemojex.store import Board, Store
from codemojex.workers.notify import NotificationConsumer, NotifyWorker
from codemojex.workers.notify_policy import NotifyOptions
from codemojex.workers.score import ScoreWorker
from codemojex.workers.settle import SettleWorker
from echomq import Consumer, ConsumerOptions, EchoMQError, Minter, Tally, Wire

log = logging.getLogger("codemojex.sweep")


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Everything the ``cm`` and ``cm-settle`` consumers and the producers share."""

    store: Store
    queues: GameQueues
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
        queues = GameQueues.on(wire, minter=minter, prefix=prefix)
        board = Board(wire, prefix=f"{prefix}cm")
        notifier = Notifier(queues.notify, minter)
        closer = Closer(store, queues.settle)
        return cls(
            store=store,
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

    def settle_consumer(
        self, options: ConsumerOptions | None = None, name: str = "settle"
    ) -> Consumer:
        """A consumer of ``cm-settle`` running the settle worker."""
        return Consumer(self.queues.settle, self.settler, options, name=name)


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
