"""The game's own Prometheus series, beside echomq's: notification sends by outcome and the 429s
the Bot API answered, read from the notification worker's counters at each scrape."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import fields

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from codemojex.notify.policy import NotifyCounts

#: NotifyCounts fields that are outcomes of one notification (the rest count other things).
OUTCOMES = ("delivered", "deferred", "retried", "dropped", "dead", "duplicates", "coalesced")


class NotificationMetrics(Collector):
    """``codemojex_notifications_total{outcome}``, ``codemojex_telegram_429_total`` and
    ``codemojex_chats_blocked_total``, from ``counts()`` (the worker's snapshot) per scrape."""

    def __init__(self, counts: Callable[[], NotifyCounts]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[Metric]:
        counts = self._counts()
        sends = CounterMetricFamily(
            "codemojex_notifications",
            "Notifications handled by the notification worker, by outcome",
            labels=["outcome"],
        )
        known = {field.name for field in fields(counts)}
        for outcome in OUTCOMES:
            if outcome in known:
                sends.add_metric([outcome], getattr(counts, outcome))
        yield sends
        yield CounterMetricFamily(
            "codemojex_telegram_429",
            "429 Too Many Requests answers seen from the Bot API (the budgets aim for none)",
            value=counts.too_many_requests,
        )
        yield CounterMetricFamily(
            "codemojex_chats_blocked",
            "Chats newly marked as having blocked the bot (403)",
            value=counts.blocked,
        )
