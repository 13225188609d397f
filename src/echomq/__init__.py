"""echomq: a flow-controlled asyncio job queue on Valkey.

Fair lanes per tenant rotated by a ring, engine-side limits shared by every worker, idempotent
and pipelined admission, leases with fencing tokens. See README.md and docs/.
"""

from ._backoff import Backoff, Exponential, Fixed, Jitter
from ._buckets import Bucket, Buckets, Taken, Wait
from ._cluster import ClusterRouter
from ._codec import Codec, JsonCodec, RawCodec
from ._connector import WIRE_VERSION, Connector
from ._consumer import Consumer, ConsumerOptions, Defer, Drop, Retry, RetryPlan, Tally
from ._errors import (
    ArgumentRefused,
    AuthError,
    Closed,
    ConnectError,
    CrossSlotError,
    Disconnected,
    EchoMQError,
    HookFailed,
    InvalidArgument,
    KindError,
    LockedError,
    NodeLeaseError,
    Overloaded,
    RateError,
    Refusal,
    ResultMissing,
    ResultTimeout,
    ScriptLoadError,
    ServerError,
    StaleTokenError,
    StateError,
    TaskFailed,
    VersionFenceError,
    WireError,
    WireTimeout,
)
from ._events import Subscription
from ._ids import Minter
from ._ids import validate as validate_id
from ._lanes import Lane
from ._metronome import Metronome
from ._pool import Pool, Wire
from ._producer import Item
from ._queue import Queue
from ._results import (
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
from ._sync import SyncQueue
from ._url import ConnectionOptions
from ._worker import Worker, WorkerOptions, serve
from .tasks import (
    App,
    AppWorker,
    Call,
    Context,
    Handle,
    Schedule,
    SyncHandle,
    Task,
    TaskOutcome,
    context,
)

__version__ = "0.1.0"

__all__ = [
    "WIRE_VERSION",
    "App",
    "AppWorker",
    "ArgumentRefused",
    "AuthError",
    "Backoff",
    "Bucket",
    "Buckets",
    "Call",
    "Closed",
    "ClusterRouter",
    "Codec",
    "CompleteOutcome",
    "Completed",
    "ConnectError",
    "ConnectionOptions",
    "Connector",
    "Consumer",
    "ConsumerOptions",
    "Context",
    "Counts",
    "CrossSlotError",
    "Defer",
    "Disconnected",
    "Drop",
    "EchoMQError",
    "Empty",
    "Exponential",
    "Failed",
    "Fixed",
    "Handle",
    "HookFailed",
    "InvalidArgument",
    "Item",
    "Jitter",
    "Job",
    "JobInfo",
    "JsonCodec",
    "KindError",
    "Lane",
    "LaneInfo",
    "LockedError",
    "Metronome",
    "Minter",
    "NodeLeaseError",
    "Overloaded",
    "Pool",
    "Queue",
    "RateError",
    "RateLimited",
    "RawCodec",
    "Reaped",
    "Refusal",
    "ResultMissing",
    "ResultTimeout",
    "Retry",
    "RetryOutcome",
    "RetryPlan",
    "Schedule",
    "ScriptLoadError",
    "ServerError",
    "StaleTokenError",
    "StateError",
    "Subscription",
    "SyncHandle",
    "SyncQueue",
    "Taken",
    "Tally",
    "Task",
    "TaskFailed",
    "TaskOutcome",
    "Upkeep",
    "Verdict",
    "VersionFenceError",
    "Wait",
    "Wire",
    "WireError",
    "WireTimeout",
    "Worker",
    "WorkerOptions",
    "context",
    "serve",
    "validate_id",
]
