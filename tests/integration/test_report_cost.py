"""Cost on every GPU-hours row, over the demo's real warehouse: a month's rows add up, term by term,
to the month's FOCUS export (``BilledCost``) to the cent, whatever the grouping; a business unit's
row is that unit's FOCUS total; idle capacity kept as its own row or shared evenly moves money
between rows and never changes the total; and a month cut in two costs what the month costs."""

from __future__ import annotations

import json
from collections import defaultdict
from decimal import Decimal
from typing import Any

import pytest

from dagster_project.defs.exports.files import read
from tests.integration.demo_helpers import Demo, app, demo_env

pytestmark = pytest.mark.integration
MONTH = "2026-11"
TERM_FIELD = {"compute": "compute_cost", "retries": "failure_waste_cost", "idle": "idle_cost"}


def report(runner: Any, *args: str) -> list[dict[str, Any]]:
    result = runner.invoke(app(), ["report", "gpu-hours", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return list(json.loads(result.output))


def cents(value: Any) -> Decimal:
    return Decimal(repr(float(value))).quantize(Decimal("0.01"))


def total(rows: list[dict[str, Any]], field: str = "total_cost") -> Decimal:
    return sum((cents(r[field]) for r in rows), Decimal("0.00"))


def test_a_months_rows_sum_to_the_focus_export_to_the_cent(demo: Demo, monkeypatch: pytest.MonkeyPatch) -> None:
    _, focus = read(demo.out / f"focus-chargeback-{MONTH}.csv")
    billed = sum((Decimal(r["BilledCost"]) for r in focus), Decimal("0.00"))
    by_term: dict[str, Decimal] = defaultdict(lambda: Decimal("0.00"))
    by_unit: dict[str, Decimal] = defaultdict(lambda: Decimal("0.00"))
    for r in focus:
        term = str(r["x_CostTerm"])
        by_term[TERM_FIELD.get(term, "shared_cost")] += Decimal(r["BilledCost"])
        by_unit[str(r["x_BusinessUnit"])] += Decimal(r["BilledCost"])
    assert billed > 0 and by_term["compute_cost"] > 0 and by_term["shared_cost"] > 0
    with demo_env(demo.settings, monkeypatch) as runner:
        for by in ("team", "business_unit", "namespace,node", "model,gpu_model,failure_reason", "job", "label:team"):
            rows = report(runner, "--by", by, "--window", MONTH)
            assert all(r["currency"] in ("USD", None) for r in rows), by
            assert total(rows) == billed, by
            for field, amount in by_term.items():
                assert total(rows, field) == amount, (by, field)
            for r in rows:  # every row's terms make its total
                parts = sum(cents(r[f]) for f in ("compute_cost", "failure_waste_cost", "idle_cost", "shared_cost"))
                assert parts == cents(r["total_cost"]), (by, r)
        units = {r["key"]: cents(r["total_cost"]) for r in report(runner, "--by", "business_unit", "--window", MONTH)}
        mine = {k: v for k, v in units.items() if not k.startswith("__")}
        assert mine == {k: v for k, v in by_unit.items() if k != "__platform__"}
        assert sum(v for k, v in units.items() if k.startswith("__")) == by_unit.get("__platform__", Decimal(0))

        team = report(runner, "--by", "team", "--window", MONTH)
        separate = report(runner, "--by", "team", "--window", MONTH, "--idle", "separate")
        even = report(runner, "--by", "team", "--window", MONTH, "--idle", "even")
        idle_row = [r for r in separate if r["key"] == "__idle__"]
        assert idle_row and cents(idle_row[0]["idle_cost"]) == by_term["idle_cost"] > 0
        assert all(cents(r["idle_cost"]) == 0 for r in separate if r["key"] != "__idle__")
        assert total(separate) == total(even) == total(team) == billed
        shares = [cents(r["idle_cost"]) for r in even if not r["key"].startswith("__") and r["allocated_gpu_hours"] > 0]
        assert len(shares) >= 2 and max(shares) - min(shares) <= Decimal("0.01")  # one day, one cluster: equal parts
        weighted = [
            r
            for r in report(runner, "--by", "team", "--window", MONTH, "--idle", "weighted")
            if not r["key"].startswith("__") and r["allocated_gpu_hours"] > 0
        ]
        rates = [float(r["idle_cost"]) / r["allocated_gpu_hours"] for r in weighted]  # idle cost per GPU-hour used
        least = min(r["allocated_gpu_hours"] for r in weighted)
        assert max(rates) - min(rates) <= 0.02 / least and max(rates) > 0

        # the month cut in two at an instant inside the demo's day costs what the month costs, up to the
        # rounding of each half's terms to the cent
        halves = [
            report(runner, "--by", "team", "--from", a, "--to", b)
            for a, b in (
                ("2026-11-01T00:00:00Z", "2026-11-02T00:30:00Z"),
                ("2026-11-02T00:30:00Z", "2026-12-01T00:00:00Z"),
            )
        ]
        assert abs(total(halves[0]) + total(halves[1]) - billed) <= Decimal("0.01") * 2 * len(by_term)
        assert all(total(h) > 0 for h in halves)
