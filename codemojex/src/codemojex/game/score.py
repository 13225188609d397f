"""The score worker: the handler of ``cm``. Scores a charged guess against its game's secret,
writes the score once, raises the player's best on the board, publishes a ``scored`` event,
notifies the room, and asks for the close on a perfect 600.

Delivery is at least once, so every step is idempotent or guarded: the score is written once
(:func:`~codemojex.store.set_score`), the board keeps the greatest total, a close request is
deduplicated and closes once. The event and the room's message go out when this run wrote the
score, or when the job is a re-delivery (an earlier attempt may have written the score and
failed before announcing it); a resweep that re-enqueues an already scored guess is silent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.domain import EmojiSet, Score, get_set, parse_guess, score
from codemojex.game.close import Closer, CloseReason
from codemojex.notify.api import Notifier
from codemojex.store import Board, Store, game_secret, game_view, guess_by_job, set_score
from codemojex.store.lookups import Contact, contact, room_chat
from codemojex.store.memo import Memo
from echomq import Drop, Queue

log = logging.getLogger("codemojex.score")


@dataclass(frozen=True, slots=True)
class _GameFacts:
    """What scoring needs of a started game; none of it changes, so it is read once."""

    keyboard: EmojiSet
    secret: tuple[str, ...]
    chat: int


async def _read_facts(session: AsyncSession, game: str) -> _GameFacts:
    view = await game_view(session, game)
    secret = await game_secret(session, game)
    return _GameFacts(get_set(view.keyboard), secret, await room_chat(session, view.room))


@dataclass(frozen=True, slots=True)
class Scored:
    """What one run of the score worker did; ``is_new`` when this run wrote the score."""

    guess: str
    game: str
    player: str
    total: int
    percent: int
    is_new: bool


def scored_text(name: str, guess: tuple[str, ...], result: Score) -> str:
    """A scored guess as people read it: who, the guess, its squares, its percentage
    (``Ada: 🍎🍌🍒🍇🦊🐶 → 🟩🟨⬛⬛🟧🟪 50%``)."""
    if result.cracked:
        return f"🎉 {name} cracked the code! {''.join(guess)} → {result.render()} 100%"
    return f"{name}: {''.join(guess)} → {result.render()} {result.percent}%"


def private_text(name: str, guess: tuple[str, ...], result: Score) -> str:
    """A group guess's score as its player reads it in their private chat (a crack is theirs:
    "You cracked the code!", not "Your guess: 🎉 Ada cracked…")."""
    if result.cracked:
        return f"🎉 You cracked the code! {''.join(guess)} → {result.render()} 100%"
    return f"Your guess: {scored_text(name, guess, result)}"


STATUS_TITLE = "🎯 Live scores (each player's latest guess; /help explains the squares)"
"""The title of a group game's live status message."""


class ScoreWorker:
    """Scores the guesses of ``cm``: the body of the ``score`` task (a score worker's state
    holds it, :mod:`codemojex.game.tasks`).

    ``events`` is the queue whose event channel carries ``scored`` (normally ``cm`` itself).
    """

    def __init__(
        self,
        store: Store,
        events: Queue,
        board: Board,
        notifier: Notifier,
        closer: Closer,
    ) -> None:
        self.store = store
        self.events = events
        self.board = board
        self.notifier = notifier
        self.closer = closer
        self._games: Memo[str, _GameFacts] = Memo()
        self._contacts: Memo[str, Contact] = Memo(4096)

    async def score(self, job: str, attempt: int, *, message: int | None = None) -> Scored:
        """Score the guess charged under ``job`` (a ``JOB`` id); ``attempt`` is 1 on the first
        run, more on a re-delivery; ``message``: the guess's message in its group, if known."""
        async with self.store.read() as session:
            guess = await guess_by_job(session, job)
            if guess is None:
                # Only submit and resweep enqueue on cm, both after the guess was committed.
                raise Drop(f"no guess is recorded under job {job}")
            facts = self._games.get(guess.game) or self._games.put(
                guess.game, await _read_facts(session, guess.game)
            )
            who = self._contacts.get(guess.player) or self._contacts.put(
                guess.player,
                await contact(session, guess.player) or Contact(guess.player, 0),
            )
        # distinct=False: a guess recorded before the distinct rule is still scored.
        symbols = parse_guess(guess.guess_text, facts.keyboard, distinct=False)
        result = score(symbols, facts.secret)
        is_new = False
        if guess.total is None:
            async with self.store.transaction() as session:
                is_new = await set_score(session, guess.id, result.total, result.per_position)

        await self.board.record(guess.game, guess.player, result.total)
        if is_new or attempt > 1:
            self._publish(job, guess.game, guess.player, result.percent)
            await self._announce(
                facts.chat, guess.game, guess.id, guess.player, who, symbols, result, message
            )
        if result.cracked:
            await self.closer.request(guess.game, CloseReason.CRACKED)
        return Scored(guess.id, guess.game, guess.player, result.total, result.percent, is_new)

    async def _announce(
        self,
        chat: int,
        game: str,
        guess: str,
        player: str,
        who: Contact,
        symbols: tuple[str, ...],
        result: Score,
        message: int | None = None,
    ) -> None:
        """A private chat gets the score as a message. A group (negative id) gets its game's
        live status edited, the player the score in their own chat, and a crack the room's
        message: a loud group stays within its 20 messages a minute."""
        text = scored_text(who.name, symbols, result)
        once = f"scored:{guess}"
        if chat > 0:
            await self.notifier.notify(chat, text, dedup_key=once)
            return
        await self.notifier.status(
            chat, game, title=STATUS_TITLE, player=player, line=text, rank=result.total, at=message
        )
        if who.telegram_id > 0:
            await self.notifier.notify(
                who.telegram_id,
                private_text(who.name, symbols, result),
                dedup_key=once,
                origin=chat,
                name=who.name,
            )
        if result.cracked:
            await self.notifier.notify(chat, text, dedup_key=f"cracked:{guess}")

    def _publish(self, job: str, game: str, player: str, percent: int) -> None:
        # At most once, like the queue's own events, and only while someone listens.
        self.events.publish("scored", job, game=game, player=player, percent=percent)
