"""Cluster simulator: synthetic but real-format inputs for every source, with exact ground truth.

``simulate(nodes, hours, seed, out_dir, start=None)`` writes dcgm-exporter ``query_range`` JSON,
a Kubernetes pod watch stream, ``sacct``/``squeue`` JSON, node_exporter/Lustre counters,
checkpoint events, nccl-tests logs, the org and pricing files, ``manifest.json`` and
``truth.json`` (what gpuledger must report for the window), and returns a
:class:`SimulationResult`. ``serve_exporter`` serves the simulated GPUs live in dcgm-exporter's
text format. ``python -m pipelines.simulator --help`` runs it from the shell.
"""

from __future__ import annotations

from pipelines.simulator.exporter import ExporterHandle, serve_exporter
from pipelines.simulator.simulate import SimulationResult, simulate

__all__ = ["ExporterHandle", "SimulationResult", "serve_exporter", "simulate"]
