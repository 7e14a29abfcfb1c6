"""The dashboard ``gpuledger serve`` serves, driven in Debian's headless Chromium through selenium and
chromium-driver, against the real local services with the demo's data: log in with a token, switch
window and grouping with the page's controls, drill business unit → team → job, download the CSV
(its rows equal the API's), a business-unit user who cannot reach another unit (neither on the
page nor by editing the URL), a wrong and an expired token refused, logout. Fails, never skips,
when chromium or chromedriver is missing."""

from __future__ import annotations

import csv
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.integration.served_site import ADMIN, EXPIRED, HOURS, SCOPED, Site, site_fixture  # noqa: F401 - the fixture

pytestmark = pytest.mark.integration


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
    """The drill table: the chosen grouping's column (``by`` of the page's URL) -> allocated GPU-hours."""
    head = [th.text for th in chrome.find_elements(By.CSS_SELECTOR, "#drill-table thead th")]
    key = head.index(parse_qs(urlsplit(chrome.current_url).query)["by"][0])
    col = head.index("allocated_gpu_hours")
    out = {}
    for tr in chrome.find_elements(By.CSS_SELECTOR, "#drill-table tbody tr"):
        cells = [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        out[cells[key]] = cells[col]
    return out


def api_rows(site: Site, dims: list[str], window: str = "", **filters: str) -> list[dict[str, Any]]:
    by = ",".join(dims)
    rows = site.api("/api/v1/gpu-hours", by=by, window=window or site.month, cluster=site.cluster).json()
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
    assert chrome.find_element(By.ID, "span").text.startswith(f"{site.month}-01T00:00:00Z")
    choose(chrome, window="yesterday")  # the demo's data lies in its month: another window, other rows
    assert (
        shown(chrome)
        == as_shown(api_rows(site, ["team"], "yesterday"), "team")
        != as_shown(api_rows(site, ["team"]), "team")
    )
    assert not shown(chrome) and chrome.find_element(By.ID, "drill-empty").is_displayed()
    choose(chrome, window=site.month)
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
