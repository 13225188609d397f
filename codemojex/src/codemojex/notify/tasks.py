"""The notify stage's task, as any echomq application writes one: ``notify`` on ``cm.notify``
(a lane per chat), whose arguments are a :class:`~codemojex.notify.api.Notification`'s fields.
Its body takes the sending worker from the running worker's state (:data:`SENDER`), so a
producer process registers the task without a bot."""

from __future__ import annotations

from typing import Any, Final

from codemojex.notify.worker import NotifyWorker
from echomq import App, Task, context

SENDER: Final = "codemojex.notify.sender"
"""The key of the :class:`NotifyWorker` in a notification worker's state."""

NotifyTask = Task[..., None]
"""The type of the ``notify`` task."""


def register(app: App, queue: str) -> NotifyTask:
    """Register ``notify`` on ``app``, on ``queue`` (the deployment's ``cm.notify``)."""

    @app.task("notify", queue=queue)
    async def notify(
        notification: str,
        chat: int,
        text: str,
        markup: dict[str, Any] | None = None,
        edit: int | None = None,
        status: str | None = None,
        version: int = 0,
        origin: int | None = None,
        name: str = "",
        reply_to: int | None = None,
    ) -> None:
        """Send (or edit) one message under the budget: see :mod:`codemojex.notify.worker`."""
        run = context()
        sender: NotifyWorker = run.state[SENDER]
        body = {
            "notification": notification,
            "chat": chat,
            "text": text,
            "markup": markup,
            "edit": edit,
            "status": status,
            "version": version,
            "origin": origin,
            "name": name,
            "reply_to": reply_to,
        }
        await sender.send(body, run.job)

    return notify
