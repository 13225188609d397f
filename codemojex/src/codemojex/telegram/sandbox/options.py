"""The sandbox's settings as frozen values: where it listens, its tokens, Telegram's limits and
the faults it injects. Durations and rates are in seconds."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from codemojex.domain.emoji import DEFAULT_SET
from echomq.dashboard import Hosts


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Telegram's send limits, as token buckets with a small tolerance over what Telegram states.

    Each bucket refills at ``*_rate`` sends per second up to ``*_burst``. Every send checks the
    chat's bucket and the global one; a group chat (id < 0) also checks its group bucket.
    ``is_enforced=False`` turns every limit off (a demo, never a flood test).
    """

    chat_rate: float = 1.0
    chat_burst: int = 4
    global_rate: float = 30.0
    global_burst: int = 35
    group_rate: float = 20.0 / 60.0
    group_burst: int = 21
    is_enforced: bool = True

    def __post_init__(self) -> None:
        for name in ("chat_rate", "global_rate", "group_rate"):
            if not getattr(self, name) > 0:
                raise ValueError(f"SandboxLimits.{name} must be > 0")
        for name in ("chat_burst", "global_burst", "group_burst"):
            if getattr(self, name) < 1:
                raise ValueError(f"SandboxLimits.{name} must be >= 1")


@dataclass(frozen=True, slots=True)
class Faults:
    """Failures the sandbox injects into sends (sendMessage, editMessageText).

    With probability ``error_rate`` a send fails without being delivered: a JSON 500, or for
    ``html_share`` of those an HTML 502 page. ``latency`` seconds are added before every Bot API
    answer. ``seed`` makes the draw repeatable.
    """

    error_rate: float = 0.0
    html_share: float = 0.0
    latency: float = 0.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.error_rate <= 1.0:
            raise ValueError("Faults.error_rate must be within [0, 1]")
        if not 0.0 <= self.html_share <= 1.0:
            raise ValueError("Faults.html_share must be within [0, 1]")
        if self.latency < 0:
            raise ValueError("Faults.latency must be >= 0 seconds")


@dataclass(frozen=True, slots=True)
class SandboxOptions:
    """Where the sandbox listens (``port=0`` picks a free port) and the tokens it accepts.

    ``bot_token`` is the only token the Bot API accepts; ``control_token`` guards the control API
    and the chat page: empty (the default) means a random one, or with a ``data_dir`` the one kept
    there (minted on the first start), so the chat page's link survives a restart. A token given
    here wins and is never written down. Neither token appears in a repr; a Sandbox's
    ``options`` carry the token in force. ``data_dir``: where the sandbox keeps its chats and
    its token across restarts (None: nothing is kept, every start is a fresh world).
    ``palette`` is the row of emojis the chat page offers (the game's default keyboard).
    ``first_update_id``: the
    id of the first update; a sandbox restarted in front of a bot that remembers the update
    ids it handled (``make run``) starts above them, as Telegram's ids only ever grow.
    ``hosts``: names the sandbox is reached by besides the loopback names, IP literals and
    ``host`` (a public name behind ``host="0.0.0.0"``); a request naming another ``Host`` gets
    421, so a DNS-rebinding page cannot read the chat page's data.
    """

    host: str = "127.0.0.1"
    port: int = 0
    bot_token: str = field(default="100000:sandbox", repr=False)
    control_token: str = field(default="", repr=False)
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    faults: Faults = field(default_factory=Faults)
    palette: tuple[str, ...] = DEFAULT_SET.symbols
    first_update_id: int = 1
    hosts: tuple[str, ...] = ()
    data_dir: Path | None = None

    def __post_init__(self) -> None:
        if self.first_update_id < 1:
            raise ValueError("SandboxOptions.first_update_id must be at least 1")
        if not 0 <= self.port <= 65535:
            raise ValueError("SandboxOptions.port must be within [0, 65535]")
        if len(self.control_token) > 256:
            raise ValueError("SandboxOptions.control_token must be at most 256 characters")
        head, sep, tail = self.bot_token.partition(":")
        if not (sep and head.isdigit() and tail):
            raise ValueError("SandboxOptions.bot_token must look like '<bot id>:<secret>'")
        if isinstance(self.hosts, str) or not all(isinstance(h, str) for h in self.hosts):
            raise ValueError("SandboxOptions.hosts must be a tuple of host names")
        Hosts(self.hosts)  # a ValueError for a name that is not one
        if self.data_dir is not None and not isinstance(self.data_dir, Path):
            raise ValueError("SandboxOptions.data_dir must be a pathlib.Path (or None)")

    @property
    def bot_id(self) -> int:
        """The bot's user id: the digits before the colon of its token, as on Telegram."""
        return int(self.bot_token.partition(":")[0])
