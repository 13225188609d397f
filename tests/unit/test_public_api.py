"""The public surface is curated: ``echomq`` holds what an application uses every day, each
public module holds the rest of its wing, and every ``__all__`` is sorted and pinned here so
changes are deliberate. Names the top level gave up still resolve there, with a warning."""

from __future__ import annotations

import importlib
import warnings

import pytest

import echomq
import echomq.errors

PINNED = {
    "echomq": {
        "App", "AppWorker", "Batching", "Call", "ConnectionOptions", "Consumer", "ConsumerOptions",
        "Context", "Cool", "Defer", "Drop", "EchoMQError", "Exponential", "Fixed", "Handle",
        "InvalidArgument", "Item", "Jitter", "Job", "JobOptions", "LaneFull", "Member",
        "Policy", "Queue", "Rate", "ResultTimeout", "Retry", "SyncHandle", "SyncQueue", "Task",
        "TaskCancelled", "TaskFailed", "TaskOutcome", "Verdict", "WireError", "chain", "context",
        "flow", "group", "shielded",
    },
    "echomq.errors": {
        "ArgumentRefused", "AuthError", "Closed", "ConnectError", "CrossSlotError", "Disconnected",
        "DurabilityUnavailable", "EchoMQError", "HookFailed", "InvalidArgument", "KindError",
        "LaneFull", "LaneHeld", "LaneMoved", "LockedError", "NodeLeaseError", "NotDurable",
        "Overloaded", "PlacementBusy", "QueueSharded", "RateError", "Refusal", "ResultMissing",
        "ResultTimeout", "ScriptLoadError", "ServerError", "StaleTokenError", "StateError",
        "TaskCancelled", "TaskFailed", "Unsupported", "VersionFenceError", "WireError",
        "WireTimeout",
    },
    "echomq.engine": {
        "Backoff", "Bucket", "Buckets", "CancelOutcome", "Cancellation", "Children",
        "CompleteOutcome", "Completed", "Counts", "Durability", "Empty", "Eta", "Exponential",
        "Failed", "FailurePolicy", "Fixed", "Flow", "FlowIds", "Item", "Jitter", "Job", "JobInfo",
        "JobOptions", "Lane", "LaneInfo", "Minter", "Policies", "Policy", "Queue", "Rate",
        "RateLimited", "Reaped", "RetryOutcome", "ShardMap", "ShardStats", "ShardedQueue",
        "ShardedSyncQueue", "Subscription", "SyncQueue", "Taken", "Upkeep", "Verdict", "Wait",
        "connect_queue", "connect_sync_queue", "open_queue", "validate_id",
    },
    "echomq.consumers": {
        "Consumer", "ConsumerOptions", "Cool", "Defer", "Drop", "Metronome", "Retry", "RetryPlan",
        "Tally", "Worker", "WorkerOptions", "serve", "shielded",
    },
    "echomq.tasks": {
        "App", "AppWorker", "BatchTask", "Batching", "Call", "Context", "FlowHandle", "Handle",
        "Hooks", "Member", "MemberVerdict", "Schedule", "SyncHandle", "Task", "TaskFlow",
        "TaskOutcome", "chain", "context", "flow", "group", "serve_tasks",
    },
    "echomq.wire": {
        "WIRE_VERSION", "ClusterRouter", "Codec", "ConnectionOptions", "Connector", "JsonCodec",
        "Pool", "RawCodec", "Wire",
    },
    "echomq.server": {
        "ClusterOptions", "EmbeddedCluster", "EmbeddedValkey", "ServerOptions", "ServerStartError",
    },
    "echomq.testing": {
        "claim_job", "discard", "lane_on", "lanes_on", "most_in_window", "serve_app", "server_ms",
        "wait_for_server_ms",
    },
    "echomq.metrics": {
        "CONTENT_TYPE", "OTHER_LANE", "WAIT_BUCKETS", "Metrics", "Observer", "Outcome",
        "lane_label", "lane_of_label",
    },
    "echomq.dashboard": {
        "DEFAULT_FAVICON", "MAX_BODY", "MIN_TOKEN_LENGTH", "TOKEN_HEADER", "DashboardApp", "Hosts",
        "LaneLabel", "create_app", "serving",
    },
    "echomq.logs": {"JobFilter", "JsonFormatter", "TextFormatter", "redact"},
    "echomq.contrib.django": {"EchoMQBackend", "worker_app"},
}  # fmt: skip
"""Every public module (the allow-list of docs/reference/wings.md) and its ``__all__``."""

MAX_TOP_LEVEL = 40
"""The top level stays small (arq exports 9 names, SAQ 5): a name an application does not need
every day lives in its wing."""


@pytest.mark.parametrize("module_name", sorted(PINNED))
def test_all_is_sorted_and_pinned(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__all__ == sorted(module.__all__, key=lambda n: (not n.isupper(), n))
    assert set(module.__all__) == PINNED[module_name]
    for name in module.__all__:
        assert getattr(module, name) is not None, name


def test_the_top_level_is_small_and_a_subset_of_the_wings() -> None:
    assert len(echomq.__all__) <= MAX_TOP_LEVEL
    wings = set().union(*(names for module, names in PINNED.items() if module != "echomq"))
    assert set(echomq.__all__) <= wings


@pytest.mark.parametrize("name", sorted(echomq.MOVED))
def test_a_name_the_top_level_gave_up_still_resolves_and_warns_its_home(name: str) -> None:
    home = echomq.MOVED[name]
    assert name in PINNED[home]
    assert name not in echomq.__all__
    with pytest.warns(DeprecationWarning, match=rf"from {home} import {name}`") as caught:
        value = getattr(echomq, name)
    assert value is getattr(importlib.import_module(home), name)
    assert caught[0].filename == __file__  # the warning points at the caller's line


def test_from_echomq_import_of_a_moved_name_warns() -> None:
    with pytest.warns(DeprecationWarning, match="echomq.Minter is deprecated"):
        from echomq import Minter  # noqa: F401
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from echomq import App, Queue  # noqa: F401  (a curated name: no warning)
    with pytest.raises(AttributeError, match="NoSuchName"):
        echomq.NoSuchName  # noqa: B018


SIGNALS = {
    "Retry",
    "Drop",
    "Defer",
    "Cool",
}  # raised by handlers to steer a job, not errors of echomq


@pytest.mark.parametrize("module_name", ["echomq", "echomq.errors", "echomq.consumers"])
def test_every_error_descends_from_the_one_root(module_name: str) -> None:
    module = importlib.import_module(module_name)
    for name in module.__all__:
        value = getattr(module, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, echomq.EchoMQError) is (name not in SIGNALS), name


def test_refusal_codes_map_to_their_classes() -> None:
    from echomq.errors import server_error

    errors = echomq.errors
    assert isinstance(server_error("EMQSTALE complete token mismatch"), errors.StaleTokenError)
    assert isinstance(server_error("EMQKIND job id must be JOB"), errors.KindError)
    unknown = server_error("EMQNEW something")
    assert type(unknown) is errors.Refusal
    assert unknown.detail == "something"
    assert type(server_error("ERR wrong")) is errors.ServerError
