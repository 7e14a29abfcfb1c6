"""Reference data: the org mapping and the prices, as effective-dated events (topic ``org.mappings``).

Both files are YAML: either the keys of one version at the top level, or a ``versions`` list.
Top-level keys other than ``kind`` and ``versions`` are defaults copied into every version (a
version's own key wins), e.g. one ``currency`` for all price versions. Each version is complete:
it is in force from its ``effective_from`` until the next version's, so a reorg or a price change
is a new version, never an edit of history. ``effective_from`` is a date (midnight UTC) or a
timestamp (naive means UTC). ``description`` keys are allowed anywhere and ignored.

Org mapping (docs/ATTRIBUTION.md "Reference data formats"; example:
``tests/fixtures/reference/org.yaml``)::

    versions:
      - effective_from: 2026-11-01T00:00:00Z
        business_units:            # business unit -> its teams
          research: [llm, vision]
          product: [search, recsys]
        namespaces:                # Kubernetes namespace -> team
          llm-train: llm
        accounts:                  # Slurm account -> team
          vision: vision

Per version: one ``org.mapping`` event with ``teams`` (team -> business unit), ``namespaces``
and ``accounts`` as written. A team listed under two business units is an error; a team used in
``namespaces``/``accounts`` but under no business unit resolves to ``unassigned`` downstream.

Pricing (example: ``tests/fixtures/reference/pricing.yaml``)::

    versions:
      - effective_from: 2026-11-01T00:00:00Z
        currency: USD
        gpu_hourly: {H100: 2.50, H200: 3.10, A100: 1.60}   # per GPU-hour, by short GPU model name
        monthly: {network: 12000, storage: 8000, support: 5000, operations: 9000}
        idle_policy: spread        # spread | platform | by_allocation
        energy_per_kwh: 0.12       # optional: what a kWh costs (part of the GPU-hour rate, shown)
        carbon_g_per_kwh: 350      # optional: grams of CO2e per kWh

An optional top-level ``kind: org`` / ``kind: pricing`` names the file's kind; without it the keys
tell (``gpu_hourly`` -> pricing; ``business_units``/``namespaces``/``accounts`` -> org).

Per version: one ``pricing.rates`` event (:class:`pipelines.events.PricingData`).

A version that fails validation (missing ``effective_from``, negative rate, unknown key, a
conflict above, a second version with the same ``effective_from``) is a dead letter with the
reason; the other versions still count. Input that is not YAML, not a mapping, or has no version
of the expected kind raises ``NotThisFormat``.

Ids: ``event_id(type, cluster, effective_from, content)``: re-ingesting the same file gives the
same ids; a corrected version for the same date gets a new id and, being later in the log, wins.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
import yaml
from pydantic import ValidationError

from pipelines import topics
from pipelines.events import event_id
from pipelines.parsers.base import NotThisFormat, ParseResult
from pipelines.parsers.reference_files import OrgVersion, PricingVersion, version_error, where
from pipelines.parsers.sched_events import RECORD_ERRORS, decode_text, raw_text

TOPIC = topics.ORG_MAPPINGS
ORG_KINDS = frozenset({"org", "org-mapping", "org_mapping", "org.mapping"})
PRICING_KINDS = frozenset({"pricing", "prices", "pricing.rates"})
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse(data: bytes | str, *, cluster: str, origin: str | None = None, **hints: Any) -> ParseResult:
    """Parse an org mapping or a pricing file, whichever it is."""
    doc = _load(data)
    kind = _detect(doc)
    if kind == "org":
        return _parse(doc, "org", cluster, origin)
    if kind == "pricing":
        return _parse(doc, "pricing", cluster, origin)
    raise NotThisFormat("not an org mapping or pricing file: no business_units/namespaces/accounts or gpu_hourly")


def parse_org(data: bytes | str, *, cluster: str, origin: str | None = None, **hints: Any) -> ParseResult:
    doc = _load(data)
    if _detect(doc) != "org":
        raise NotThisFormat("not an org mapping: no version with business_units, namespaces or accounts")
    return _parse(doc, "org", cluster, origin)


def parse_pricing(data: bytes | str, *, cluster: str, origin: str | None = None, **hints: Any) -> ParseResult:
    doc = _load(data)
    if _detect(doc) != "pricing":
        raise NotThisFormat("not a pricing file: no version with gpu_hourly")
    return _parse(doc, "pricing", cluster, origin)


def _load(data: bytes | str) -> dict[str, Any]:
    text = decode_text(data, "reference YAML")
    try:
        doc = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader
    except (yaml.YAMLError, ValueError, TypeError, RecursionError, OverflowError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise NotThisFormat(f"not reference YAML: {first[:120]}") from None
    if not isinstance(doc, dict):
        raise NotThisFormat(f"not reference YAML: top level is {type(doc).__name__}, not a mapping")
    if "versions" in doc and not isinstance(doc["versions"], list):
        raise NotThisFormat("not reference YAML: 'versions' is not a list")
    return doc


def _versions(doc: dict[str, Any]) -> list[Any]:
    defaults = {k: v for k, v in doc.items() if k not in ("kind", "versions")}
    if "versions" not in doc:
        return [defaults]
    return [{**defaults, **v} if isinstance(v, dict) else v for v in doc["versions"]]


def _detect(doc: dict[str, Any]) -> str | None:
    kind = str(doc.get("kind", "")).strip().lower()
    if kind in ORG_KINDS:
        return "org"
    if kind in PRICING_KINDS:
        return "pricing"
    if kind:
        return None
    versions = [v for v in _versions(doc) if isinstance(v, dict)]
    if any("gpu_hourly" in v for v in versions):
        return "pricing"
    if any(key in v for v in versions for key in ("business_units", "namespaces", "accounts")):
        return "org"
    return None


def _parse(doc: dict[str, Any], kind: str, cluster: str, origin: str | None) -> ParseResult:
    result = ParseResult()
    seen: set[datetime] = set()
    for position, version in enumerate(_versions(doc), 1):
        raw = raw_text(version)
        try:
            if not isinstance(version, dict):
                raise ValueError(f"{where(origin, position, version)}: version is not a mapping")
            try:
                data = org_data(version) if kind == "org" else pricing_data(version)
            except ValidationError as exc:
                raise ValueError(version_error(exc, origin, position, version)) from None
            except ValueError as exc:  # a rule across fields (a team under two business units)
                raise ValueError(f"{where(origin, position, version)}: {exc}") from None
            if data["effective_from"] in seen:
                raise ValueError(
                    f"{where(origin, position, version)}: a second version effective from "
                    f"{data['effective_from'].isoformat()}"
                )
            seen.add(data["effective_from"])
            content = orjson.dumps(data, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)
        except RECORD_ERRORS as exc:  # orjson.JSONEncodeError is a TypeError
            result.reject(topic=TOPIC.name, source=kind, reason=str(exc), raw=raw, origin=origin)
            continue
        event_type = "org.mapping" if kind == "org" else "pricing.rates"
        envelope = {
            "id": event_id(event_type, cluster, data["effective_from"], content),
            "source": kind,
            "type": event_type,
            "time": data["effective_from"],
            "cluster": cluster,
            "data": data,
        }
        result.add(envelope, topic=TOPIC.name, source=kind, raw=raw, origin=origin)
    return result


def org_data(version: dict[str, Any]) -> dict[str, Any]:
    """One org version -> ``OrgMappingData`` fields; raises ValidationError on a bad shape and
    ValueError on a team under two business units."""
    org = OrgVersion.model_validate(version)
    teams: dict[str, str] = {}
    for unit, members in org.business_units.items():
        for team in members:
            _claim(teams, team, unit, "team", "business unit")
    return {
        "effective_from": org.effective_from,
        "teams": teams,
        "namespaces": dict(org.namespaces),
        "accounts": dict(org.accounts),
    }


def pricing_data(version: dict[str, Any]) -> dict[str, Any]:
    """One pricing version -> ``PricingData`` fields; raises ValidationError on a bad one."""
    return PricingVersion.model_validate(version).model_dump(exclude={"description"}, exclude_none=True)


def _claim(table: dict[str, str], key: str, owner: str, what: str, owner_kind: str) -> None:
    if table.get(key, owner) != owner:
        raise ValueError(f"{what} {key!r} is in two {owner_kind}s: {table[key]!r} and {owner!r}")
    table[key] = owner
