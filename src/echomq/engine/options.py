"""A job's admission options: the one carrier from ``@app.task``, ``Task.using``, ``Item`` and
``Queue.enqueue`` down to the engine, and the one place that checks them and lays them out as
``enqueue.lua``'s ``ARGV``.

A new option is a field of :class:`JobOptions`, its check in :func:`admission`, a field of
:class:`Admission` (the script's argument, in order) and its Lua; every producer (the async
``Queue``, the blocking ``SyncQueue``, the task layer, batches) carries it from there. On a
shard of a sharded queue a call carries a :class:`Fence` too (:func:`admission_argv`).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from echomq.engine import ids as _ids
from echomq.engine.checks import MAX_DURATION, MAX_PAYLOAD, MAX_RESULT_TTL, MAX_UNIX_SECONDS, ms
from echomq.engine.keys import DEFAULT_GROUP, SLOTS, validate_dedup, validate_group
from echomq.errors import InvalidArgument
from echomq.wire.codec import Codec
from echomq.wire.connector import Arg

#: A job's priority band: 0 (least urgent) to 9 (most urgent), 5 when not given. The claim
#: serves the most urgent band with a serviceable lane; lanes rotate by weight within a band
#: (docs/guides/priorities-costs-cooling.md).
PRIORITIES = range(10)
PRIORITY_DEFAULT = 5

#: A job's cost in units: 1 (the default) to 1,000. Lane and queue rates count units, and so
#: does a lane's ceiling (a cost-3 job takes 3 of its slots); see
#: docs/guides/priorities-costs-cooling.md.
COSTS = range(1, 1001)
COST_DEFAULT = 1

#: Where a dedup key's TTL counts from: the enqueue, or the job's end (completed, dead,
#: cancelled or removed), the key living as long as the job until then.
DEDUP_FROM = ("enqueue", "finish")


class JobOptions(NamedTuple):
    """How one job is admitted; every field optional. Immutable: ``options._replace(lane=...)``
    (or :meth:`Task.using`) makes a variant.

    * ``lane`` — the tenant lane the job waits in (default ``_``): any text of 1 to 1,024 bytes.
    * ``id`` — the job's ``JOB`` branded id (minted when None); admission is idempotent by it.
    * ``dedup_key`` — maps to the job for ``dedup_ttl`` seconds, counted from ``dedup_from``
      (``enqueue`` or ``finish``, the job's end); without ``dedup_ttl`` for the row's life.
    * ``delay`` (seconds from now) or ``at`` (Unix seconds) — when the job becomes claimable.
    * ``result_ttl`` — seconds the completed row (the result) is kept; None: the completer's.
    * ``debounce`` (seconds) — the last call within a quiet period wins: the first call with a
      ``dedup_key`` schedules the job ``debounce`` seconds out; each later call with that key
      while the job still waits moves it ``debounce`` seconds from then and, with
      ``debounce_keep="last"`` (the default), replaces its payload (``"first"`` keeps the
      first); ``debounce_max`` (seconds) bounds how long the first call's job can be pushed
      back. Such a call answers ``debounced`` with the id of the job that will run.
    * ``priority`` — the job's band, 0 to 9 (higher first); None: 5, the middle.
    * ``cost`` — the units the job spends of its lane's and queue's rates and of its lane's
      ceiling, 1 to 1,000; None: 1.

    Every field is checked at admission, before anything is minted or written; a refused one
    raises :class:`InvalidArgument` naming it. :meth:`check` runs the same checks early.
    """

    lane: str | None = None
    id: str | None = None
    dedup_key: str | None = None
    dedup_ttl: float | None = None
    dedup_from: str = "enqueue"
    delay: float | None = None
    at: float | None = None
    result_ttl: float | None = None
    debounce: float | None = None
    debounce_max: float | None = None
    debounce_keep: str = "last"
    priority: int | None = None
    cost: int | None = None

    def check(self) -> JobOptions:
        """These options, checked as admission checks them (``InvalidArgument`` names the
        field); the payload is checked at admission."""
        _argv(self)
        if self.id is not None:
            _ids.validate(self.id, "JOB", "job id")
        return self


#: No options: the default lane, a minted id, no dedup key, now.
DEFAULT_OPTIONS = JobOptions()
_new = tuple.__new__


def keyed(options: JobOptions, lane: str | None, dedup_key: str | None) -> JobOptions:
    """``options`` with a call's lane and dedup key (the task layer computes them from each
    call's arguments): ``_replace`` without its keyword parsing, a batch making one per item."""
    return _new(JobOptions, (lane, options[1], dedup_key, *options[3:]))


class Admission(NamedTuple):
    """One job as ``enqueue.lua`` takes it; its fields, in order, are the item's ``ARGV`` (the
    one place that layout is written: the async engine and ``SyncQueue`` both send these).
    ``run_at``: 0 now, > 0 absolute server ms, < 0 in ``-run_at`` ms; ``dedup`` "" for none;
    ``dedup_ttl_ms`` 0 for the row's life; ``dedup_from`` where that TTL counts from
    (``enqueue`` or ``finish``); ``result_ttl_ms`` the completed row's keep, -1 the completer's;
    ``debounce`` "" for none, else ``"wait_ms:max_ms:keep"`` (max 0: unbounded);
    ``priority`` the job's band (0..9, 5 the default); ``cost`` its units (1..1000, 1 the
    default)."""

    id: str
    payload: bytes
    group: str
    run_at: int = 0
    dedup: str = ""
    dedup_ttl_ms: int = 0
    dedup_from: str = "enqueue"
    result_ttl_ms: int = -1
    debounce: str = ""
    priority: int = PRIORITY_DEFAULT
    cost: int = COST_DEFAULT


#: ``ARGV`` words per admitted item.
ADMISSION_WIDTH = len(Admission._fields)

#: The word that opens the ``ARGV`` of an admission sent to a shard of a sharded queue
#: (enqueue.lua, flow.lua, reassign.lua; docs/concepts/shards.md, "The fence"): the producer's
#: placement epoch follows it, and each item carries its lane slot after its own words. An
#: unsharded queue's call carries none of it (the scripts pay one comparison for it).
FENCE_MARK: Final = "fence"
#: :data:`FENCE_MARK` of a call whose items' dedup keys were looked for on the source of a lane
#: held for a move (docs/concepts/shards.md, "Dedup while a lane is held").
FENCE_CHECKED: Final = "fence checked"
#: The largest placement epoch a fence carries (the scripts' numbers are exact to 2^53).
MAX_EPOCH: Final = 2**53 - 1


class Fence(NamedTuple):
    """An admission's fence on a shard of a sharded queue: the producer's placement ``epoch``
    (its ``ShardMap``'s) and the lane slot of each item (``shards.lane_slot`` of its lane), in
    item order. :func:`fence` builds one, checked."""

    epoch: int
    slots: tuple[int, ...]
    #: The items' dedup keys were looked for on the source of a lane held for a move (a
    #: :class:`~echomq.errors.LaneHeld` refusal's): the held shard admits them
    #: (:data:`FENCE_CHECKED`).
    checked: bool = False

    def part(self, start: int, stop: int) -> Fence:
        """The fence of items ``start`` to ``stop`` (a chunk of a batch)."""
        return Fence(self.epoch, self.slots[start:stop], self.checked)


def fence(epoch: int, slots: Iterable[int]) -> Fence:
    """A checked :class:`Fence`: ``epoch`` an int from 0 to 2^53 - 1, every slot an int from 0
    to 16383 (``InvalidArgument`` names ``epoch`` or ``slot``), before anything is sent."""
    if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch <= MAX_EPOCH:
        raise InvalidArgument("epoch", epoch, f"must be an int from 0 to {MAX_EPOCH}")
    checked = tuple(slots)
    for slot in checked:
        if isinstance(slot, bool) or not isinstance(slot, int) or not 0 <= slot < SLOTS:
            raise InvalidArgument("slot", slot, f"must be an int from 0 to {SLOTS - 1}")
    return Fence(epoch, checked)


def admission_argv(items: Sequence[Sequence[Arg]], fence: Fence | None = None) -> list[Arg]:
    """One admission call's ``ARGV``: each item's words in order (an :class:`Admission` for
    enqueue.lua, a ``Node.args()`` for flow.lua, ``(id, lane)`` for reassign.lua); with a
    ``fence``, :data:`FENCE_MARK` and its epoch first and each item's lane slot after its words.
    The one place this layout is written: the async engine and ``SyncQueue`` both build with it.
    """
    if fence is None:
        return [arg for item in items for arg in item]
    if len(fence.slots) != len(items):
        raise InvalidArgument("slots", fence.slots, f"must be one per item ({len(items)})")
    argv: list[Arg] = [FENCE_CHECKED if fence.checked else FENCE_MARK, fence.epoch]
    for item, slot in zip(items, fence.slots, strict=True):
        argv += item
        argv.append(slot)
    return argv


def admission(
    codec: Codec, mint: Callable[[], str], payload: Any, options: JobOptions
) -> Admission:
    """One job as the engine takes it, every option checked (``InvalidArgument`` names the one
    refused, before anything is minted or sent). ``mint`` makes the id when ``options.id`` is
    None."""
    data = codec.encode(payload)
    if len(data) > MAX_PAYLOAD:
        raise InvalidArgument(
            "payload", f"<{len(data)} bytes>", f"encodes to more than {MAX_PAYLOAD} bytes"
        )
    lane, run_at, dedup, ttl, start, keep, debounce, priority, cost = _argv(options)
    job_id = mint() if options.id is None else _ids.validate(options.id, "JOB", "job id")
    return Admission(job_id, data, lane, run_at, dedup, ttl, start, keep, debounce, priority, cost)


def _argv(options: JobOptions) -> tuple[str, int, str, int, str, int, str, int, int]:
    """The options' checks, in one place: their engine form (all but the id and payload)."""
    lane, _, dedup_key, dedup_ttl, dedup_from, delay, at, result_ttl = options[:8]
    lane = DEFAULT_GROUP if lane is None else validate_group(lane)
    dedup = "" if dedup_key is None else validate_dedup(dedup_key)
    ttl = 0 if dedup_ttl is None else ms(dedup_ttl, "dedup_ttl", positive=True)
    start = "enqueue" if dedup_from == "enqueue" else check_dedup_from(dedup_from, dedup_ttl)
    keep = -1 if result_ttl is None else ms(result_ttl, "result_ttl", most=MAX_RESULT_TTL)
    if delay is not None:
        if at is not None:
            raise InvalidArgument("at", at, "give delay or at, not both")
        run_at = -ms(delay, "delay")
    else:
        run_at = 0 if at is None else when_run_at(at, "at")
    debounce = ""
    if (
        options.debounce is not None
        or options.debounce_max is not None
        or options.debounce_keep != "last"
    ):
        run_at, debounce = _debounce(options)
    priority, cost = check_priority(options.priority), check_cost(options.cost)
    return lane, run_at, dedup, ttl, start, keep, debounce, priority, cost


#: What a debounced job keeps of the calls that pushed it back: the last call's payload, or
#: the first's.
DEBOUNCE_KEEP = ("last", "first")


def _debounce(options: JobOptions) -> tuple[int, str]:
    """A debounce's run-at (its wait from now) and its ``ARGV`` word, every part checked."""
    if options.debounce is None:
        name = "debounce_max" if options.debounce_max is not None else "debounce_keep"
        raise InvalidArgument(name, getattr(options, name), "needs a debounce (seconds)")
    wait = ms(options.debounce, "debounce", positive=True)
    if options.dedup_key is None:
        raise InvalidArgument(
            "dedup_key", None, "debounce needs a dedup key: the calls that share it are one job"
        )
    if options.delay is not None or options.at is not None:
        argument = "delay" if options.delay is not None else "at"
        raise InvalidArgument(argument, getattr(options, argument), "debounce schedules the job")
    most = 0
    if options.debounce_max is not None:
        most = ms(options.debounce_max, "debounce_max", positive=True)
        if most < wait:
            raise InvalidArgument(
                "debounce_max", options.debounce_max, "must be at least the debounce"
            )
    if options.debounce_keep not in DEBOUNCE_KEEP:
        raise InvalidArgument("debounce_keep", options.debounce_keep, "must be 'last' or 'first'")
    return -wait, f"{wait}:{most}:{options.debounce_keep}"


def check_priority(priority: int | None) -> int:
    """``priority`` checked: an ``int`` in 0..9 (None: the default, 5)."""
    if priority is None:
        return PRIORITY_DEFAULT
    if isinstance(priority, bool) or not isinstance(priority, int) or priority not in PRIORITIES:
        raise InvalidArgument("priority", priority, "must be an integer from 0 to 9 (9 first)")
    return priority


def check_cost(cost: int | None) -> int:
    """``cost`` checked: an ``int`` in 1..1000 (None: the default, 1)."""
    if cost is None:
        return COST_DEFAULT
    if isinstance(cost, bool) or not isinstance(cost, int) or cost not in COSTS:
        raise InvalidArgument("cost", cost, "must be an integer from 1 to 1000 (units)")
    return cost


def check_dedup_from(dedup_from: str | None, dedup_ttl: float | None) -> str:
    """``dedup_from`` checked (None: ``enqueue``); counting from the finish needs a TTL."""
    if dedup_from is None:
        return "enqueue"
    if dedup_from not in DEDUP_FROM:
        raise InvalidArgument("dedup_from", dedup_from, "must be 'enqueue' or 'finish'")
    if dedup_from == "finish" and dedup_ttl is None:
        raise InvalidArgument(
            "dedup_ttl", dedup_ttl, "dedup_from='finish' needs a dedup_ttl (seconds after the end)"
        )
    return dedup_from


def when_run_at(when: float, argument: str = "when") -> int:
    """An epoch timestamp in Unix seconds (``enqueue_at``'s ``when``, ``task.using(at=)``) as
    engine ms. A value above 10**11 is a millisecond timestamp by mistake (BullMQ and JavaScript
    count in ms): refused, naming ``argument``, as is anything more than 10 years ahead."""
    if isinstance(when, int | float) and not isinstance(when, bool) and when > MAX_UNIX_SECONDS:
        raise InvalidArgument(
            argument, when, "looks like milliseconds: it takes Unix seconds (time.time())"
        )
    return ms(when, argument, positive=True, most=time.time() + MAX_DURATION)


#: The keyword options ``enqueue_in`` / ``enqueue_at`` take (``group`` the old word for lane).
_KEYWORDS = frozenset(JobOptions._fields) - {"delay", "at"} | {"group"}


def options_of(keywords: Mapping[str, Any], **when: Any) -> JobOptions:
    """``enqueue_in`` / ``enqueue_at``'s keyword options as :class:`JobOptions`, unknown ones
    refused by name; ``when`` is their ``delay`` or ``at``."""
    unknown = set(keywords) - _KEYWORDS
    if unknown:
        allowed = ", ".join(sorted(_KEYWORDS - {"group"}))
        raise InvalidArgument("option", sorted(unknown)[0], f"allowed: {allowed}")
    if "group" in keywords:
        keywords = dict(keywords)
        keywords["lane"] = lane_alias(keywords.get("lane"), keywords.pop("group"))
    return JobOptions(**keywords, **when)


def lane_alias(lane: str | None, group: str | None, stacklevel: int = 3) -> str | None:
    """``lane``, or the deprecated ``group=`` spelling of it (with a ``DeprecationWarning``);
    both given is refused."""
    if group is None:
        return lane
    warnings.warn(
        "group= is deprecated: the word is lane= (group= goes in the next release)",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    if lane is not None:
        raise InvalidArgument("group", group, "give lane= only (group= is its old name)")
    return group
