"""A throw-away Prometheus: Debian's ``/usr/bin/prometheus`` as a child process on 127.0.0.1.

Used by the collectors' integration tests and for trying the Prometheus mode of
``gpuledger collect`` locally. Unlike the Kafka broker and the ClickHouse endpoint it is not a
``gpuledger up`` service: the process belongs to whoever started it, lives in a temporary working
directory (config, TSDB, log) and is gone, directory included, after :meth:`PrometheusServer.stop`::

    config = render_config([ScrapeJob("dcgm", ["127.0.0.1:9400"])], scrape_interval_s=1)
    with PrometheusServer(config) as prom:      # waits until /-/ready answers 200
        ...query prom.url...

Stopping sends SIGTERM to that one child pid, waits, then SIGKILL — never anything by name.
Run standalone: ``python -m infra.prometheus.server --target 127.0.0.1:9400 --interval 5``.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import orjson

from infra.errors import MissingDependency, ServiceError

TEMPLATE = Path(__file__).resolve().parent / "prometheus.yml"
DEFAULT_BINARY = Path("/usr/bin/prometheus")


@dataclass(frozen=True)
class ScrapeJob:
    name: str
    targets: list[str]
    metrics_path: str = "/metrics"
    honor_labels: bool = False
    labels: dict[str, str] = field(default_factory=dict)  # added to every series of the job


def duration(seconds: float) -> str:
    """A Prometheus duration: ``1s``, ``30s``, ``1500ms``."""
    if not seconds > 0:
        raise ValueError(f"a duration must be positive, got {seconds!r}")
    millis = round(seconds * 1000)
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


def render_config(
    jobs: list[ScrapeJob], *, scrape_interval_s: float = 15.0, evaluation_interval_s: float | None = None
) -> str:
    """The template filled in: global intervals and one static scrape config per job."""
    blocks = []
    for job in jobs:
        lines = [
            f"  - job_name: {_quote(job.name)}",
            f"    metrics_path: {_quote(job.metrics_path)}",
            f"    honor_labels: {'true' if job.honor_labels else 'false'}",
            "    static_configs:",
            f"      - targets: {_json(job.targets)}",
        ]
        if job.labels:
            lines.append(f"        labels: {_json(job.labels)}")
        blocks.append("\n".join(lines))
    return TEMPLATE.read_text().format(
        scrape_interval=duration(scrape_interval_s),
        scrape_timeout=duration(min(scrape_interval_s, 10.0)),
        evaluation_interval=duration(evaluation_interval_s or scrape_interval_s),
        scrape_configs="\n".join(blocks) if blocks else "  []",
    )


def _json(value: object) -> str:
    return orjson.dumps(value).decode()  # JSON is YAML flow style


def _quote(text: str) -> str:
    return _json(text)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def find_binary(binary: str | Path | None = None) -> Path:
    """The Prometheus executable: the one given, else /usr/bin/prometheus, else PATH."""
    candidates = [Path(binary)] if binary else [DEFAULT_BINARY]
    if not binary and (found := shutil.which("prometheus")):
        candidates.append(Path(found))
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise MissingDependency(f"Prometheus not found at {candidates[0]}: install Debian's `prometheus` package")


class PrometheusServer:
    """One child Prometheus process with its own temporary config, storage and log."""

    def __init__(
        self,
        config_text: str,
        *,
        port: int | None = None,
        binary: str | Path | None = None,
        ready_timeout_s: float = 30.0,
    ) -> None:
        self.binary = find_binary(binary)
        self.config_text = config_text
        self.port = port or free_port()
        self.ready_timeout_s = ready_timeout_s
        self._workdir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path | None:
        return self._workdir / "prometheus.log" if self._workdir else None

    def start(self) -> PrometheusServer:
        if self._proc is not None:
            raise ServiceError("this Prometheus is already running")
        self._workdir = Path(tempfile.mkdtemp(prefix="gpuledger-prometheus-"))
        config = self._workdir / "prometheus.yml"
        config.write_text(self.config_text)
        argv = [
            str(self.binary),
            f"--config.file={config}",
            f"--storage.tsdb.path={self._workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--storage.tsdb.retention.time=1d",
        ]
        with open(self._workdir / "prometheus.log", "wb") as log:
            self._proc = subprocess.Popen(  # noqa: S603 - our own argv, no shell
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self._workdir,
                start_new_session=True,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise ServiceError(f"Prometheus exited with code {self._proc.returncode}: {self.log_tail(3)}")
            if self.ready():
                return
            time.sleep(0.05)
        raise ServiceError(f"Prometheus not ready on {self.url} after {self.ready_timeout_s:.0f}s: {self.log_tail(3)}")

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=1.0) as response:  # noqa: S310
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM our child, SIGKILL it if it lingers, then delete the working directory."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=timeout_s)
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def log_tail(self, lines: int = 20) -> str:
        path = self.log_file
        if path is None or not path.exists():
            return ""
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run a throw-away Prometheus scraping the given targets.")
    parser.add_argument("--target", action="append", default=[], help="host:port to scrape (repeatable)")
    parser.add_argument("--job", default="dcgm", help="job name of the targets")
    parser.add_argument("--interval", type=float, default=15.0, help="scrape interval in seconds")
    parser.add_argument("--port", type=int, default=None, help="listen port (default: a free one)")
    args = parser.parse_args(argv)
    config = render_config([ScrapeJob(args.job, args.target)], scrape_interval_s=args.interval)
    with PrometheusServer(config, port=args.port) as server:
        print(f"Prometheus ready at {server.url} (Ctrl-C stops it)", flush=True)
        try:
            while server.running():
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
