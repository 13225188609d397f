"""Global fairness across shards, held in the pure model (shard_model): lanes of random weights
spread over S shards, backlogged, W workers claiming in batches through ShardStride. Over a run
of N = 20 W (1 + K b / W_min) claims every lane's share is within ±5% of its weight share and
Jain's index over the weight-normalised shares is ≥ 0.99; a lane on a busy shard keeps its
share while another shard idles and after it comes back. The naive schemes fail the same
checks, so the checks can fail (docs/concepts/shards.md, "Visiting the shards")."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shard_model import (
    NaiveStride,
    PickerFactory,
    RoundRobinShards,
    Sharded,
    build,
    jain,
    normalised_shares,
    run_length,
)

from echomq.engine.shard_schedule import IDLE, ShardLoad, ShardStride

TOLERANCE = 0.05
JAIN = 0.99
#: A refresh rarer than any run: a worker reads every shard's load before its first visit only.
NEVER = 10**9


@st.composite
def floods(draw: st.DrawFn) -> tuple[list[int], list[int], int, int, int, int]:
    """(weights, placement, workers, batch, refresh, seed): lanes of weight 1..10 on 2..6
    shards, every shard holding one lane at least (an empty shard is idle, tested below)."""
    shards = draw(st.integers(2, 6))
    extra = draw(st.lists(st.integers(0, shards - 1), max_size=24 - shards))
    placement = [*range(shards), *extra]
    weights = draw(st.lists(st.integers(1, 10), min_size=len(placement), max_size=len(placement)))
    workers = draw(st.integers(1, 6))
    batch = draw(st.sampled_from([1, 4, 16]))
    # Every shard's load read every 1, 16 or 256 visits of a worker, or once at its start only
    # (NEVER): in a flood the claims' replies alone keep the stride's view exact.
    refresh = draw(st.sampled_from([1, 16, 256, NEVER]))
    return weights, placement, workers, batch, refresh, draw(st.integers(0, 2**32))


def flood(
    weights: list[int],
    placement: list[int],
    workers: int,
    batch: int,
    refresh: int,
    seed: int,
    picker: PickerFactory = ShardStride,
    claims: int | None = None,
) -> dict[str, float]:
    rings, lane_weights, _ = build(weights, placement, max(placement) + 1)
    sim = Sharded(rings, workers, batch, refresh, random.Random(seed), picker)
    served = sim.run(claims or run_length(weights, placement, workers, batch))
    return normalised_shares(served, lane_weights)


@settings(max_examples=25, deadline=None)
@given(floods())
def test_weights_hold_across_shards_on_a_backlogged_flood(
    case: tuple[list[int], list[int], int, int, int, int],
) -> None:
    shares = flood(*case)
    assert jain(list(shares.values())) >= JAIN
    off = {lane: round(x, 4) for lane, x in shares.items() if abs(x - 1) > TOLERANCE}
    assert off == {}


def test_a_100_to_1_flood_keeps_every_tenant_at_its_weight() -> None:
    """One tenant of weight 100 alone on shard 0, thirty of weight 1 over shards 1..3."""
    weights, placement = [100, *[1] * 30], [0, *[1 + i % 3 for i in range(30)]]
    shares = flood(weights, placement, workers=4, batch=4, refresh=16, seed=1)
    assert jain(list(shares.values())) >= JAIN
    assert all(abs(x - 1) <= TOLERANCE for x in shares.values()), shares


def test_visiting_the_shards_in_turn_breaks_the_weights() -> None:
    """The check bites: one visit per shard in turn gives one lane alone on its shard as much
    as twenty lanes of weight 10 together."""
    weights, placement = [1, *[10] * 20], [0, *[1] * 20]
    shares = flood(weights, placement, 2, 4, 16, 0, picker=RoundRobinShards)
    assert shares["l0"] > 50
    assert jain(list(shares.values())) < JAIN


@st.composite
def idlers(draw: st.DrawFn) -> tuple[list[int], list[int], int, int, int]:
    """(busy weights, idler weights, workers, batch, seed): the busy lanes on shard 0, the
    idler's on shards 1..3."""
    busy = draw(st.lists(st.integers(1, 10), min_size=1, max_size=8))
    idle = draw(st.lists(st.integers(1, 10), min_size=1, max_size=8))
    return (
        busy,
        idle,
        draw(st.integers(1, 4)),
        draw(st.sampled_from([1, 4, 16])),
        draw(st.integers(0, 2**32)),
    )


def busy_after_idle(
    busy: list[int], idle: list[int], workers: int, batch: int, seed: int, picker: PickerFactory
) -> tuple[dict[str, float], dict[str, float], int, list[str]]:
    """Both sets backlogged for N claims, the idler's lanes emptied for N, then backlogged again
    for N. Returns the busy lanes' shares (of every lane's weight) in the third phase, their
    shares among themselves in the second, the visits wasted on an emptied shard, and the
    lanes served in the second phase."""
    weights = [*busy, *idle]
    placement = [0] * len(busy) + [1 + i % 3 for i in range(len(idle))]
    rings, lane_weights, home = build(weights, placement, 4)
    refresh = 16
    sim = Sharded(rings, workers, batch, refresh, random.Random(seed), picker)
    # The third phase: the busy lanes must keep their share once the idler's lanes are seen
    # again, a refresh (per worker) after they return: N, plus what those visits can lease.
    claims = run_length(weights, placement, workers, batch) + 20 * workers * refresh * batch
    sim.run(claims)
    idlers = [lane for lane, shard in home.items() if shard]
    for lane in idlers:
        rings[home[lane]].drain(lane)
    wasted = sim.wasted
    second = sim.run(claims)
    wasted = sim.wasted - wasted
    for lane in idlers:
        rings[home[lane]].push(lane, 10**12)
    third = sim.run(claims)
    busy_lanes = {lane: w for lane, w in lane_weights.items() if home[lane] == 0}
    shares = normalised_shares(third, lane_weights)
    alone = normalised_shares(Counter({k: v for k, v in second.items()}), busy_lanes)
    return {lane: shares[lane] for lane in busy_lanes}, alone, wasted, list(second)


@settings(max_examples=15, deadline=None)
@given(idlers())
def test_an_idle_shard_neither_holds_up_nor_starves_a_busy_one(
    case: tuple[list[int], list[int], int, int, int],
) -> None:
    busy, idle, workers, batch, seed = case
    third, second, wasted, served = busy_after_idle(busy, idle, workers, batch, seed, ShardStride)
    # While the idler's shards are empty every claim is the busy shard's, at its weights, and
    # each worker wastes at most one visit on each emptied shard before it hears they are.
    assert set(served) <= set(second)
    assert all(abs(x - 1) <= TOLERANCE for x in second.values()), second
    assert wasted <= workers * 3
    # When they come back, no catch-up: the busy lanes keep their share of the whole queue.
    assert all(x >= 1 - TOLERANCE for x in third.values()), third


def test_a_stride_that_remembers_idling_starves_the_busy_shard() -> None:
    """The check bites: a stride without the floor gives a returning shard the visits it
    missed while idle, and the busy shard's lanes get next to nothing meanwhile."""
    third, _, _, _ = busy_after_idle([1, 2, 3], [1, 2, 3], 2, 4, 0, NaiveStride)
    assert max(third.values()) < 0.5


def test_a_stride_with_the_floor_passes_the_same_case() -> None:
    third, _, _, _ = busy_after_idle([1, 2, 3], [1, 2, 3], 2, 4, 0, ShardStride)
    assert min(third.values()) >= 1 - TOLERANCE


def visits(stride: ShardStride, n: int) -> Counter[int]:
    """The shards ``n`` visits pick, each charged one claim (every one finds work)."""
    picks: Counter[int] = Counter()
    for _ in range(n):
        shard = stride.pick()
        assert shard is not None
        picks[shard] += 1
        stride.charge(shard, 1)
    return picks


def test_the_most_urgent_band_is_visited_first() -> None:
    stride = ShardStride(3)
    stride.observe(0, ShardLoad(5, 10))
    stride.observe(1, ShardLoad(7, 1))
    stride.observe(2, ShardLoad(7, 3))
    assert visits(stride, 400) == Counter({2: 300, 1: 100})


def test_shards_returning_after_a_park_start_level() -> None:
    """The worker's clock is the floor when no shard stayed eligible: a shard idle for the
    whole of another's run does not take the next hundred visits on their return."""
    stride = ShardStride(2)
    stride.observe(0, ShardLoad(5, 1))
    for _ in range(100):
        assert stride.pick() == 0
        stride.charge(0, 1)
    stride.observe(0, IDLE)
    assert stride.pick() is None
    stride.observe(0, ShardLoad(5, 1))
    stride.observe(1, ShardLoad(5, 1))
    picks = visits(stride, 100)
    assert abs(picks[0] - picks[1]) <= 2, picks


@pytest.mark.parametrize("offset", range(4))
def test_between_equal_passes_the_shard_served_longest_ago_goes_first(offset: int) -> None:
    """As one ring: lane b served in band 9 goes behind lane a that waited in band 0, whatever
    the worker's tie-break offset (a rotation alone picked either, half the time each)."""
    stride = ShardStride(2, offset=offset)
    stride.observe(0, ShardLoad(0, 1))  # lane a
    stride.observe(1, ShardLoad(9, 1))  # lane b, a job of band 9
    assert stride.pick() == 1
    stride.charge(1, 1)
    stride.observe(1, ShardLoad(0, 1))  # b's band-0 job is left: both at pass 1 now
    assert stride.pick() == 0
    stride.charge(0, 1)
    assert stride.pick() == 1


def test_no_active_shard_means_park() -> None:
    stride = ShardStride(2)
    assert stride.pick() is None
    stride.observe(1, ShardLoad(5, 2))
    assert stride.pick() == 1
    stride.observe(1, IDLE)
    assert stride.pick() is None


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: ShardStride(0), "shards"),
        (lambda: ShardStride(2, offset=1.5), "offset"),  # type: ignore[arg-type]
        (lambda: ShardStride(2).observe(2, IDLE), "shard"),
        (lambda: ShardStride(2).charge(0, -1), "claims"),
        (lambda: ShardLoad(10, 1), "band"),
        (lambda: ShardLoad(5, 0), "weight"),
        (lambda: ShardLoad(-1, 3), "weight"),
    ],
)
def test_bad_input_names_the_argument(call: object, argument: str) -> None:
    from echomq.errors import InvalidArgument

    with pytest.raises(InvalidArgument) as refused:
        call()  # type: ignore[operator]
    assert refused.value.argument == argument
