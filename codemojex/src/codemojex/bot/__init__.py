"""The command worker of ``cm.bot.commands`` and its routers, one module per feature (aiogram
style): start/help, play, guess, the inline keyboard, board, me, convert, and the fallback.
"""

from codemojex.workers.commands.context import CommandKeys, CommandOptions, Draft, Services
from codemojex.workers.commands.worker import (
    COMMAND_CONSUMER,
    CommandWorker,
    Handled,
    LaneLocks,
    dispatcher,
)

__all__ = [
    "COMMAND_CONSUMER",
    "CommandKeys",
    "CommandOptions",
    "CommandWorker",
    "Draft",
    "Handled",
    "LaneLocks",
    "Services",
    "dispatcher",
]
