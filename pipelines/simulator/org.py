"""The simulated organisation: business units, teams, namespaces, Slurm accounts, models.

Two effective-dated versions of the org mapping are produced (docs/ATTRIBUTION.md "Reference
data formats"): version 1 in force from the start of the report's first hour, and — when the
window is at least two hours long — version 2 from the whole hour nearest the middle of the
window, moving team ``recsys`` from ``product`` to ``research``. Team ``speech`` is mapped but
never runs anything; namespace ``ml-sandbox`` is in no mapping (its pods without a ``team``
label are ``unassigned``).
"""

from __future__ import annotations

from dataclasses import dataclass

BUSINESS_UNITS_V1: dict[str, list[str]] = {
    "research": ["llm", "vision", "speech"],
    "product": ["search", "recsys"],
    "risk": ["fraud"],
    "infrastructure": ["platform"],
}
BUSINESS_UNITS_V2: dict[str, list[str]] = {
    "research": ["llm", "vision", "speech", "recsys"],
    "product": ["search"],
    "risk": ["fraud"],
    "infrastructure": ["platform"],
}
NAMESPACES: dict[str, str] = {
    "llm-train": "llm",
    "llm-serve": "llm",
    "vision": "vision",
    "search": "search",
    "recsys": "recsys",
    "notebooks": "vision",
    "speech-lab": "speech",
}
UNMAPPED_NAMESPACE = "ml-sandbox"
ACCOUNTS: dict[str, str] = {
    "llm": "llm",
    "vision": "vision",
    "recsys": "recsys",
    "fraud": "fraud",
    "platform": "platform",
}
UNASSIGNED = "unassigned"
UNKNOWN_MODEL = "unknown"


@dataclass(frozen=True)
class OrgVersion:
    effective_from: int  # simulation offset (may be negative: before the window)
    business_units: dict[str, list[str]]

    def bu_of(self, team: str) -> str:
        for bu, teams in self.business_units.items():
            if team in teams:
                return bu
        return UNASSIGNED


def org_versions(start_offset_of_hour: int, horizon: int) -> list[OrgVersion]:
    """Version 1 from the start of the first hour; version 2 at a whole hour mid-window."""
    versions = [OrgVersion(start_offset_of_hour, BUSINESS_UNITS_V1)]
    mid = start_offset_of_hour + ((horizon // 2 - start_offset_of_hour) // 3600) * 3600
    if horizon >= 7200 and 0 < mid < horizon:
        versions.append(OrgVersion(mid, BUSINESS_UNITS_V2))
    return versions


def team_of(*, label_team: str | None, namespace: str | None, account: str | None) -> str:
    """Team by the owner rules: pod label, else namespace mapping, else account mapping."""
    if label_team:
        return label_team
    if namespace is not None:
        return NAMESPACES.get(namespace, UNASSIGNED)
    if account is not None:
        return ACCOUNTS.get(account, UNASSIGNED)
    return UNASSIGNED
