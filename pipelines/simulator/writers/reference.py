"""``org.yaml`` and ``pricing.yaml`` in the formats of docs/ATTRIBUTION.md "Reference data formats"."""

from __future__ import annotations

from pathlib import Path

from pipelines.simulator.config import SimConfig
from pipelines.simulator.org import ACCOUNTS, NAMESPACES, OrgVersion
from pipelines.simulator.writers.common import write_text
from pipelines.times import utc_text

GPU_HOURLY = {"H100": "2.50", "H200": "3.10", "A100": "1.60"}
MONTHLY = {"network": 12000, "storage": 8000, "support": 5000, "operations": 9000}


def write_org(path: Path, cfg: SimConfig, versions: list[OrgVersion]) -> None:
    lines = ["versions:"]
    for version in versions:
        lines.append(f"  - effective_from: {utc_text(cfg.at(version.effective_from))}")
        lines.append("    business_units:            # business unit -> its teams")
        lines += [f"      {bu}: [{', '.join(teams)}]" for bu, teams in version.business_units.items()]
        lines.append("    namespaces:                # Kubernetes namespace -> team")
        lines += [f"      {ns}: {team}" for ns, team in NAMESPACES.items()]
        lines.append("    accounts:                  # Slurm account -> team")
        lines += [f"      {acct}: {team}" for acct, team in ACCOUNTS.items()]
    write_text(path, "\n".join(lines) + "\n")


def write_pricing(path: Path, cfg: SimConfig, effective_from: int) -> None:
    hourly = ", ".join(f"{k}: {v}" for k, v in GPU_HOURLY.items())
    monthly = ", ".join(f"{k}: {v}" for k, v in MONTHLY.items())
    write_text(
        path,
        "\n".join(
            [
                "versions:",
                f"  - effective_from: {utc_text(cfg.at(effective_from))}",
                "    currency: USD",
                f"    gpu_hourly: {{{hourly}}}",
                f"    monthly: {{{monthly}}}",
                "    idle_policy: spread",
                "    energy_per_kwh: 0.12          # shown beside the GPU-hours (part of the GPU-hour rate)",
                "    carbon_g_per_kwh: 350",
            ]
        )
        + "\n",
    )
