"""Submitting a guess: validate it, charge the fee and record the guess with its ``JOB`` id in
one transaction, commit, then enqueue it on the player's lane of ``cm``.

The charge comes first and is the system of record: an enqueue that fails (or a crash between
the commit and the enqueue) leaves a charged, unscored guess that :meth:`Guesses.resweep`
enqueues again under the same ``JOB`` id. Admission is idempotent by id, and writing a score is
idempotent by guess, so a guess is charged once and scored once however often it is enqueued.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from codemojex.domain import Currency, EmojiSet, Fee, get_set, parse_guess
from codemojex.store import (
    GameClosed,
    GameStatus,
    GuessRecord,
    InsufficientFunds,
    Store,
    checked_id,
    game_view,
    guess_by_job,
    record_guess,
    unscored_guesses,
)
from codemojex.store.allowance import grant_allowance
from codemojex.store.memo import Memo
from echomq import EchoMQError, Queue, Task
from echomq.engine import Minter

if TYPE_CHECKING:
    from codemojex.game.score import Scored

log = logging.getLogger("codemojex.guesses")


@dataclass(frozen=True, slots=True)
class Receipt:
    """A charged guess: its ``GES`` and ``JOB`` ids, its symbols and the fee paid.

    ``is_queued`` is ``False`` when the enqueue after the commit failed; the guess stays charged
    and :meth:`Guesses.resweep` enqueues it later.
    """

    guess: str
    job: str
    game: str
    player: str
    symbols: tuple[str, ...]
    fee: Fee
    is_queued: bool
    topped_up: int = 0
    """Clips the daily allowance credited to pay this guess (0: none was needed)."""


@dataclass(frozen=True, slots=True)
class Resweep:
    """What one resweep did with the charged-but-unscored guesses it found."""

    found: int
    enqueued: int
    duplicate: int
    failed: int


def score_payload(record: GuessRecord) -> tuple[str, str, str]:
    """The arguments of a guess's ``score`` task (game, guess, player): ids only, never the
    guess or the secret."""
    return record.game, record.id, record.player


@dataclass(frozen=True, slots=True)
class _Terms:
    """What a started game fixes for every guess (its status is checked by the charge)."""

    keyboard: EmojiSet
    fee: Fee
    deadline: datetime


class Guesses:
    """Submits guesses into ``store`` and as ``score`` tasks (on ``cm``), minting ids with
    ``minter``."""

    def __init__(self, store: Store, score: Task[[str, str, str], Scored], minter: Minter) -> None:
        self.store = store
        self.score = score
        #: ``cm``, for its lanes (pause, resume, depth).
        self.queue: Queue = score.app.queue(score.queue)
        self.minter = minter
        self._terms: Memo[str, _Terms] = Memo()
        self._reading: dict[str, asyncio.Future[_Terms]] = {}  # one read per game at a time

    async def submit(
        self,
        game: str,
        player: str,
        guess_text: str,
        *,
        job: str | None = None,
        message: int | None = None,
    ) -> Receipt:
        """Charge ``player`` the fee of ``game`` for ``guess_text`` and enqueue it for scoring.

        ``job`` (a ``JOB`` id) makes the submit idempotent: the guess is recorded under it, and
        a second submit with the same ``job`` (the command worker running one update again
        after a crash) finds that guess, charges nothing and enqueues it again (a duplicate
        while it waits). Without it a fresh ``JOB`` id is minted: every call is a new guess.
        ``message`` (a group guess's Telegram message id) goes with the score job, so the
        group's answer can reply to it.

        Refused before any charge, each a :class:`~codemojex.domain.CodemojexError` naming the
        problem: :class:`~codemojex.store.NotFound` (no such game or player),
        :class:`~codemojex.store.GameClosed` (reason ``closed`` or ``expired``),
        :class:`~codemojex.domain.GuessError` (too few or too many emojis, or an emoji not on the
        game's keyboard), :class:`~codemojex.store.InsufficientFunds` (the balance cannot pay).
        """
        game = checked_id(game, "GAM", "game")
        player = checked_id(player, "PLR", "player")
        if job is not None:
            # Before the checks: a game closed since the first run must not refuse a guess
            # that run already charged.
            async with self.store.read() as session:
                charged = await guess_by_job(session, checked_id(job, "JOB", "job"))
            if charged is not None:
                return await self._receipt(charged)
        terms = await self._terms_of(game)
        if terms.deadline <= datetime.now(UTC):
            raise GameClosed(game, "expired")
        symbols = parse_guess(guess_text, terms.keyboard)

        job = job if job is not None else self.minter.mint("JOB")
        text = "".join(symbols)
        topped_up = 0
        try:
            async with self.store.transaction() as session:
                # Checks open and not expired again under the write: the checks above fail
                # fast, and a game closed since its terms were read is refused here.
                record = await record_guess(
                    session, game, player, job, text, terms.fee, minter=self.minter
                )
        except InsufficientFunds as short:
            if short.currency is not Currency.CLIPS:
                raise
            # Out of clips: today's allowance, if due, commits with the guess it pays for. None
            # granted may still pay: a concurrent submit's grant committed since (then this one
            # waited on it); if not, record_guess refuses again with the current balance.
            async with self.store.transaction() as session:
                topped_up = await grant_allowance(
                    session, player, terms.fee.amount, minter=self.minter
                )
                record = await record_guess(
                    session, game, player, job, text, terms.fee, minter=self.minter
                )
        return Receipt(
            topped_up=topped_up,
            guess=record.id,
            job=record.job_id,
            game=game,
            player=player,
            symbols=symbols,
            fee=terms.fee,
            is_queued=await self._enqueue(record, message),
        )

    async def _receipt(self, record: GuessRecord) -> Receipt:
        """The receipt of a guess charged before (it is enqueued again: a duplicate if waiting)."""
        async with self.store.read() as session:
            view = await game_view(session, record.game)
        return Receipt(
            guess=record.id,
            job=record.job_id,
            game=record.game,
            player=record.player,
            symbols=parse_guess(record.guess_text, get_set(view.keyboard), distinct=False),
            fee=view.fee,
            is_queued=await self._enqueue(record),
        )

    async def _terms_of(self, game: str) -> _Terms:
        """The game's terms, cached; concurrent misses share one read. A burst of submits to a
        game not cached yet (a flood of 2,000 at once) would otherwise each take a connection
        for the same row and starve the pool the charges need."""
        cached = self._terms.get(game)
        if cached is not None:
            return cached
        reading = self._reading.get(game)
        if reading is None:
            reading = self._reading[game] = asyncio.ensure_future(self._read_terms(game))
            reading.add_done_callback(lambda _: self._reading.pop(game, None))
        # Shielded: one caller cancelled does not cancel the read the others wait on.
        return self._terms.put(game, await asyncio.shield(reading))

    async def _read_terms(self, game: str) -> _Terms:
        async with self.store.read() as session:
            view = await game_view(session, game)
        if view.status is not GameStatus.OPEN:
            raise GameClosed(game, "closed")
        return _Terms(get_set(view.keyboard), view.fee, view.deadline)

    async def _enqueue(self, record: GuessRecord, message: int | None = None) -> bool:
        extra = {} if message is None else {"message": message}
        try:
            handle = await self.score.using(id=record.job_id).enqueue(
                *score_payload(record), **extra
            )
            verdict = handle.verdict
        except EchoMQError as error:
            log.warning("guess %s is charged but not enqueued (resweep will): %s", record.id, error)
            return False
        if not verdict.ok:
            log.warning("guess %s is charged but not enqueued: %s", record.id, verdict.error)
        return verdict.ok

    async def resweep(self, older_than: float = 30.0, *, limit: int = 1000) -> Resweep:
        """Enqueue again, under their own ``JOB`` ids, guesses charged over ``older_than``
        seconds ago and still unscored (at most ``limit``, oldest first).

        A guess whose job is still waiting or running answers ``duplicate``; a guess scored in
        the meantime is enqueued but its score is not written twice. Run it periodically, with
        ``older_than`` comfortably above the time a guess takes to be scored.
        """
        if older_than < 0:
            raise ValueError(f"older_than {older_than!r}: seconds, 0 or more")
        cutoff = datetime.now(UTC) - timedelta(seconds=older_than)
        async with self.store.read() as session:
            records = await unscored_guesses(session, cutoff, limit=limit)
        if not records:
            return Resweep(0, 0, 0, 0)
        handles = await self.score.app.enqueue_many(
            self.score.using(id=record.job_id).call(*score_payload(record)) for record in records
        )
        kinds = [handle.verdict.kind for handle in handles]
        return Resweep(
            found=len(records),
            enqueued=kinds.count("enqueued"),
            duplicate=kinds.count("duplicate"),
            failed=kinds.count("error") + kinds.count("unknown"),
        )

    async def pause(self, player: str) -> bool:
        """Stop scoring ``player``'s guesses (they keep waiting); ``False`` if already paused."""
        return await self.queue.lane(checked_id(player, "PLR", "player")).pause()

    async def resume(self, player: str) -> bool:
        """Score ``player``'s guesses again; ``False`` if the lane was not paused."""
        return await self.queue.lane(checked_id(player, "PLR", "player")).resume()

    async def depth(self, player: str) -> int:
        """How many of ``player``'s guesses wait to be scored."""
        return await self.queue.lane(checked_id(player, "PLR", "player")).depth()
