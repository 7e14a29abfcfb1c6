"""The CLI (``report unit-cost``) and the API (``GET /api/v1/unit-cost``) accept and refuse the same
argument combinations, through the one rule in ``gpuledger.unit_cost``; no warehouse is asked."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.requests import Request
from typer.testing import CliRunner

from dagster_project.defs.exports import on_demand as export_reports
from gpuledger import reports
from gpuledger.cli import export_cmd
from gpuledger.cli.main import app as cli_app
from gpuledger.serve import app as serve_app
from gpuledger.serve.tokens import Scope, Tokens
from gpuledger.unit_cost import MonthUnitCost, OutputUnitCost, api_param, unit_cost_request
from gpuledger.windows import BadWindow, billing_month
from pipelines.clusters import ClusterScope
from pipelines.settings import Settings

MARCH = {"period": "2026-03"}
COMBINATIONS: list[tuple[dict[str, str], bool]] = [
    ({}, True),  # the month's unit cost of last month
    (MARCH, True),
    ({"window": "last-month"}, True),
    ({"window": "2026-03"}, True),
    ({**MARCH, "cluster": "east"}, True),
    ({**MARCH, "window": "2026-03"}, False),
    ({"period": "last-month"}, False),  # a period is YYYY-MM; the window takes the words
    ({"period": "2026-3"}, False),
    ({**MARCH, "by": "model"}, False),  # groups go with unit
    ({"from": "2026-03-01T00:00:00Z"}, False),
    ({"to": "2026-03-05T00:00:00Z"}, False),
    ({"unit": "tokens"}, True),
    ({"unit": "tokens", "by": "model", **MARCH, "cluster": "east"}, True),
    ({"unit": "tokens", "from": "2026-03-01T00:00:00Z", "to": "2026-03-05T00:00:00Z"}, True),
    ({"unit": "tokens", "window": "2026-03"}, True),
    ({"unit": "tokens", **MARCH, "window": "2026-03"}, False),
    ({"unit": "tokens", **MARCH, "from": "2026-03-01T00:00:00Z"}, False),
    ({"unit": "tokens", "period": "2026-13"}, False),
]
TWO_CLUSTERS = [
    {**dict.fromkeys((*export_reports.UNIT_COST_COLUMNS, *export_reports.SCALED_COLUMNS), ""), "cluster": c}
    for c in ("east", "west")
]


@pytest.fixture
def no_warehouse(monkeypatch: pytest.MonkeyPatch) -> None:
    class Client:
        def close(self) -> None:
            pass

    monkeypatch.setattr(export_reports, "unit_cost_records", lambda *_: [dict(r) for r in TWO_CLUSTERS])
    monkeypatch.setattr(export_cmd, "get_client", lambda *_: Client())
    monkeypatch.setattr(export_cmd, "report", lambda *_, **__: None)
    monkeypatch.setattr(serve_app, "get_client", lambda *_, **__: Client())
    monkeypatch.setattr(reports, "run", lambda *_, **__: reports.Result([], []))


def cli(args: dict[str, str]) -> tuple[bool, str]:
    argv = ["report", "unit-cost", "--format", "json"]
    for name, value in args.items():
        argv += [f"--{name}", value]
    done = CliRunner().invoke(cli_app, argv)  # main() turns a BadRequest into exit 2
    assert done.exit_code == 0 or isinstance(done.exception, reports.BadRequest), done.output
    return done.exit_code == 0, done.output


def api(args: dict[str, str]) -> tuple[bool, list[dict[str, Any]]]:
    application = serve_app.create_app(Settings(), Tokens({}))
    [route] = [r for r in application.routes if getattr(r, "path", "") == "/api/v1/unit-cost"]
    names = {"from": "start", "to": "end"}
    kwargs: dict[str, Any] = {"period": None, "window": None, "unit": None, "by": None, "start": None, "end": None}
    kwargs.update({"cluster": None, **{names.get(k, k): v for k, v in args.items()}})
    try:
        got = route.endpoint(request=Request({"type": "http"}), who=Scope(), **kwargs)  # type: ignore[attr-defined]
    except reports.BadRequest:
        return False, []
    return True, got


@pytest.mark.usefixtures("no_warehouse")
@pytest.mark.parametrize(("args", "accepted"), COMBINATIONS)
def test_the_cli_and_the_api_accept_the_same_combinations(args: dict[str, str], accepted: bool) -> None:
    assert cli(args)[0] is accepted, args
    assert api(args)[0] is accepted, args


@pytest.mark.usefixtures("no_warehouse")
def test_the_months_unit_cost_keeps_the_asked_cluster_in_both() -> None:
    assert [r["cluster"] for r in api({**MARCH, "cluster": "east"})[1]] == ["east"]
    assert [r["cluster"] for r in api(MARCH)[1]] == ["east", "west"]
    ok, output = cli({**MARCH, "cluster": "east"})
    assert ok and '"east"' in output and '"west"' not in output


def test_the_rule_reads_the_arguments() -> None:
    none = dict.fromkeys(("period", "window", "unit", "by", "start", "end", "cluster"))
    month = unit_cost_request(**{**none, "period": "2026-03", "cluster": "east"}, spell=api_param)
    assert month == MonthUnitCost("2026-03", ClusterScope.one("east"))
    output = unit_cost_request(**{**none, "unit": "tokens", "period": "2026-03"}, spell=api_param)
    assert output == OutputUnitCost("tokens", None, None, None, "2026-03", ClusterScope.every())


@pytest.mark.parametrize(
    ("period", "window", "default", "month"),
    [("2026-03", None, None, "2026-03"), (None, "2026-03", None, "2026-03"), (None, None, "2026-02", "2026-02")],
)
def test_billing_month(period: str | None, window: str | None, default: str | None, month: str) -> None:
    assert billing_month(period, window, default) == month


@pytest.mark.parametrize(("period", "window"), [(None, None), ("2026-03", "2026-03"), ("2026-03-02", None)])
def test_billing_month_refuses(period: str | None, window: str | None) -> None:
    with pytest.raises(BadWindow):
        billing_month(period, window)
