"""OpenCost-compatible allocation API: ``/allocation/compute`` and ``/allocation``.

OpenCost's parameters (``window``, ``aggregate``, ``step``, ``accumulate``, ``idle`` /
``includeIdle``, ``shareIdle``, and ``shareSplit`` for how shared idle is split) and its answer:
``{"code": 200, "data": [set, …]}``, one set per step, each mapping an allocation's name to an object
with OpenCost's field names where they apply (``name``, ``properties``, ``window``, ``start``, ``end``,
``minutes``, ``gpuHours``, ``gpuCost``, ``gpuCostIdle``, ``gpuEfficiency``, ``sharedCost``,
``totalCost``, and the CPU/RAM/PV/network costs gpuledger does not measure, as 0), plus gpuledger's
own (``busyGpuHours``, ``idleGpuHours``, ``failedGpuHours``, ``failureWasteCost``, …). Every number
is ``report gpu-hours`` for the set's range (``gpuledger.reports.run``), so scoping, cost and
money are the same rules; docs/API.md sets both APIs side by side.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from clickhouse_connect.driver.client import Client
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from gpuledger import reports
from gpuledger.serve import opencost_window as words
from gpuledger.serve.tokens import Scope
from pipelines.clusters import ClusterScope, parse_cluster
from pipelines.times import utc_text

MAX_SETS = 1000
IDLE_NAME = "__idle__"
CAPACITY_ROWS = ("__unallocated__", "__unavailable__")
NOT_MEASURED = (
    "cpuCores",
    "cpuCoreHours",
    "cpuCost",
    "ramBytes",
    "ramByteHours",
    "ramCost",
    "pvCost",
    "networkCost",
    "loadBalancerCost",
    "externalCost",
)
PROPERTY_NAMES = {
    "business_unit": "businessUnit",
    "gpu_model": "gpuModel",
    "workload_kind": "workloadKind",
    "failure_reason": "failureReason",
}


def allocation(name: str, row: dict[str, Any], dims: list[str], start: datetime, end: datetime) -> dict[str, Any]:
    """One report row as an OpenCost allocation object."""
    hours = float(row.get("allocated_gpu_hours") or 0.0)
    busy = float(row.get("busy_gpu_hours") or 0.0)
    observed = hours - float(row.get("unobserved_gpu_hours") or 0.0)
    idle_cost, total = row.get("idle_cost"), row.get("total_cost")
    gpu_cost = None if total is None else round(total - float(row.get("shared_cost") or 0.0), 2)
    props: dict[str, Any] = {}
    if not name.startswith("__"):
        for d in dims:
            value = row.get(d, row.get("key"))
            if d.startswith("label:"):  # OpenCost's properties.labels
                props.setdefault("labels", {})[d.removeprefix("label:")] = value
            else:
                props[PROPERTY_NAMES.get(d, d)] = value
    span_h = (end - start).total_seconds() / 3600
    return {
        "name": name,
        "properties": props,
        "window": {"start": utc_text(start), "end": utc_text(end)},
        "start": utc_text(start),
        "end": utc_text(end),
        "minutes": span_h * 60,
        "gpuCount": hours / span_h if span_h else 0.0,
        "gpuHours": hours,
        "gpuCost": gpu_cost,
        "gpuCostIdle": idle_cost,
        "gpuEfficiency": busy / observed if observed > 0 else 0.0,
        **dict.fromkeys(NOT_MEASURED, 0.0),
        "sharedCost": row.get("shared_cost"),
        "totalCost": total,
        "totalEfficiency": busy / observed if observed > 0 else 0.0,
        # gpuledger's own
        "currency": row.get("currency"),
        "computeCost": row.get("compute_cost"),
        "failureWasteCost": row.get("failure_waste_cost"),
        "busyGpuHours": busy,
        "idleGpuHours": float(row.get("idle_gpu_hours") or 0.0),
        "failedGpuHours": float(row.get("failed_gpu_hours") or 0.0),
        "unobservedGpuHours": float(row.get("unobserved_gpu_hours") or 0.0),
        "energyKwh": float(row.get("energy_kwh") or 0.0),
    }


def allocation_set(
    rows: list[dict[str, Any]], dims: list[str], start: datetime, end: datetime, include_idle: bool
) -> dict[str, dict[str, Any]]:
    """A step's rows as ``{name: allocation}``; names join the aggregate's values with ``/`` as
    OpenCost does. Idle capacity (unallocated and unavailable GPU-hours, and the idle cost nobody
    was given) is ``__idle__`` when idle is included, else left out."""
    out: dict[str, dict[str, Any]] = {}
    idle: dict[str, Any] = {"allocated_gpu_hours": 0.0, "idle_cost": 0.0, "total_cost": 0.0, "shared_cost": 0.0}
    for row in rows:
        key = str(row["key"]) if "key" in row else "\x1f".join(str(row[d]) for d in dims)
        if key.split("\x1f")[0] in (*CAPACITY_ROWS, IDLE_NAME):
            idle["allocated_gpu_hours"] += float(row.get("gpu_hours") or 0.0)
            idle["idle_cost"] += float(row.get("idle_cost") or 0.0)
            idle["total_cost"] += float(row.get("total_cost") or 0.0)
            idle["currency"] = idle.get("currency") or row.get("currency")
            continue
        name = "/".join(key.split("\x1f"))
        out[name] = allocation(name, row, dims, start, end)
    if include_idle and (idle["allocated_gpu_hours"] > 0 or idle["total_cost"] > 0):
        idle["idle_cost"], idle["total_cost"] = round(idle["idle_cost"], 2), round(idle["total_cost"], 2)
        out[IDLE_NAME] = allocation(IDLE_NAME, idle, dims, start, end)
    return out


def steps(start: datetime, end: datetime, step: timedelta) -> list[tuple[datetime, datetime]]:
    out, a = [], start
    while a < end:
        out.append((a, min(a + step, end)))
        a = out[-1][1]
        if len(out) > MAX_SETS:
            raise reports.BadRequest(f"more than {MAX_SETS} sets: choose a longer step")
    return out


def router(
    scope: Callable[..., Scope],
    warehouse: Callable[[], AbstractContextManager[Client]],
    max_days: float,
) -> APIRouter:
    api = APIRouter(tags=["OpenCost-compatible"])
    scoped = Depends(scope)  # the bearer token's scope (401 without a known token)

    def compute(
        request: Request,
        window: str,
        who: Scope = scoped,
        aggregate: str | None = None,
        step: str | None = None,
        accumulate: str | None = None,
        idle: str | None = None,
        include_idle: Annotated[str | None, Query(alias="includeIdle")] = None,
        share_idle: Annotated[str | None, Query(alias="shareIdle")] = None,
        share_split: Annotated[str | None, Query(alias="shareSplit")] = None,
        cluster: str | None = None,
    ) -> JSONResponse:
        """Allocations per ``aggregate`` over ``window``, one set per ``step`` (OpenCost's API)."""
        try:
            data = _sets(
                request.state.scope,
                window,
                aggregate,
                step,
                accumulate,
                idle,
                include_idle,
                share_idle,
                share_split,
                parse_cluster(cluster),
            )
        except reports.BadRequest as exc:
            return JSONResponse({"code": 400, "message": " ".join(str(exc).split())}, status_code=400)
        except reports.OutOfScope as exc:
            return JSONResponse({"code": 403, "message": str(exc)}, status_code=403)
        request.state.rows = sum(len(s) for s in data)
        return JSONResponse({"code": 200, "data": data})

    def _sets(
        who: Scope,
        window: str,
        aggregate: str | None,
        step: str | None,
        accumulate: str | None,
        idle: str | None,
        include_idle: str | None,
        share_idle: str | None,
        share_split: str | None,
        cluster: ClusterScope,
    ) -> list[dict[str, dict[str, Any]]]:
        start, end = words.window(window, datetime.now(UTC))
        if end - start > timedelta(days=max_days):
            raise reports.BadRequest(f"the window is longer than {max_days:g} days")
        dims = words.aggregate(aggregate)
        with_idle = words.boolean("includeIdle", include_idle, words.boolean("idle", idle, False))
        split = (share_split or "weighted").strip().lower()
        if split not in ("weighted", "even"):
            raise reports.BadRequest(f"illegal shareSplit: {share_split!r} (weighted or even)")
        sharing = split if words.boolean("shareIdle", share_idle, False) else "separate"
        parts = (
            [(start, end)]
            if words.boolean("accumulate", accumulate, False)
            else steps(start, end, words.step(step, end - start))
        )
        out = []
        with warehouse() as client:
            for a, b in parts:
                rows = reports.run(
                    client,
                    "gpu-hours",
                    by=dims,
                    start=a,
                    end=b,
                    cluster=cluster,
                    business_unit=who.business_unit,
                    idle=sharing,
                ).records
                out.append(allocation_set(rows, dims, a, b, with_idle and sharing == "separate"))
        return out

    for path in ("/allocation/compute", "/allocation"):
        api.get(path, summary="OpenCost-compatible allocation: GPU-hours and cost per aggregate and step")(compute)
    return api
