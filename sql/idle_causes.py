"""The idle-cause rule's constants: what ``sql/queries/idle_causes.sql`` (the report) and
``waste_idle_daily.sql`` (the Dagster asset) return and the fixed parameters both are run with
(docs/ATTRIBUTION.md "Idle causes"). One place, below the read side and the batch side that use it."""

from __future__ import annotations

from typing import Any

IDLE_CAUSES = ("checkpoint", "storage_stall", "fabric_degraded", "startup", "teardown", "idle", "unobserved")
IDLE_CAUSE_RULES: tuple[tuple[str, Any], ...] = (
    ("phase_seconds", 900),  # startup / teardown: at most the first / last 15 minutes of an attempt
    ("ceiling_ratio", 0.9),  # storage stall: throughput at or above 90 % of the node's 7-day ceiling
    ("tolerance", 0.10),  # fabric: below (1 - tolerance) x the NCCL baseline, as fabric_health flags
)
