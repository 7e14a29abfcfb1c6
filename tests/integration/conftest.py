"""Integration fixtures: the attribution's warehouse on a test's own database, and one expensive
run shared among the tests that only read its results."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infra.services import apply_migrations
from pipelines.settings import Settings
from streams.attribution.warehouse import AttributionWarehouse
from tests.conftest import Endpoints, fresh_settings
from tests.integration.demo_helpers import Demo, demo_env, run_demo


@pytest.fixture(scope="session")
def demo(endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> Demo:
    """One small ``gpuledger demo`` in a database, topics and home of its own, run once for the tests
    that read its outputs (dashboard, reports, chargeback files, the warehouse it filled). Its stream
    workers are stopped when it has finished; a test that needs workers starts them (``demo_env``).
    The database is left in place so a failure can be inspected."""
    settings = fresh_settings(endpoints, tmp_path_factory)
    out = tmp_path_factory.mktemp("demo") / "out"
    with pytest.MonkeyPatch.context() as monkeypatch, demo_env(settings, monkeypatch):
        stdout = run_demo(out)
    return Demo(settings, out, stdout)


@pytest.fixture
def warehouse(isolated_settings: Settings) -> Iterator[AttributionWarehouse]:
    """The attribution's warehouse on the test's own database, migrated (a module may define its own
    ``warehouse`` fixture for something else)."""
    apply_migrations(isolated_settings)
    wh = AttributionWarehouse(isolated_settings)
    yield wh
    wh.close()
