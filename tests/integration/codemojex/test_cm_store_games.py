"""Rooms, games and charged guesses on a real database: the players' view never holds the
secret, a guess is charged and recorded together or not at all, and a game closes exactly once.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from cm_store_fixtures import (  # noqa: F401 (fixtures register by import)
    ledger_rows,
    minter_fixture,
    new_player,
    store_fixture,
)

from codemojex.domain import (
    FREE_ROOM_FEE,
    PAID_ROOM_FEE,
    STARTING_CLIPS,
    CodeError,
    Currency,
    EconomyError,
    Fee,
)
from codemojex.store import (
    GameClosed,
    GameStatus,
    GameView,
    InsufficientFunds,
    NotFound,
    RoomKind,
    RoomStatus,
    Store,
    balances,
    close_game,
    create_game,
    credit,
    current_game,
    ensure_room,
    expired_games,
    game_secret,
    game_view,
    guess_by_job,
    ledger_sum,
    record_guess,
    record_winners,
    set_score,
    unscored_guesses,
)
from echomq.engine import Minter

SECRET = ("🍎", "🍌", "🍒", "🍇", "🍉", "🥝")
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


async def new_game(
    store: Store,
    minter: Minter,
    *,
    kind: RoomKind = RoomKind.FREE,
    chat: int = -100,
    deadline: datetime | None = None,
) -> GameView:
    fee = PAID_ROOM_FEE if kind is RoomKind.PAID else FREE_ROOM_FEE
    async with store.transaction() as session:
        room = await ensure_room(session, chat, kind, "fruit", minter)
        game = await create_game(
            session,
            room.id,
            "fruit",
            SECRET,
            deadline or datetime.now(UTC) + timedelta(hours=35),
            fee,
            minter=minter,
        )
    assert game is not None
    return game


async def test_a_game_starts_in_a_waiting_room_and_only_once(store: Store, minter: Minter) -> None:
    game = await new_game(store, minter, kind=RoomKind.PAID)

    async with store.transaction() as session:
        room = await ensure_room(session, -100, RoomKind.FREE, "other", minter)
        again = await create_game(
            session, room.id, "fruit", SECRET, NOW, PAID_ROOM_FEE, minter=minter
        )
        assert await current_game(session, room.id) == game

    assert again is None
    assert (room.id, room.kind, room.emoji_set, room.status) == (
        game.room,
        RoomKind.PAID,
        "fruit",
        RoomStatus.PLAYING,
    )
    assert game.id.startswith("GAM")
    assert (game.status, game.pool, game.fee, game.winners) == (
        GameStatus.OPEN,
        0,
        PAID_ROOM_FEE,
        (),
    )
    assert game.deadline.tzinfo is not None


async def test_the_players_view_of_a_game_has_no_secret(store: Store, minter: Minter) -> None:
    game = await new_game(store, minter)
    async with store.read() as session:
        viewed = await game_view(session, game.id)
        secret = await game_secret(session, game.id)

    assert secret == SECRET
    names = {field.name for field in dataclasses.fields(GameView)}
    assert not any("secret" in name for name in names)
    assert not hasattr(viewed, "secret")
    for shown in (repr(viewed), str(viewed), repr(dataclasses.asdict(viewed))):
        assert "".join(SECRET) not in shown
        assert not any(symbol in shown for symbol in SECRET)


async def test_the_fee_must_be_the_currency_of_the_room(store: Store, minter: Minter) -> None:
    async with store.transaction() as session:
        room = await ensure_room(session, -5, RoomKind.FREE, "fruit", minter)
        with pytest.raises(EconomyError) as caught:
            await create_game(session, room.id, "fruit", SECRET, NOW, PAID_ROOM_FEE, minter=minter)
        assert caught.value.reason == "fee_currency"
        with pytest.raises(CodeError):
            await create_game(session, room.id, "fruit", (), NOW, FREE_ROOM_FEE, minter=minter)
        with pytest.raises(NotFound):
            await create_game(
                session, minter.mint("ROM"), "fruit", SECRET, NOW, FREE_ROOM_FEE, minter=minter
            )
        assert await current_game(session, room.id) is None


async def test_a_guess_is_charged_and_recorded_together(store: Store, minter: Minter) -> None:
    player = await new_player(store, minter)
    game = await new_game(store, minter)
    job = minter.mint("JOB")

    async with store.transaction() as session:
        guess = await record_guess(
            session, game.id, player, job, "🍎🍎🍎🍎🍎🍎", FREE_ROOM_FEE, minter=minter
        )

    assert guess.id.startswith("GES")
    assert (guess.game, guess.player, guess.job_id, guess.total, guess.positions) == (
        game.id,
        player,
        job,
        None,
        None,
    )
    async with store.read() as session:
        assert (await balances(session, player)).clips == STARTING_CLIPS - 1
        assert await ledger_sum(session, player, Currency.CLIPS) == STARTING_CLIPS - 1
        assert await guess_by_job(session, job) == guess
        assert (await game_view(session, game.id)).pool == 0  # clips never feed a pool


async def test_a_paid_guess_feeds_the_prize_pool(store: Store, minter: Minter) -> None:
    player = await new_player(store, minter)
    game = await new_game(store, minter, kind=RoomKind.PAID)
    async with store.transaction() as session:
        await credit(session, player, Currency.KEYS, 2, "purchase", minter=minter)
        for _ in range(2):
            await record_guess(
                session, game.id, player, minter.mint("JOB"), "🍎", PAID_ROOM_FEE, minter=minter
            )
        assert (await game_view(session, game.id)).pool == 2
        assert (await balances(session, player)).keys == 0


async def test_a_repeated_job_id_returns_the_guess_and_charges_once(
    store: Store, minter: Minter
) -> None:
    player = await new_player(store, minter)
    game = await new_game(store, minter)
    job = minter.mint("JOB")

    async def submit() -> str:
        async with store.transaction() as session:
            recorded = await record_guess(
                session, game.id, player, job, "🍌", FREE_ROOM_FEE, minter=minter
            )
            return recorded.id

    ids = await asyncio.gather(*(submit() for _ in range(5)))

    assert len(set(ids)) == 1
    async with store.read() as session:
        assert (await balances(session, player)).clips == STARTING_CLIPS - 1
    assert await ledger_rows(store, player) == 2


@pytest.mark.parametrize("problem", ["closed", "expired"])
async def test_a_guess_into_a_closed_or_expired_game_is_refused_uncharged(
    store: Store, minter: Minter, problem: str
) -> None:
    player = await new_player(store, minter)
    if problem == "closed":
        game = await new_game(store, minter)
        async with store.transaction() as session:
            assert await close_game(session, game.id)
    else:
        game = await new_game(store, minter, deadline=datetime.now(UTC) - timedelta(seconds=1))
    job = minter.mint("JOB")

    with pytest.raises(GameClosed) as caught:
        async with store.transaction() as session:
            await record_guess(session, game.id, player, job, "🍎", FREE_ROOM_FEE, minter=minter)

    assert caught.value.reason == problem
    assert caught.value.game == game.id
    assert game.id in str(caught.value)
    async with store.read() as session:
        assert (await balances(session, player)).clips == STARTING_CLIPS
        assert await guess_by_job(session, job) is None
        assert await unscored_guesses(session, datetime.now(UTC) + timedelta(days=1)) == ()
    assert await ledger_rows(store, player) == 1


async def test_a_refused_guess_leaves_the_callers_transaction_as_it_was(
    store: Store, minter: Minter
) -> None:
    player = await new_player(store, minter)
    game = await new_game(store, minter, kind=RoomKind.PAID)
    async with store.transaction() as session:
        with pytest.raises(InsufficientFunds):
            await record_guess(
                session, game.id, player, minter.mint("JOB"), "🍎", PAID_ROOM_FEE, minter=minter
            )
        with pytest.raises(EconomyError):
            await record_guess(
                session,
                game.id,
                player,
                minter.mint("JOB"),
                "🍎",
                Fee(Currency.KEYS, 2),
                minter=minter,
            )
        with pytest.raises(NotFound):
            await record_guess(
                session,
                minter.mint("GAM"),
                player,
                minter.mint("JOB"),
                "🍎",
                FREE_ROOM_FEE,
                minter=minter,
            )
    # The block committed; the pool increment made before the debit was refused was undone.
    async with store.read() as session:
        assert (await game_view(session, game.id)).pool == 0
        assert (await balances(session, player)).keys == 0
    assert await ledger_rows(store, player) == 1


async def test_close_game_returns_true_exactly_once_under_concurrent_callers(
    store: Store, minter: Minter
) -> None:
    game = await new_game(store, minter)

    async def close() -> bool:
        async with store.transaction() as session:
            return await close_game(session, game.id)

    outcomes = await asyncio.gather(*(close() for _ in range(10)))

    assert outcomes.count(True) == 1
    async with store.read() as session:
        closed = await game_view(session, game.id)
        assert closed.status is GameStatus.CLOSED
        assert closed.closed_at is not None
        assert await current_game(session, game.room) is None
    async with store.transaction() as session:
        assert await close_game(session, game.id) is False
        with pytest.raises(NotFound):
            await close_game(session, minter.mint("GAM"))
        room = await ensure_room(session, -100, RoomKind.FREE, "fruit", minter)
    assert room.status is RoomStatus.WAITING


async def test_guesses_racing_a_close_are_either_recorded_and_charged_or_refused_uncharged(
    store: Store, minter: Minter
) -> None:
    players = [await new_player(store, minter, telegram_id=500 + n) for n in range(10)]
    game = await new_game(store, minter)

    async def guess(player: str) -> bool:
        try:
            async with store.transaction() as session:
                await record_guess(
                    session, game.id, player, minter.mint("JOB"), "🍇", FREE_ROOM_FEE, minter=minter
                )
        except GameClosed:
            return False
        return True

    async def close() -> bool:
        async with store.transaction() as session:
            return await close_game(session, game.id)

    # The close is submitted in the middle of the burst, so guesses land on both sides of it.
    guesses = [guess(player) for player in players]
    results = await asyncio.gather(*guesses[:5], close(), *guesses[5:])
    charged_flags = results[:5] + results[6:]

    assert results[5] is True
    async with store.read() as session:
        recorded = await unscored_guesses(session, datetime.now(UTC) + timedelta(days=1))
        assert len(recorded) == charged_flags.count(True)
        for player, charged in zip(players, charged_flags, strict=True):
            expected = STARTING_CLIPS - 1 if charged else STARTING_CLIPS
            assert (await balances(session, player)).clips == expected
            assert await ledger_sum(session, player, Currency.CLIPS) == expected


async def test_unscored_guesses_are_found_and_scored_once(store: Store, minter: Minter) -> None:
    player = await new_player(store, minter)
    game = await new_game(store, minter)
    async with store.transaction() as session:
        old = await record_guess(
            session,
            game.id,
            player,
            minter.mint("JOB"),
            "old",
            FREE_ROOM_FEE,
            minter=minter,
            now=NOW,
        )
        new = await record_guess(
            session,
            game.id,
            player,
            minter.mint("JOB"),
            "new",
            FREE_ROOM_FEE,
            minter=minter,
            now=NOW + timedelta(minutes=5),
        )

    async with store.transaction() as session:
        assert await unscored_guesses(session, NOW + timedelta(minutes=1)) == (old,)
        assert await unscored_guesses(session, NOW + timedelta(minutes=10)) == (old, new)
        assert await set_score(session, old.id, 240, [100, 80, 60, 0, 0, 0]) is True
        assert await set_score(session, old.id, 240, [100, 80, 60, 0, 0, 0]) is False
        with pytest.raises(CodeError):
            await set_score(session, new.id, 600, [100])
        with pytest.raises(NotFound):
            await set_score(session, minter.mint("GES"), 0, [0] * 6)
        assert await unscored_guesses(session, NOW + timedelta(minutes=10)) == (new,)
        scored = await guess_by_job(session, old.job_id)
    assert scored is not None
    assert (scored.total, scored.positions) == (240, (100, 80, 60, 0, 0, 0))


async def test_expired_games_are_listed_for_the_sweep(store: Store, minter: Minter) -> None:
    running = await new_game(store, minter, chat=-1, deadline=NOW + timedelta(hours=1))
    due = await new_game(store, minter, chat=-2, deadline=NOW - timedelta(seconds=1))
    async with store.transaction() as session:
        assert await expired_games(session, NOW) == (due.id,)
        assert await expired_games(session, NOW + timedelta(hours=2)) == (running.id, due.id)
        await close_game(session, due.id)
        assert await expired_games(session, NOW) == ()


async def test_winners_are_recorded_once_on_a_closed_game(store: Store, minter: Minter) -> None:
    game = await new_game(store, minter)
    winners = [minter.mint("PLR"), minter.mint("PLR")]
    async with store.transaction() as session:
        with pytest.raises(NotFound):
            await record_winners(session, game.id, winners, 600)
        await close_game(session, game.id)
        assert await record_winners(session, game.id, winners, 600) is True
        assert await record_winners(session, game.id, winners[:1], 500) is False
        viewed = await game_view(session, game.id)
    assert (viewed.winners, viewed.top_score) == (tuple(winners), 600)
