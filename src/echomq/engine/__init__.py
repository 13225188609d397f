"""The engine: a queue's keyspace, its Lua transitions (``lua/``, one file per atomic operation)
and the typed Python surface over them — admission, claim, settle, lanes, limits, buckets, ids,
reads, results, events and waiters, for the async ``Queue`` and the blocking ``SyncQueue``.

Public: the names in ``__all__`` below (the queue's values, verdicts, limits, buckets, flows and
ids), importable as ``from echomq.engine import Minter``; :mod:`echomq` re-exports the few an
application needs every day. The modules inside may change between releases.
"""

from echomq.engine.backoff import Backoff, Exponential, Fixed, Jitter
from echomq.engine.buckets import Bucket, Buckets, Taken, Wait
from echomq.engine.durability import Durability
from echomq.engine.eta import Eta
from echomq.engine.events import Subscription
from echomq.engine.flows import Children, FailurePolicy, Flow, FlowIds
from echomq.engine.ids import Minter
from echomq.engine.ids import validate as validate_id
from echomq.engine.lanes import Lane
from echomq.engine.opening import connect_queue, connect_sync_queue, open_queue
from echomq.engine.options import JobOptions
from echomq.engine.policies import Policies, Policy, Rate
from echomq.engine.producer import Item
from echomq.engine.queue import Queue
from echomq.engine.results import (
    Cancellation,
    CancelOutcome,
    Completed,
    CompleteOutcome,
    Counts,
    Empty,
    Failed,
    Job,
    JobInfo,
    LaneInfo,
    RateLimited,
    Reaped,
    RetryOutcome,
    Upkeep,
    Verdict,
)
from echomq.engine.shard_stats import ShardStats
from echomq.engine.sharded import ShardedQueue
from echomq.engine.sharded_sync import ShardedSyncQueue
from echomq.engine.shards import ShardMap
from echomq.engine.sync_queue import SyncQueue

__all__ = [
    "Backoff",
    "Bucket",
    "Buckets",
    "CancelOutcome",
    "Cancellation",
    "Children",
    "CompleteOutcome",
    "Completed",
    "Counts",
    "Durability",
    "Empty",
    "Eta",
    "Exponential",
    "Failed",
    "FailurePolicy",
    "Fixed",
    "Flow",
    "FlowIds",
    "Item",
    "Jitter",
    "Job",
    "JobInfo",
    "JobOptions",
    "Lane",
    "LaneInfo",
    "Minter",
    "Policies",
    "Policy",
    "Queue",
    "Rate",
    "RateLimited",
    "Reaped",
    "RetryOutcome",
    "ShardMap",
    "ShardStats",
    "ShardedQueue",
    "ShardedSyncQueue",
    "Subscription",
    "SyncQueue",
    "Taken",
    "Upkeep",
    "Verdict",
    "Wait",
    "connect_queue",
    "connect_sync_queue",
    "open_queue",
    "validate_id",
]
