"""The flood scenario as data: its options and the plan a seed draws from them — the rooms, their
players, each game's secret, every guess and when quiet players send theirs. The same seed and
options always give the same plan; only the machine's speed varies from run to run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from codemojex.domain import CODE_LENGTH, draw_secret, get_set

KEYBOARD = "classic"
"""The emoji set of every flood game."""

LOUD_CHAT = -2000
"""The loud room's group chat; quiet rooms are the group chats below it (-2001, -2002, …)."""

FIRST_USER = 200_000
"""The Telegram id of the first flood player (private chat id == user id)."""


@dataclass(frozen=True, slots=True)
class FloodOptions:
    """The flood's size and pace. Durations are seconds.

    ``players`` hammer the loud room, each sending ``guesses`` guesses back to back, from
    ``flood_at`` on; ``watchers`` more members of the loud room only watch. ``quiet_rooms``
    rooms of ``quiet_players`` players each play for ``duration``, each player guessing every
    ``pace`` seconds on average (uniformly between half and one and a half times that). Then a
    loud player cracks the code, the quiet games close by the timer, and every member of every
    room gets the result privately: the burst of notifications.
    ``score_concurrency`` is the score consumer's; ``window`` the fairness window; the flood
    waits at most ``drain_timeout`` for the last scores and sends after the play ends.
    """

    players: int = 12
    guesses: int = 50
    watchers: int = 60
    quiet_rooms: int = 3
    quiet_players: int = 3
    duration: float = 20.0
    pace: float = 2.0
    flood_at: float = 2.0
    seed: int = 2026
    score_concurrency: int = 4
    window: float = 1.0
    drain_timeout: float = 60.0

    def __post_init__(self) -> None:
        for name in ("players", "guesses", "quiet_rooms", "quiet_players", "score_concurrency"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} {value!r}: an integer >= 1")
        for name in ("duration", "pace", "window", "drain_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"{name} {value!r}: seconds > 0")
        watchers = self.watchers
        if isinstance(watchers, bool) or not isinstance(watchers, int) or watchers < 0:
            raise ValueError(f"watchers {self.watchers!r}: an integer >= 0")
        if not 0 <= self.flood_at < self.duration:
            raise ValueError(f"flood_at {self.flood_at!r}: seconds, from 0 to below duration")


SMALL = FloodOptions(
    players=4,
    guesses=120,
    watchers=20,
    quiet_rooms=2,
    quiet_players=2,
    duration=10.0,
    pace=1.0,
    flood_at=1.0,
    score_concurrency=2,
)
"""The test suite's preset (``--small``): the same shape in 10–20 seconds on a loaded laptop.
Few loud players with deep lanes and two scorers: the loud room's backlog, not the store's
write lock that every guess shares, sets its latency, so the loud/quiet ordering has a margin."""


@dataclass(frozen=True, slots=True)
class PlayerPlan:
    """One player: Telegram id and name, and the guesses they send, in order; ``at`` holds the
    send times (seconds after the start) of a quiet player and is empty for a loud one."""

    user: int
    name: str
    guesses: tuple[str, ...]
    at: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class RoomPlan:
    """One room: its label, group chat id, title, game secret, players, and ``watchers``: the
    Telegram ids of members who do not guess but get the result."""

    label: str
    chat: int
    title: str
    secret: tuple[str, ...]
    players: tuple[PlayerPlan, ...]
    is_loud: bool = False
    watchers: tuple[int, ...] = ()

    @property
    def members(self) -> tuple[int, ...]:
        """Every member's Telegram id: the players, then the watchers."""
        return tuple(p.user for p in self.players) + self.watchers

    @property
    def cracking_guess(self) -> str:
        """The guess that scores 600 and closes the game."""
        return "".join(self.secret)


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything a seed decides: the loud room first, then the quiet rooms."""

    options: FloodOptions
    rooms: tuple[RoomPlan, ...] = field(default=())

    @property
    def loud(self) -> RoomPlan:
        return self.rooms[0]

    @property
    def quiet(self) -> tuple[RoomPlan, ...]:
        return self.rooms[1:]

    @property
    def guesses(self) -> int:
        """How many guesses the plan sends, the cracking guess included."""
        return sum(len(p.guesses) for room in self.rooms for p in room.players) + 1

    @property
    def private_chats(self) -> tuple[int, ...]:
        """Every member's private chat (its id is the member's Telegram id)."""
        return tuple(user for room in self.rooms for user in room.members)


def _guess(rng: random.Random, symbols: tuple[str, ...], secret: tuple[str, ...]) -> str:
    while True:
        drawn = tuple(rng.sample(symbols, CODE_LENGTH))  # distinct, as the game requires
        if drawn != secret:  # only the finale cracks a code
            return "".join(drawn)


def plan(options: FloodOptions) -> Plan:
    """The scenario ``options.seed`` draws: reproducible, with no I/O."""
    rng = random.Random(options.seed)
    symbols = get_set(KEYBOARD).symbols
    user = FIRST_USER
    secret = draw_secret(get_set(KEYBOARD), rng)
    loud_players = []
    for n in range(options.players):
        texts = tuple(_guess(rng, symbols, secret) for _ in range(options.guesses))
        loud_players.append(PlayerPlan(user, f"Loud {n + 1}", texts))
        user += 1
    watchers = tuple(range(user, user + options.watchers))
    user += options.watchers
    loud = RoomPlan("loud", LOUD_CHAT, "Loud room", secret, tuple(loud_players), True, watchers)
    rooms = [loud]
    for r in range(options.quiet_rooms):
        secret = draw_secret(get_set(KEYBOARD), rng)
        players = []
        for n in range(options.quiet_players):
            times: list[float] = []
            at = rng.uniform(0, options.pace)
            while at < options.duration:
                times.append(round(at, 3))
                at += rng.uniform(0.5 * options.pace, 1.5 * options.pace)
            texts = tuple(_guess(rng, symbols, secret) for _ in times)
            players.append(PlayerPlan(user, f"Quiet {r + 1}.{n + 1}", texts, tuple(times)))
            user += 1
        label = f"quiet-{r + 1}"
        rooms.append(
            RoomPlan(label, LOUD_CHAT - 1 - r, f"Quiet room {r + 1}", secret, tuple(players))
        )
    return Plan(options, tuple(rooms))
