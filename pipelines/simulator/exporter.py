"""A live dcgm-exporter endpoint for the simulated cluster (standard library ``http.server``).

``serve_exporter(result_or_out_dir, host="127.0.0.1", port=0, speed=1.0)`` starts a threaded
HTTP server on loopback and returns an :class:`ExporterHandle` (``.url``, ``.close()``; also a
context manager). It serves the very series of ``dcgm/query_range.json``:

* ``GET /metrics`` — every node's GPUs; ``GET /nodes/<node>/metrics`` — one node, answering
  ``503`` while that node is in its scrape gap (so a Prometheus scraping per node sees the same
  missing scrapes as the file).
* **Clock**: simulated time ``sim = start + (now - t0) * speed``, with ``now``/``t0`` the monotonic
  clock when a request arrives / when the server started, and ``start`` the window start unless
  ``start_at`` is given. A request at ``sim`` is answered with the scrape ``k = floor((sim -
  start) / interval)`` (clamped to the window: before it the first scrape, after it the last),
  i.e. the latest sample at or before ``sim`` — the same sample-and-hold reading as the file.
  ``handle.freeze(sim_time)`` pins the clock (tests); ``handle.freeze(None)`` lets it run.
* Text exposition as dcgm-exporter prints it: ``# HELP``/``# TYPE`` per metric, labels in the
  exporter's order, without the ``instance``/``job``/``kubernetes_node`` labels that Prometheus adds
  itself (the node of an exporter without ``NODE_NAME`` is in ``kubernetes_node`` only).

Every answer is recorded in ``handle.served`` as a :class:`Scrape` (simulated time, the sample
time served, node or ``None``, HTTP status, body), so a test can tell what was served when.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from pipelines.simulator.sharing import NODE_LABEL
from pipelines.simulator.writers.dcgm import StoredSeries
from pipelines.times import parse_iso

HELP = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "Ratio of time the graphics engine is active.",
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilization (in %).",
    "DCGM_FI_DEV_FB_USED": "Framebuffer memory used (in MiB).",
    "DCGM_FI_DEV_POWER_USAGE": "Power draw (in W).",
    "DCGM_FI_DEV_XID_ERRORS": "Value of the last XID error encountered.",
}
LABEL_ORDER = (
    "gpu",
    "UUID",
    "pci_bus_id",
    "device",
    "modelName",
    "GPU_I_PROFILE",
    "GPU_I_ID",
    "Hostname",
    "hostname",
    "DCGM_FI_DRIVER_VERSION",
    "container",
    "namespace",
    "pod",
    "hpc_job",
)
PROMETHEUS_LABELS = ("__name__", "instance", "job", NODE_LABEL)


@dataclass(frozen=True)
class Scrape:
    sim_time: datetime
    sample_time: datetime
    node: str | None
    status: int
    body: str


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _line(series: StoredSeries, value: str) -> str:
    labels = series.labels
    keys = [k for k in LABEL_ORDER if k in labels] + sorted(
        k for k in labels if k not in LABEL_ORDER and k not in PROMETHEUS_LABELS
    )
    body = ",".join(f'{k}="{_escape(labels[k])}"' for k in keys)
    return f"{labels['__name__']}{{{body}}} {value}"


class MetricBook:
    """The series by node and metric, answering "what did scrape k show"."""

    def __init__(self, start: datetime, interval: int, steps: int, series: list[StoredSeries]) -> None:
        self.start, self.interval, self.steps = start, interval, steps
        self.by_node: dict[str, list[StoredSeries]] = {}
        for s in series:
            node = s.labels.get(NODE_LABEL) or s.labels.get("Hostname") or s.labels.get("hostname") or ""
            self.by_node.setdefault(node, []).append(s)

    def step_at(self, sim_time: datetime) -> int:
        k = int((sim_time - self.start).total_seconds() // self.interval)
        return min(max(k, 0), self.steps - 1)

    def sample_time(self, step: int) -> datetime:
        return self.start + timedelta(seconds=step * self.interval)

    def answered(self, node: str, step: int) -> bool:
        """Whether the node answered scrape ``step`` (False inside its gap)."""
        for s in self.by_node.get(node, []):
            i = int(np.searchsorted(s.steps, step))
            if i < len(s.steps) and int(s.steps[i]) == step:
                return True
        return False

    def render(self, step: int, node: str | None = None) -> str:
        lines_by_metric: dict[str, list[str]] = {name: [] for name in HELP}
        nodes = [node] if node is not None else sorted(self.by_node)
        for name in nodes:
            for s in self.by_node.get(name, []):
                i = int(np.searchsorted(s.steps, step))
                if i < len(s.steps) and s.steps[i] == step:
                    lines_by_metric.setdefault(s.labels["__name__"], []).append(_line(s, s.values[i]))
        out: list[str] = []
        for metric, lines in lines_by_metric.items():
            if lines:
                out += [f"# HELP {metric} {HELP.get(metric, metric)}", f"# TYPE {metric} gauge", *lines]
        return "\n".join(out) + "\n"


def load_book(out_dir: Path) -> MetricBook:
    """Read the series back from a simulator output directory."""
    manifest = orjson.loads((out_dir / "manifest.json").read_bytes())
    start = parse_iso(manifest["start"])
    interval = int(manifest["scrape_interval_s"])
    end = parse_iso(manifest["end"])
    steps = -(-int((end - start).total_seconds()) // interval)
    answer = orjson.loads((out_dir / "dcgm" / "query_range.json").read_bytes())
    epoch = start.timestamp()
    series = []
    for item in answer["data"]["result"]:
        ks = np.array([int(round((float(t) - epoch) / interval)) for t, _ in item["values"]], dtype=np.int64)
        series.append(StoredSeries(dict(item["metric"]), ks, [v for _, v in item["values"]]))
    return MetricBook(start, interval, steps, series)


class ExporterHandle:
    def __init__(self, book: MetricBook, server: ThreadingHTTPServer, speed: float, start_at: datetime | None) -> None:
        self.book, self.server, self.speed = book, server, speed
        self.origin = start_at or book.start
        self.t0 = time.monotonic()
        self.served: list[Scrape] = []
        self._frozen: datetime | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=server.serve_forever, name="dcgm-exporter-sim", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/metrics"

    def sim_time(self) -> datetime:
        if self._frozen is not None:
            return self._frozen
        return self.origin + timedelta(seconds=(time.monotonic() - self.t0) * self.speed)

    def freeze(self, sim_time: datetime | None) -> None:
        """Pin the simulated clock at ``sim_time`` (``None``: run on from the pinned time)."""
        if sim_time is None and self._frozen is not None:
            self.origin, self.t0 = self._frozen, time.monotonic()
        self._frozen = sim_time

    def answer(self, node: str | None) -> Scrape:
        sim = self.sim_time()
        step = self.book.step_at(sim)
        if node is not None and node not in self.book.by_node:
            scrape = Scrape(sim, self.book.sample_time(step), node, 404, f"unknown node {node}\n")
        elif node is not None and not self.book.answered(node, step):
            scrape = Scrape(sim, self.book.sample_time(step), node, 503, "scrape failed\n")
        else:
            scrape = Scrape(sim, self.book.sample_time(step), node, 200, self.book.render(step, node))
        with self._lock:
            self.served.append(scrape)
        return scrape

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ExporterHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handler(handle_ref: list[ExporterHandle]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                scrape = handle_ref[0].answer(None)
            elif path.startswith("/nodes/") and path.endswith("/metrics"):
                scrape = handle_ref[0].answer(path[len("/nodes/") : -len("/metrics")])
            else:
                self.send_error(404)
                return
            body = scrape.body.encode()
            self.send_response(scrape.status)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
            return

    return Handler


def serve_exporter(
    sim_or_out_dir: Any, host: str = "127.0.0.1", port: int = 0, speed: float = 1.0, start_at: datetime | None = None
) -> ExporterHandle:
    """Serve a simulation (a ``SimulationResult`` or its output directory) as dcgm-exporter."""
    if isinstance(sim_or_out_dir, str | Path):
        book = load_book(Path(sim_or_out_dir))
    else:
        cfg = sim_or_out_dir.config
        book = MetricBook(cfg.start, cfg.scrape_interval_s, cfg.steps, sim_or_out_dir.series)
    ref: list[ExporterHandle] = []
    server = ThreadingHTTPServer((host, port), _handler(ref))
    server.daemon_threads = True
    handle = ExporterHandle(book, server, speed, start_at)
    ref.append(handle)
    return handle
