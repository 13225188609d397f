"""What the operators' dashboard reads for the game's lanes: players by name (their ``PLR``
lane, their private chat), a group's chat by its room; lanes it does not know stay unnamed."""

from __future__ import annotations

from cm_store_fixtures import (  # noqa: F401 (fixtures register by import)
    minter_fixture,
    new_player,
    store_fixture,
)

from codemojex.store import RoomKind, Store, ensure_room
from codemojex.store.lookups import lane_labels
from echomq.engine import Minter


async def test_lanes_read_as_players_and_rooms(store: Store, minter: Minter) -> None:
    ada = await new_player(store, minter, telegram_id=1001)
    async with store.transaction() as session:
        group = await ensure_room(session, -100123, RoomKind.FREE, "fruit", minter)
    async with store.read() as session:
        labels = await lane_labels(session, [ada, "1001", "-100123", "777", "GAM0000000001", ""])
    assert labels == {
        ada: "Ada",
        "1001": "Ada (private chat)",
        "-100123": f"free room {group.id}",
    }
