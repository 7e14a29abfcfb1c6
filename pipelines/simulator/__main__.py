"""``python -m pipelines.simulator --nodes N --hours H --seed S --out DIR [--start ISO]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipelines.simulator.simulate import simulate
from pipelines.times import parse_iso


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines.simulator", description=__doc__)
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--start", type=parse_iso, default=None, help="window start, ISO 8601 (default 2026-11-02T00:00Z)"
    )
    parser.add_argument("--scrape-interval", type=int, default=30, help="seconds between dcgm scrapes")
    parser.add_argument(
        "--modern-sharing",
        action="store_true",
        help="time-slicing and MPS nodes, DRA claims, an exporter without NODE_NAME",
    )
    args = parser.parse_args(argv)
    try:
        result = simulate(
            args.nodes,
            args.hours,
            args.seed,
            args.out,
            args.start,
            scrape_interval_s=args.scrape_interval,
            modern_sharing=args.modern_sharing,
        )
    except ValueError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    truth = result.truth
    sys.stdout.write(
        f"wrote {len(result.manifest['files'])} files to {args.out} in {result.elapsed_s:.1f}s: "
        f"{truth['allocated_gpu_seconds'] / 3600:.1f} GPU-h allocated of "
        f"{truth['capacity_gpu_seconds'] / 3600:.1f}, {len(truth['attempts'])} attempts\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
