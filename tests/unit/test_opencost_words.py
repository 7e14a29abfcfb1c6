"""OpenCost's window, step and aggregate words, parsed as OpenCost parses them (UTC), and report
rows shaped as OpenCost allocation sets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpuledger.reports import BadRequest
from gpuledger.serve import opencost_window as words
from gpuledger.serve.opencost import allocation_set, steps

NOW = datetime(2026, 11, 18, 13, 45, 10, tzinfo=UTC)  # a Wednesday
DAY = datetime(2026, 11, 18, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("today", DAY, NOW),
        ("yesterday", DAY - timedelta(days=1), DAY),
        ("week", datetime(2026, 11, 15, tzinfo=UTC), NOW),  # from Sunday
        ("lastweek", datetime(2026, 11, 8, tzinfo=UTC), datetime(2026, 11, 15, tzinfo=UTC)),
        ("month", datetime(2026, 11, 1, tzinfo=UTC), NOW),
        ("lastmonth", datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC)),
        ("7d", DAY - timedelta(days=6), NOW),  # whole days up to the end of today, clipped to now
        ("24h", datetime(2026, 11, 17, 14, tzinfo=UTC), NOW),
        ("30m", datetime(2026, 11, 18, 13, 16, tzinfo=UTC), NOW),  # 30 minutes up to the end of this one
        ("1w", datetime(2026, 11, 12, tzinfo=UTC), NOW),
        ("1762992000,1763078400", datetime(2025, 11, 13, tzinfo=UTC), datetime(2025, 11, 14, tzinfo=UTC)),
        (
            "2026-11-02T00:00:00Z,2026-11-03T00:00:00Z",
            datetime(2026, 11, 2, tzinfo=UTC),
            datetime(2026, 11, 3, tzinfo=UTC),
        ),
    ],
)
def test_windows_as_opencost_reads_them(text: str, start: datetime, end: datetime) -> None:
    assert words.window(text, NOW) == (start, end)


@pytest.mark.parametrize(
    "text", ["fortnight", "7x", "2026-11-02,2026-11-03", "2027-01-01T00:00:00Z,2027-01-02T00:00:00Z"]
)
def test_bad_or_future_windows_are_refused(text: str) -> None:
    with pytest.raises(BadRequest):
        words.window(text, NOW)


def test_steps_and_booleans() -> None:
    assert words.step("1d", timedelta(days=7)) == timedelta(days=1)
    assert words.step(None, timedelta(hours=5)) == timedelta(hours=5)
    parts = steps(DAY - timedelta(days=6), NOW, timedelta(days=1))
    assert len(parts) == 7 and parts[-1] == (DAY, NOW) and all(b - a == timedelta(days=1) for a, b in parts[:-1])
    assert words.boolean("accumulate", "true", False) and not words.boolean("accumulate", None, False)
    for bad in (lambda: words.step("0d", timedelta(1)), lambda: words.boolean("idle", "maybe", False)):
        with pytest.raises(BadRequest):
            bad()


def test_aggregates_map_to_report_dimensions() -> None:
    assert words.aggregate("namespace") == ["namespace"]
    assert words.aggregate("cluster,namespace,label:app.kubernetes.io/part-of") == [
        "cluster",
        "namespace",
        "label:app.kubernetes.io/part-of",
    ]
    assert words.aggregate("label:cost-center,department,controllerKind") == [
        "label:cost-center",
        "business_unit",
        "workload_kind",
    ]
    assert words.aggregate(None) == ["job"]
    for bad in ("colour", "label:", "namespace,annotation:x"):
        with pytest.raises(BadRequest):
            words.aggregate(bad)


def test_rows_become_an_opencost_set_with_idle_as_its_own_allocation() -> None:
    rows = [
        {
            "team": "vision",
            "model": "vit",
            "allocated_gpu_hours": 4.0,
            "busy_gpu_hours": 3.0,
            "unobserved_gpu_hours": 1.0,
            "failed_gpu_hours": 0.0,
            "idle_gpu_hours": 0.0,
            "gpu_hours": 4.0,
            "energy_kwh": 1.2,
            "compute_cost": 10.0,
            "failure_waste_cost": 0.0,
            "idle_cost": 0.0,
            "shared_cost": 2.5,
            "total_cost": 12.5,
            "currency": "USD",
        },
        {
            "team": "__unallocated__",
            "model": "__unallocated__",
            "allocated_gpu_hours": 0.0,
            "gpu_hours": 2.0,
            "total_cost": 0.0,
            "idle_cost": 0.0,
            "currency": None,
        },
        {
            "team": "__idle__",
            "model": "__idle__",
            "allocated_gpu_hours": 0.0,
            "gpu_hours": 0.0,
            "idle_cost": 5.0,
            "total_cost": 5.0,
            "shared_cost": 0.0,
            "currency": "USD",
        },
    ]
    start, end = DAY, DAY + timedelta(hours=2)
    got = allocation_set(rows, ["team", "model"], start, end, include_idle=True)
    assert set(got) == {"vision/vit", "__idle__"}
    vit = got["vision/vit"]
    assert vit["properties"] == {"team": "vision", "model": "vit"}
    assert vit["window"] == {"start": "2026-11-18T00:00:00Z", "end": "2026-11-18T02:00:00Z"}
    assert (vit["gpuHours"], vit["gpuCount"], vit["gpuCost"], vit["sharedCost"], vit["totalCost"]) == (
        4.0,
        2.0,
        10.0,
        2.5,
        12.5,
    )
    assert vit["gpuEfficiency"] == 1.0 and vit["cpuCost"] == 0.0 and vit["busyGpuHours"] == 3.0
    assert (got["__idle__"]["gpuHours"], got["__idle__"]["totalCost"]) == (2.0, 5.0)
    assert set(allocation_set(rows, ["team", "model"], start, end, include_idle=False)) == {"vision/vit"}
    labelled = allocation_set([{**rows[0], "key": "cc-7"}], ["label:cost-center"], start, end, include_idle=False)
    assert labelled["cc-7"]["properties"] == {"labels": {"cost-center": "cc-7"}}
