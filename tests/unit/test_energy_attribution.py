"""Energy per owner (docs/ATTRIBUTION.md "Energy"), on the pure attribution code: a GPU's energy
in each instant goes where that instant's capacity goes, so an owner's energy at a constant power
P is P × its allocated GPU-seconds, whichever of the counter and the power reading is there."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pipelines import events as ev
from streams.attribution.node_range import SampleRow
from streams.attribution.ranges import compute_range

T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
t0 = T0.timestamp()
H100 = "NVIDIA H100 80GB HBM3"
WATTS = 400.0
HOUR = 3600.0


def alloc(**kw: Any) -> ev.AllocationData:
    base: dict[str, Any] = {
        "scheduler": "kubernetes",
        "job_id": "ns/p",
        "node": "n1",
        "state": "running",
        "start_time": T0,
        "gpus": [{"kind": "gpu", "count": 1}],
    }
    base.update(kw)
    return ev.AllocationData.model_validate(base)


def gpu(
    uuid: str = "GPU-0",
    *,
    start: float = t0 - 60,
    until: float = t0 + HOUR,
    power: bool = True,
    counter: bool = True,
    watts: float = WATTS,
    reset_at: float | None = None,
    mig: int | None = None,
    profile: str = "",
    util: float | None = 0.5,
    skip: frozenset[int] = frozenset(),
    device_on_instances: bool = False,
) -> list[SampleRow]:
    """A GPU scraped every 30 s at a constant ``watts``: its power reading and its energy counter
    (mJ since an arbitrary origin; from ``reset_at`` on it counts again from zero). A MIG instance's
    samples carry the device's readings only with ``device_on_instances``."""
    rows = []
    for i in range(int((until - start) // 30)):
        if i in skip:
            continue
        t = start + 30 * i
        mj = (t - start + 123_456.0) * watts * 1000.0
        if reset_at is not None and t >= reset_at:
            mj = (t - reset_at) * watts * 1000.0
        device = mig is None or device_on_instances
        rows.append(
            SampleRow(
                t,
                uuid,
                mig,
                0,
                H100,
                profile,
                util,
                0,
                "",
                "",
                "",
                30.0,
                watts if power and device else None,
                mj if counter and device else None,
            )
        )
    return rows


def by_owner(facts: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """(allocated GPU-hours, kWh) per job id ('' for capacity no one held)."""
    seconds: dict[str, float] = defaultdict(float)
    joules: dict[str, float] = defaultdict(float)
    for f in facts:
        key = f["job_id"] or f["kind"]
        seconds[key] += f["gpu_seconds"]
        joules[key] += f["energy_joules"]
    return {k: (seconds[k] / HOUR, joules[k] / 3.6e6) for k in seconds}


@pytest.mark.parametrize(
    "power,counter",
    [(True, True), (True, False), (False, True)],
    ids=["counter-and-power", "power-only", "counter-only"],
)
def test_an_owner_at_400_watts_burns_0_4_kwh_per_allocated_gpu_hour(power: bool, counter: bool) -> None:
    pod = alloc(device_ids=["GPU-0"], start_time=T0 + timedelta(seconds=610), end_time=T0 + timedelta(seconds=3010))
    facts = compute_range("c", "n1", t0, t0 + HOUR, 60, gpu(power=power, counter=counter), [pod])
    owners = by_owner(facts)
    hours, kwh = owners["ns/p"]
    assert hours == pytest.approx(2400 / HOUR)
    assert kwh == pytest.approx(0.4 * hours, rel=1e-9)
    idle_hours, idle_kwh = owners["unallocated"]
    assert idle_kwh == pytest.approx(0.4 * idle_hours, rel=1e-9)
    # conserved against the physical GPU: one hour at 400 W, whoever held it
    assert sum(f["energy_joules"] for f in facts) == pytest.approx(WATTS * HOUR, rel=1e-9)


@pytest.mark.parametrize("power", [True, False], ids=["with-power", "counter-only"])
def test_a_counter_reset_makes_no_negative_or_doubled_energy(power: bool) -> None:
    pod = alloc(device_ids=["GPU-0"])
    facts = compute_range("c", "n1", t0, t0 + HOUR, 60, gpu(power=power, reset_at=t0 + 1815.0), [pod])
    assert all(f["energy_joules"] >= 0 for f in facts)
    hours, kwh = by_owner(facts)["ns/p"]
    assert kwh == pytest.approx(0.4 * hours, rel=1e-9)
    windows: dict[Any, float] = defaultdict(float)
    for f in facts:
        windows[f["window_start"]] += f["energy_joules"]
    assert max(windows.values()) == pytest.approx(WATTS * 60, rel=1e-9)  # no window counts the reset twice


@pytest.mark.parametrize("device_on_instances", [False, True], ids=["parent-series", "repeated-on-instances"])
def test_time_sliced_replicas_and_mig_instances_take_the_gpu_energy_by_their_share(device_on_instances: bool) -> None:
    sliced = [alloc(job_id=f"ns/r{k}", device_ids=[f"GPU-0::{k}"]) for k in range(3)]  # 3 of 4 replicas held
    mig = [
        alloc(job_id="ns/m3", device_ids=["MIG-GPU-1/3"], gpus=[{"kind": "mig", "count": 1, "profile": "3g.40gb"}]),
        alloc(job_id="ns/m4", device_ids=["MIG-GPU-1/4"], gpus=[{"kind": "mig", "count": 1, "profile": "2g.20gb"}]),
    ]
    # the exporter gives a MIG GPU's power and energy on a parent series, or repeats them on every
    # instance: either way the GPU's energy is counted once
    parent = [] if device_on_instances else gpu("GPU-1", util=None)
    rows = [
        *gpu("GPU-0"),
        *parent,
        *gpu("GPU-1", mig=3, profile="3g.40gb", device_on_instances=device_on_instances),
        *gpu("GPU-1", mig=4, profile="2g.20gb", device_on_instances=device_on_instances),
    ]
    facts = compute_range("c", "n1", t0, t0 + 600, 60, rows, [*sliced, *mig])
    owners = by_owner(facts)
    for job in ("ns/r0", "ns/r1", "ns/r2", "ns/m3", "ns/m4"):
        hours, kwh = owners[job]
        assert hours > 0
        assert kwh == pytest.approx(0.4 * hours, rel=1e-9), job
    assert owners["ns/r0"][0] == pytest.approx(600 / 4 / HOUR)
    assert owners["ns/m3"][0] == pytest.approx(600 * 3 / 7 / HOUR)
    assert sum(f["energy_joules"] for f in facts) == pytest.approx(2 * WATTS * 600, rel=1e-9)


def test_missing_scrapes_beyond_the_hold_limit_leave_energy_unobserved_not_invented() -> None:
    pod = alloc(device_ids=["GPU-0"])
    # scrapes 10..29 missing (t0+240 .. t0+810): the one at t0+210 holds 90 s, to t0+300; nothing is
    # known of [t0+300, t0+840), the next scrape
    facts = compute_range("c", "n1", t0, t0 + 1200, 60, gpu(skip=frozenset(range(10, 30))), [pod])
    joules = sum(f["energy_joules"] for f in facts)
    assert joules == pytest.approx(WATTS * (1200 - 540), rel=1e-9)
    assert sum(f["gpu_seconds"] for f in facts if f["kind"] == "allocated") == pytest.approx(1200)


def test_a_window_has_the_same_energy_whatever_range_computes_it() -> None:
    pod = alloc(device_ids=["GPU-0"], start_time=T0 + timedelta(seconds=95))
    # a varying draw: the counter and the power reading disagree between scrapes, as they do
    rows = [
        SampleRow(
            r.time,
            r.uuid,
            None,
            0,
            H100,
            "",
            0.5,
            0,
            "",
            "",
            "",
            30.0,
            300.0 + (int(r.time) % 7) * 20,
            1e6 * (r.time - t0 + 60) ** 1.5,
        )
        for r in gpu()
    ]
    whole = compute_range("c", "n1", t0, t0 + 1800, 60, rows, [pod])
    parts = [
        f
        for lo, hi in ((t0, t0 + 600), (t0 + 600, t0 + 1800))
        for f in compute_range("c", "n1", lo, hi, 60, [r for r in rows if lo - 900 <= r.time < hi], [pod])
    ]
    assert {f["fact_id"]: f["energy_joules"] for f in whole} == pytest.approx(
        {f["fact_id"]: f["energy_joules"] for f in parts}, rel=1e-12
    )
