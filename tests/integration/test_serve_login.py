"""Login without a browser, on ``gpuledger serve`` with the demo's data: CSRF refusals, an expired
token (401 with its reason, in the access log), the trusted proxy header (off unless configured),
and the unit cost per 1M generated tokens in the API, the CLI, the demo's summary and the page."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys

import pytest
import requests

from gpuledger.serve.tokens import hashed_line
from tests.integration.demo_helpers import REPO
from tests.integration.served_site import ADMIN, EXPIRED, Site, serving, site_fixture  # noqa: F401 - the fixture

pytestmark = pytest.mark.integration


def test_csrf_expiry_and_the_access_log(site: Site) -> None:
    evil = requests.post(
        site.url + "/login",
        data={"token": ADMIN},
        headers={"Origin": "http://evil.example"},
        allow_redirects=False,
        timeout=30,
    )
    assert evil.status_code == 403 and "set-cookie" not in evil.headers
    assert requests.post(site.url + "/login", data={"token": ADMIN}, timeout=30).status_code == 403  # no Origin
    ok = requests.post(
        site.url + "/login", data={"token": ADMIN}, headers={"Origin": site.url}, allow_redirects=False, timeout=30
    )
    assert ok.status_code == 303 and ok.headers["location"] == "/dashboard"
    sid = ok.cookies.get("gpuledger_session")
    assert sid
    logout = requests.post(
        site.url + "/logout",
        cookies={"gpuledger_session": sid},
        headers={"Origin": "http://evil.example"},
        allow_redirects=False,
        timeout=30,
    )
    assert logout.status_code == 403
    assert requests.get(site.url + "/dashboard", cookies={"gpuledger_session": sid}, timeout=30).status_code == 200

    expired = site.api("/api/v1/gpu-hours", token=EXPIRED, window=site.month)
    assert expired.status_code == 401 and expired.json()["detail"].startswith("token sha256:")
    assert "expired at 2020-01-01T00:00:00Z" in expired.json()["detail"]
    lines = [json.loads(line) for line in (site.home / "serve-access.log").read_text().splitlines()]
    assert EXPIRED not in (site.home / "serve-access.log").read_text()
    mine = hashed_line(EXPIRED, "all").split()[0][: len("sha256:") + 12]
    assert any(r["token"] == mine and r["status"] == 401 and "expired" in (r["reason"] or "") for r in lines)
    logins = [r for r in lines if r["path"] == "/login"]  # logins are lines of the access log too
    assert [r["status"] for r in logins] == [403, 403, 303] and logins[0]["reason"] == "cross-site POST refused"
    admin = hashed_line(ADMIN, "all").split()[0][: len("sha256:") + 12]
    assert logins[2]["token"] == admin and logins[2]["scope"] == "all" and logins[2]["reason"] is None


def test_unit_cost_reads_per_million_generated_tokens(site: Site) -> None:
    """The demo's servers report generated and prompt tokens: the unit cost divides by the generated
    ones and reads per 1M of them (not "0.00 USD" per token) in the API, the CLI, the demo's summary
    and the dashboard, with the raw per-token value kept beside it."""
    (row,) = site.api("/api/v1/unit-cost", period=site.month, cluster=site.cluster).json()
    assert row["unit_kind"] == "output_events:tokens_generated" and row["unit_cost_per"] == "1M tokens_generated"
    assert row["unit_cost_scaled"] == pytest.approx(float(row["total"]) * 1e6 / row["accepted_units"], abs=0.005)
    assert row["unit_cost_scaled"] >= 1.0 and 0 < float(row["unit_cost"]) < 0.01  # the raw value stays
    shown = f"{row['unit_cost_scaled']:,.2f} {row['currency']} per 1M tokens_generated"
    assert shown in " ".join(site.demo_stdout.split()), site.demo_stdout[-1500:]
    cli = subprocess.run(
        [sys.executable, "-m", "gpuledger.cli.main", "report", "unit-cost", "--period", site.month],
        env={**site.env, "COLUMNS": "200"},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert cli.returncode == 0 and shown in cli.stdout, cli.stdout + cli.stderr
    page = site.api("/dashboard", window=site.month, cluster=site.cluster).text
    table = page[page.index('id="table-unit-cost"') :]
    assert f"{row['unit_cost_scaled']:,.2f}" in table[: table.index("</table>")]
    chart = page[page.index('id="chart-unit-cost"') :]
    ticks = re.findall(r'text-anchor="end" font-size="11">([^<]*)</text>', chart[: chart.index("</svg>")])
    assert len(set(ticks)) == len(ticks) >= 3 and "per 1M tokens_generated" in chart[: chart.index("</svg>")]


def test_a_trusted_proxy_header_only_when_configured(site: Site) -> None:
    """Off by default: the header alone is no login. Configured, the user it names gets the scope
    the list gives it, and a user not listed gets 403."""
    header = {"X-Forwarded-Email": "Lead@Example.com"}
    params = {"window": site.month, "by": "business_unit"}
    ignored = requests.get(site.url + "/dashboard/export.csv", params=params, headers=header, timeout=60)
    assert ignored.status_code == 401
    env = {
        **site.env,
        "GPULEDGER_TRUSTED_USER_HEADER": "X-Forwarded-Email",
        "GPULEDGER_TRUSTED_USERS": "lead@example.com=business_unit:research,cfo@example.com=all",
    }
    with serving(site.home, env, "proxied") as url:
        lead = requests.get(url + "/dashboard/export.csv", params=params, headers=header, timeout=60)
        assert lead.status_code == 200 and [r["business_unit"] for r in csv.DictReader(lead.text.splitlines())] == [
            "research"
        ]
        cfo = requests.get(
            url + "/dashboard/export.csv", params=params, headers={"X-Forwarded-Email": "cfo@example.com"}, timeout=60
        )
        assert cfo.status_code == 200 and site.other in cfo.text
        stranger = requests.get(
            url + "/dashboard/export.csv", params=params, headers={"X-Forwarded-Email": "x@example.com"}, timeout=60
        )
        assert stranger.status_code == 403
    lines = [json.loads(line) for line in (site.home / "proxied-access.log").read_text().splitlines()]
    assert {r["token"] for r in lines} == {"user:lead@example.com", "user:cfo@example.com", "user:x@example.com"}
