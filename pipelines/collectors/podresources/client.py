"""The kubelet's PodResources gRPC socket as a device source (``PodResourcesLister/List``).

One ``List()`` per read, over the unix socket the kubelet serves on its node
(``/var/lib/kubelet/pod-resources/kubelet.sock``). The answer is turned into the protobuf JSON
mapping with the field names of the ``.proto`` and read by
:func:`pipelines.parsers.kubernetes.parse_pod_resources`, the same parser that reads a ``List()``
dump from a file, so both paths give the same device map.

Failures are ``SourceUnavailable`` with one line naming the socket: the socket file missing (the
kubelet is restarting, or its pod-resources directory is not mounted), a socket nobody serves,
the kubelet's rate limit (``RESOURCE_EXHAUSTED``), a deadline. After a failure the channel is
dropped and the next read dials afresh: a restarted kubelet creates a new socket file, and a
fresh channel does not wait out gRPC's reconnect back-off (up to two minutes) before trying it.
``GetAllocatableResources`` is not asked: the node's GPU count already comes from the Node object.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict

from pipelines.errors import SourceUnavailable
from pipelines.parsers.base import NotThisFormat
from pipelines.parsers.kubernetes import parse_pod_resources
from pipelines.parsers.kubernetes_tracker import DeviceMap

# the kubelet answers with up to 16 MiB (its podresources DefaultMaxMsgSize); gRPC's default is 4 MiB
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
_OPTIONS = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES), ("grpc.enable_http_proxy", 0)]


class PodResourcesSocket:
    """``read()`` -> device ids per (namespace, pod, container) from the kubelet, now."""

    def __init__(self, path: Path, *, timeout_s: float = 10.0) -> None:
        self.path = Path(path)
        self.timeout_s = timeout_s
        self._channel: grpc.Channel | None = None
        self._list: Any = None

    def describe(self) -> str:
        return f"kubelet PodResources socket {self.path}"

    def read(self) -> DeviceMap:
        from pipelines.collectors.podresources import api_pb2

        self._check_socket()
        try:
            answer = self._stub()(api_pb2.ListPodResourcesRequest(), timeout=self.timeout_s)
        except grpc.RpcError as exc:
            self.close()  # dial afresh next time (see the module docstring)
            raise SourceUnavailable(f"{self.describe()}: List failed: {_rpc_error(exc)}") from None
        # empty lists printed too: a node without pods answers {"pod_resources": []}, not {}
        doc = MessageToDict(answer, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
        try:
            return parse_pod_resources(doc)
        except NotThisFormat as exc:
            raise SourceUnavailable(f"{self.describe()}: {exc}") from None

    def _check_socket(self) -> None:
        try:
            mode = self.path.stat().st_mode
        except OSError as exc:
            self.close()
            hint = " (is the kubelet's pod-resources directory mounted?)" if not self.path.parent.exists() else ""
            raise SourceUnavailable(f"{self.describe()}: {exc.strerror}{hint}") from None
        if not stat.S_ISSOCK(mode):
            raise SourceUnavailable(f"{self.describe()}: not a unix socket")

    def _stub(self) -> Any:
        if self._list is None:
            from pipelines.collectors.podresources import api_pb2_grpc

            self._channel = grpc.insecure_channel(f"unix://{self.path.resolve()}", options=_OPTIONS)
            self._list = api_pb2_grpc.PodResourcesListerStub(self._channel).List
        return self._list

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self._channel, self._list = None, None


def _rpc_error(exc: grpc.RpcError) -> str:
    code = exc.code() if isinstance(exc, grpc.Call) else None
    details = exc.details() if isinstance(exc, grpc.Call) else None
    text = " ".join(str(details or exc).split())[:300]
    return f"{code.name}: {text}" if code is not None else text
