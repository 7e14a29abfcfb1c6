"""The dashboard ``gpuledger serve`` serves, driven in Debian's headless Chromium through selenium and
chromium-driver, against the real local services with the demo's data: log in with a token, switch
window and grouping with the page's controls, drill business unit → team → job, download the CSV
(its rows equal the API's), a business-unit user who cannot reach another unit (neither on the
page nor by editing the URL), a wrong and an expired token refused, logout. Fails, never skips,
when chromium or chromedriver is missing."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from pydantic import SecretStr
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from infra.services import down
from pipelines.serve.tokens import hashed_line
from pipelines.settings import Settings
from tests.conftest import Endpoints
from tests.integration.demo_helpers import REPO
from tests.integration.test_serve import _free_port

pytestmark = pytest.mark.integration
ADMIN, SCOPED, EXPIRED = ("t-" + uuid.uuid4().hex for _ in range(3))
HOURS = ("allocated_gpu_hours", "busy_gpu_hours", "idle_gpu_hours", "failed_gpu_hours")


@dataclass
class Site:
    url: str
    home: Path
    month: str
    cluster: str
    unit: str  # the scoped token's business unit
    other: str  # another unit with rows
    demo_stdout: str
    env: dict[str, str]

    def api(self, path: str, token: str = ADMIN, **params: str) -> requests.Response:
        return requests.get(self.url + path, params=params, headers={"Authorization": f"Bearer {token}"}, timeout=60)


@pytest.fixture(scope="module")
def site(endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    home = tmp_path_factory.mktemp("served")
    tag = uuid.uuid4().hex[:10]
    settings = Settings(
        kafka_bootstrap_servers=endpoints.kafka_bootstrap,
        clickhouse_url=endpoints.clickhouse_url,
        clickhouse_user=endpoints.clickhouse_user,
        clickhouse_password=SecretStr(endpoints.clickhouse_password),
        clickhouse_database=f"test_{tag}",
        topic_prefix=f"test-{tag}.",
        home=home,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "CLICKHOUSE_", "GPULEDGER_"))}
    env.update(settings.process_env())
    serve = None
    try:
        demo = [sys.executable, "-m", "pipelines.cli.demo_cmd", "--nodes", "2", "--hours", "2", "--seed", "3"]
        done = subprocess.run(
            [*demo, "--out", str(home / "demo")], env=env, cwd=REPO, capture_output=True, text=True, timeout=900
        )
        assert done.returncode == 0, done.stdout + done.stderr
        ran = json.loads((home / "demo" / "demo.json").read_text())
        tokens = home / "tokens"
        tokens.write_text(
            f"{hashed_line(ADMIN, 'all')}\n{hashed_line(SCOPED, 'business_unit:research')}\n"
            f"{hashed_line(EXPIRED, 'all')} expires=2020-01-01T00:00:00Z\n"
        )
        serve, url = start_serve(home, env, "serve")
        site = Site(url, home, ran["start"][:7], ran["cluster"], "research", "", done.stdout, env)
        units = [r["key"] for r in site.api("/api/v1/gpu-hours", by="business_unit", window=site.month).json()]
        assert "research" in units, units
        site.other = next(u for u in units if u not in ("research",) and not u.startswith("__"))
        yield site
    finally:
        if serve is not None:
            serve.terminate()
            serve.wait(timeout=30)
        down(settings)


@contextmanager
def serving(home: Path, env: dict[str, str], name: str) -> Iterator[str]:
    """Another ``gpuledger serve`` of the same warehouse, with ``env``; its URL."""
    serve, url = start_serve(home, env, name)
    try:
        yield url
    finally:
        serve.terminate()
        serve.wait(timeout=30)


def start_serve(home: Path, env: dict[str, str], name: str) -> tuple[subprocess.Popen[bytes], str]:
    """``gpuledger serve`` with the tokens file in ``home``, answering ``/healthz``; its log and
    access log are ``home/<name>.log`` and ``home/<name>-access.log``."""
    port = _free_port()
    argv = [sys.executable, "-m", "pipelines.cli.main", "serve", "--port", str(port)]
    argv += ["--tokens-file", str(home / "tokens"), "--access-log", str(home / f"{name}-access.log")]
    with open(home / f"{name}.log", "wb") as log:
        serve = subprocess.Popen(argv, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if requests.get(url + "/healthz", timeout=2).status_code == 200:
                return serve, url
        except requests.ConnectionError:
            pass
        assert serve.poll() is None and time.monotonic() < deadline, (home / f"{name}.log").read_text()
        time.sleep(0.3)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert binary, "chromium is not installed (bash scripts/setup-tests.sh installs Debian's chromium package)"
    assert driver, "chromedriver is not installed (bash scripts/setup-tests.sh installs Debian's chromium-driver)"
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,2200",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(arg)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    options.add_experimental_option(
        "prefs", {"download.default_directory": str(downloads), "download.prompt_for_download": False}
    )
    chrome = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    chrome.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    try:
        yield chrome
    finally:
        chrome.quit()


def log_in(chrome: webdriver.Chrome, site: Site, token: str) -> None:
    chrome.get(site.url + "/")
    field = chrome.find_element(By.ID, "token")
    field.clear()
    field.send_keys(token)
    chrome.find_element(By.ID, "login-submit").click()
    WebDriverWait(chrome, 30).until(
        lambda c: c.find_elements(By.ID, "drill-table") or c.find_elements(By.ID, "login-error")
    )


def choose(chrome: webdriver.Chrome, **values: str) -> None:
    """Set the page's controls and press Show."""
    for name, value in values.items():
        Select(chrome.find_element(By.ID, f"control-{name}")).select_by_value(value)
    chrome.find_element(By.ID, "control-apply").click()
    WebDriverWait(chrome, 30).until(lambda c: all(f"{k}={v}" in c.current_url for k, v in values.items()))


def shown(chrome: webdriver.Chrome) -> dict[str, str]:
    """The drill table: grouping column (the last dimension before the numbers) -> allocated GPU-hours."""
    head = [th.text for th in chrome.find_elements(By.CSS_SELECTOR, "#drill-table thead th")]
    key = max(i for i, h in enumerate(head) if not h.endswith(("_hours", "_kwh")) and "cost" not in h)
    col = head.index("allocated_gpu_hours")
    out = {}
    for tr in chrome.find_elements(By.CSS_SELECTOR, "#drill-table tbody tr"):
        cells = [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        out[cells[key]] = cells[col]
    return out


def api_rows(site: Site, dims: list[str], **filters: str) -> list[dict[str, Any]]:
    rows = site.api("/api/v1/gpu-hours", by=",".join(dims), window=site.month, cluster=site.cluster).json()
    if len(dims) == 1:
        rows = [{dims[0]: r.pop("key"), **r} for r in rows]
    return [r for r in rows if all(r[k] == v for k, v in filters.items())]


def as_shown(rows: list[dict[str, Any]], key: str) -> dict[str, str]:
    return {str(r[key]): f"{r['allocated_gpu_hours']:,.2f}" for r in rows}


def test_log_in_switch_drill_download_and_log_out(site: Site, browser: webdriver.Chrome, tmp_path: Path) -> None:
    chrome = browser
    log_in(chrome, site, "not-a-token")
    assert chrome.find_element(By.ID, "login-error").text == "That token is not valid."
    assert chrome.get_cookie("gpuledger_session") is None
    log_in(chrome, site, EXPIRED)
    assert "expired at 2020-01-01T00:00:00Z" in chrome.find_element(By.ID, "login-error").text
    log_in(chrome, site, ADMIN)
    assert chrome.current_url == site.url + "/dashboard"
    cookie = chrome.get_cookie("gpuledger_session")
    assert cookie and cookie["httpOnly"] and cookie["sameSite"] == "Strict" and not cookie["secure"]
    assert ADMIN not in cookie["value"]

    choose(chrome, window=site.month, by="team")  # the page's controls, not a typed URL
    assert shown(chrome) == as_shown(api_rows(site, ["team"]), "team") and len(shown(chrome)) >= 3
    choose(chrome, by="business_unit")
    top = shown(chrome)
    assert top == as_shown(api_rows(site, ["business_unit"]), "business_unit") and site.other in top
    marks = chrome.find_elements(By.CSS_SELECTOR, "#drill-chart svg rect.mark")
    owned = [k for k in top if not k.startswith("__")]
    assert len(marks) == 3 * len(owned)  # allocated, busy and idle bars per unit

    chrome.find_element(By.LINK_TEXT, "research").click()  # drill: the unit's teams
    WebDriverWait(chrome, 30).until(lambda c: "business_unit=research" in c.current_url)
    teams = shown(chrome)
    assert teams == as_shown(api_rows(site, ["business_unit", "team"], business_unit="research"), "team")
    team = max(teams, key=lambda t: float(teams[t].replace(",", "")))
    chrome.find_element(By.LINK_TEXT, team).click()  # drill: the team's jobs
    WebDriverWait(chrome, 30).until(lambda c: f"team={team}" in c.current_url and "by=job" in c.current_url)
    want = api_rows(site, ["business_unit", "team", "job"], business_unit="research", team=team)
    assert shown(chrome) == as_shown(want, "job") and want
    assert chrome.find_element(By.ID, "crumbs").text == f"all business units › research › {team}"

    chrome.find_element(By.ID, "download-csv").click()
    downloads = tmp_path / "downloads"
    deadline = time.monotonic() + 30
    while not [p for p in downloads.glob("*.csv")] and time.monotonic() < deadline:
        time.sleep(0.2)
    (path,) = downloads.glob("*.csv")
    with path.open(newline="") as f:
        got = list(csv.DictReader(f))
    assert [r["job"] for r in got] == [r["job"] for r in want]
    for row, expected in zip(got, want, strict=True):
        assert row["business_unit"] == "research" and row["team"] == team
        for col in HOURS:
            assert float(row[col]) == pytest.approx(expected[col], rel=1e-9, abs=1e-12), (row, col)

    shot = tmp_path / "dashboard.png"
    chrome.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    print(f"served dashboard screenshot: {shot}")
    assert chrome.execute_script("return document.scripts.length") == 0  # no script, no CDN
    assert not chrome.find_elements(By.CSS_SELECTOR, "[src^='http'], link[href^='http']")

    session = chrome.get_cookie("gpuledger_session")
    assert session
    sid = session["value"]
    chrome.find_element(By.ID, "logout-submit").click()
    WebDriverWait(chrome, 30).until(lambda c: c.find_elements(By.ID, "login"))
    assert chrome.get_cookie("gpuledger_session") is None
    chrome.get(site.url + "/dashboard")  # no session: back to the login page
    assert chrome.find_elements(By.ID, "login") and not chrome.find_elements(By.ID, "drill-table")
    replay = requests.get(site.url + "/dashboard", cookies={"gpuledger_session": sid}, timeout=30)
    assert replay.status_code == 401  # the session ended on the server, not only in the browser


def test_a_business_unit_user_sees_only_that_unit(site: Site, browser: webdriver.Chrome) -> None:
    chrome = browser
    log_in(chrome, site, SCOPED)
    assert "business_unit:research" in chrome.find_element(By.ID, "who").text
    choose(chrome, window=site.month, by="business_unit")
    assert list(shown(chrome)) == ["research"]
    choose(chrome, by="team")
    assert shown(chrome) == as_shown(api_rows(site, ["business_unit", "team"], business_unit="research"), "team")
    assert site.other not in chrome.page_source and "__unallocated__" not in chrome.page_source
    for path in ("/dashboard", "/dashboard/export.csv"):  # another unit by editing the URL
        chrome.get(f"{site.url}{path}?window={site.month}&by=team&business_unit={site.other}")
        assert "may not open another business unit" in chrome.page_source
        assert f">{site.other}<" not in chrome.page_source and "allocated_gpu_hours" not in chrome.page_source


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
        [sys.executable, "-m", "pipelines.cli.main", "report", "unit-cost", "--period", site.month],
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
