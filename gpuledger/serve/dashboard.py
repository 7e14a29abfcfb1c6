"""``/dashboard`` and ``/dashboard/export.csv``: the served finance dashboard (``gpuledger.dashboard.served``).

Authenticated as the API is (``gpuledger.serve.session.identify``: bearer token, session cookie or
trusted header); a browser without a session is sent to the login page. A business-unit scope sees
its own unit only: the rows come through the scoped report layer, and the cluster-wide sections
(queue, fabric, the cluster's unit cost: every unit's data) are shown to the scope ``all`` alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from clickhouse_connect.driver.client import Client
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from gpuledger import reports
from gpuledger.dashboard.drill import DRILL, View, as_csv, rows
from gpuledger.serve.session import SECURITY_HEADERS, identify
from pipelines.clusters import parse_cluster
from pipelines.settings import Settings
from sql.client import get_client
from sql.values import plain

router = APIRouter()
MONTHS_BACK = 12


@contextmanager
def warehouse(settings: Settings) -> Iterator[Client]:
    client = get_client(settings, reader=True)
    try:
        yield client
    finally:
        client.close()


@dataclass(frozen=True)
class Asked:
    """A dashboard request resolved: the view, its time range and the clusters with data in it."""

    view: View
    start: datetime
    end: datetime
    clusters: list[str]


def _resolve(request: Request, client: Client, scope: str | None, cluster: str | None, window: str, by: str) -> Asked:
    """The view asked for; without a cluster, the first one with data. A business-unit
    scope may not drill into another unit (403)."""
    filters = {d: request.query_params[d] for d in DRILL if request.query_params.get(d)}
    if scope is not None and filters.get("business_unit", scope) != scope:
        raise reports.OutOfScope(f"a token for {scope} may not open another business unit")
    max_days = request.app.state.max_days
    start, end = reports.time_range(None, None, window, max_days=max_days)
    since = datetime.now(UTC) - timedelta(days=max_days)  # the clusters the page offers: any with data since
    found = reports.run(client, "gpu-hours", by="cluster", start=since, end=datetime.now(UTC), business_unit=scope)
    clusters = sorted(str(r["key"]) for r in found.records if not str(r["key"]).startswith("__"))
    default = clusters[0] if clusters else request.app.state.settings.cluster
    return Asked(View(parse_cluster(cluster).name_or(default), window, by, filters), start, end, clusters)


def _months(now: datetime) -> list[str]:
    """The current month and the ones before it, newest first."""
    year, month = now.year, now.month
    out = []
    for _ in range(MONTHS_BACK):
        out.append(f"{year:04d}-{month:02d}")
        year, month = (year, month - 1) if month > 1 else (year - 1, 12)
    return out


@router.get("/dashboard", response_class=HTMLResponse, summary="the finance dashboard (a browser logs in at /)")
def dashboard(
    request: Request,
    cluster: str | None = None,
    window: str = "month-to-date",
    by: str = "business_unit",
    business_unit: str | None = None,
    team: str | None = None,
) -> Response:
    try:
        who = identify(request)
    except HTTPException as exc:
        if exc.status_code == 401 and "text/html" in request.headers.get("accept", ""):
            return RedirectResponse("/", status_code=303)
        raise
    scope = who.scope.business_unit
    from gpuledger.dashboard import data, served

    with warehouse(request.app.state.settings) as client:
        asked = _resolve(request, client, scope, cluster, window, by)
        found = rows(client, asked.view, asked.start, asked.end, scope)
        request.state.rows = len(found)
        full = data.collect(client, asked.view.cluster, asked.start, asked.end) if scope is None else None
    body = served.page(
        asked.view,
        found,
        who=f"{who.id} · {who.scope}",
        scoped=scope,
        clusters=asked.clusters,
        months=_months(datetime.now(UTC)),
        span=(str(plain(asked.start)), str(plain(asked.end))),
        full=full,
    )
    return HTMLResponse(body, headers={"Cache-Control": "no-store", **SECURITY_HEADERS})


@router.get("/dashboard/export.csv", summary="the rows the dashboard shows for the same parameters, as CSV")
def export_csv(
    request: Request,
    cluster: str | None = None,
    window: str = "month-to-date",
    by: str = "business_unit",
    business_unit: str | None = None,
    team: str | None = None,
) -> Response:
    scope = identify(request).scope.business_unit
    with warehouse(request.app.state.settings) as client:
        asked = _resolve(request, client, scope, cluster, window, by)
        found = rows(client, asked.view, asked.start, asked.end, scope)
    request.state.rows = len(found)
    view = asked.view
    name = "-".join(["gpu-hours", view.cluster, window, *view.filters.values(), view.by])
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return Response(
        as_csv(found, view),
        media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{safe}.csv"', "Cache-Control": "no-store"},
    )
