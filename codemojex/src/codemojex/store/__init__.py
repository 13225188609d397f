"""The SQL system of record: players, wallets with an append-only ledger, rooms, games, guesses;
and the Valkey board (:class:`Board`) with the typed key/value layer (:mod:`codemojex.store.kv`).

SQLite by default (a file), PostgreSQL by URL. Repository functions take an ``AsyncSession``
from :meth:`Store.transaction` and never commit: the caller's block is the transaction.
"""

from codemojex.store._sql import checked_id
from codemojex.store.board import Board, Standing
from codemojex.store.engine import Store, open_store, sqlite_url
from codemojex.store.errors import (
    GameClosed,
    InsufficientFunds,
    InvalidId,
    NotFound,
    UnsupportedDatabase,
)
from codemojex.store.games import (
    GameView,
    Room,
    close_game,
    create_game,
    current_game,
    ensure_room,
    expired_games,
    game_secret,
    game_view,
    record_winners,
)
from codemojex.store.guesses import (
    GuessRecord,
    guess_by_job,
    record_guess,
    set_score,
    unscored_guesses,
)
from codemojex.store.models import GameStatus, RoomKind, RoomStatus
from codemojex.store.wallets import (
    Balances,
    LedgerEntry,
    Player,
    balances,
    credit,
    debit,
    ensure_player,
    find_player,
    ledger_sum,
)

__all__ = [
    "Balances",
    "Board",
    "GameClosed",
    "GameStatus",
    "GameView",
    "GuessRecord",
    "InsufficientFunds",
    "InvalidId",
    "LedgerEntry",
    "NotFound",
    "Player",
    "Room",
    "RoomKind",
    "RoomStatus",
    "Standing",
    "Store",
    "UnsupportedDatabase",
    "balances",
    "checked_id",
    "close_game",
    "create_game",
    "credit",
    "current_game",
    "debit",
    "ensure_player",
    "ensure_room",
    "expired_games",
    "find_player",
    "game_secret",
    "game_view",
    "guess_by_job",
    "ledger_sum",
    "open_store",
    "record_guess",
    "record_winners",
    "set_score",
    "sqlite_url",
    "unscored_guesses",
]
