"""What each workload does to a GPU at a scrape time: utilisation and framebuffer use.

Per attempt the utilisation at the scrape times of its run is a pure function of the kind, the
attempt's own random stream and the scrape times: training ~0.8–0.95 with dips during
checkpoint writes, inference on a diurnal curve (trough 04:00 UTC, peak 16:00 UTC), notebooks
mostly idle (0.02–0.1 with rare bursts), batch 0.5–0.9, NCCL acceptance runs ~0.97.

Slow starts: about a third of training and batch attempts load their data first, 2–12 minutes
after the container starts during which the GPU is held and does nothing (``loading_seconds``,
from its own stream so that nothing else an attempt draws changes).
"""

from __future__ import annotations

import numpy as np

from pipelines.simulator.model.jobs import Attempt

FB_SHARE = {
    "training": (0.85, 0.95),
    "inference": (0.6, 0.8),
    "notebook": (0.1, 0.4),
    "batch": (0.3, 0.7),
    "benchmark": (0.5, 0.6),
}


def attempt_stream(seed: int, attempt: Attempt) -> np.random.Generator:
    return np.random.default_rng([seed, 17, attempt.spec.seq, attempt.number, attempt.restart_index])


def loading_seconds(seed: int, attempt: Attempt) -> int:
    """Seconds after ``run_start`` the attempt spends loading data with its GPUs idle (0 for most)."""
    if attempt.spec.kind not in ("training", "batch"):
        return 0
    rng = np.random.default_rng([seed, 23, attempt.spec.seq, attempt.number, attempt.restart_index])
    return int(rng.integers(120, 721)) if rng.random() < 0.35 else 0


def workload_util(attempt: Attempt, times: np.ndarray, start_epoch: int, rng: np.random.Generator) -> np.ndarray:
    """Utilisation (0–1, unquantised) at the given simulation offsets of the attempt's run."""
    spec, n = attempt.spec, len(times)
    base = spec.util_base
    if spec.kind == "training":
        out = base + rng.normal(0.0, 0.015, n)
        for ckpt in attempt.checkpoints:
            inside = (times >= ckpt.started) & (times < ckpt.finished)
            out[inside] = 0.12 + rng.normal(0.0, 0.02, int(inside.sum()))
    elif spec.kind == "inference":
        hours = ((times + start_epoch) % 86400) / 3600.0
        diurnal = 0.2 + 0.65 * (0.5 - 0.5 * np.cos(2 * np.pi * (hours - 4.0) / 24.0))
        out = base * diurnal + rng.normal(0.0, 0.03, n)
    elif spec.kind == "notebook":
        out = base + rng.normal(0.0, 0.01, n)
        burst = rng.random(n) < 0.04
        out[burst] = rng.uniform(0.3, 0.7, int(burst.sum()))
    elif spec.kind == "benchmark":
        out = 0.97 + rng.normal(0.0, 0.01, n)
    else:
        out = base + rng.normal(0.0, 0.04, n)
    return np.clip(out, 0.0, 1.0)


def fb_share(attempt: Attempt, rng: np.random.Generator) -> float:
    lo, hi = FB_SHARE.get(attempt.spec.kind, (0.3, 0.6))
    return float(rng.uniform(lo, hi))
