"""The settle worker: the handler of ``cm-settle``. Closes a game exactly once, pays its pool to
the top score (ties split evenly) in diamonds, records the winners, tells the room, and puts the
room back to waiting.

Two guards make the close happen once when a perfect score races the timer and several
consumers run. The close lock (``SET cm:{GAM…}:closed <job id> NX``) lets one close job through;
the others finish at once. Then one SQL transaction closes the game with a conditional UPDATE
(``… WHERE status = 'open'``), credits the winners and records them: it commits whole or not at
all, and a second transaction that gets past a lost lock finds the game closed and pays nothing.
A lock holder that crashed is retried under the same job id, which the lock recognises; a lock
whose holder vanished expires after ``lock_ttl``.

The payout counts the guesses scored when the close commits: a guess charged before the close
but still waiting in its lane is scored afterwards (it was paid for) without changing the prize.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.domain import MAX_TOTAL, Currency, split_pool
from codemojex.notify.api import Notifier
from codemojex.store import (
    Board,
    InvalidId,
    NotFound,
    Store,
    checked_id,
    close_game,
    credit,
    game_view,
    record_winners,
)
from codemojex.store.lookups import player_names, room_chat, top_score
from echomq import Drop
from echomq.engine import Minter

log = logging.getLogger("codemojex.settle")

PRIZE_REASON: Final = "prize"
"""The ledger reason of a winner's share (its reference is the game's ``GAM`` id)."""

SETTLED_MARK: Final = "settled"
"""The close lock's value once the game is settled and announced."""


class SettleOutcome(StrEnum):
    """What one run of the settle worker found."""

    CLOSED = "closed"
    """This run closed the game and paid it out."""
    ALREADY_CLOSED = "already_closed"
    """The game was closed before; nothing was paid."""
    LOCKED = "locked"
    """Another close holds (or held) the lock; nothing was done."""


@dataclass(frozen=True, slots=True)
class Settled:
    """The result of one run: ``shares`` (diamonds per winner) only when it closed the game."""

    game: str
    outcome: SettleOutcome
    shares: Mapping[str, int] = field(default_factory=dict)
    top_score: int | None = None


def closed_text(top: int | None, shares: Mapping[str, int], names: Mapping[str, str]) -> str:
    """The room's message when a game closes: the winners and their prizes, never the secret."""
    if top is None or not shares:
        return "🏁 Game over: no guess was scored. Send /play to start another."
    percent = round(top * 100 / MAX_TOTAL)
    prizes = ", ".join(
        f"{names.get(player, player)} +{share} 💎" if share else names.get(player, player)
        for player, share in shares.items()
    )
    return f"🏁 Game over! Top score {percent}%: {prizes}. Send /play to start another."


class SettleWorker:
    """Closes the games of ``cm-settle``: the body of the ``settle`` task (a settle worker's
    state holds it, :mod:`codemojex.game.tasks`).

    ``board`` holds the close locks and the boards; ``lock_ttl`` (seconds) bounds how
    long a crashed closer blocks the others, ``keep`` (seconds) how long a settled game's lock
    and board are kept.
    """

    def __init__(
        self,
        store: Store,
        board: Board,
        notifier: Notifier,
        minter: Minter,
        *,
        lock_ttl: float = 60.0,
        keep: float = 7 * 24 * 3600.0,
    ) -> None:
        if not lock_ttl > 0 or not keep > 0:
            raise ValueError("lock_ttl and keep are seconds > 0")
        self.store = store
        self.board = board
        self.notifier = notifier
        self.minter = minter
        self.lock_ttl_ms = max(1, round(lock_ttl * 1000))
        self.keep_s = max(1, round(keep))

    async def settle(self, game: str, job: str) -> Settled:
        """Close ``game`` for the close job ``job`` (its ``JOB`` id holds the close lock)."""
        try:
            game = checked_id(game, "GAM", "game")
        except InvalidId as error:
            raise Drop(f"close job {job} names no game: {error}") from None
        holder = await self.board.take_close_lock(game, job, self.lock_ttl_ms)
        # None: this run took the lock. Our own id: an earlier attempt of this job took it and
        # failed part way (maybe after its commit). Anything else: another close got there first.
        is_retry = holder is not None
        if is_retry and holder != job:
            return Settled(game, SettleOutcome.LOCKED)

        async with self.store.transaction() as session:
            try:
                is_closed = await close_game(session, game)
            except NotFound as error:
                raise Drop(str(error)) from None
            view = await game_view(session, game)
            payout: tuple[int | None, dict[str, int]] | None = None
            if is_closed:
                payout = await self._pay_out(session, game, view.pool)
            elif is_retry and view.top_score is not None:
                # An earlier attempt of this job committed the payout: announce it, pay nothing.
                shares = split_pool(view.pool, view.winners) if view.winners else {}
                payout = (view.top_score if view.winners else None), shares
            chat = await room_chat(session, view.room)
            names = await player_names(session, payout[1] if payout is not None else ())

        if payout is None:
            await self.board.mark_settled(game, SETTLED_MARK, self.keep_s)
            return Settled(game, SettleOutcome.ALREADY_CLOSED)
        top, shares = payout
        await self.notifier.notify(
            chat, closed_text(top, shares, names), dedup_key=f"closed:{game}"
        )
        await self.board.mark_settled(game, SETTLED_MARK, self.keep_s)
        if not is_closed:
            return Settled(game, SettleOutcome.ALREADY_CLOSED)
        log.info("game %s closed; top %s, shares %s", game, top, shares)
        return Settled(game, SettleOutcome.CLOSED, shares, top)

    async def _pay_out(
        self, session: AsyncSession, game: str, pool: int
    ) -> tuple[int | None, dict[str, int]]:
        """Credit the pool to the top scorers (ties split evenly) and record them as winners.

        The pool's units are paid one diamond each; a free room's pool is 0 and pays nothing.
        Returns the top total (``None`` when no guess was scored) and each winner's share.
        """
        top = await top_score(session, game)
        if top is None:
            await record_winners(session, game, (), 0)
            return None, {}
        shares = split_pool(pool, top.players)
        for player, share in shares.items():
            if share > 0:
                await credit(
                    session, player, Currency.DIAMONDS, share, PRIZE_REASON, game,
                    minter=self.minter,
                )  # fmt: skip
        await record_winners(session, game, top.players, top.total)
        return top.total, shares
