"""The public surface is curated: a sorted ``__all__``, pinned here so changes are deliberate."""

import echomq

PINNED = {
    "WIRE_VERSION", "ArgumentRefused", "AuthError", "Backoff", "Closed", "Codec", "ConnectError",
    "ConnectionOptions", "Connector", "Counts", "Disconnected", "EchoMQError", "Empty",
    "Exponential", "Fixed", "InvalidArgument", "Item", "Jitter", "Job", "JobInfo", "JsonCodec",
    "KindError", "Lane", "LaneInfo", "LockedError", "Minter", "NodeLeaseError", "Overloaded",
    "Policies", "Policy", "Pool", "Queue", "Rate",
    "RateError", "RateLimited", "RawCodec", "Reaped", "Refusal", "ScriptLoadError",
    "ServerError", "StaleTokenError", "StateError", "Subscription", "Verdict",
    "VersionFenceError", "Wire", "WireError", "WireTimeout", "Bucket", "Buckets", "Taken",
    "Wait", "Consumer", "ConsumerOptions", "Cool", "Defer", "Drop", "Retry", "Tally", "Metronome",
    "Upkeep", "Worker", "WorkerOptions", "serve", "ClusterRouter", "CrossSlotError", "SyncQueue",
    "CompleteOutcome", "Failed", "RetryOutcome", "RetryPlan",
    "App", "AppWorker", "Call", "Context", "Handle", "HookFailed", "ResultMissing",
    "ResultTimeout", "SyncHandle", "Task", "TaskFailed", "TaskOutcome", "context", "Completed",
    "Schedule", "Batching", "BatchTask", "Member", "MemberVerdict",
    "CancelOutcome", "Cancellation", "TaskCancelled", "shielded",
    "Children", "FailurePolicy", "Flow", "FlowIds", "FlowHandle", "TaskFlow",
    "chain", "flow", "group",
    "validate_id",
    "Durability", "DurabilityUnavailable", "NotDurable",
}  # fmt: skip


def test_all_is_sorted_and_pinned() -> None:
    assert echomq.__all__ == sorted(echomq.__all__, key=lambda n: (not n.isupper(), n))
    assert set(echomq.__all__) == PINNED
    for name in echomq.__all__:
        assert getattr(echomq, name) is not None


SIGNALS = {
    "Retry",
    "Drop",
    "Defer",
    "Cool",
}  # raised by handlers to steer a job, not errors of echomq


def test_every_error_descends_from_the_one_root() -> None:
    for name in echomq.__all__:
        value = getattr(echomq, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, echomq.EchoMQError) is (name not in SIGNALS), name


def test_refusal_codes_map_to_their_classes() -> None:
    from echomq.errors import server_error

    assert isinstance(server_error("EMQSTALE complete token mismatch"), echomq.StaleTokenError)
    assert isinstance(server_error("EMQKIND job id must be JOB"), echomq.KindError)
    unknown = server_error("EMQNEW something")
    assert type(unknown) is echomq.Refusal
    assert unknown.detail == "something"
    assert type(server_error("ERR wrong")) is echomq.ServerError
