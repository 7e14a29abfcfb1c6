"""Late data: the sensor that re-runs closed days and months whose inputs changed after they were built."""

from __future__ import annotations

import dagster as dg

from dagster_project.defs.late_data import sensors


def definitions() -> dg.Definitions:
    return dg.Definitions(sensors=sensors.sensors)
