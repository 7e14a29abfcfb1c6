"""Sampling profile of a running stream worker with py-spy (all threads, attached by pid).

py-spy writes collapsed stacks (``frame;frame;… count`` per line); ``summarise`` turns them into
the share of samples per leaf function (self time) and per chosen frame (inclusive time).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from infra.errors import MissingDependency


def start(pid: int, out: Path, rate: int = 50) -> subprocess.Popen[bytes]:
    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(exe).exists():
        raise MissingDependency("py-spy is needed for --profile: .venv/bin/pip install py-spy")
    return subprocess.Popen(
        [
            exe,
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "-r",
            str(rate),  # noqa: S603
            "-o",
            str(out),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Ctrl-C makes py-spy stop sampling and write its output."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _frames(line: str) -> tuple[list[str], int]:
    stack, _, count = line.rstrip().rpartition(" ")
    return [
        f.split(" (")[0] + " (" + f.split(" (")[-1].split(":")[0].rsplit("/", 1)[-1] + ")"
        for f in stack.split(";")
        if f
    ], int(count)


def summarise(raw: Path, top: int = 20) -> dict[str, list[tuple[str, float]]]:
    """Top leaf functions (self %) and top frames anywhere on the stack (inclusive %)."""
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        if not line.strip():
            continue
        frames, count = _frames(line)
        if not frames:
            continue
        total += count
        self_time[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    pct = 100.0 / max(total, 1)
    return {
        "self": [(f, round(c * pct, 1)) for f, c in self_time.most_common(top)],
        "inclusive": [(f, round(c * pct, 1)) for f, c in inclusive.most_common(top * 3)],
        "samples": [("total", float(total))],
    }
