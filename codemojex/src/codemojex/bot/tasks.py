"""The bot stage's task, as any echomq application writes one: ``command`` on
``cm.bot.commands`` (a lane per chat), whose one argument is a Telegram update as the Bot API
delivered it. Its body takes the command worker from the running worker's state
(:data:`COMMANDS`), so the gateways register the task without building one."""

from __future__ import annotations

from typing import Any, Final

from codemojex.bot.worker import CommandWorker, Handled
from echomq import App, Task, context

COMMANDS: Final = "codemojex.bot.commands"
"""The key of the :class:`CommandWorker` in a command worker's state."""

CommandTask = Task[[dict[str, Any]], Handled]
"""The type of the ``command`` task."""


def register(app: App, queue: str) -> CommandTask:
    """Register ``command`` on ``app``, on ``queue`` (the deployment's ``cm.bot.commands``)."""

    @app.task("command", queue=queue)
    async def command(update: dict[str, Any]) -> Handled:
        """Handle one Telegram update once: see :mod:`codemojex.bot.worker`."""
        run = context()
        worker: CommandWorker = run.state[COMMANDS]
        return await worker.handle(update, run.job)

    return command
