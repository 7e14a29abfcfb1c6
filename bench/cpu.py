"""CPU time of processes, for CPU-µs per GPU-sample: the stream worker and the local ClickHouse endpoint.

A process's CPU time is ``utime + stime`` of ``/proc/<pid>/stat`` (fields 14 and 15, in clock
ticks: 10 ms at the usual 100 Hz), all its threads included. The endpoint is found by the port its
URL names: the process owning the socket that listens there (``/proc/net/tcp``/``tcp6`` give the
socket's inode, ``/proc/<pid>/fd`` the process holding it). Only an endpoint on this machine
(a loopback URL) can be measured; for a remote ClickHouse there is no process to read.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

PROC = Path("/proc")
LISTEN = "0A"  # the TCP state column of /proc/net/tcp for a listening socket
LOCAL_NAMES = ("localhost",)


def stat_ticks(stat: str) -> int:
    """utime + stime, in clock ticks, of one ``/proc/<pid>/stat`` line.

    The command name (field 2) is in parentheses and may itself hold spaces and parentheses, so
    the fields are counted from the last ``)``: state is field 3, utime 14, stime 15."""
    fields = stat[stat.rindex(")") + 1 :].split()
    return int(fields[11]) + int(fields[12])


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process has used so far (all its threads)."""
    stat = (PROC / str(pid) / "stat").read_text()
    return stat_ticks(stat) / os.sysconf("SC_CLK_TCK")


def per_sample_us(cpu_s: float, samples: int) -> float:
    """CPU-µs per GPU-sample, to 0.1 µs."""
    if samples <= 0:
        raise ValueError(f"CPU per sample needs at least one sample, got {samples}")
    if cpu_s < 0:
        raise ValueError(f"CPU time cannot go backwards (got {cpu_s} s)")
    return round(cpu_s * 1e6 / samples, 1)


def listening_inodes(table: str, port: int) -> set[str]:
    """Inodes of the sockets listening on ``port`` in a ``/proc/net/tcp`` or ``tcp6`` table."""
    inodes = set()
    for line in table.splitlines()[1:]:  # the first line is the header
        cols = line.split()
        if len(cols) < 10:
            continue
        local, state, inode = cols[1], cols[3], cols[9]
        if state == LISTEN and int(local.rsplit(":", 1)[1], 16) == port:
            inodes.add(inode)
    return inodes


def listening_pid(port: int) -> int | None:
    """The process listening on TCP ``port`` on this machine, or None (none, or not ours to see)."""
    inodes: set[str] = set()
    for name in ("tcp", "tcp6"):
        try:
            inodes |= listening_inodes((PROC / "net" / name).read_text(), port)
        except OSError:
            continue
    wanted = {f"socket:[{inode}]" for inode in inodes}
    if not wanted:
        return None
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in wanted for fd in (entry / "fd").iterdir()):
                return int(entry.name)
        except OSError:  # gone meanwhile, or another user's process
            continue
    return None


def is_local(url: str) -> bool:
    """Whether the URL names this machine by a loopback address or ``localhost``."""
    host = urlparse(url).hostname or ""
    if host in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def endpoint_pid(url: str) -> int | None:
    """The local process serving the ClickHouse URL, or None for a remote server."""
    if not is_local(url):
        return None
    parsed = urlparse(url)
    return listening_pid(parsed.port or (8443 if parsed.scheme == "https" else 8123))


@dataclass(frozen=True)
class Reading:
    """CPU seconds of the worker and of the endpoint (None: not measured) at one moment."""

    worker_s: float
    endpoint_s: float | None


def read(worker_pid: int, endpoint: int | None) -> Reading:
    return Reading(cpu_seconds(worker_pid), None if endpoint is None else cpu_seconds(endpoint))
