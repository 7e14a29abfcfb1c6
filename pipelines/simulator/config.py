"""Simulation parameters and the fixed catalogue the simulator draws from.

All simulation time is kept as **integer seconds from the report start** ``S``: scheduler
timestamps (Slurm epochs, Kubernetes RFC 3339) have one-second resolution, so every allocation
boundary is an exact integer and the ground truth can be computed without rounding. The scrape
grid is ``S + k * scrape_interval_s``; the report window is ``[S, S + horizon)`` with the horizon
``round(hours * 3600)`` seconds.

GPU-second fractions are kept as integers in units of 1/420 GPU (``UNIT``): a whole GPU is 420, a
MIG ``<g>g`` instance ``60 * g`` (g/7), a replica of a GPU shared N ways ``420 / N`` (N = 4, the
time-slicing and MPS replicas of ``modern_sharing``, or the 1–3 pods holding a shared DRA claim).
Sums are exact; the truth divides by ``UNIT`` only when it writes JSON.

``modern_sharing`` (off by default, so the demo's and the end-to-end tests' numbers stay put)
adds the GPU sharing of current clusters (:mod:`pipelines.simulator.sharing`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pipelines.times import as_utc

UNIT = 420  # GPU fractions in 1/420: lcm of 7 MIG slices and every way a GPU is shared (4, 10, 2, 1–3)
SHARED_REPLICAS = 4
MIG_SLICES = 7
DEFAULT_START = datetime(2026, 11, 2, 0, 0, tzinfo=UTC)
DEFAULT_CLUSTER = "sim"
HOLD_INTERVALS = 3  # sample-and-hold limit (docs/ATTRIBUTION.md "Busy")


@dataclass(frozen=True)
class GpuModel:
    """One GPU product as dcgm-exporter and Slurm name it."""

    short: str  # pricing key and truth `gpu_model` ("H100")
    name: str  # dcgm-exporter modelName
    gres: str  # Slurm typed GRES name
    fb_mib: int  # framebuffer size
    idle_w: float
    max_w: float
    mig_profiles: dict[int, str]  # compute slices -> profile name


GPU_MODELS: dict[str, GpuModel] = {
    "H100": GpuModel(
        "H100", "NVIDIA H100 80GB HBM3", "h100", 81559, 70.0, 700.0, {1: "1g.10gb", 2: "2g.20gb", 3: "3g.40gb"}
    ),
    "A100": GpuModel(
        "A100", "NVIDIA A100-SXM4-80GB", "a100", 81920, 55.0, 400.0, {1: "1g.10gb", 2: "2g.20gb", 3: "3g.40gb"}
    ),
    "H200": GpuModel("H200", "NVIDIA H200", "h200", 143771, 75.0, 700.0, {1: "1g.18gb", 2: "2g.35gb", 3: "3g.71gb"}),
}
MODEL_CYCLE = ("H100", "A100", "H200")


@dataclass(frozen=True)
class SimConfig:
    nodes: int
    hours: float
    seed: int
    start: datetime = DEFAULT_START
    scrape_interval_s: int = 30
    cluster: str = DEFAULT_CLUSTER
    modern_sharing: bool = False

    def __post_init__(self) -> None:
        if self.nodes < 2:
            raise ValueError("the simulator needs at least 2 nodes (one Kubernetes, one Slurm)")
        if not 0 < self.hours <= 24 * 31:
            raise ValueError("hours must be in (0, 744]")
        if self.scrape_interval_s < 1:
            raise ValueError("scrape_interval_s must be a positive whole number of seconds")
        if self.start.tzinfo is None:
            raise ValueError("start must be timezone-aware")
        if self.start.microsecond:
            raise ValueError("start must be a whole second")
        if self.horizon < 4 * self.scrape_interval_s:
            raise ValueError("the report window must hold at least 4 scrape intervals")

    @property
    def horizon(self) -> int:
        """Report window length in whole seconds."""
        return int(round(self.hours * 3600))

    @property
    def steps(self) -> int:
        """Number of scrape times in the window (the last may hold a partial interval)."""
        return -(-self.horizon // self.scrape_interval_s)

    @property
    def start_epoch(self) -> int:
        return int(self.start.timestamp())

    def at(self, offset: int | float) -> datetime:
        """Absolute UTC time of a simulation offset in seconds."""
        return as_utc(self.start + timedelta(seconds=offset))

    @property
    def end(self) -> datetime:
        return self.at(self.horizon)
