"""A whole pipeline on the real local services, isolated per test: topics, database, workers.

Workers run as real subprocesses (``python -m streams worker``) so tests can SIGKILL them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer

from infra.kafka.broker import ensure_topics
from infra.services import apply_migrations
from pipelines import events as ev
from pipelines import wire
from pipelines.parsers.registry import parse_manifest_entry
from pipelines.producer import EventProducer
from pipelines.settings import Settings
from pipelines.topics import SCHEDULER_ALLOCATIONS, physical_name
from sql import load_query
from sql.client import get_client
from streams import replay
from streams.progress import end_offsets, wait_until_reflected

REPO = Path(__file__).resolve().parents[2]


def allocations(settings: Settings, *, quiet_ms: int) -> list[ev.Envelope]:
    """Every event on the settings' scheduler.allocations topic, read from the start until none came
    for ``quiet_ms``."""
    consumer = KafkaConsumer(
        physical_name(SCHEDULER_ALLOCATIONS, settings),
        **settings.kafka_client_config(),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=quiet_ms,
    )
    try:
        return [wire.decode(m.value) for m in consumer]
    finally:
        consumer.close()


class Pipeline:
    def __init__(self, settings: Settings, logs: Path) -> None:
        self.settings = settings
        self.logs = logs
        self.workers: dict[int, subprocess.Popen[bytes]] = {}
        self._logs: dict[int, Any] = {}
        ensure_topics(settings)
        apply_migrations(settings)

    def env(self) -> dict[str, str]:
        return {**os.environ, **self.settings.process_env()}

    def start_worker(self, index: int) -> None:
        log = self._logs[index] = open(self.logs / f"worker-{index}.log", "ab")  # noqa: SIM115
        self.workers[index] = subprocess.Popen(
            [sys.executable, "-m", "streams", "worker", "--index", str(index), "--loglevel", "warn"],
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )

    def kill_worker(self, index: int, sig: int = signal.SIGKILL) -> None:
        proc = self.workers.pop(index)
        proc.send_signal(sig)
        proc.wait(timeout=30)
        self._logs.pop(index).close()

    def stop_all(self) -> None:
        for index in list(self.workers):
            proc = self.workers[index]
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            self.workers.pop(index)
            self._logs.pop(index).close()

    def publish_dir(self, sim_out: Path, limit: int | None = None) -> int:
        """Parse and publish every file of a simulator output (or the first ``limit`` events)."""
        manifest = json.loads((sim_out / "manifest.json").read_text())
        sent = 0
        with EventProducer(self.settings) as producer:
            for entry in manifest["files"]:
                result = parse_manifest_entry(sim_out, entry, "sim")
                for event in result.events:
                    if limit is not None and sent >= limit:
                        return sent
                    producer.publish(event)
                    sent += 1
                for letter in result.dead_letters:
                    producer.dead_letter(letter)
        return sent

    def wait(self, timeout_s: float = 600.0) -> None:
        wait_until_reflected(self.settings, end_offsets(self.settings), timeout_s)

    def replay_from_zero(self) -> None:
        replay.truncate(self.settings)
        replay.rewind(self.settings)

    def query(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        client = get_client(self.settings)
        try:
            result = client.query(load_query(name), parameters=params)
            return [dict(zip(result.column_names, row, strict=True)) for row in result.result_rows]
        finally:
            client.close()

    def gpu_hours(self, by: str, start: datetime, end: datetime) -> dict[str, dict[str, Any]]:
        rows = self.query("gpu_hours", {"by": by, "start": start, "end": end, "cluster": ""})
        return {r["key"]: r for r in rows}

    def unavailable_gpu_seconds(self, start: datetime, end: datetime) -> float:
        """GPU-seconds of nodes drained, down or NotReady between ``start`` and ``end``."""
        row = self.gpu_hours("node", start, end).get("__unavailable__")
        return 0.0 if row is None else float(row["gpu_hours"]) * 3600

    def facts_digest(self) -> list[tuple[Any, ...]]:
        """Every current fact, rounded to the microsecond, in a stable order."""
        client = get_client(self.settings)
        try:
            rows = client.query(
                "SELECT window_start, node, slot, kind, job_id, attempt, round(gpu_seconds, 6), "
                "round(busy_seconds, 6), round(unobserved_seconds, 6), round(energy_joules, 3) FROM current_facts "
                "ORDER BY window_start, node, slot, kind, job_id, attempt"
            ).result_rows
        finally:
            client.close()
        return [tuple(r) for r in rows]

    def attempts_digest(self) -> list[tuple[Any, ...]]:
        """Every attempt record (its newest version), without the version, in a stable order."""
        client = get_client(self.settings)
        try:
            rows = client.query(
                "SELECT cluster, job_id, attempt, state, start_time, end_time, outcome, failure_reason, nodes, "
                "round(gpu_seconds, 6), round(lost_gpu_seconds, 6) FROM job_attempts FINAL "
                "ORDER BY cluster, job_id, attempt"
            ).result_rows
        finally:
            client.close()
        return [tuple(r) for r in rows]


def wait_for(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.5)
