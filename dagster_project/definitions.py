"""The code location: every concept folder under ``defs/`` contributes its assets, checks, jobs and schedules."""

from __future__ import annotations

import dagster as dg

from dagster_project.defs import capacity, costs, exports, fabric, late_data, usage, waste
from dagster_project.defs.common.resources import default_resources

defs = dg.Definitions.merge(
    *(concept.definitions() for concept in (usage, waste, costs, exports, capacity, fabric, late_data)),
    dg.Definitions(resources=default_resources()),
)
