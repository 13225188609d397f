"""echomq: a flow-controlled asyncio job queue on Valkey.

Fair lanes per tenant rotated by a ring, engine-side limits shared by every worker, idempotent
and pipelined admission, leases with fencing tokens. See README.md and docs/.

This package holds what an application uses every day: the task layer, the queue, the signals a
handler raises, the limits and the errors an application catches. The rest is public in its
wing, each with its own ``__all__``: :mod:`echomq.errors` (every error), :mod:`echomq.engine`
(values, verdicts, buckets, flows, ids), :mod:`echomq.consumers` (metronome, worker),
:mod:`echomq.wire` (pools, codecs, cluster) and :mod:`echomq.tasks` (the whole task layer).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from echomq.consumers import Consumer, ConsumerOptions, Cool, Defer, Drop, Retry, shielded
from echomq.engine import (
    Exponential,
    Fixed,
    Item,
    Jitter,
    Job,
    JobOptions,
    Policy,
    Queue,
    Rate,
    SyncQueue,
    Verdict,
)
from echomq.errors import (
    EchoMQError,
    InvalidArgument,
    LaneFull,
    ResultTimeout,
    TaskCancelled,
    TaskFailed,
    WireError,
)
from echomq.tasks import (
    App,
    AppWorker,
    Batching,
    Call,
    Context,
    Handle,
    Member,
    SyncHandle,
    Task,
    TaskOutcome,
    chain,
    context,
    flow,
    group,
)
from echomq.wire import ConnectionOptions

__version__ = "0.1.0"

__all__ = [
    "App",
    "AppWorker",
    "Batching",
    "Call",
    "ConnectionOptions",
    "Consumer",
    "ConsumerOptions",
    "Context",
    "Cool",
    "Defer",
    "Drop",
    "EchoMQError",
    "Exponential",
    "Fixed",
    "Handle",
    "InvalidArgument",
    "Item",
    "Jitter",
    "Job",
    "JobOptions",
    "LaneFull",
    "Member",
    "Policy",
    "Queue",
    "Rate",
    "ResultTimeout",
    "Retry",
    "SyncHandle",
    "SyncQueue",
    "Task",
    "TaskCancelled",
    "TaskFailed",
    "TaskOutcome",
    "Verdict",
    "WireError",
    "chain",
    "context",
    "flow",
    "group",
    "shielded",
]

_ERRORS = (
    "ArgumentRefused AuthError Closed ConnectError CrossSlotError Disconnected "
    "DurabilityUnavailable HookFailed KindError LockedError NodeLeaseError NotDurable Overloaded "
    "RateError Refusal ResultMissing ScriptLoadError ServerError StaleTokenError StateError "
    "VersionFenceError WireTimeout"
)
_ENGINE = (
    "Backoff Bucket Buckets CancelOutcome Cancellation Children CompleteOutcome Completed Counts "
    "Durability Empty Failed FailurePolicy Flow FlowIds JobInfo Lane LaneInfo Minter Policies "
    "RateLimited Reaped RetryOutcome Subscription Taken Upkeep Wait validate_id"
)
_CONSUMERS = "Metronome RetryPlan Tally Worker WorkerOptions serve"
_TASKS = "BatchTask FlowHandle MemberVerdict Schedule TaskFlow"
_WIRE = "WIRE_VERSION ClusterRouter Codec Connector JsonCodec Pool RawCodec Wire"

MOVED: Mapping[str, str] = MappingProxyType(
    {
        name: home
        for home, names in [
            ("echomq.errors", _ERRORS),
            ("echomq.engine", _ENGINE),
            ("echomq.consumers", _CONSUMERS),
            ("echomq.tasks", _TASKS),
            ("echomq.wire", _WIRE),
        ]
        for name in names.split()
    }
)
"""Names this package exported before its surface was curated, and their home now: reading one
as ``echomq.X`` still works for one release, with a ``DeprecationWarning`` naming the home."""


def __getattr__(name: str) -> Any:
    home = MOVED.get(name)
    if home is None:
        raise AttributeError(f"module 'echomq' has no attribute {name!r}")
    warnings.warn(
        f"echomq.{name} is deprecated and goes in the next release: "
        f"import it from its home, `from {home} import {name}`",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(home), name)
