"""What the sandbox counted: deliveries, edits and every kind of refusal, read as a frozen
snapshot."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class SandboxStats:
    """A snapshot: ``delivered`` bot messages, ``edited`` ones, refusals by kind (429s, 403s,
    400s, injected ``faults``), and ``by_chat``: messages delivered per chat id."""

    delivered: int = 0
    edited: int = 0
    too_many_requests: int = 0
    forbidden: int = 0
    bad_requests: int = 0
    faults: int = 0
    by_chat: dict[int, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        body = asdict(self)
        body["by_chat"] = {str(chat): count for chat, count in self.by_chat.items()}
        return body


class Tally:
    """The live counters behind :class:`SandboxStats`."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.by_chat: Counter[int] = Counter()

    def delivered(self, chat: int) -> None:
        self.counts["delivered"] += 1
        self.by_chat[chat] += 1

    def bump(self, name: str) -> None:
        self.counts[name] += 1

    def snapshot(self) -> SandboxStats:
        return SandboxStats(
            delivered=self.counts["delivered"],
            edited=self.counts["edited"],
            too_many_requests=self.counts["too_many_requests"],
            forbidden=self.counts["forbidden"],
            bad_requests=self.counts["bad_requests"],
            faults=self.counts["faults"],
            by_chat=dict(self.by_chat),
        )
