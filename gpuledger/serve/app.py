"""``gpuledger serve``: the read-only HTTP API, the finance dashboard and the pipeline's metrics.

Every ``/api`` and ``/dashboard`` request needs a bearer token (``gpuledger.serve.tokens``), or a
browser's session from the login page at ``/`` (``gpuledger.serve.session``); a token scoped to
one business unit sees only that unit's rows (``gpuledger.reports``) and gets 403 for anything
else. The dashboard's routes are in ``gpuledger.serve.dashboard``. The numbers are those of
``gpuledger report … --format json`` for the same query: both call ``gpuledger.reports.run``. Bad
parameters are a 400 with a one-line reason.
``/healthz`` answers while the process runs, ``/readyz`` when Kafka and ClickHouse answer and no
node's attribution has been waiting longer than the stall threshold; ``/metrics`` is Prometheus
text (no token: bind it where only Prometheus reaches, loopback by default).
"""

from __future__ import annotations

import logging
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import orjson
from clickhouse_connect.driver.client import Client
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest

from gpuledger import reports
from gpuledger.serve import dashboard as dashboard_routes
from gpuledger.serve import session
from gpuledger.serve.health import readiness
from gpuledger.serve.metrics import PipelineCollector
from gpuledger.serve.opencost import router as opencost_router
from gpuledger.serve.tokens import Scope, Tokens
from gpuledger.unit_cost import MonthUnitCost, api_param, unit_cost_request
from pipelines.clusters import parse_cluster
from pipelines.settings import Settings
from sql.client import get_client
from sql.values import plain

PERIOD_FILE = r"^\d{4}-(0[1-9]|1[0-2])\.(csv|parquet)$"
AUDITED = ("/api/", "/dashboard", "/allocation")  # every request to these is a line of the access log
# one JSON line per API or dashboard request: time, token id (never the token), scope, path, status,
# rows; its own logger, so an operator routes it apart from the server's log (`gpuledger serve --access-log`)
access_log = logging.getLogger("gpuledger.access")


def request_scope(request: Request) -> Scope:
    """The scope of the request's bearer token or session (401 without a valid one)."""
    return session.identify(request).scope


def _rows(request: Request, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records``, counted for the access log."""
    request.state.rows = len(records)
    return records


Scoped = Annotated[Scope, Depends(request_scope)]


def create_app(settings: Settings, tokens: Tokens, max_days: float = 400.0, stall_after_s: float = 600.0) -> FastAPI:
    app = FastAPI(title="gpuledger", version="1", summary="GPU-seconds, waste and cost per owner, read-only")
    app.state.tokens = tokens
    app.state.settings, app.state.max_days, app.state.sessions = settings, max_days, session.Sessions()
    app.state.trusted_header = settings.trusted_user_header
    app.state.trusted_users = session.trusted_users(settings.trusted_users or "")
    app.include_router(session.router)
    app.include_router(dashboard_routes.router)
    registry = CollectorRegistry()
    requests_total = Counter(
        "gpuledger_api_requests", "API requests by endpoint and status", ["endpoint", "status"], registry=registry
    )
    registry.register(PipelineCollector(settings, stall_after_s))

    @contextmanager
    def warehouse() -> Iterator[Client]:
        client = get_client(settings, reader=True)
        try:
            yield client
        finally:
            client.close()

    @app.middleware("http")
    async def count(request: Request, call_next: Callable[[Request], Any]) -> Response:
        response: Response = await call_next(request)
        route = request.scope.get("route")
        requests_total.labels(getattr(route, "path", "unmatched"), str(response.status_code)).inc()
        if request.url.path.startswith(AUDITED + session.AUDITED):  # and logins; "reason": why refused
            access_log.info(
                orjson.dumps(
                    {
                        "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
                        "token": getattr(request.state, "token_id", None),
                        "scope": str(getattr(request.state, "scope", "")) or None,
                        "method": request.method,
                        "path": request.url.path,
                        "query": request.url.query,
                        "status": response.status_code,
                        "rows": getattr(request.state, "rows", None),
                        "reason": getattr(request.state, "reason", None),
                    }
                ).decode()
            )
        return response

    @app.exception_handler(reports.BadRequest)
    async def bad_request(_: Request, exc: reports.BadRequest) -> JSONResponse:
        return JSONResponse({"detail": " ".join(str(exc).split())}, status_code=400)

    @app.exception_handler(reports.OutOfScope)
    async def out_of_scope(_: Request, exc: reports.OutOfScope) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=403)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    def readyz() -> JSONResponse:
        ready, checks = readiness(settings, stall_after_s)
        return JSONResponse({"ready": ready, "checks": checks}, status_code=200 if ready else 503)

    @app.get("/metrics")
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    def report_endpoint(name: str) -> None:
        spec = reports.REPORTS[name]

        def handler(
            request: Request,
            who: Scoped,
            by: str | None = None,
            start: Annotated[str | None, Query(alias="from")] = None,
            end: Annotated[str | None, Query(alias="to")] = None,
            window: str | None = None,
            cluster: str | None = None,
            limit: Annotated[int, Query(ge=1, le=100_000)] = 50,
            idle: str | None = None,
        ) -> list[dict[str, Any]]:
            a, b = reports.time_range(start, end, window, max_days=max_days)
            with warehouse() as client:
                return _rows(
                    request,
                    reports.run(
                        client,
                        name,
                        by=by,
                        start=a,
                        end=b,
                        cluster=parse_cluster(cluster),
                        limit=limit,
                        business_unit=who.business_unit,
                        idle=idle,
                    ).records,
                )

        handler.__name__ = name.replace("-", "_")
        app.get(f"/api/v1/{name}", summary=spec.title, description=(reports.run.__doc__ or "").strip())(handler)

    for name in reports.REPORTS:
        if not reports.REPORTS[name].extra:  # unit-cost: below, with the month's unit cost
            report_endpoint(name)

    @app.get(
        "/api/v1/unit-cost",
        summary="effective cluster unit cost of a month, or with unit= the cost per "
        "million units of an output per group",
    )
    def unit_cost(
        request: Request,
        who: Scoped,
        period: str | None = None,
        window: str | None = None,
        unit: str | None = None,
        by: str | None = None,
        start: Annotated[str | None, Query(alias="from")] = None,
        end: Annotated[str | None, Query(alias="to")] = None,
        cluster: str | None = None,
    ) -> list[dict[str, Any]]:
        from dagster_project.defs.exports.on_demand import unit_cost_records

        asked = unit_cost_request(
            period=period, window=window, unit=unit, by=by, start=start, end=end, cluster=cluster, spell=api_param
        )
        if not isinstance(asked, MonthUnitCost):
            a, b = reports.time_range(asked.start, asked.end, asked.window, max_days=max_days)
            with warehouse() as client:
                return _rows(
                    request,
                    reports.run(
                        client,
                        "unit-cost",
                        by=asked.by,
                        start=a,
                        end=b,
                        cluster=asked.cluster,
                        business_unit=who.business_unit,
                        extra={"unit": asked.unit},
                    ).records,
                )
        if who.business_unit is not None:  # a cluster's totals: every unit's cost in them
            raise reports.OutOfScope(
                f"the cluster unit cost holds every business unit's cost; a token for "
                f"{who.business_unit} may ask for its own with unit="
            )
        with warehouse() as client:  # settings.cluster: the price book of a cluster without its own
            records = unit_cost_records(client, asked.month, settings.cluster)
        return _rows(
            request, [{k: plain(v) for k, v in r.items()} for r in records if asked.cluster.includes(r["cluster"])]
        )

    @app.get("/api/v1/chargeback/{file}", summary="FOCUS 1.2 chargeback file of a month (YYYY-MM.csv|.parquet)")
    def chargeback(
        request: Request, who: Scoped, file: str, business_unit: str | None = None, cluster: str | None = None
    ) -> Response:
        import pyarrow.parquet as pq

        from dagster_project.defs.exports.on_demand import ExportRefused, export_chargeback

        if not re.match(PERIOD_FILE, file):
            raise reports.BadRequest(f"the file is YYYY-MM.csv or YYYY-MM.parquet, not {file!r}")
        period, fmt = file.rsplit(".", 1)
        if who.business_unit is not None:
            if business_unit not in (None, who.business_unit):
                raise reports.OutOfScope(f"a token for {who.business_unit} may not read {business_unit}'s export")
            business_unit = who.business_unit
        with tempfile.TemporaryDirectory(prefix="gpuledger-export-") as out, warehouse() as client:
            try:
                result = export_chargeback(
                    client,
                    period,
                    Path(out),
                    "csv" if fmt == "csv" else "parquet",
                    business_unit,
                    settings.cluster,  # the price book of a cluster without its own
                    cluster=parse_cluster(cluster),
                    record=False,
                )
            except ExportRefused as exc:
                missing = "no business unit" in str(exc)
                if missing and who.business_unit is not None:  # never the other units' names
                    raise HTTPException(404, f"no business unit {business_unit!r} in {period}") from None
                raise HTTPException(404 if missing else 409, str(exc)) from None
            path = result.paths[0]
            body = path.read_bytes()
            request.state.rows = pq.read_metadata(path).num_rows if fmt == "parquet" else max(body.count(b"\n") - 1, 0)
        media = "text/csv" if fmt == "csv" else "application/vnd.apache.parquet"
        return Response(body, media_type=media, headers={"Content-Disposition": f'attachment; filename="{path.name}"'})

    # / (login), /logout and /dashboard: the session and dashboard routers, included above

    app.include_router(opencost_router(request_scope, warehouse, max_days))
    app.state.started = time.time()
    return app
