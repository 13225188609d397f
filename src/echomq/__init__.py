"""echomq: a flow-controlled asyncio job queue on Valkey.

Fair lanes per tenant rotated by a ring, engine-side limits shared by every worker, idempotent
and pipelined admission, leases with fencing tokens. See README.md and docs/.
"""

from echomq.consumers.consumer import (
    Consumer,
    ConsumerOptions,
    Defer,
    Drop,
    Retry,
    RetryPlan,
    Tally,
)
from echomq.consumers.metronome import Metronome
from echomq.consumers.worker import Worker, WorkerOptions, serve
from echomq.engine.backoff import Backoff, Exponential, Fixed, Jitter
from echomq.engine.buckets import Bucket, Buckets, Taken, Wait
from echomq.engine.events import Subscription
from echomq.engine.flows import Children, FailurePolicy, Flow, FlowIds
from echomq.engine.ids import Minter
from echomq.engine.lanes import Lane
from echomq.engine.producer import Item
from echomq.engine.queue import Queue
from echomq.engine.results import (
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
from echomq.engine.sync_queue import SyncQueue
from echomq.errors import (
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
from echomq.tasks import (
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
from echomq.wire.cluster import ClusterRouter
from echomq.wire.codec import Codec, JsonCodec, RawCodec
from echomq.wire.connector import WIRE_VERSION, Connector
from echomq.wire.pool import Pool, Wire
from echomq.wire.url import ConnectionOptions

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
    "Children",
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
    "FailurePolicy",
    "Fixed",
    "Flow",
    "FlowIds",
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
]
