"""Stream workers as subprocesses for the benchmark, their memory, and the bare consume baseline.

A worker is ``python -m streams worker`` with the benchmark's isolated settings in its
environment (optionally under a profiler); RSS is read from ``/proc/<pid>/status`` (VmRSS).
The bare consume rate reads ``gpu.metrics`` with aiokafka and does nothing with the messages.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition

from pipelines.settings import Settings
from pipelines.topics import GPU_METRICS, physical_name
from streams.progress import end_offsets, wait_until_reflected

REPO = Path(__file__).resolve().parent.parent


def worker_env(settings: Settings) -> dict[str, str]:
    return {**os.environ, **settings.process_env()}


class Worker:
    """One stream worker subprocess, logging to ``log``."""

    def __init__(self, settings: Settings, log: Path, index: int = 0) -> None:
        self._log = open(log, "ab")  # noqa: SIM115 - closed in stop()
        argv = [sys.executable, "-m", "streams", "worker", "--index", str(index)]
        self.proc = subprocess.Popen(  # noqa: S603
            argv,
            env=worker_env(settings),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )

    def rss_mib(self) -> float:
        return rss_mib(self.proc.pid)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout_s: float = 60.0) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()


def reflect(settings: Settings, timeout_s: float, poll_s: float = 0.25) -> None:
    """Wait until every message now in the topics is reflected in the facts (``gpuledger ingest --wait``)."""
    wait_until_reflected(settings, end_offsets(settings), timeout_s, poll_s=poll_s)


def rss_mib(pid: int) -> float:
    """Resident set size of a process in MiB (VmRSS), 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def bare_consume(settings: Settings, expected_messages: int, timeout_s: float = 300.0) -> float:
    """Seconds to read ``expected_messages`` of gpu.metrics from offset 0 with aiokafka, no processing."""
    return asyncio.run(_consume(settings, expected_messages, timeout_s))


async def _consume(settings: Settings, expected: int, timeout_s: float) -> float:
    topic = physical_name(GPU_METRICS, settings)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        max_partition_fetch_bytes=8 * 1024 * 1024,
        fetch_max_bytes=64 * 1024 * 1024,
    )
    await consumer.start()
    try:
        parts = [TopicPartition(topic, p) for p in range(GPU_METRICS.partitions)]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        began = time.perf_counter()
        seen = 0
        while seen < expected:
            if time.perf_counter() - began > timeout_s:
                raise TimeoutError(f"bare consume read {seen} of {expected} messages in {timeout_s:.0f}s")
            batches = await consumer.getmany(timeout_ms=1000, max_records=100_000)
            seen += sum(len(records) for records in batches.values())
        return time.perf_counter() - began
    finally:
        await consumer.stop()
