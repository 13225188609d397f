"""The notification stage, ``cm.notify``: its producer API (:mod:`codemojex.notify.api`: the
notifier and the queue), the worker in three layers (fairness, rate, delivery), its consumer,
policy and metrics. Other stages import :mod:`codemojex.notify.api` only."""
