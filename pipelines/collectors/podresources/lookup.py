"""Device ids for the pod tracker, read from a device source when a pod needs them.

The tracker publishes a placement's device ids with the placement's first event, and an event id
is published once: ids learnt after that never reach it. So the device map must already name a
pod's containers when the pod is first seen placed. The kubelet allocates devices when it admits
a pod, before it writes the pod's ``status.startTime``; a device read made after a pod object
was received therefore names that pod if the kubelet ever will. Hence:

* :meth:`DeviceLookup.refresh` at every poll (a file source re-reads only when it changed);
* :meth:`DeviceLookup.ensure` before a pod object is fed to the tracker: when the pod is placed
  (on this node), holds GPUs and a GPU container is missing from the map, read again — unless a
  read made after that object was received already happened (``received`` numbers the objects:
  one number for a whole list, one per watch event). A list of many pods costs one read.

Every answer is merged (:func:`pipelines.parsers.kubernetes.merge_pod_resources`) keeping the ids
of pods the collector still follows, and the map survives a restart through the collector's
state file (:meth:`export_state` / :meth:`import_state`).
"""

from __future__ import annotations

from collections.abc import Callable, Container
from typing import Any

from pipelines.collectors.podresources import DeviceSource
from pipelines.parsers.kubernetes import merge_pod_resources
from pipelines.parsers.kubernetes_tracker import PodTracker


class DeviceLookup:
    def __init__(
        self,
        source: DeviceSource,
        tracker: PodTracker,
        *,
        node: str | None,
        followed: Callable[[], Container[tuple[str, str]]],
    ) -> None:
        self.source = source
        self.tracker = tracker
        self.node = node
        self.followed = followed  # (namespace, pod) of the pods whose ids must outlive the kubelet's answer
        self.reads = 0
        self._devices: dict[tuple[str, str, str], list[str]] = {}
        self._received = 0  # objects received from the API (a list counts once)
        self._read_after = -1  # the value of _received at the last read

    def received(self) -> int:
        """Number an object (or a whole list) just received from the API."""
        self._received += 1
        return self._received

    def refresh(self) -> None:
        """Read the source and merge its answer; ``SourceUnavailable`` when it cannot answer."""
        answer = self.source.read()
        self.reads += 1
        self._read_after = self._received
        if answer is not None:
            self._devices = merge_pod_resources(self._devices, answer, self.followed())
            self.tracker.set_devices(self._devices)

    def ensure(self, pod: Any, received: int) -> None:
        """Read again if ``pod`` (received as number ``received``) needs ids the map lacks."""
        if received > self._read_after and self.tracker.lacks_devices(pod, node=self.node):
            self.refresh()

    def export_state(self) -> list[list[Any]]:
        return [[namespace, pod, container, ids] for (namespace, pod, container), ids in sorted(self._devices.items())]

    def import_state(self, saved: Any) -> None:
        for entry in saved if isinstance(saved, list) else []:
            if (
                isinstance(entry, list)
                and len(entry) == 4
                and all(isinstance(v, str) for v in entry[:3])
                and isinstance(entry[3], list)
            ):
                self._devices[(entry[0], entry[1], entry[2])] = [str(d) for d in entry[3]]
        self.tracker.set_devices(self._devices)

    def close(self) -> None:
        self.source.close()
