"""infra/compose.yaml, loaded as ``docker compose config`` loads it (the Compose specification's Go
loader in tools/manifestcheck: schema, interpolation, references between services): every role is
there, on one image, Grafana and serve read as the read-only account, passwords are required, and
the loader refuses what Docker would refuse. Nothing here runs a container (no engine here)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "infra/compose.yaml"
BIN = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpuledger" / "bin"
SECRETS = {
    "CLICKHOUSE_PASSWORD": "writer-pw",
    "CLICKHOUSE_READER_PASSWORD": "reader-pw",
    "DAGSTER_PG_PASSWORD": "pg-pw",
    "GPULEDGER_API_TOKENS": "tok=all",
}
GPULEDGER_ROLES = {
    "gpuledger-init",
    "gpuledger",
    "collector-dcgm",
    "collector-storage",
    "collector-kubernetes",
    "collector-slurm",
    "serve",
    "dagster-webserver",
    "dagster-daemon",
}


def load(path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    tool = BIN / "manifestcheck"
    if not tool.exists():
        pytest.fail(f"{tool} is missing: run bash scripts/setup-tests.sh (scripts/test-setup.d/helm.sh builds it)")
    clean = {k: v for k, v in os.environ.items() if k not in SECRETS and k != "COMPOSE_PROFILES"}
    return subprocess.run(
        [str(tool), "compose", str(path)], env={**clean, **env}, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture(scope="module")
def project() -> dict[str, Any]:
    done = load(COMPOSE, **SECRETS, COMPOSE_PROFILES="kubernetes,slurm")
    assert done.returncode == 0, done.stderr
    loaded: dict[str, Any] = yaml.safe_load(done.stdout)
    return loaded


def test_every_role_runs_from_the_one_image(project: dict[str, Any]) -> None:
    services = project["services"]
    assert GPULEDGER_ROLES | {"kafka", "clickhouse", "prometheus", "grafana", "dagster-postgres"} == set(services)
    assert {services[name]["image"] for name in GPULEDGER_ROLES} == {"gpuledger:local"}
    assert services["gpuledger-init"]["build"]["dockerfile"] == "infra/Dockerfile"
    assert services["collector-kubernetes"]["command"][:3] == ["gpuledger", "collect", "kubernetes"]
    assert services["dagster-daemon"]["command"][:2] == ["dagster-daemon", "run"]
    for name in GPULEDGER_ROLES - {"gpuledger-init"}:  # nothing of gpuledger starts before the migrations
        assert services[name]["depends_on"]["gpuledger-init"]["condition"] == "service_completed_successfully"
    for name in ("dagster-webserver", "dagster-daemon"):
        assert services[name]["depends_on"]["dagster-postgres"]["condition"] == "service_healthy"
        assert services[name]["environment"]["DAGSTER_PG_PASSWORD"] == "pg-pw"


def test_profiles_keep_the_scheduler_collectors_off_by_default() -> None:
    done = load(COMPOSE, **SECRETS)
    assert done.returncode == 0, done.stderr
    services = set(yaml.safe_load(done.stdout)["services"])
    assert "collector-dcgm" in services and not {"collector-kubernetes", "collector-slurm"} & services


def test_grafana_and_serve_read_as_the_reader(project: dict[str, Any]) -> None:
    services = project["services"]
    grafana = services["grafana"]["environment"]
    assert grafana["CLICKHOUSE_READER_USER"] == "gpuledger_reader"
    assert grafana["CLICKHOUSE_READER_PASSWORD"] == "reader-pw"
    assert "writer-pw" not in yaml.safe_dump(services["grafana"])
    assert services["serve"]["environment"]["GPULEDGER_API_TOKENS"] == "tok=all"
    assert services["serve"]["ports"][0]["host_ip"] == "127.0.0.1"
    datasource = yaml.safe_load((REPO / "infra/grafana/provisioning/datasources/clickhouse.yaml").read_text())
    assert datasource["datasources"][0]["jsonData"]["username"] == "${CLICKHOUSE_READER_USER}"


@pytest.mark.parametrize("missing", sorted(SECRETS))
def test_every_password_must_be_given(missing: str) -> None:
    done = load(COMPOSE, **{k: v for k, v in SECRETS.items() if k != missing})
    assert done.returncode == 1 and f"required variable {missing} is missing" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda doc: doc["services"]["serve"].update(imagee="x"), "imagee"),
        (lambda doc: doc.update(servces={}), "servces"),
        (
            lambda doc: doc["services"]["gpuledger"].update(depends_on={"nowhere": {"condition": "service_started"}}),
            "nowhere",
        ),
    ],
)
def test_the_loader_refuses_what_docker_refuses(tmp_path: Path, change: Any, problem: str) -> None:
    # a copy beside the files it mounts, so only the change differs
    for item in ("grafana", "prometheus", "dagster"):
        shutil.copytree(REPO / "infra" / item, tmp_path / item)
    doc = yaml.safe_load(COMPOSE.read_text())
    change(doc)
    broken = tmp_path / "compose.yaml"
    broken.write_text(yaml.safe_dump(doc, sort_keys=False))
    done = load(broken, **SECRETS)
    assert done.returncode == 1 and problem in done.stderr
