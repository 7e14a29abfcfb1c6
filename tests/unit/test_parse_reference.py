"""Reference data parser: org mapping and pricing YAML -> effective-dated events."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipelines.events import OrgMappingEvent, PricingEvent
from pipelines.parsers import reference
from pipelines.parsers.base import NotThisFormat, ParseResult

FIXTURES = Path(__file__).parent.parent / "fixtures" / "reference"
ORG = (FIXTURES / "org.yaml").read_text()
PRICING = (FIXTURES / "pricing.yaml").read_text()


def day(year: int, month: int, dd: int) -> datetime:
    return datetime(year, month, dd, tzinfo=UTC)


def test_org_fixture_versions() -> None:
    result = reference.parse(ORG, cluster="c1", origin="org.yaml")
    assert result.dead_letters == []
    first, second = result.events
    assert isinstance(first, OrgMappingEvent) and isinstance(second, OrgMappingEvent)
    assert (first.source, first.type, first.time, second.time) == (
        "org",
        "org.mapping",
        day(2026, 1, 1),
        day(2026, 4, 1),
    )
    assert first.data.teams == {"llm": "research", "vision": "research", "assistants": "product", "search": "product"}
    assert first.data.namespaces["llm-train"] == "llm" and first.data.accounts["nlp"] == "llm"
    assert second.data.teams["search"] == "platform" and second.data.teams["infra"] == "platform"
    assert second.data.namespaces["monitoring"] == "infra" and second.data.accounts["ops"] == "infra"


def test_pricing_fixture_versions() -> None:
    result = reference.parse(PRICING, cluster="c1")
    assert result.dead_letters == []
    first, second = result.events
    assert isinstance(first, PricingEvent) and isinstance(second, PricingEvent)
    assert (first.source, first.type) == ("pricing", "pricing.rates")
    assert (first.data.currency, second.data.currency) == ("USD", "USD")
    assert first.data.gpu_hourly == {"H100": 2.5, "H200": 3.1, "A100": 1.6}
    assert (first.data.monthly.operations, first.data.idle_policy) == (15000.0, "spread")
    assert (second.time, second.data.gpu_hourly["H100"], second.data.idle_policy) == (
        day(2026, 7, 1),
        2.1,
        "by_allocation",
    )


@pytest.mark.parametrize(
    "text, kind",
    [
        ("effective_from: 2026-02-01\nbusiness_units: {research: [llm]}\n", "org.mapping"),
        ("effective_from: 2026-02-01T00:00:00Z\nnamespaces: {llm-train: llm}\n", "org.mapping"),
        ("kind: org\neffective_from: 2026-02-01\naccounts: {}\n", "org.mapping"),
        ("effective_from: 2026-02-01\ncurrency: EUR\ngpu_hourly: {H100: 2}\n", "pricing.rates"),
        (
            "kind: pricing\nversions:\n  - {effective_from: 2026-02-01, currency: EUR, gpu_hourly: {A100: 1}}\n",
            "pricing.rates",
        ),
    ],
)
def test_single_version_and_detection_without_kind(text: str, kind: str) -> None:
    result = reference.parse(text, cluster="c1")
    assert [e.type for e in result.events] == [kind] and result.dead_letters == []
    assert result.events[0].time == day(2026, 2, 1)


def test_top_level_keys_are_defaults_for_every_version() -> None:
    text = (
        "currency: EUR\nidle_policy: platform\nversions:\n"
        "  - {effective_from: 2026-02-01, gpu_hourly: {H100: 2}}\n"
        "  - {effective_from: 2026-03-01, gpu_hourly: {H100: 3}, currency: USD}\n"
    )
    events = reference.parse(text, cluster="c1").events
    assert [(e.data.currency, e.data.idle_policy) for e in events] == [("EUR", "platform"), ("USD", "platform")]


def test_effective_from_timestamp_forms() -> None:
    text = (
        "currency: USD\ngpu_hourly: {H100: 2}\nversions:\n"
        "  - effective_from: 2026-02-01T06:00:00+02:00\n"
        "  - effective_from: '2026-03-01 12:00:00'\n"
    )
    times = [e.time for e in reference.parse_pricing(text, cluster="c1").events]
    assert times == [datetime(2026, 2, 1, 4, tzinfo=UTC), datetime(2026, 3, 1, 12, tzinfo=UTC)]


@pytest.mark.parametrize(
    "bad_version, reason",
    [
        ("{business_units: {research: [llm]}}", "effective_from"),
        ("{effective_from: 2026-05-01, business_units: {r: [llm], p: [llm]}}", "two business units"),
        ("{effective_from: 2026-05-01, business_units: {r: {teams: [llm]}}}", "list of names"),
        ("{effective_from: 2026-05-01, namespaces: [llm-train]}", "must be a mapping"),
        ("{effective_from: 2026-05-01, accounts: {llm: ''}}", "non-empty names"),
        ("{effective_from: 2026-05-01, teams: {llm: research}}", "teams: unknown key"),
        ("{effective_from: 2026-01-01T00:00:00Z, namespaces: {a: b}}", "second version"),
        ("just a string", "not a mapping"),
    ],
)
def test_bad_org_version_is_a_dead_letter_and_others_still_count(bad_version: str, reason: str) -> None:
    text = ORG.replace("versions:\n", f"versions:\n  - {bad_version}\n", 1)
    result = reference.parse_org(text, cluster="c1", origin="org.yaml")
    assert len(result.events) == 2  # a repeated date: the first version with it wins
    assert len(result.dead_letters) == 1 and reason in result.dead_letters[0].reason
    assert (result.dead_letters[0].topic, result.dead_letters[0].source) == ("org.mappings", "org")


@pytest.mark.parametrize(
    "bad_version, reason",
    [
        ("{effective_from: 2026-09-01, currency: USD, gpu_hourly: {H100: -1}}", "H100: must be at least 0"),
        ("{effective_from: 2026-09-01, currency: USD, gpu_hourly: {}}", "at least one GPU model"),
        ("{effective_from: 2026-09-01, currency: USD, gpu_hourly: {H100: 2}, idle_policy: nobody}", "idle_policy"),
        ("{effective_from: 2026-09-01, gpu_hourly: {H100: 2}, currency: DOLLARS}", "currency"),
        ("{effective_from: 2026-09-01, gpu_hourly: {H100: 2}}", "currency"),
        ("{effective_from: 2026-09-01, currency: USD, gpu_hourly: {H100: 2}, monthly: {power: 5}}", "power"),
        ("{effective_from: never, currency: USD, gpu_hourly: {H100: 2}}", "timestamp"),
    ],
)
def test_bad_pricing_version_is_a_dead_letter(bad_version: str, reason: str) -> None:
    text = PRICING.replace("versions:\n", f"versions:\n  - {bad_version}\n", 1)
    result = reference.parse_pricing(text, cluster="c1")
    assert len(result.events) == 2 and len(result.dead_letters) == 1
    assert reason in result.dead_letters[0].reason and result.dead_letters[0].source == "pricing"


Parser = Callable[..., ParseResult]


@pytest.mark.parametrize(
    "parser, text",
    [
        (reference.parse, "key: [unclosed"),
        (reference.parse, "- a\n- b\n"),
        (reference.parse, "plain words"),
        (reference.parse, "{some: thing}"),
        (reference.parse, "kind: budget\nteams: {}\n"),
        (reference.parse, "versions: 3\n"),
        (reference.parse_org, PRICING),
        (reference.parse_pricing, ORG),
        (reference.parse, b"\xff\xfe\x00"),
        (reference.parse, '{"jobs": []}'),
    ],
)
def test_not_reference_data(parser: Parser, text: str | bytes) -> None:
    with pytest.raises(NotThisFormat):
        parser(text, cluster="c1")


def test_ids_are_deterministic_and_change_with_content() -> None:
    first = [e.id for e in reference.parse(PRICING, cluster="c1").events]
    assert first == [e.id for e in reference.parse(PRICING.encode(), cluster="c1").events]
    changed = PRICING.replace("H100: 2.10", "H100: 2.05")
    corrected = [e.id for e in reference.parse(changed, cluster="c1").events]
    assert corrected[0] == first[0] and corrected[1] != first[1]
    assert [e.id for e in reference.parse(PRICING, cluster="c2").events] != first


@pytest.mark.parametrize(
    "parser, fixture, bad_version, where",
    [
        (
            reference.parse_pricing,
            PRICING,
            "{effective_from: 2026-09-01, currency: USD, gpu_hourly: {H100: -1}}",
            "pricing.yaml, version 1 (effective 2026-09-01): gpu_hourly.H100: ",
        ),
        (
            reference.parse_pricing,
            PRICING,
            "{effective_from: 2026-09-01, currency: USD, gpu_hourly: {H100: 2}, monthly: {power: 5}}",
            "pricing.yaml, version 1 (effective 2026-09-01): monthly.power: unknown key",
        ),
        (
            reference.parse_pricing,
            PRICING,
            "{effective_from: 2026-09-01, gpu_hourly: {H100: 2}}",
            "pricing.yaml, version 1 (effective 2026-09-01): currency: required",
        ),
        (
            reference.parse_org,
            ORG,
            "{effective_from: 2026-05-01, teams: {llm: research}}",
            "org.yaml, version 1 (effective 2026-05-01): teams: unknown key",
        ),
        (
            reference.parse_org,
            ORG,
            "{effective_from: 2026-05-01, accounts: {llm: ''}}",
            "org.yaml, version 1 (effective 2026-05-01): accounts.llm: ",
        ),
        (reference.parse_org, ORG, "{business_units: {research: [llm]}}", "org.yaml, version 1: effective_from: "),
    ],
)
def test_a_bad_version_names_the_file_the_version_and_the_field(
    parser: Parser, fixture: str, bad_version: str, where: str
) -> None:
    text = fixture.replace("versions:\n", f"versions:\n  - {bad_version}\n", 1)
    (letter,) = parser(text, cluster="c1", origin=f"{'org' if fixture is ORG else 'pricing'}.yaml").dead_letters
    assert letter.reason.startswith(where), letter.reason
    assert "\n" not in letter.reason


def test_the_third_version_is_named_as_such() -> None:
    text = PRICING + "  - {effective_from: 2027-01-01, currency: USD, gpu_hourly: {H100: two}}\n"
    (letter,) = reference.parse_pricing(text, cluster="c1", origin="p.yaml").dead_letters
    assert letter.reason.startswith("p.yaml, version 3 (effective 2027-01-01): gpu_hourly.H100: "), letter.reason


def test_a_rule_across_fields_names_the_version_too() -> None:
    text = ORG.replace(
        "versions:\n", "versions:\n  - {effective_from: 2026-05-01, business_units: {r: [a], p: [a]}}\n", 1
    )
    (letter,) = reference.parse_org(text, cluster="c1", origin="org.yaml").dead_letters
    assert letter.reason == "org.yaml, version 1 (effective 2026-05-01): team 'a' is in two business units: 'r' and 'p'"
