"""The owner rule (docs/ATTRIBUTION.md "Owner") has one SQL text: the view ``owner_resolution``.

Which org version is in force for a cluster at a time, and the team and business unit it gives an
owner key, are written once; facts, the hourly rollup, its rebuild and the reports join that view.
The scan reads what the migrations leave behind — the latest definition of every view in
``sql/ddl/`` — and every query in ``sql/queries/``, comments removed, and finds each part of the
rule in exactly one of them. A definition with a reason to name a part for something else is
listed in ``ALLOWED`` with the reason.
"""

from __future__ import annotations

import re

import pytest

from sql import QUERY_DIR, ddl_files, split_statements

HOME = "view owner_resolution"
# a part whose text lives elsewhere: the version in force depends on the cluster and time only
HOMES = {"the org version in force (a cluster's own versions before the '*' ones)": "view org_versions_in_force"}

# what → a pattern found only in the text that decides it
PARTS: dict[str, re.Pattern[str]] = {
    "the org version in force (a cluster's own versions before the '*' ones)": re.compile(r"\bcluster\s*!=\s*'\*'"),
    "the team label before any mapping": re.compile(r"\bteam_label\s*!=\s*''"),
    "the team of a namespace": re.compile(r"'namespace_team'"),
    "the team of a Slurm account": re.compile(r"'account_team'"),
    "the business unit of a team": re.compile(r"'team_business_unit'"),
}

# (definition, part) → why that definition names the part for something other than an owner
ALLOWED: dict[tuple[str, str], str] = {
    ("query chargeback_business_units", "the business unit of a team"): (
        "which business units get an export file: every unit of a version in force at some time in the "
        "month, not the unit of one owner"
    ),
}

_VIEW = re.compile(
    r"^CREATE\s+(?P<replace>OR\s+REPLACE\s+)?(?:MATERIALIZED\s+)?VIEW\s+(?P<if>IF\s+NOT\s+EXISTS\s+)?`?(?P<name>\w+)",
    re.IGNORECASE,
)


def _code(text: str) -> str:
    """SQL without its ``--`` comments (a comment may name the rule; only code applies it)."""
    return "\n".join(line.split("--", 1)[0] for line in text.splitlines())


def current_views() -> dict[str, str]:
    """Every view's definition as the migrations, applied in order, leave it."""
    views: dict[str, str] = {}
    for path in ddl_files():
        for statement in split_statements(_code(path.read_text())):
            match = _VIEW.match(statement.strip())
            if match is None:
                continue
            name = match.group("name")
            if match.group("replace") or name not in views:
                views[name] = statement
    return views


def definitions() -> dict[str, str]:
    defs = {f"view {name}": text for name, text in current_views().items()}
    defs.update({f"query {p.stem}": _code(p.read_text()) for p in sorted(QUERY_DIR.glob("*.sql"))})
    return defs


def test_the_scan_sees_the_views_as_the_migrations_leave_them() -> None:
    views = current_views()
    # created IF NOT EXISTS by 0006, replaced by later migrations: the latest text is the one read
    assert "resolved_facts" in views and "resolved_hourly" in views
    assert "CREATE OR REPLACE VIEW" in views["resolved_facts"]
    assert "owner_resolution" in views


@pytest.mark.parametrize("part", sorted(PARTS))
def test_each_part_of_the_owner_rule_is_written_once(part: str) -> None:
    found = sorted(
        name for name, text in definitions().items() if PARTS[part].search(text) and (name, part) not in ALLOWED
    )
    home = HOMES.get(part, HOME)
    assert found == [home], f"{part}: written in {found}, expected only in {home}"
