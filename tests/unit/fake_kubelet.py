"""A stand-in for the kubelet's PodResources endpoint: a real gRPC server on a unix socket.

No kubelet runs here. This serves ``PodResourcesLister`` from the generated servicer over a unix
socket, as the kubelet does, answering ``List`` from a script: each call takes the next answer
(the last one repeats); an answer is ``{(namespace, pod): {container: [(resource, [ids])]}}``, or a
``grpc.StatusCode`` to fail that call with (the kubelet's rate limit answers RESOURCE_EXHAUSTED).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeAlias

import grpc

from pipelines.collectors.podresources import api_pb2, api_pb2_grpc

Answer: TypeAlias = dict[tuple[str, str], dict[str, list[tuple[str, list[str]]]]] | grpc.StatusCode


class FakeKubelet(api_pb2_grpc.PodResourcesListerServicer):
    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.calls = 0

    def List(self, request: api_pb2.ListPodResourcesRequest, context: grpc.ServicerContext) -> Any:  # noqa: N802
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        if isinstance(answer, grpc.StatusCode):
            context.abort(answer, "rejected by the kubelet")
        pods = [
            api_pb2.PodResources(
                name=name,
                namespace=namespace,
                containers=[
                    api_pb2.ContainerResources(
                        name=container,
                        devices=[
                            api_pb2.ContainerDevices(
                                resource_name=resource,
                                device_ids=ids,
                                topology=api_pb2.TopologyInfo(nodes=[api_pb2.NUMANode(ID=0)]),
                            )
                            for resource, ids in devices
                        ],
                        cpu_ids=[2, 3],
                    )
                    for container, devices in containers.items()
                ],
            )
            for (namespace, name), containers in answer.items()
        ]
        return api_pb2.ListPodResourcesResponse(pod_resources=pods)


@contextmanager
def serving(kubelet: FakeKubelet, path: Path) -> Iterator[grpc.Server]:
    """Serve ``kubelet`` on the unix socket ``path`` until the block ends."""
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    api_pb2_grpc.add_PodResourcesListerServicer_to_server(kubelet, server)
    server.add_insecure_port(f"unix://{path}")
    server.start()
    try:
        yield server
    finally:
        server.stop(None).wait()
        path.unlink(missing_ok=True)


@contextmanager
def socket_dir() -> Iterator[Path]:
    """A short directory for sockets (a unix socket path must stay under 108 bytes)."""
    with tempfile.TemporaryDirectory(prefix="pr-", dir="/tmp") as tmp:
        os.chmod(tmp, 0o700)
        yield Path(tmp)
