"""The notification worker process's runner: an echomq :class:`~echomq.AppWorker` serving the
``notify`` task of ``cm.notify`` with :class:`~codemojex.notify.worker.NotifyWorker` in its
state; how it claims (batches, leases), that each chat's lane is ordered, and how it stops on a
bad token."""

from __future__ import annotations

import dataclasses

from codemojex.notify.policy import BadTokenError, NotifyCounts
from codemojex.notify.tasks import SENDER
from codemojex.notify.worker import NotifyWorker
from echomq import App, AppWorker, ConsumerOptions
from echomq.consumers import Tally
from echomq.metrics import Observer

#: How the notification consumer works unless told otherwise: batches as long as a chat's
#: burst (a lane's burst goes in one claim under a backlog); eight sends in hand are plenty for
#: 30/s (more only contend for the global bucket: the flood test measured half the deferrals
#: at 8 as at 16, at the same throughput); a short beat and idle upkeep, because a deferral
#: scheduled while the consumer is parked comes back only at its next upkeep (an idle one
#: costs one tick script); leases far longer than a send.
NOTIFY_CONSUMER = ConsumerOptions(concurrency=8, lease=60.0, batch=3, beat=0.25, idle_upkeep=0.25)


class NotificationConsumer(AppWorker):
    """Serves ``app``'s ``notify`` task with ``worker``: a notification is dead after the
    worker's ``attempts`` failures; ``run`` checks the token first and raises
    :class:`BadTokenError` (after stopping, with every notification still queued) when the Bot
    API refuses it."""

    def __init__(
        self,
        app: App,
        worker: NotifyWorker,
        options: ConsumerOptions | None = None,
        *,
        check_token: bool = True,
        observer: Observer | None = None,
    ) -> None:
        options = dataclasses.replace(
            options or NOTIFY_CONSUMER, max_attempts=worker.options.attempts
        )
        super().__init__(
            app, [worker.queue.name], options, observer=observer, state={SENDER: worker}
        )
        self.worker = worker
        self.check_token = check_token
        worker.on_fault = self._fault

    def _fault(self, error: BadTokenError) -> None:
        self.stop()

    @property
    def counts(self) -> NotifyCounts:
        """The worker's counters (a snapshot)."""
        return self.worker.counts

    async def run(self) -> dict[str, Tally]:
        if self.check_token:
            await self.worker.check_token()
        # A chat's messages arrive in the order they were minted, across processes and through
        # deferrals: each chat's lane serves one notification at a time, its head holding
        # through Telegram's retry-after (echomq's ordered lanes, a setting the engine keeps,
        # so every sending process agrees; setting it again is harmless).
        await self.worker.queue.ordered(True)
        tallies = await super().run()
        if self.worker.fault is not None:
            raise self.worker.fault
        return tallies
