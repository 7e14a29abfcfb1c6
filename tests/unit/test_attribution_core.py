"""Every attribution rule of docs/ATTRIBUTION.md, pinned on the pure core."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.attribution.core import Binding, GpuInfo, Owner, Placement, Series, attribute_window, down_intervals

W0, W1 = 1_000_020.0 * 60, 1_000_021.0 * 60  # one UTC-aligned minute
G1, G2 = "GPU-aaaa", "GPU-bbbb"


def owner(job: str, attempt: int = 1) -> Owner:
    return Owner(scheduler="kubernetes", job_id=job, attempt=attempt)


def whole(uuid: str) -> Binding:
    return Binding(uuid, 1.0, uuid, uuid)


def flat(util: float, start: float = W0 - 90, end: float = W1 + 30, step: float = 30.0, xid: int = 0) -> Series:
    times = [start + i * step for i in range(int((end - start) / step))]
    return Series(times, [util] * len(times), [xid] * len(times), step)


def by_kind(rows, kind):
    return [r for r in rows if r.kind == kind]


def per_gpu_total(rows):
    totals: dict[str, float] = defaultdict(float)
    for r in rows:
        totals[r.gpu_uuid] += r.gpu_seconds
    return totals


def test_partial_allocation_conserves_capacity_and_integrates_busy() -> None:
    p = Placement(owner("ns/a"), W0 + 15, W0 + 45, (whole(G1),))
    rows = attribute_window("n1", W0, W1, [GpuInfo(G1, 0, "H100")], [p], {G1: flat(0.5)})
    [alloc] = by_kind(rows, "allocated")
    [free] = by_kind(rows, "unallocated")
    assert alloc.gpu_seconds == pytest.approx(30.0)
    assert free.gpu_seconds == pytest.approx(30.0)
    assert alloc.busy_seconds == pytest.approx(15.0)  # 0.5 util over 30 s
    assert alloc.unobserved_seconds == pytest.approx(0.0)


def test_mig_instance_is_g_over_7_and_unused_slices_unallocated() -> None:
    slot = f"{G1}/mig1"
    p = Placement(owner("ns/nb"), W0, W1, (Binding(G1, 3 / 7, slot, slot),))
    rows = attribute_window("n1", W0, W1, [GpuInfo(G1, 0, "A100")], [p], {slot: flat(0.7)}, {G1: [slot]})
    [alloc] = by_kind(rows, "allocated")
    assert alloc.gpu_seconds == pytest.approx(60 * 3 / 7)
    assert alloc.busy_seconds == pytest.approx(60 * 3 / 7 * 0.7)
    assert by_kind(rows, "unallocated")[0].gpu_seconds == pytest.approx(60 * 4 / 7)


def test_time_sliced_replicas_get_one_over_n_and_util_over_n() -> None:
    ps = [Placement(owner(f"ns/p{i}"), W0, W1, (Binding(G1, 0.25, G1, f"{G1}::{i}"),)) for i in range(2)]
    rows = attribute_window("n1", W0, W1, [GpuInfo(G1, 0, "H100")], ps, {G1: flat(0.8)})
    allocs = by_kind(rows, "allocated")
    assert [a.gpu_seconds for a in allocs] == pytest.approx([15.0, 15.0])
    assert [a.busy_seconds for a in allocs] == pytest.approx([12.0, 12.0])
    assert by_kind(rows, "unallocated")[0].gpu_seconds == pytest.approx(30.0)


def test_sample_and_hold_stops_after_three_intervals() -> None:
    series = Series([W0 - 30.0], [1.0], [0], 30.0)  # holds until W0 + 60 - 30 = W0 + 60 (3 × 30 s)
    series2 = Series([W0 - 60.0], [1.0], [0], 30.0)  # holds until W0 + 30
    for s, busy in ((series, 60.0), (series2, 30.0)):
        p = Placement(owner("ns/a"), W0, W1, (whole(G1),))
        [alloc] = by_kind(attribute_window("n1", W0, W1, [GpuInfo(G1, 0, "H100")], [p], {G1: s}), "allocated")
        assert alloc.busy_seconds == pytest.approx(busy)
        assert alloc.unobserved_seconds == pytest.approx(60.0 - busy)


def test_blank_samples_are_unobserved_not_idle() -> None:
    s = Series([W0, W0 + 30], [None, 0.0], [0, 0], 30.0)
    p = Placement(owner("ns/a"), W0, W1, (whole(G1),))
    [alloc] = by_kind(attribute_window("n1", W0, W1, [GpuInfo(G1, 0, "H100")], [p], {G1: s}), "allocated")
    assert alloc.unobserved_seconds == pytest.approx(30.0)
    assert alloc.busy_seconds == 0.0


def test_fatal_xid_makes_unheld_capacity_unavailable_and_allocation_wins() -> None:
    s = Series([W0 - 30, W0, W0 + 30], [0.0, 0.0, 0.0], [0, 79, 79], 30.0)
    p = Placement(owner("ns/a"), W0 - 100, W0 + 10, (whole(G1),))
    rows = attribute_window("n1", W0, W1, [GpuInfo(G1, 0, "H100")], [p], {G1: s})
    assert by_kind(rows, "allocated")[0].gpu_seconds == pytest.approx(10.0)
    assert by_kind(rows, "unavailable")[0].gpu_seconds == pytest.approx(50.0)
    assert not by_kind(rows, "unallocated")


def test_xid_cleared_ends_unavailability_and_non_fatal_xids_do_not_count() -> None:
    s = Series([0, 10, 20, 30], [0.0] * 4, [79, 13, 0, 48], 10.0)
    assert down_intervals([s]) == [(0, 10), (30, float("inf"))]


def test_unbound_placement_takes_free_capacity_in_index_order_busy_unobserved() -> None:
    gpus = [GpuInfo(G2, 1, "H100"), GpuInfo(G1, 0, "H100")]
    bound = Placement(owner("slurm-1"), W0, W1, (whole(G1),))
    unbound = Placement(owner("slurm-2"), W0, W1, (), unbound_gpus=1.0)
    rows = attribute_window("n1", W0, W1, gpus, [bound, unbound], {G1: flat(1.0), G2: flat(1.0)})
    u = [r for r in rows if r.owner == unbound.owner]
    assert [(r.gpu_uuid, r.gpu_seconds, r.busy_seconds, r.unobserved_seconds) for r in u] == [(G2, 60.0, 0.0, 60.0)]
    assert not by_kind(rows, "unallocated")


def test_conflicting_claims_are_scaled_so_capacity_is_conserved() -> None:
    ps = [Placement(owner(f"ns/{i}"), W0, W1, (whole(G1),)) for i in range(2)]
    rows = attribute_window("n1", W0, W1, [GpuInfo(G1, 0, "H100")], ps, {G1: flat(1.0)})
    assert [r.gpu_seconds for r in by_kind(rows, "allocated")] == pytest.approx([30.0, 30.0])
    assert all(r.busy_seconds <= r.gpu_seconds + 1e-9 for r in rows)


def test_gpu_named_by_allocation_is_present_without_samples() -> None:
    p = Placement(owner("ns/a"), W0, W0 + 20, (whole(G2),))
    rows = attribute_window("n1", W0, W1, [], [p], {})
    assert per_gpu_total(rows)[G2] == pytest.approx(60.0)
    assert by_kind(rows, "allocated")[0].unobserved_seconds == pytest.approx(20.0)


# ---------------------------------------------------------------------------------------------
# properties
# ---------------------------------------------------------------------------------------------
GPU_IDS = [f"GPU-{i}" for i in range(3)]


@st.composite
def scenario(draw):
    placements = []
    for i in range(draw(st.integers(0, 6))):
        start = W0 + draw(st.floats(-120, 70, allow_nan=False))
        end = None if draw(st.booleans()) and i == 0 else start + draw(st.floats(0.001, 200, allow_nan=False))
        kind = draw(st.sampled_from(["whole", "mig", "shared", "unbound"]))
        uuid = draw(st.sampled_from(GPU_IDS))
        if kind == "whole":
            b: tuple[Binding, ...] = (whole(uuid),)
        elif kind == "mig":
            g = draw(st.integers(1, 7))
            b = (Binding(uuid, g / 7, f"{uuid}/mig{i}", f"{uuid}/mig{i}"),)
        elif kind == "shared":
            b = (Binding(uuid, 0.25, uuid, f"{uuid}::{i}"),)
        else:
            b = ()
        placements.append(
            Placement(
                owner(f"j{i}"), round(start, 3), round(end, 3) if end else None, b, 1.0 if kind == "unbound" else 0.0
            )
        )
    series = {}
    for uuid in GPU_IDS[: draw(st.integers(0, 3))]:
        n = draw(st.integers(0, 8))
        times = sorted({round(W0 + draw(st.floats(-150, 60, allow_nan=False)), 3) for _ in range(n)})
        utils = [draw(st.one_of(st.none(), st.floats(0, 1))) for _ in times]
        xids = [draw(st.sampled_from([0, 0, 0, 79, None])) for _ in times]
        series[uuid] = Series(times, utils, xids, 15.0)
    gpus = [GpuInfo(u, i, "H100") for i, u in enumerate(GPU_IDS) if u in series]
    return gpus, placements, series


def _canon(rows):
    return sorted(
        (
            r.gpu_uuid,
            r.slot,
            r.kind,
            str(r.owner),
            round(r.gpu_seconds, 6),
            round(r.busy_seconds, 6),
            round(r.unobserved_seconds, 6),
        )
        for r in rows
    )


@settings(max_examples=300, deadline=None)
@given(scenario())
def test_capacity_conserved_per_gpu_and_busy_bounded(case) -> None:
    gpus, placements, series = case
    rows = attribute_window("n1", W0, W1, gpus, placements, series)
    overflow = sum(r.gpu_seconds for r in rows if r.gpu_uuid == "")
    for uuid, total in per_gpu_total(rows).items():
        if uuid:
            assert total == pytest.approx(W1 - W0, abs=1e-3)  # to the millisecond
    bound_gpus = {b.uuid for p in placements for b in p.bindings if p.start < W1 and (p.end is None or p.end > W0)}
    assert {r.gpu_uuid for r in rows if r.gpu_uuid} == {g.uuid for g in gpus} | bound_gpus
    for r in rows:
        assert r.gpu_seconds >= -1e-9
        assert r.busy_seconds <= r.gpu_seconds + 1e-6
        assert r.busy_seconds + r.unobserved_seconds <= r.gpu_seconds + 1e-6
    assert overflow >= 0


@settings(max_examples=200, deadline=None)
@given(scenario(), st.randoms(use_true_random=False))
def test_order_of_events_and_duplicates_change_nothing(case, rnd: random.Random) -> None:
    gpus, placements, series = case
    expected = _canon(attribute_window("n1", W0, W1, gpus, placements, series))
    shuffled = list(placements) + list(placements)  # every event delivered twice, in another order
    rnd.shuffle(shuffled)
    dedup = list(dict.fromkeys(shuffled))  # what the warehouse keeps: one row per event id
    gpus_shuffled = list(gpus)
    rnd.shuffle(gpus_shuffled)
    assert _canon(attribute_window("n1", W0, W1, gpus_shuffled, dedup, series)) == expected
