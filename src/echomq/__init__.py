"""echomq: a flow-controlled asyncio job queue on Valkey.

Fair lanes per tenant rotated by a ring, engine-side limits shared by every worker, idempotent
and pipelined admission, leases with fencing tokens. See README.md and docs/.
"""

from ._backoff import Backoff, Exponential, Fixed, Jitter
from ._codec import Codec, JsonCodec, RawCodec
from ._connector import WIRE_VERSION, Connector
from ._errors import (
    AuthError,
    Closed,
    ConnectError,
    Disconnected,
    EchoMQError,
    InvalidArgument,
    KindError,
    LockedError,
    Overloaded,
    RateError,
    Refusal,
    ScriptLoadError,
    ServerError,
    StaleTokenError,
    StateError,
    VersionFenceError,
    WireError,
    WireTimeout,
)
from ._events import Subscription
from ._ids import Minter
from ._lanes import Lane
from ._pool import Pool, Wire
from ._queue import Item, Queue
from ._results import Counts, Empty, Job, JobInfo, LaneInfo, RateLimited, Reaped, Verdict
from ._url import ConnectionOptions

__version__ = "0.1.0"

__all__ = [
    "WIRE_VERSION",
    "AuthError",
    "Backoff",
    "Closed",
    "Codec",
    "ConnectError",
    "ConnectionOptions",
    "Connector",
    "Counts",
    "Disconnected",
    "EchoMQError",
    "Empty",
    "Exponential",
    "Fixed",
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
    "Minter",
    "Overloaded",
    "Pool",
    "Queue",
    "RateError",
    "RateLimited",
    "RawCodec",
    "Reaped",
    "Refusal",
    "ScriptLoadError",
    "ServerError",
    "StaleTokenError",
    "StateError",
    "Subscription",
    "Verdict",
    "VersionFenceError",
    "Wire",
    "WireError",
    "WireTimeout",
]
