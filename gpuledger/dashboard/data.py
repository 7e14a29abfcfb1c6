"""Everything the finance dashboard, the SRE report and the demo summary show, as plain JSON data.

The tables come from the same named queries as ``gpuledger report`` (``sql/queries``) with the same
parameters, so their totals equal the CLI's for the same period and cluster. The time series read
the Dagster asset tables (``cost_allocation_daily``, ``fabric_health``,
``effective_cluster_unit_cost_monthly``) and the resolved facts, with server-side parameters only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from clickhouse_connect.driver.client import Client

from dagster_project.defs.exports.on_demand import with_scaled
from gpuledger import reports
from pipelines.clusters import parse_cluster
from sql.idle_causes import IDLE_CAUSES
from sql.values import plain

HOURLY_BU = """
SELECT toStartOfHour(window_start) AS hour, business_unit, sum(gpu_seconds) / 3600 AS gpu_hours
FROM resolved_facts
WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
  AND cluster = {cluster:String} AND kind = 'allocated'
GROUP BY hour, business_unit ORDER BY hour, business_unit
"""
DAILY_COST = """
SELECT day, business_unit, toFloat64(sum(cost)) AS cost, any(currency) AS currency
FROM cost_allocation_daily
WHERE day >= toDate({start:DateTime64(3, 'UTC')})
  AND day <= toDate({end:DateTime64(3, 'UTC')} - INTERVAL 1 MILLISECOND)
  AND cluster = {cluster:String}
GROUP BY day, business_unit ORDER BY day, business_unit
"""
FABRIC = """
SELECT day, node_set, runs, failed_runs, avg_busbw_gbps, baseline_gbps, ratio, below_baseline
FROM fabric_health
WHERE day >= toDate({start:DateTime64(3, 'UTC')})
  AND day <= toDate({end:DateTime64(3, 'UTC')} - INTERVAL 1 MILLISECOND)
  AND cluster = {cluster:String}
ORDER BY day, node_set
"""
UNIT_COST = """
SELECT month, currency, compute, network, storage, support, operations, idle, retries, total,
       accepted_units, unit_kind, unit_cost
FROM effective_cluster_unit_cost_monthly
WHERE cluster = {cluster:String} ORDER BY month
"""


def records(client: Client, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    result = client.query(sql, parameters=params)
    return [{c: plain(v) for c, v in zip(result.column_names, row, strict=True)} for row in result.result_rows]


def collect(client: Client, cluster: str, start: datetime, end: datetime) -> dict[str, Any]:
    """The dashboard's data for one cluster and ``[start, end)``."""
    p = {"start": start, "end": end, "cluster": cluster}

    def report(name: str, **kw: Any) -> list[dict[str, Any]]:  # the same layer as `gpuledger report` and the API
        return reports.run(client, name, start=start, end=end, cluster=parse_cluster(cluster), **kw).records

    data: dict[str, Any] = {
        "cluster": cluster,
        "start": plain(start),
        "end": plain(end),
        "gpu_hours_by_business_unit": report("gpu-hours", by="business_unit"),
        "gpu_hours_by_team": report("gpu-hours", by="team"),
        "failures": report("failures", limit=100000),
        "queue": report("queue"),
        "idle_by_business_unit": report("idle", by="business_unit"),
        "idle_causes_by_team": report("idle-causes", by="team"),
        "benchmarks": report("benchmarks"),
        "token_cost_by_model": [r for r in report("unit-cost", by="model", extra={"unit": "tokens"}) if r["units"]],
        "hourly_gpu_hours_by_business_unit": records(client, HOURLY_BU, p),
        "daily_cost_by_business_unit": records(client, DAILY_COST, p),
        "fabric_health": records(client, FABRIC, p),
        "unit_cost": [with_scaled(r) for r in records(client, UNIT_COST, {"cluster": cluster})],
    }
    data["totals"] = totals(data)
    data["failure_burn_by_reason"] = burn_by_reason(data["failures"])
    data["idle_causes"] = causes_total(data["idle_causes_by_team"])
    return data


def causes_total(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The period's idle GPU-hours and their cost per cause, over every team (in the causes' order)."""
    by: dict[str, dict[str, Any]] = {c: {"cause": c, "idle_gpu_hours": 0.0, "cost": 0.0} for c in IDLE_CAUSES}
    for row in rows:
        agg = by[row["cause"]]
        agg["idle_gpu_hours"] += float(row["idle_gpu_hours"])
        agg["cost"] += float(row["cost"] or 0.0)
    return [r for r in by.values() if r["idle_gpu_hours"] > 0]


def totals(data: dict[str, Any]) -> dict[str, float]:
    """Allocated / busy / idle / failed GPU-hours, capacity and energy, from the by-business-unit rows."""
    owned = [r for r in data["gpu_hours_by_business_unit"] if not str(r["key"]).startswith("__")]
    out = {
        k: sum(float(r[k]) for r in owned)
        for k in ("allocated_gpu_hours", "busy_gpu_hours", "idle_gpu_hours", "failed_gpu_hours", "unobserved_gpu_hours")
    }
    out["capacity_gpu_hours"] = sum(float(r["gpu_hours"]) for r in data["gpu_hours_by_business_unit"])
    # every GPU's energy, held or not (the owners' and the unallocated and unavailable capacity's)
    out["energy_kwh"] = sum(float(r["energy_kwh"]) for r in data["gpu_hours_by_business_unit"])
    for kind in ("unallocated", "unavailable"):
        out[f"{kind}_gpu_hours"] = sum(
            float(r["gpu_hours"]) for r in data["gpu_hours_by_business_unit"] if r["key"] == f"__{kind}__"
        )
    out["cost"] = sum(float(r["cost"]) for r in data["daily_cost_by_business_unit"])
    return out


def burn_by_reason(failures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by: dict[str, dict[str, Any]] = {}
    for row in failures:
        reason = row["failure_reason"] or "(unknown)"
        agg = by.setdefault(
            reason, {"failure_reason": reason, "attempts": 0, "failed_gpu_hours": 0.0, "lost_gpu_hours": 0.0}
        )
        agg["attempts"] += 1
        agg["failed_gpu_hours"] += float(row["failed_gpu_hours"] or 0.0)
        agg["lost_gpu_hours"] += float(row["lost_gpu_hours"] or 0.0)
    return sorted(by.values(), key=lambda r: -r["failed_gpu_hours"])
