"""Start and stop ``python -m infra.clickhouse.endpoint`` as a child process for tests.

The child's stderr is read on a background thread (so it can never block on a full pipe) and kept,
which lets tests check what the endpoint logged.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


class EndpointProcess:
    """One endpoint child process; ``url`` is known once it printed its "listening on" line."""

    def __init__(self, data_dir: Path, env: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> None:
        self.lines: list[str] = []
        self._ready = threading.Event()
        self.url = ""
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "infra.clickhouse.endpoint",
                "--data",
                str(data_dir),
                "--port",
                "0",
                *args,
            ],
            cwd=REPO_ROOT,
            env=dict(os.environ) if env is None else env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(timeout=60) or not self.url:
            self.stop()
            raise RuntimeError("endpoint did not start: " + " | ".join(self.lines[-5:]))

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("listening on "):
                self.url = line.split()[-1]
                self._ready.set()
        self._ready.set()

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, wait for exit; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._reader.join(timeout=5)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        return int(self.proc.returncode)
