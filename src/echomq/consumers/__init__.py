"""Consumers: the claim → run → settle loops (one job at a time, or in batches) and the parts
they share, the metronome that paces a pool of them, the upkeep cadence, and the worker process
that runs them from a handler path.

Public: the names in ``__all__`` below (``from echomq.consumers import Metronome``); :mod:`echomq`
re-exports the consumer, its options and the signals a handler raises. The modules inside may
change between releases.
"""

from echomq.consumers.abort import shielded
from echomq.consumers.consumer import Consumer, ConsumerOptions, RetryPlan, Tally
from echomq.consumers.metronome import Metronome
from echomq.consumers.signals import Cool, Defer, Drop, Retry
from echomq.consumers.worker import Worker, WorkerOptions, serve

__all__ = [
    "Consumer",
    "ConsumerOptions",
    "Cool",
    "Defer",
    "Drop",
    "Metronome",
    "Retry",
    "RetryPlan",
    "Tally",
    "Worker",
    "WorkerOptions",
    "serve",
    "shielded",
]
