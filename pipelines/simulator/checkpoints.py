"""Checkpoint writes (and restores) of training attempts.

A training attempt writes a checkpoint every ``checkpoint_every`` seconds of its run, each taking
``bytes / 3 GB/s``; only writes that finished before the attempt ended (or before the window
ended, for a running attempt) are recorded — a write cut short by a failure never completed. A
retry of a job with saved progress first restores the last checkpoint (a ``restore`` event at
its run start). The work saved by the last completed write (its start minus the run start) is
not redone by the next attempt; the GPU-seconds after that write's ``finished`` are the lost
work of a failed attempt (docs/ATTRIBUTION.md "Attempts and failure waste").
"""

from __future__ import annotations

from pipelines.simulator.model.jobs import Attempt, Checkpoint

WRITE_BYTES_PER_S = 3.0e9


def _path(attempt: Attempt, step: int) -> str:
    spec = attempt.spec
    if spec.scheduler == "slurm":
        return f"/lustre/scratch/{spec.account}/{spec.slurm_id}/ckpt-{step:06d}"
    return f"s3://ckpt-{spec.namespace}/{spec.owner_name}/step-{step:06d}"


def record_checkpoints(attempt: Attempt, until: int) -> None:
    """Fill ``attempt.checkpoints`` for its run up to ``until``; bank the saved progress."""
    spec = attempt.spec
    if not spec.checkpoint_every or attempt.checkpoints or attempt.run_start >= until:
        return
    node = attempt.nodes[0]
    duration = max(30, int(spec.checkpoint_bytes / WRITE_BYTES_PER_S))
    done_before = spec.progress // spec.checkpoint_every
    if attempt.number > 1 and spec.progress > 0:
        restored = attempt.run_start + max(duration // 2, 15)
        if restored <= until:
            attempt.checkpoints.append(
                Checkpoint(
                    "restore", attempt.run_start, restored, spec.checkpoint_bytes, node, _path(attempt, done_before)
                )
            )
    k = 1
    while True:
        started = attempt.run_start + k * spec.checkpoint_every
        finished = started + duration
        if finished > until:
            break
        attempt.checkpoints.append(
            Checkpoint("write", started, finished, spec.checkpoint_bytes, node, _path(attempt, done_before + k))
        )
        k += 1
    writes = [c for c in attempt.checkpoints if c.kind == "write"]
    if writes and attempt.end is not None:
        spec.progress += writes[-1].started - attempt.run_start
