"""The demo's data served by ``gpuledger serve`` with a tokens file of three tokens (``all``,
``business_unit:research`` and one expired), for the served dashboard's tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from pydantic import SecretStr

from gpuledger.serve.tokens import hashed_line
from infra.services import down
from pipelines.settings import Settings
from tests.conftest import Endpoints
from tests.integration.demo_helpers import REPO
from tests.integration.test_serve import _free_port

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


@pytest.fixture(scope="module", name="site")
def site_fixture(endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
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
        demo = [sys.executable, "-m", "gpuledger.cli.demo_cmd", "--nodes", "2", "--hours", "2", "--seed", "3"]
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
    argv = [sys.executable, "-m", "gpuledger.cli.main", "serve", "--port", str(port)]
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
