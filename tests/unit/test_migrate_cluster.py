"""The migrations' replicated variant: every MergeTree-family table of a Replicated database."""

from __future__ import annotations

import pytest

from sql import ddl_files, split_statements
from sql.migrate import MIGRATIONS_TABLE, database_statement, for_cluster


def test_single_server_statements_are_unchanged() -> None:
    for path in ddl_files():
        for statement in split_statements(path.read_text()):
            assert for_cluster(statement, "") == statement


@pytest.mark.parametrize(
    ("engine", "replicated"),
    [
        ("ENGINE = MergeTree", "ENGINE = ReplicatedMergeTree"),
        ("ENGINE = ReplacingMergeTree(version)", "ENGINE = ReplicatedReplacingMergeTree(version)"),
        ("ENGINE=AggregatingMergeTree", "ENGINE = ReplicatedAggregatingMergeTree"),
        ("engine = SummingMergeTree((a, b))", "ENGINE = ReplicatedSummingMergeTree((a, b))"),
        ("ENGINE = ReplicatedReplacingMergeTree(v)", "ENGINE = ReplicatedReplacingMergeTree(v)"),
        ("ENGINE = Memory", "ENGINE = Memory"),
    ],
)
def test_engines_become_replicated(engine: str, replicated: str) -> None:
    statement = f"CREATE TABLE IF NOT EXISTS t (a UInt8)\n{engine}\nORDER BY a"
    assert for_cluster(statement, "gpu") == f"CREATE TABLE IF NOT EXISTS t (a UInt8)\n{replicated}\nORDER BY a"


def test_every_table_of_the_migrations_is_replicated_on_a_cluster() -> None:
    tables = 0
    for path in ddl_files():
        for statement in split_statements(path.read_text()):
            out = for_cluster(statement, "gpu")
            if "MergeTree" in statement and "CREATE TABLE" in statement:
                tables += 1
                assert "ENGINE = Replicated" in out, (path.name, statement[:60])
            # nothing but the engine's name changes
            assert out.replace("ENGINE = Replicated", "ENGINE = ") == statement
    assert tables >= 30
    assert "ENGINE = ReplicatedReplacingMergeTree(applied_at)" in for_cluster(MIGRATIONS_TABLE, "gpu")


def test_the_database_is_replicated_on_the_named_cluster() -> None:
    assert database_statement("gpuledger", "") == "CREATE DATABASE IF NOT EXISTS `gpuledger`"
    sql = database_statement("gpuledger", "gpu_fleet")
    assert sql == (
        "CREATE DATABASE IF NOT EXISTS `gpuledger` ON CLUSTER `gpu_fleet` "
        "ENGINE = Replicated('/clickhouse/databases/gpuledger', '{shard}', '{replica}')"
    )
    with pytest.raises(ValueError, match="invalid cluster name"):
        database_statement("gpuledger", "a`; DROP")
