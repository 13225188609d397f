"""The sandbox Bot API server: Telegram's HTTP surface, envelopes and limits on 127.0.0.1, with a
Python control API and a browser chat page, so the bot runs and is tested without Telegram."""

from codemojex.telegram.sandbox.errors import BotApiError, SandboxError
from codemojex.telegram.sandbox.options import Faults, SandboxLimits, SandboxOptions
from codemojex.telegram.sandbox.server import LOUNGE, PREDEFINED_USERS, Sandbox
from codemojex.telegram.sandbox.stats import SandboxStats
from codemojex.telegram.sandbox.world import SentMessage

__all__ = [
    "LOUNGE",
    "PREDEFINED_USERS",
    "BotApiError",
    "Faults",
    "Sandbox",
    "SandboxError",
    "SandboxLimits",
    "SandboxOptions",
    "SandboxStats",
    "SentMessage",
]
