"""The demo's finance dashboard opened in headless Chromium from ``file://``: every chart container
holds a rendered ``<svg>`` with drawn marks, nothing refers to the network, and a screenshot is
saved (its path is printed). Fails, never skips, when Chromium is missing."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.integration.demo_helpers import Demo, embedded_data

pytestmark = pytest.mark.integration
CHARTS = {"cost-by-bu", "hourly-bu", "utilization", "failure-burn", "queue", "unit-cost", "fabric", "idle-causes"}


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("chromium")
    assert binary, "chromium is not installed (bash scripts/setup-tests.sh installs Debian's chromium package)"
    argv = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


class RenderedCharts(HTMLParser):
    """Per chart container: svg elements and drawn marks inside them; and every external URL."""

    def __init__(self) -> None:
        super().__init__()
        self.svgs: dict[str, int] = {}
        self.marks: dict[str, int] = {}
        self.urls: list[str] = []
        self.current: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "div" and "chart" in (a.get("class") or "").split():
            self.current = (a.get("id") or "").removeprefix("chart-")
            self.svgs[self.current] = self.marks[self.current] = 0
        elif tag == "svg" and self.current:
            self.svgs[self.current] += 1
        elif tag == "rect" and self.current and "mark" in (a.get("class") or ""):
            self.marks[self.current] += 1
        for key in ("src", "href"):
            if a.get(key):
                self.urls.append(str(a[key]))


def test_dashboard_renders_every_chart_offline(demo: Demo, tmp_path: Path) -> None:
    dashboard = demo.out / "dashboard.html"
    url = dashboard.resolve().as_uri()
    dom = chromium(tmp_path / "profile-dom", "--dump-dom", url).stdout
    parsed = RenderedCharts()
    parsed.feed(dom)
    assert set(parsed.svgs) == CHARTS and all(parsed.svgs[c] == 1 for c in CHARTS), parsed.svgs
    assert all(parsed.marks[c] > 0 for c in CHARTS), parsed.marks
    assert not [u for u in parsed.urls if not u.startswith(("#", "data:"))], parsed.urls
    assert "cluster demo-2n2h-s3" in dom and embedded_data(dashboard)["cluster"] == "demo-2n2h-s3"
    shot = tmp_path / "dashboard.png"
    chromium(tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1400,2400", url)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    print(f"dashboard screenshot: {shot}")
