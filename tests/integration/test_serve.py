"""``gpuledger serve`` against the real local services, with the demo's data ingested: every API
endpoint equals ``gpuledger report … --format json``; tokens and business-unit scopes; 400s with a
reason; the dashboard in headless Chromium; ``/metrics`` scraped by a real Prometheus."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
from pydantic import SecretStr

from bench.load import Load, encode, publish
from gpuledger.serve.tokens import hashed_line
from infra.prometheus.server import PrometheusServer, ScrapeJob, render_config
from infra.services import down
from pipelines.settings import Settings
from sql.client import get_client
from tests.conftest import Endpoints
from tests.integration.demo_helpers import REPO
from tests.integration.test_dashboard_browser import CHARTS, RenderedCharts, chromium

pytestmark = pytest.mark.integration
ADMIN, OTHER = "admin-" + uuid.uuid4().hex, "scoped-" + uuid.uuid4().hex
STALL_AFTER_S = 5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Served:
    settings: Settings
    url: str
    env: dict[str, str]
    start: str
    end: str
    unit: str  # the business unit the scoped token may see
    other_unit: str
    cluster: str

    def get(self, path: str, token: str | None = ADMIN, **params: Any) -> requests.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return requests.get(self.url + path, params=params, headers=headers, timeout=120)

    def cli(self, *args: str) -> Any:
        done = subprocess.run(
            [sys.executable, "-m", "gpuledger.cli.main", *args],
            env=self.env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


@pytest.fixture(scope="module")
def served(endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("serve")
    tag = uuid.uuid4().hex[:10]
    settings = Settings(
        kafka_bootstrap_servers=endpoints.kafka_bootstrap,
        clickhouse_url=endpoints.clickhouse_url,
        clickhouse_user=endpoints.clickhouse_user,
        clickhouse_password=SecretStr(endpoints.clickhouse_password),
        clickhouse_database=f"test_{tag}",
        topic_prefix=f"test-{tag}.",
        home=home,
        metrics_port=_free_port(),
    )  # the demo's stream worker serves its /metrics there
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "CLICKHOUSE_", "GPULEDGER_"))}
    env.update(settings.process_env(), COLUMNS="160")
    out = home / "demo"
    demo = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuledger.cli.demo_cmd",
            "--nodes",
            "2",
            "--hours",
            "2",
            "--seed",
            "3",
            "--out",
            str(out),
        ],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    serve = None
    try:
        assert demo.returncode == 0, demo.stdout + demo.stderr
        ran = json.loads((out / "demo.json").read_text())
        start, end = ran["start"], ran["end"]
        probe = Served(settings, "", env, start, end, "", "", ran["cluster"])
        units = [
            r["key"]
            for r in probe.cli(
                "report", "gpu-hours", "--by", "business_unit", "--from", start, "--to", end, "--format", "json"
            )
            if not r["key"].startswith("__")
        ]
        assert len(units) >= 2, units
        tokens = home / "tokens"
        tokens.write_text(f"{hashed_line(ADMIN, 'all')}\n{hashed_line(OTHER, 'business_unit:' + units[0])}\n")
        port = _free_port()
        argv = [
            sys.executable,
            "-m",
            "gpuledger.cli.main",
            "serve",
            "--port",
            str(port),
            "--tokens-file",
            str(tokens),
            "--max-days",
            "400",
            "--stall-after",
            str(STALL_AFTER_S),
            "--access-log",
            str(home / "access.log"),
        ]
        log = open(home / "serve.log", "wb")  # noqa: SIM115 - closed below
        serve = subprocess.Popen(argv, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert serve.poll() is None, (home / "serve.log").read_text()
            assert time.monotonic() < deadline, "serve did not answer /healthz"
            time.sleep(0.3)
        yield Served(settings, url, env, start, end, units[0], units[1], ran["cluster"])
    finally:
        if serve is not None:
            serve.terminate()
            serve.wait(timeout=30)
            log.close()
        down(settings)


@pytest.mark.parametrize(
    ("endpoint", "args"),
    [
        ("gpu-hours", {"by": "team"}),
        ("gpu-hours", {"by": "team,model"}),
        ("gpu-hours", {"by": "business_unit,gpu_model,failure_reason"}),
        ("failures", {}),
        ("idle", {"by": "business_unit"}),
        ("idle", {"by": "node,gpu_model"}),
        ("idle-causes", {"by": "team"}),
        ("idle-causes", {"by": "model,node"}),
        ("queue", {}),
        ("benchmarks", {}),
        ("conflicts", {}),
    ],
)
def test_every_report_endpoint_equals_the_cli_json(served: Served, endpoint: str, args: dict[str, str]) -> None:
    got = served.get(f"/api/v1/{endpoint}", **{"from": served.start, "to": served.end, **args})
    assert got.status_code == 200, got.text
    cli = ["report", endpoint, "--from", served.start, "--to", served.end, "--format", "json"]
    if "by" in args:
        cli += ["--by", args["by"]]
    want = served.cli(*cli)
    assert same(got.json(), want)
    if endpoint == "gpu-hours" and "," in args["by"]:
        assert want and all(set(args["by"].split(",")) <= set(row) for row in want)


def same(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> bool:
    """The same rows; floats to 1e-9 (ClickHouse sums floats in no fixed order, run to run)."""

    def key(row: dict[str, Any]) -> str:
        return json.dumps({k: v for k, v in row.items() if not isinstance(v, float)}, sort_keys=True)

    if len(got) != len(want) or sorted(map(key, got)) != sorted(map(key, want)):
        return False
    by_key = {key(r): r for r in want}
    return all(
        r[k] == pytest.approx(by_key[key(r)][k], rel=1e-9, abs=1e-9) for r in got for k in r if isinstance(r[k], float)
    )


def test_windows_as_people_type_them(served: Served) -> None:
    month = served.start[:7]
    got = served.get("/api/v1/gpu-hours", by="team", window=month)
    assert got.status_code == 200 and same(
        got.json(), served.cli("report", "gpu-hours", "--by", "team", "--window", month, "--format", "json")
    )
    assert served.get("/api/v1/gpu-hours", window="yesterday").status_code == 200


def test_unit_cost_and_chargeback_files(served: Served) -> None:
    month = served.start[:7]
    cost = served.get("/api/v1/unit-cost", period=month)
    assert cost.status_code == 200 and cost.json() and cost.json()[0]["currency"]
    whole = served.get(f"/api/v1/chargeback/{month}.csv")
    assert whole.status_code == 200 and whole.headers["content-type"].startswith("text/csv")
    assert served.unit in whole.text and served.other_unit in whole.text
    parquet = served.get(f"/api/v1/chargeback/{month}.parquet", business_unit=served.unit)
    assert parquet.status_code == 200 and parquet.content[:4] == b"PAR1"


def test_a_missing_or_wrong_token_is_401(served: Served) -> None:
    for path in ("/api/v1/gpu-hours", "/dashboard", f"/api/v1/chargeback/{served.start[:7]}.csv"):
        assert served.get(path, token=None).status_code == 401
        assert served.get(path, token="not-a-token").status_code == 401
    assert served.get("/healthz", token=None).status_code == 200


def test_a_business_unit_token_sees_only_its_unit(served: Served) -> None:
    span = {"from": served.start, "to": served.end}

    def hours(row: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in row.items() if k.endswith("_hours")}

    for by in ("team", "team,model", "node"):
        dims = by.split(",")
        scoped = served.get("/api/v1/gpu-hours", token=OTHER, by=by, **span)
        assert scoped.status_code == 200, scoped.text
        full = served.get("/api/v1/gpu-hours", by=f"business_unit,{by}", **span).json()
        mine = [{**{d: r[d] for d in dims}, **hours(r)} for r in full if r["business_unit"] == served.unit]
        got = [
            {**({d: r[d] for d in dims} if len(dims) > 1 else {dims[0]: r["key"]}), **hours(r)} for r in scoped.json()
        ]
        assert got and same(got, mine), by
    units = served.get("/api/v1/gpu-hours", token=OTHER, by="business_unit", **span).json()
    assert [r["key"] for r in units] == [served.unit]
    failures = served.get("/api/v1/failures", token=OTHER, **span).json()
    assert all(r["business_unit"] == served.unit for r in failures)
    month = served.start[:7]
    assert (
        served.get(f"/api/v1/chargeback/{month}.csv", token=OTHER, business_unit=served.other_unit).status_code == 403
    )
    own = served.get(f"/api/v1/chargeback/{month}.csv", token=OTHER)
    assert own.status_code == 200 and served.unit in own.text and served.other_unit not in own.text
    for path in ("/api/v1/queue", "/api/v1/conflicts"):
        assert served.get(path, token=OTHER, **span).status_code == 403
    page = served.get("/dashboard", token=OTHER, window=month, by="business_unit")
    assert page.status_code == 200 and f">{served.unit}<" in page.text and served.other_unit not in page.text


def test_a_business_unit_token_gets_403_or_only_its_own_rows_from_every_route(served: Served) -> None:
    """Every GET route of the OpenAPI schema, as a business-unit token calls it: a 403, or an answer
    (rows, a file, a 404 or 400 message) in which no other unit's name appears and every row that
    names a business unit names its own."""
    schema = requests.get(served.url + "/openapi.json", timeout=30).json()
    month = served.start[:7]
    seen: dict[str, int] = {}
    for path, ops in schema["paths"].items():
        if "get" not in ops or not path.startswith(("/api/", "/dashboard", "/allocation")):
            continue
        url = path.replace("{file}", f"{month}.csv")
        variants: list[dict[str, str]] = [{"from": served.start, "to": served.end}, {"period": month}, {}]
        if path.startswith("/allocation"):
            span = f"{served.start},{served.end}"
            variants = [
                {"window": span, "aggregate": a, "idle": "true"} for a in ("namespace", "business_unit", "team")
            ]
            variants += [{"window": span, "aggregate": "label:cost-center", "step": "1h"}, {"window": "lastmonth"}]
        if path == "/api/v1/unit-cost":
            variants += [{"period": month, "unit": "prompt_tokens"}, {"period": month, "cluster": served.cluster}]
        if path.startswith("/api/v1/chargeback/"):
            variants = [{}, {"business_unit": served.other_unit}, {"business_unit": "no-such-unit"}]
        for params in variants:
            got = served.get(url, token=OTHER, **params)
            seen[path] = got.status_code
            assert got.status_code in (200, 400, 403, 404), (path, params, got.status_code, got.text[:200])
            if got.status_code == 403:
                continue
            assert served.other_unit not in got.text, (path, params, got.text[:300])
            if got.status_code == 200 and path.startswith("/allocation"):  # OpenCost's {code, data} sets
                for one in (a for step in got.json()["data"] for a in step.values()):
                    assert one["properties"].get("businessUnit", served.unit) == served.unit, (path, params, one)
                    assert one["name"] != "__idle__", (path, params)  # idle capacity belongs to no unit
            elif got.status_code == 200 and got.headers["content-type"].startswith("application/json"):
                for row in got.json():
                    assert row.get("business_unit", served.unit) == served.unit, (path, params, row)
    assert seen["/api/v1/gpu-hours"] == 200 and seen["/dashboard"] == 200 and seen["/api/v1/queue"] == 403
    assert seen["/api/v1/benchmarks"] == 403 and len(seen) >= 9, seen
    assert seen["/allocation/compute"] == seen["/allocation"] == 200, seen


def test_the_access_log_names_the_token_by_its_id_and_never_the_token(served: Served) -> None:
    served.get("/api/v1/gpu-hours", token=OTHER, by="team", **{"from": served.start, "to": served.end})
    served.get("/api/v1/queue", token=OTHER)
    served.get("/api/v1/gpu-hours", token="not-a-token")
    text = (served.settings.home / "access.log").read_text()
    assert ADMIN not in text and OTHER not in text
    lines = [json.loads(line) for line in text.splitlines()]
    mine = hashed_line(OTHER, "all").split()[0][: len("sha256:") + 12]
    rows = [r for r in lines if r["token"] == mine and r["path"] == "/api/v1/gpu-hours"]
    assert rows and rows[-1]["status"] == 200 and rows[-1]["scope"] == f"business_unit:{served.unit}"
    assert (
        rows[-1]["rows"]
        == len(
            served.get("/api/v1/gpu-hours", token=OTHER, by="team", **{"from": served.start, "to": served.end}).json()
        )
        > 0
    )
    assert any(r["token"] == mine and r["path"] == "/api/v1/queue" and r["status"] == 403 for r in lines)
    assert any(r["token"] is None and r["status"] == 401 for r in lines)
    assert all(
        set(r) == {"time", "token", "scope", "method", "path", "query", "status", "rows", "reason"} for r in lines
    )
    assert any(r["token"] is None and r["status"] == 401 and r["reason"] for r in lines)


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"by": "colour"}, "unknown grouping"),
        ({"from": "last tuesday"}, "not an ISO 8601 time"),
        ({"from": "2026-11-02T02:00:00Z", "to": "2026-11-02T01:00:00Z"}, "must be after"),
        ({"from": "2020-01-01T00:00:00Z", "to": "2026-11-02T00:00:00Z"}, "longer than 400 days"),
        ({"window": "fortnight"}, "is not one of"),
        ({"window": "7d", "from": "2026-11-01T00:00:00Z"}, "either a window or from/to"),
    ],
)
def test_bad_parameters_are_400_with_one_line(served: Served, params: dict[str, str], reason: str) -> None:
    got = served.get("/api/v1/gpu-hours", **params)
    assert got.status_code == 400
    detail = got.json()["detail"]
    assert reason in detail and "\n" not in detail


def test_the_dashboard_renders_in_chromium(served: Served, tmp_path: Path) -> None:
    page = served.get("/dashboard", cluster=served.cluster, window=served.start[:7])
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    path = tmp_path / "dashboard.html"
    path.write_text(page.text, encoding="utf-8")
    dom = chromium(tmp_path / "profile", "--dump-dom", path.resolve().as_uri()).stdout
    parsed = RenderedCharts()
    parsed.feed(dom)
    assert set(parsed.svgs) == CHARTS and all(parsed.marks[c] > 0 for c in CHARTS - {"unit-cost", "fabric"})


def test_readyz_and_metrics_scraped_by_prometheus(served: Served) -> None:
    ready = served.get("/readyz", token=None)
    assert ready.json()["checks"]["kafka"] is True and ready.json()["checks"]["clickhouse"] is True
    text = served.get("/metrics", token=None).text
    for name in (
        "gpuledger_consumer_lag_messages",
        "gpuledger_attribution_freshness_seconds",
        "gpuledger_quarantined_nodes",
        "gpuledger_api_requests_total",
        "gpuledger_scrape_source_up",
    ):
        assert name in text, name
    target = served.url.removeprefix("http://")
    with PrometheusServer(render_config([ScrapeJob("gpuledger", [target])], scrape_interval_s=1)) as prom:
        deadline = time.monotonic() + 60
        while True:
            found = requests.get(
                f"{prom.url}/api/v1/query", params={"query": "gpuledger_consumer_lag_messages"}, timeout=10
            ).json()["data"]["result"]
            if found or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert found and all(r["metric"]["topic"].startswith(served.settings.topic_prefix) for r in found)
        fresh = requests.get(
            f"{prom.url}/api/v1/query", params={"query": "gpuledger_attribution_freshness_seconds"}, timeout=10
        ).json()["data"]["result"]
        assert fresh and float(fresh[0]["value"][1]) > 0


def test_alert_rules_pass_promtool() -> None:
    rules = REPO / "infra" / "prometheus"
    for argv in (
        ["promtool", "check", "rules", str(rules / "alerts.yml")],
        ["promtool", "test", "rules", str(rules / "tests" / "alerts_test.yml")],
    ):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr


def test_tables_keep_full_column_names_on_a_pipe(served: Served) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuledger.cli.main",
            "report",
            "gpu-hours",
            "--by",
            "team,model",
            "--from",
            served.start,
            "--to",
            served.end,
        ],
        env={**served.env, "COLUMNS": "60"},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    header = next(line for line in done.stdout.splitlines() if "allocated" in line)
    for name in ("team", "model", "allocated_gpu_hours", "unobserved_gpu_hours", "idle_gpu_hours"):
        assert name in header
    assert "…" not in done.stdout


def _values(text: str) -> dict[str, float]:
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("gpuledger_")
    }


def test_workers_and_collectors_serve_their_own_metrics(served: Served) -> None:
    worker = _values(requests.get(f"http://127.0.0.1:{served.settings.metrics_port}/metrics", timeout=10).text)
    assert worker['gpuledger_events_consumed_total{topic="gpu.metrics"}'] > 0
    assert worker["gpuledger_facts_written_total"] > 0
    assert worker["gpuledger_attribution_step_duration_seconds_count"] > 0
    body = (REPO / "tests" / "fixtures" / "dcgm" / "exporter_3x_hostname.prom").read_bytes()

    class Exporter(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    exporter = ThreadingHTTPServer(("127.0.0.1", 0), Exporter)
    threading.Thread(target=exporter.serve_forever, daemon=True).start()
    port = _free_port()
    collector = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuledger.cli.main",
            "collect",
            "dcgm",
            "--exporter",
            f"http://127.0.0.1:{exporter.server_address[1]}/metrics",
            "--follow",
            "--interval",
            "1",
        ],
        env={**served.env, "GPULEDGER_METRICS_PORT": str(port)},
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        polls = 0.0
        while polls < 2 and time.monotonic() < deadline:
            time.sleep(1)
            try:
                text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
            except requests.ConnectionError:
                continue
            polls = _values(text).get('gpuledger_collector_polls_total{collector="dcgm"}', 0.0)
        assert polls >= 2
        assert (
            'gpuledger_collector_poll_errors_total{collector="dcgm"}' not in text
            or _values(text)['gpuledger_collector_poll_errors_total{collector="dcgm"}'] == 0
        )
    finally:
        collector.terminate()
        collector.wait(timeout=30)
        exporter.shutdown()
        exporter.server_close()


def test_a_stalled_pipeline_shows_in_metrics_and_readiness(served: Served) -> None:
    """Last in this module: it stops the demo's workers. Messages then wait with no worker in the
    group, and input already consumed (an activity row) waits for an attribution that never comes."""
    down(served.settings)
    publish(served.settings, encode(Load(nodes=1, interval_s=60, node_prefix="stalled"), 0, 3))
    client = get_client(served.settings)
    try:
        at = datetime(2026, 11, 2, tzinfo=UTC)
        client.insert(
            "node_activity",
            [["c-stalled", "n-stalled", at, at, False, time.time_ns() - 60 * 10**9]],
            column_names=["cluster", "node", "min_time", "max_time", "allocations", "seq"],
        )
    finally:
        client.close()
    deadline = time.monotonic() + 90
    while True:
        text = served.get("/metrics", token=None).text
        values = {
            line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("gpuledger_") and not line.startswith("#")
        }
        if values.get("gpuledger_stream_workers_active") == 0.0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert values.get("gpuledger_stream_workers_active") == 0.0, text
    assert sum(v for k, v in values.items() if k.startswith("gpuledger_consumer_lag_messages{")) >= 3
    assert values.get('gpuledger_attribution_stalled_nodes{cluster="c-stalled"}') == 1.0, text
    ready = served.get("/readyz", token=None)
    assert ready.status_code == 503 and ready.json()["checks"]["stalled_nodes"] >= 1
    assert ready.json()["checks"]["stream_workers_active"] is False
