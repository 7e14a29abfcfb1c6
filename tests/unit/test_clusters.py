from __future__ import annotations

import pytest

from pipelines.clusters import ALL_CLUSTERS, EVERY_CLUSTER, ClusterScope, parse_cluster

PROD = ClusterScope.one("prod")


@pytest.mark.parametrize(
    ("text", "default", "expected"),
    [
        (None, EVERY_CLUSTER, EVERY_CLUSTER),
        (None, PROD, PROD),
        ("", PROD, EVERY_CLUSTER),
        (ALL_CLUSTERS, PROD, EVERY_CLUSTER),
        ("east", PROD, ClusterScope.one("east")),
        ("x' OR 1", EVERY_CLUSTER, ClusterScope.one("x' OR 1")),
    ],
)
def test_parse_cluster(text: str | None, default: ClusterScope, expected: ClusterScope) -> None:
    assert parse_cluster(text, default) == expected


def test_the_queries_take_an_empty_string_for_every_cluster() -> None:
    assert EVERY_CLUSTER.sql_params() == {"cluster": ""}
    assert ClusterScope.org().sql_params() == {"cluster": ""}
    assert PROD.sql_params() == {"cluster": "prod"}


@pytest.mark.parametrize("stored", [ALL_CLUSTERS, "prod", "east-2"])
def test_stored_values_round_trip(stored: str) -> None:
    assert ClusterScope.from_stored(stored).stored() == stored


def test_an_org_version_for_every_cluster() -> None:
    assert ClusterScope.from_stored(ALL_CLUSTERS) == ClusterScope.org()
    assert ClusterScope.from_stored(ALL_CLUSTERS).sql_value == ""


def test_every_cluster_is_not_a_stored_value() -> None:
    with pytest.raises(ValueError):
        EVERY_CLUSTER.stored()


@pytest.mark.parametrize(("kind", "name"), [("one", ""), ("every", "prod"), ("org", "prod"), ("one", ALL_CLUSTERS)])
def test_inconsistent_scopes_are_refused(kind: str, name: str) -> None:
    with pytest.raises(ValueError):
        ClusterScope(kind, name)  # type: ignore[arg-type]


def test_which_rows_a_scope_includes() -> None:
    assert EVERY_CLUSTER.includes("east") and ClusterScope.org().includes("east")
    assert PROD.includes("prod") and not PROD.includes("east")
    assert PROD.name_or("dflt") == "prod" and EVERY_CLUSTER.name_or("dflt") == "dflt"
