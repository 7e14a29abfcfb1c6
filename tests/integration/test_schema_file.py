"""sql/schema.sql is what the migrations produce, so today's schema can be read in one file."""

from __future__ import annotations

import difflib

import pytest
from clickhouse_connect.driver.client import Client

from pipelines.settings import Settings
from sql.schema import SCHEMA_FILE, dump

pytestmark = pytest.mark.integration


def test_schema_file_matches_a_database_migrated_from_nothing(client: Client, isolated_settings: Settings) -> None:
    produced = dump(client, isolated_settings.clickhouse_database)
    written = SCHEMA_FILE.read_text(encoding="utf-8")
    diff = "".join(difflib.unified_diff(written.splitlines(True), produced.splitlines(True), "schema.sql", "migrated"))
    assert produced == written, (
        "sql/schema.sql is not what sql/ddl/ produces: regenerate it with `.venv/bin/python -m sql.schema`\n"
        + diff[:4000]
    )
    # every object of the database is in it, under no database's name
    assert isolated_settings.clickhouse_database not in produced
    tables = client.query(
        "SELECT count() FROM system.tables WHERE database = {db:String}",
        parameters={"db": isolated_settings.clickhouse_database},
    ).result_rows[0][0]
    assert produced.count("\nCREATE ") == tables > 40
