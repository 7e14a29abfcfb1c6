"""Which GPUs a container holds, from the kubelet's PodResources API: the device sources.

A device source answers ``read()`` with device ids per ``(namespace, pod, container)`` (the shape
of :func:`pipelines.parsers.kubernetes.parse_pod_resources`), or ``None`` when nothing changed
since the previous read, and raises ``SourceUnavailable`` (one line) when it cannot answer:

* :class:`PodResourcesFile` — a ``List()`` answer dumped as JSON by something else (re-read when
  its modification time changes);
* :class:`pipelines.collectors.podresources.client.PodResourcesSocket` — the kubelet's gRPC
  socket itself, asked at every read (needs ``grpcio`` and ``protobuf``: the ``collect`` extra).

The collector merges each answer into what it knew
(:func:`pipelines.parsers.kubernetes.merge_pod_resources`), so a pod the kubelet has already
forgotten keeps its device ids until its end is published.

``api.proto`` is the kubelet's API definition; ``api_pb2*.py`` are generated from it
(:mod:`pipelines.collectors.podresources.generate`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from pipelines.errors import SourceUnavailable
from pipelines.parsers.kubernetes import parse_pod_resources
from pipelines.parsers.kubernetes_tracker import DeviceMap


class DeviceSource(Protocol):
    def describe(self) -> str: ...

    def read(self) -> DeviceMap | None: ...

    def close(self) -> None: ...


class PodResourcesFile:
    """A PodResources ``List()`` JSON file, re-read when it changes."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._mtime: float | None = None

    def describe(self) -> str:
        return f"PodResources file {self.path}"

    def read(self) -> DeviceMap | None:
        try:
            mtime = self.path.stat().st_mtime
            if mtime == self._mtime:
                return None
            devices = parse_pod_resources(self.path.read_bytes())
        except OSError as exc:
            raise SourceUnavailable(f"{self.describe()}: {exc.strerror}") from None
        self._mtime = mtime
        return devices

    def close(self) -> None:
        return None


__all__ = ["DeviceSource", "PodResourcesFile"]
