"""``/allocation/compute`` and ``/allocation`` (OpenCost's API) against ``gpuledger serve`` with the
demo's data: OpenCost's envelope and field names, the numbers of ``report gpu-hours`` for the same
range, one set per step whose sums are the accumulated set's, ``label:<key>`` through the configured
team label keys, idle as ``__idle__`` or shared, OpenCost-shaped errors."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from tests.integration import test_serve
from tests.integration.test_serve import OTHER, Served

served = test_serve.served  # the demo behind `gpuledger serve`, started once for this module too

pytestmark = pytest.mark.integration
FIELDS = {
    "name",
    "properties",
    "window",
    "start",
    "end",
    "minutes",
    "gpuHours",
    "gpuCost",
    "gpuCostIdle",
    "sharedCost",
    "totalCost",
    "cpuCost",
    "ramCost",
    "busyGpuHours",
    "idleGpuHours",
    "failedGpuHours",
}


def allocations(
    served: Served, path: str = "/allocation/compute", token: str | None = None, **params: str
) -> list[dict[str, dict[str, Any]]]:
    got = served.get(path, **({"token": token} if token else {}), **params)
    assert got.status_code == 200, got.text
    body = got.json()
    assert set(body) == {"code", "data"} and body["code"] == 200 and isinstance(body["data"], list)
    return list(body["data"])


def test_accumulated_namespaces_are_the_gpu_hours_report(served: Served) -> None:
    span = f"{served.start},{served.end}"
    [one] = allocations(served, window=span, aggregate="namespace", accumulate="true")
    report = served.cli(
        "report",
        "gpu-hours",
        "--by",
        "namespace",
        "--from",
        served.start,
        "--to",
        served.end,
        "--idle",
        "separate",
        "--format",
        "json",
    )
    owners = {r["key"]: r for r in report if not r["key"].startswith("__")}
    assert owners and set(one) == set(owners)
    for name, alloc in one.items():
        assert set(alloc) >= FIELDS and alloc["name"] == name and alloc["properties"] == {"namespace": name}
        assert alloc["window"] == {"start": alloc["start"], "end": alloc["end"]}
        row = owners[name]
        assert alloc["gpuHours"] == pytest.approx(row["allocated_gpu_hours"])
        assert alloc["totalCost"] == pytest.approx(row["total_cost"]) and alloc["sharedCost"] == row["shared_cost"]
        assert alloc["gpuCost"] == pytest.approx(row["compute_cost"] + row["failure_waste_cost"] + row["idle_cost"])
        assert alloc["busyGpuHours"] == pytest.approx(row["busy_gpu_hours"]) and alloc["cpuCost"] == 0.0
    assert datetime.fromisoformat(next(iter(one.values()))["start"]) == datetime.fromisoformat(served.start)
    # the same through /allocation, and with idle: __idle__ carries the idle capacity and its cost
    [with_idle] = allocations(served, "/allocation", window=span, aggregate="namespace", accumulate="true", idle="true")
    idle = with_idle.pop("__idle__")
    capacity = sum(r["gpu_hours"] for r in report if r["key"] in ("__unallocated__", "__unavailable__"))
    assert idle["gpuHours"] == pytest.approx(capacity) and idle["totalCost"] > 0
    assert with_idle == one
    [shared] = allocations(served, window=span, aggregate="namespace", accumulate="true", shareIdle="true")
    assert "__idle__" not in shared
    total = sum(a["totalCost"] for a in shared.values())
    assert total == pytest.approx(sum(a["totalCost"] for a in one.values()) + idle["totalCost"], abs=0.05)


def test_one_set_per_step_adds_up_to_the_accumulated_set(served: Served) -> None:
    """GPU-hours add up per allocation; money adds up over all allocations (each set shares its own
    idle capacity and shared costs by its own usage, so one owner's share of them depends on the step)."""
    span = f"{served.start},{served.end}"
    sets = allocations(served, window=span, aggregate="team,model", step="1h", idle="true")
    hours = (datetime.fromisoformat(served.end) - datetime.fromisoformat(served.start)).total_seconds() / 3600
    assert len(sets) == round(hours) >= 2
    starts = [next(iter(s.values()))["start"] for s in sets if s]
    assert starts == sorted(set(starts)) and len(starts) == len(sets)
    [whole] = allocations(served, window=span, aggregate="team,model", accumulate="true", idle="true")
    for name, alloc in whole.items():
        assert name == "__idle__" or ("/" in name and set(alloc["properties"]) == {"team", "model"})
        assert sum(s[name]["gpuHours"] for s in sets if name in s) == pytest.approx(alloc["gpuHours"])
    money = sum(a["totalCost"] for s in sets for a in s.values())
    assert money == pytest.approx(sum(a["totalCost"] for a in whole.values()), abs=0.01 * 7 * len(sets))
    assert money > 0


def test_label_aggregates_group_by_the_pods_labels(served: Served) -> None:
    span = f"{served.start},{served.end}"
    [by_label] = allocations(served, window=span, aggregate="label:team", accumulate="true")
    [by_team] = allocations(served, window=span, aggregate="team", accumulate="true")
    labelled = {k: a for k, a in by_label.items() if k != "__unlabelled__"}
    assert len(labelled) >= 2 and all(a["properties"] == {"labels": {"team": k}} for k, a in labelled.items())
    for name, alloc in labelled.items():  # a pod's team label is its team; Slurm jobs map theirs by account
        assert 0 < alloc["gpuHours"] <= by_team[name]["gpuHours"] + 1e-9
    hours = sum(a["gpuHours"] for a in by_label.values())
    assert hours == pytest.approx(sum(a["gpuHours"] for a in by_team.values()))
    [nobody] = allocations(served, window=span, aggregate="label:cost-center", accumulate="true")
    assert set(nobody) == {"__unlabelled__"} and nobody["__unlabelled__"]["gpuHours"] == pytest.approx(hours)
    for params in (
        {"window": "fortnight"},
        {"window": span, "step": "0h"},
        {"window": span, "accumulate": "maybe"},
        {"window": span, "aggregate": "label:"},
    ):
        bad = served.get("/allocation/compute", **params)
        assert bad.status_code == 400 and bad.json()["code"] == 400, params
    days = allocations(served, window="2026-11-01T00:00:00Z,2026-11-03T00:00:00Z", aggregate="namespace", step="1d")
    assert len(days) == 2 and days[0] == {} and days[1]  # one set per day; nothing ran on the first


def test_a_business_unit_token_sees_its_own_allocations(served: Served) -> None:
    span = f"{served.start},{served.end}"
    [mine] = allocations(served, token=OTHER, window=span, aggregate="team", accumulate="true", idle="true")
    [everyone] = allocations(served, window=span, aggregate="business_unit,team", accumulate="true")
    own = {a["properties"]["team"] for a in everyone.values() if a["properties"]["businessUnit"] == served.unit}
    assert own and set(mine) == own
    assert served.get("/allocation/compute", token=None, window=span).status_code == 401
