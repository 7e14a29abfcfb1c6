"""The capacity plan runs in the monthly job (``costs/schedules.py``); no schedule of their own."""

from __future__ import annotations

import dagster as dg

jobs: list[dg.UnresolvedAssetJobDefinition] = []
schedules: list[dg.ScheduleDefinition] = []
