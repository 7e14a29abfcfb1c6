"""Security checks: injection-proof CLI filters, per-unit exports, secrets from the environment only.

The endpoint's own guarantees (loopback bind by default, refused wrong credentials, the password
absent from its debug log) are tested in ``test_clickhouse_endpoint.py``
(``test_binds_loopback_by_default``, ``test_wrong_credentials_are_refused``,
``test_right_credentials_work_every_way``); here the rest of gpuledger is checked against such a
guarded endpoint: the CLI and a stream worker authenticate and never print the password.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import SecretStr
from typer.testing import CliRunner

from bench.load import Load, encode, publish
from dagster_project.defs.exports.files import read
from gpuledger.cli.export_cmd import register
from gpuledger.cli.report_cmd import report_app
from gpuledger.reports import BadRequest
from infra.services import endpoint_service
from pipelines.settings import Settings, reset_settings
from sql.client import get_client
from tests.conftest import Endpoints
from tests.integration._endpoint_process import EndpointProcess
from tests.integration.pipeline import Pipeline
from tests.integration.test_dagster_assets import load_fixture_rows

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SECRET = "Zq9-ledger-secret-7741"
RANGE = ["--from", "2026-03-14", "--to", "2026-03-17"]
INJECTIONS = ["x' OR 1=1 --", "c1' OR '1'='1", "c1'; DROP TABLE gpu_usage_facts; --", "c1\\' OR 1=1 #"]


@pytest.fixture
def warehouse(isolated_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """Three days of facts, attempts and reference data (the Dagster test's fixture rows)."""
    load_fixture_rows(isolated_settings)
    monkeypatch.setenv("GPULEDGER_CLICKHOUSE_URL", isolated_settings.clickhouse_endpoint_url)
    monkeypatch.setenv("GPULEDGER_CLICKHOUSE_DATABASE", isolated_settings.clickhouse_database)
    reset_settings()
    yield isolated_settings
    reset_settings()


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app, report_app)
    app.add_typer(report_app, name="report")
    return app


def _tables(settings: Settings) -> dict[str, int]:
    client = get_client(settings)
    try:
        names = [
            r[0]
            for r in client.query(
                "SELECT name FROM system.tables WHERE database = currentDatabase() AND engine NOT LIKE '%View'"
            ).result_rows
        ]
        return {n: int(str(client.command(f"SELECT count() FROM `{n}`"))) for n in names}
    finally:
        client.close()


def _report(args: list[str]) -> Any:
    result = CliRunner().invoke(_app(), ["report", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_injection_in_cli_filters_matches_nothing_and_changes_nothing(warehouse: Settings) -> None:
    before = _tables(warehouse)
    assert before["gpu_usage_facts"] > 0
    assert _report(["gpu-hours", *RANGE, "--cluster", "c1"])  # the real cluster has rows
    for text in INJECTIONS:
        for command in ("gpu-hours", "idle", "failures"):
            assert _report([command, *RANGE, "--cluster", text]) == [], (command, text)
    bad_by = CliRunner().invoke(_app(), ["report", "gpu-hours", *RANGE, "--by", "team; DROP TABLE fact_windows"])
    # a dimension is checked against the report's list before any query (the real CLI exits 2)
    assert isinstance(bad_by.exception, BadRequest) and "unknown grouping" in str(bad_by.exception)
    assert _tables(warehouse) == before


def test_a_business_units_export_holds_only_its_rows(warehouse: Settings, tmp_path: Path) -> None:
    runner = CliRunner()
    everything = runner.invoke(_app(), ["export", "chargeback", "--period", "2026-03", "--out", str(tmp_path / "all")])
    assert everything.exit_code == 0, everything.output
    _, all_rows = read(tmp_path / "all" / "focus-chargeback-2026-03.csv")
    for unit in ("product", "research"):
        out = tmp_path / unit
        result = runner.invoke(
            _app(), ["export", "chargeback", "--period", "2026-03", "--out", str(out), "--business-unit", unit]
        )
        assert result.exit_code == 0, result.output
        assert [p.name for p in out.iterdir()] == [f"focus-chargeback-2026-03-{unit}.csv"]
        _, rows = read(out / f"focus-chargeback-2026-03-{unit}.csv")
        assert rows and all(r["SubAccountId"] == unit for r in rows)
        assert sorted(map(repr, rows)) == sorted(repr(r) for r in all_rows if r["SubAccountId"] == unit)
    sneaky = runner.invoke(
        _app(),
        [
            "export",
            "chargeback",
            "--period",
            "2026-03",
            "--out",
            str(tmp_path / "x"),
            "--business-unit",
            "product' OR '1'='1",
        ],
    )
    assert sneaky.exit_code != 0 and not (tmp_path / "x").exists()


def test_settings_hide_secrets_and_read_them_only_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLICKHOUSE_PASSWORD", SECRET)
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", SECRET + "-sasl")
    settings = Settings()
    assert settings.clickhouse_password.get_secret_value() == SECRET
    assert settings.kafka_sasl_password is not None
    for text in (repr(settings), str(settings), settings.model_dump_json(), repr(settings.model_dump())):
        assert SECRET not in text
    assert Settings.model_config.get("env_file") is None  # no dotenv file is ever read
    example = (REPO / "infra" / ".env.example").read_text()
    secrets = [line for line in example.splitlines() if "PASSWORD=" in line]
    assert secrets and all(line.split("PASSWORD=", 1)[1].split("#")[0].strip() == "" for line in secrets)


def test_local_endpoint_is_started_on_loopback() -> None:
    assert Settings.model_fields["clickhouse_host"].default == "127.0.0.1"
    argv = endpoint_service(Settings(clickhouse_host="127.0.0.1")).argv
    assert argv[argv.index("--host") + 1] == "127.0.0.1"


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[EndpointProcess]:
    env = {k: v for k, v in os.environ.items() if "CLICKHOUSE" not in k}
    env.update({"CLICKHOUSE_USER": "ledger", "CLICKHOUSE_PASSWORD": SECRET})
    endpoint = EndpointProcess(tmp_path / "chdb", env=env, args=("--log-level", "debug"))
    yield endpoint
    endpoint.stop()


def test_cli_and_worker_authenticate_and_never_print_the_secret(
    guarded: EndpointProcess, endpoints: Endpoints, tmp_path: Path
) -> None:
    (tmp_path / "home").mkdir()
    settings = Settings(
        kafka_bootstrap_servers=endpoints.kafka_bootstrap,
        clickhouse_url=guarded.url,
        clickhouse_user="ledger",
        clickhouse_password=SecretStr(SECRET),
        clickhouse_database="secured",
        topic_prefix=f"test-secured-{tmp_path.name[-12:]}.",
        home=tmp_path / "home",
    )
    pipeline = Pipeline(settings, tmp_path)
    try:
        pipeline.start_worker(0)
        publish(settings, encode(Load(nodes=1, interval_s=30), 0, 20))
        pipeline.wait(timeout_s=120)
    finally:
        pipeline.stop_all()
    env = {**pipeline.env(), "GPULEDGER_DEBUG": ""}
    status = subprocess.run(
        [sys.executable, "-m", "gpuledger.cli.main", "status", "--format", "json"],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["tables"]["gpu_samples"] == 160  # authenticated: it could count
    wrong = subprocess.run(
        [sys.executable, "-m", "gpuledger.cli.main", "status", "--format", "json"],
        env={**env, "CLICKHOUSE_PASSWORD": SECRET + "-wrong"},
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    worker_log = (tmp_path / "worker-0.log").read_text()
    for text in (status.stdout, status.stderr, wrong.stdout, wrong.stderr, worker_log, guarded.output):
        assert SECRET not in text
