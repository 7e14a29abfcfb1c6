"""Start and stop background services by pid file — never by process name.

A pid file holds ``{"pid", "argv", "started"}``. A service counts as running only when that pid is
alive *and* its ``/proc/<pid>/cmdline`` still matches the recorded argv, so a recycled pid is never
mistaken for our process and never signalled. ``stop`` sends SIGTERM to the process group the
service leads (it was started in a new session), waits, then SIGKILLs what is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from infra.errors import ServiceError


@dataclass
class Service:
    name: str
    argv: list[str]
    run_dir: Path
    log_dir: Path
    ready: Callable[[], bool]
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    # the settings that matter to what the service does (no secrets): recorded when it starts, so
    # a later ``up`` with other settings can say the running one differs
    identity: dict[str, str] = field(default_factory=dict)
    start_timeout_s: float = 60.0
    stop_timeout_s: float = 20.0

    @property
    def pid_file(self) -> Path:
        return self.run_dir / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.log_dir / f"{self.name}.log"


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def read_pid(service: Service) -> int | None:
    """The pid of the running service we started, or None (stale pid files are removed)."""
    try:
        record = json.loads(service.pid_file.read_text())
        pid = int(record["pid"])
        argv = list(record["argv"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    cmdline = _cmdline(pid)
    if cmdline is None or cmdline != argv:
        service.pid_file.unlink(missing_ok=True)
        return None
    return pid


def start(service: Service) -> tuple[int, bool]:
    """Start the service unless it runs already; returns (pid, started_now)."""
    existing = read_pid(service)
    if existing is not None:
        return existing, False
    service.run_dir.mkdir(parents=True, exist_ok=True)
    service.log_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **service.env}
    with open(service.log_file, "ab") as log:
        proc = subprocess.Popen(  # noqa: S603 - argv built by us, no shell
            service.argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=service.cwd,
            start_new_session=True,
        )
    service.pid_file.write_text(
        json.dumps({"pid": proc.pid, "argv": service.argv, "started": time.time(), "identity": service.identity})
    )
    deadline = time.monotonic() + service.start_timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            service.pid_file.unlink(missing_ok=True)
            raise ServiceError(f"{service.name} exited with code {proc.returncode}: {_tail(service.log_file)}")
        if service.ready():
            return proc.pid, True
        time.sleep(0.25)
    stop(service)
    raise ServiceError(f"{service.name} not ready after {service.start_timeout_s:.0f}s: {_tail(service.log_file)}")


def differences(service: Service) -> list[str]:
    """How the running service (if any) was started otherwise than ``service`` says: argv and
    identity settings, as "name: running → wanted"."""
    if read_pid(service) is None:
        return []
    try:
        record = json.loads(service.pid_file.read_text())
    except (OSError, ValueError):
        return []
    out = []
    if list(record.get("argv", [])) != service.argv:
        out.append(f"command: {' '.join(record.get('argv', []))} → {' '.join(service.argv)}")
    running = record.get("identity") or {}
    for key in sorted(set(running) | set(service.identity)):
        if running.get(key) != service.identity.get(key):
            out.append(f"{key}: {running.get(key, '(unset)')} → {service.identity.get(key, '(unset)')}")
    return out


def stop(service: Service) -> bool:
    """Stop the service if we started it; returns whether something was stopped."""
    pid = read_pid(service)
    if pid is None:
        service.pid_file.unlink(missing_ok=True)
        return False
    _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + service.stop_timeout_s
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.2)
    if _alive(pid):
        _signal_group(pid, signal.SIGKILL)
        while _alive(pid):
            time.sleep(0.1)
    service.pid_file.unlink(missing_ok=True)
    return True


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)  # reap if it is our child
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = _proc_state(pid)
    return state not in ("Z", "X")


def _proc_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[0]


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return
    except PermissionError:
        os.kill(pid, sig)


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(empty log)"
