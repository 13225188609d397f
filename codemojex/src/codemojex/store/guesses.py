"""Charged guesses: one transaction debits the fee and records the guess with its ``JOB`` id, so
a charged guess is never lost; unscored guesses are found again for re-enqueueing, and a score
is written once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from sqlalchemy import Row, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.domain import CodeError, Currency, EconomyError, Fee
from codemojex.store._sql import checked_id, utc_now
from codemojex.store.errors import GameClosed, NotFound
from codemojex.store.models import GameRow, GameStatus, GuessRow
from codemojex.store.wallets import debit
from echomq.engine import Minter

GUESS_REASON: Final = "guess"
"""The ledger reason of a guess fee (its reference is the guess's ``GES`` id)."""


@dataclass(frozen=True, slots=True)
class GuessRecord:
    """A charged guess; ``total`` and ``positions`` are ``None`` until it is scored."""

    id: str
    game: str
    player: str
    job_id: str
    guess_text: str
    total: int | None
    positions: tuple[int, ...] | None
    created_at: datetime


_COLUMNS: Final = (
    GuessRow.id,
    GuessRow.game_id,
    GuessRow.player_id,
    GuessRow.job_id,
    GuessRow.guess_text,
    GuessRow.score_total,
    GuessRow.position_scores,
    GuessRow.created_at,
)


async def record_guess(
    session: AsyncSession,
    game: str,
    player: str,
    job_id: str,
    guess_text: str,
    fee: Fee,
    *,
    minter: Minter,
    now: datetime | None = None,
) -> GuessRecord:
    """Charge ``fee`` and record the guess (unscored) under ``job_id``, all or nothing.

    The game row is claimed first with a conditional UPDATE (open, before its deadline; a paid
    game's fee is added to its pool there), so a concurrent close either waits for this guess or
    refuses it. Refused, with nothing charged: :class:`GameClosed` (``closed``/``expired``),
    :class:`~codemojex.store.errors.InsufficientFunds`, :class:`NotFound`, a ``fee`` that is not
    the game's (:class:`EconomyError`). A ``job_id`` seen before returns that guess uncharged.
    """
    game = checked_id(game, "GAM", "game")
    player = checked_id(player, "PLR", "player")
    job_id = checked_id(job_id, "JOB", "job_id")
    at = utc_now(now)
    existing = await guess_by_job(session, job_id)
    if existing is not None:
        return existing
    guess = minter.mint("GES")
    try:
        # A savepoint: a refusal after the game row was touched leaves the caller's transaction
        # exactly as it was, even if the caller catches the error and commits.
        async with session.begin_nested():
            claimed = (
                await session.execute(
                    update(GameRow)
                    .where(
                        GameRow.id == game,
                        GameRow.status == GameStatus.OPEN,
                        GameRow.deadline > at,
                    )
                    .values(pool=GameRow.pool + _pool_share(fee))
                    .returning(GameRow.fee_currency, GameRow.fee_amount)
                    .execution_options(synchronize_session=False)
                )
            ).one_or_none()
            if claimed is None:
                raise await _refusal(session, game)
            if Fee(claimed.fee_currency, claimed.fee_amount) != fee:
                raise EconomyError(
                    "fee", fee, "fee_mismatch", f"the game charges {claimed.fee_amount} "
                    f"{claimed.fee_currency.value}"
                )  # fmt: skip
            await debit(
                session, player, fee.currency, fee.amount, GUESS_REASON, guess,
                minter=minter, now=at,
            )  # fmt: skip
            await session.execute(
                insert(GuessRow).values(
                    id=guess,
                    game_id=game,
                    player_id=player,
                    job_id=job_id,
                    guess_text=guess_text,
                    created_at=at,
                )
            )
    except IntegrityError:
        # Another transaction recorded the same job id first: that guess stands, charged once.
        existing = await guess_by_job(session, job_id)
        if existing is None:
            raise
        return existing
    return GuessRecord(
        id=guess,
        game=game,
        player=player,
        job_id=job_id,
        guess_text=guess_text,
        total=None,
        positions=None,
        created_at=at,
    )


async def guess_by_job(session: AsyncSession, job_id: str) -> GuessRecord | None:
    """The guess recorded under ``job_id``, or ``None``."""
    job_id = checked_id(job_id, "JOB", "job_id")
    row = (await session.execute(select(*_COLUMNS).where(GuessRow.job_id == job_id))).one_or_none()
    return None if row is None else _record(row)


async def unscored_guesses(
    session: AsyncSession, older_than: datetime, *, limit: int = 1000
) -> tuple[GuessRecord, ...]:
    """Guesses recorded before ``older_than`` and still unscored, oldest first, at most ``limit``.

    The re-enqueue sweep's input: a guess charged but never enqueued (or whose job was lost)
    shows up here; re-enqueueing under its own ``job_id`` is idempotent.
    """
    rows = await session.execute(
        select(*_COLUMNS)
        .where(GuessRow.score_total.is_(None), GuessRow.created_at < utc_now(older_than))
        .order_by(GuessRow.id)
        .limit(limit)
    )
    return tuple(_record(row) for row in rows)


async def set_score(
    session: AsyncSession,
    guess: str,
    total: int,
    positions: Sequence[int],
    *,
    now: datetime | None = None,
) -> bool:
    """Write the score of ``guess``; ``True`` if this call wrote it, ``False`` if already scored.

    Idempotent: scoring is deterministic, so a re-delivered job's score is the one on file.
    ``total`` must be the sum of ``positions`` (:class:`CodeError`).
    """
    guess = checked_id(guess, "GES", "guess")
    points = [int(point) for point in positions]
    if sum(points) != total:
        raise CodeError("score", "inconsistent", f"total {total} is not the sum of {points}")
    written = await session.scalar(
        update(GuessRow)
        .where(GuessRow.id == guess, GuessRow.score_total.is_(None))
        .values(score_total=total, position_scores=json.dumps(points), scored_at=utc_now(now))
        .returning(GuessRow.id)
        .execution_options(synchronize_session=False)
    )
    if written is not None:
        return True
    if await session.scalar(select(GuessRow.id).where(GuessRow.id == guess)) is None:
        raise NotFound("guess", guess)
    return False


def _pool_share(fee: Fee) -> int:
    # Paid rooms charge keys and their fees feed the prize pool; clips have no value.
    return fee.amount if fee.currency is Currency.KEYS else 0


async def _refusal(session: AsyncSession, game: str) -> GameClosed | NotFound:
    status = await session.scalar(select(GameRow.status).where(GameRow.id == game))
    if status is None:
        return NotFound("game", game)
    return GameClosed(game, "closed" if status is GameStatus.CLOSED else "expired")


def _record(row: Row[*tuple[Any, ...]]) -> GuessRecord:
    return GuessRecord(
        id=row.id,
        game=row.game_id,
        player=row.player_id,
        job_id=row.job_id,
        guess_text=row.guess_text,
        total=row.score_total,
        positions=None if row.position_scores is None else tuple(json.loads(row.position_scores)),
        created_at=row.created_at,
    )
