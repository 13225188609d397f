"""The sandbox's errors: a Bot API refusal as Telegram words it, and bad input to the sandbox's
own control surface (Python or HTTP).

    CodemojexError
    ├── BotApiError     a Bot API call refused: ``status``, Telegram's ``description``, and
    │                   ``retry_after`` (seconds) on a 429
    └── SandboxError    (also ValueError) bad input to the control API: ``reason`` says which
"""

from __future__ import annotations

from codemojex.domain.errors import CodemojexError


class BotApiError(CodemojexError):
    """A Bot API call answered with Telegram's error envelope (``ok: false``)."""

    def __init__(self, status: int, description: str, *, retry_after: int | None = None) -> None:
        self.status = status
        self.description = description
        self.retry_after = retry_after
        super().__init__(description, reason=f"http_{status}")

    def envelope(self) -> dict[str, object]:
        """Telegram's JSON error body for this refusal."""
        body: dict[str, object] = {
            "ok": False,
            "error_code": self.status,
            "description": self.description,
        }
        if self.retry_after is not None:
            body["parameters"] = {"retry_after": self.retry_after}
        return body


class SandboxError(CodemojexError, ValueError):
    """Bad input to the sandbox's control API (unknown chat, message, user, malformed field)."""


def bad_request(detail: str) -> BotApiError:
    """Telegram's 400 with its ``Bad Request: …`` wording."""
    return BotApiError(400, f"Bad Request: {detail}")
