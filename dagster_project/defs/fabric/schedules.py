"""Fabric health runs in the daily job (``usage/schedules.py``); no schedule of their own."""

from __future__ import annotations

import dagster as dg

jobs: list[dg.UnresolvedAssetJobDefinition] = []
schedules: list[dg.ScheduleDefinition] = []
