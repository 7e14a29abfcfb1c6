"""The real Kubernetes control plane of infra/kubernetes/start.sh, driven as a kubelet would drive it.

No kubelet, scheduler or controller manager runs, so this module does their part through the real
API server with the admin's credentials: it creates namespaces (with the ``default`` service
account the controller manager would add), nodes with their GPU capacity and Ready condition,
pods; it binds pods to nodes through the ``binding`` subresource as the scheduler does and writes
their status through the ``status`` subresource as the kubelet does. Objects travel as plain JSON
(``_preload_content=False``): what the server answers is read as it answered.

The collector's credentials are the chart's own: the ServiceAccount, ClusterRole and
ClusterRoleBinding ``helm template`` renders from infra/helm/gpuledger, and a token the API server
issues for that ServiceAccount (TokenRequest), written into a kubeconfig per API server.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpuledger" / "bin"
CHART_NAMESPACE = "gpuledger"


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_s() -> datetime:
    """Now, to the second: the API keeps status times to the second."""
    return datetime.now(UTC).replace(microsecond=0)


class ControlPlane:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        # Any: bodies go as plain JSON objects, which the client sends as they are
        self.api: Any = client.CoreV1Api(config.new_client_from_config(str(directory / "admin.kubeconfig")))

    def close(self) -> None:
        self.api.api_client.close()

    @staticmethod
    def _json(response: Any) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(response.data)
        return doc

    # --- namespaces and nodes ------------------------------------------------------------------
    def namespace(self, name: str) -> None:
        self.api.create_namespace({"metadata": {"name": name}}, _preload_content=False)
        self.api.create_namespaced_service_account(name, {"metadata": {"name": "default"}}, _preload_content=False)

    def node(self, name: str, gpus: int = 8) -> None:
        self.api.create_node(
            {"metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}, "spec": {}},
            _preload_content=False,
        )
        self.node_ready(name, True, gpus=gpus)

    def node_ready(self, name: str, ready: bool, gpus: int = 8) -> None:
        """The status a kubelet posts: capacity and allocatable GPUs, and the Ready condition."""
        node = self._json(self.api.read_node_status(name, _preload_content=False))
        stamp = rfc3339(now_s())
        node["status"] = {
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)},
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "Unknown",
                    "reason": "KubeletReady" if ready else "NodeStatusUnknown",
                    "message": "kubelet is posting ready status" if ready else "Kubelet stopped posting node status.",
                    "lastHeartbeatTime": stamp,
                    "lastTransitionTime": stamp,
                }
            ],
        }
        self.api.replace_node_status(name, node, _preload_content=False)

    def cordon(self, name: str, cordoned: bool) -> None:
        self.api.patch_node(name, {"spec": {"unschedulable": cordoned}}, _preload_content=False)

    # --- pods ----------------------------------------------------------------------------------
    def pod(
        self,
        namespace: str,
        name: str,
        *,
        gpus: int,
        devices: list[str],
        restart_policy: str = "Never",
        labels: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """A pending pod asking for ``gpus`` nvidia.com/gpu; the device plugin's ids in the
        annotation the collector reads when no PodResources socket is given."""
        body = {
            "metadata": {
                "name": name,
                "labels": {"team": "llm", **(labels or {})},
                "annotations": {"gpuledger.io/devices": ",".join(devices)},
            },
            "spec": {
                "restartPolicy": restart_policy,
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.local/train:2.1",
                        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                    }
                ],
            },
        }
        return self._json(self.api.create_namespaced_pod(namespace, body, _preload_content=False))

    def bind(self, namespace: str, name: str, node: str) -> None:
        self.api.create_namespaced_pod_binding(
            name,
            namespace,
            {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}},
            _preload_content=False,
        )

    def read(self, namespace: str, name: str) -> dict[str, Any]:
        return self._json(self.api.read_namespaced_pod(name, namespace, _preload_content=False))

    def status(
        self,
        namespace: str,
        name: str,
        phase: str,
        *,
        started: datetime,
        restarts: int = 0,
        running_since: datetime | None = None,
        terminated: dict[str, Any] | None = None,
        last: dict[str, Any] | None = None,
        claims: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Write the pod's status as the kubelet would: ``started`` is status.startTime; the main
        container runs since ``running_since`` or ended as ``terminated``; ``last`` is its
        previous run (``lastState.terminated``); ``claims`` the ResourceClaims made for its
        template claims (pod claim name -> ResourceClaim name), as the resourceclaim controller writes them."""
        pod = self.read(namespace, name)
        running = {"startedAt": rfc3339(running_since or started)}
        state = {"terminated": terminated} if terminated else {"running": running}
        pod["status"] = {
            "phase": phase,
            "startTime": rfc3339(started),
            "hostIP": "127.0.0.1",
            "podIP": "10.244.0.10",
            "conditions": [{"type": "Ready", "status": "False" if terminated else "True"}],
            "containerStatuses": [
                {
                    "name": "main",
                    "image": "registry.local/train:2.1",
                    "imageID": "",
                    "ready": not terminated,
                    "restartCount": restarts,
                    "started": not terminated,
                    "state": state,
                    "lastState": {"terminated": last} if last else {},
                }
            ],
        }
        if claims:
            pod["status"]["resourceClaimStatuses"] = [
                {"name": ref, "resourceClaimName": claim} for ref, claim in claims.items()
            ]
        return self._json(self.api.replace_namespaced_pod_status(name, namespace, pod, _preload_content=False))

    def delete(self, namespace: str, name: str) -> None:
        self.api.delete_namespaced_pod(name, namespace, grace_period_seconds=0, _preload_content=False)

    # --- Dynamic Resource Allocation (resource.k8s.io/v1) ----------------------------------------
    @property
    def resources(self) -> Any:
        return client.CustomObjectsApi(self.api.api_client)

    def device_class(self, name: str, driver: str) -> None:
        self.resources.create_cluster_custom_object(
            "resource.k8s.io",
            "v1",
            "deviceclasses",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]},
            },
            _preload_content=False,
        )

    def resource_slice(self, node: str, driver: str, uuids: dict[str, str]) -> None:
        """What the driver's kubelet plugin publishes for its node: one pool named after the node,
        devices ``name -> uuid``."""
        self.resources.create_cluster_custom_object(
            "resource.k8s.io",
            "v1",
            "resourceslices",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-{driver}"},
                "spec": {
                    "driver": driver,
                    "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": [
                        {"name": device, "attributes": {"type": {"string": "gpu"}, "uuid": {"string": uuid}}}
                        for device, uuid in uuids.items()
                    ],
                },
            },
            _preload_content=False,
        )

    def claim(self, namespace: str, name: str, device_class: str) -> None:
        self.resources.create_namespaced_custom_object(
            "resource.k8s.io",
            "v1",
            namespace,
            "resourceclaims",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": name},
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {
                                    "deviceClassName": device_class,
                                    "allocationMode": "ExactCount",
                                    "count": 1,
                                },
                            }
                        ]
                    }
                },
            },
            _preload_content=False,
        )

    def allocate(
        self, namespace: str, name: str, *, driver: str, pool: str, device: str, pods: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """Write the claim's status as the scheduler does: its device allocated, reserved for ``pods``."""
        claim = self.read_claim(namespace, name)
        claim["status"] = {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": driver, "pool": pool, "device": device}]}
            },
            "reservedFor": [
                {"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]} for p in pods
            ],
        }
        return self._json(
            self.resources.replace_namespaced_custom_object_status(
                "resource.k8s.io", "v1", namespace, "resourceclaims", name, claim, _preload_content=False
            )
        )

    def read_claim(self, namespace: str, name: str) -> dict[str, Any]:
        return self._json(
            self.resources.get_namespaced_custom_object(
                "resource.k8s.io", "v1", namespace, "resourceclaims", name, _preload_content=False
            )
        )

    def delete_claim(self, namespace: str, name: str) -> None:
        self.resources.delete_namespaced_custom_object(
            "resource.k8s.io", "v1", namespace, "resourceclaims", name, _preload_content=False
        )

    def claim_pod(self, namespace: str, name: str, claims: dict[str, dict[str, str]]) -> dict[str, Any]:
        """A pending pod whose container uses ``claims`` (pod claim name -> ``{"resourceClaimName": ..}``
        or ``{"resourceClaimTemplateName": ..}``) and no device-plugin resource."""
        body = {
            "metadata": {"name": name, "labels": {"team": "llm"}},
            "spec": {
                "restartPolicy": "Never",
                "resourceClaims": [{"name": ref, **source} for ref, source in claims.items()],
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.local/train:2.1",
                        "resources": {"claims": [{"name": ref} for ref in claims]},
                    }
                ],
            },
        }
        return self._json(self.api.create_namespaced_pod(namespace, body, _preload_content=False))

    # --- the collector's credentials -----------------------------------------------------------
    def chart_service_account(self, env: dict[str, str]) -> tuple[str, str]:
        """Apply the chart's collector RBAC; return (namespace, service account name)."""
        rendered = subprocess.run(
            [
                str(BIN / "helm"),
                "template",
                "gl",
                str(REPO / "infra/helm/gpuledger"),
                "--namespace",
                CHART_NAMESPACE,
                "--show-only",
                "templates/rbac.yaml",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert rendered.returncode == 0, rendered.stderr
        self.api.create_namespace({"metadata": {"name": CHART_NAMESPACE}}, _preload_content=False)
        rbac: Any = client.RbacAuthorizationV1Api(self.api.api_client)
        account = ""
        for doc in (d for d in yaml.safe_load_all(rendered.stdout) if d):
            kind = doc["kind"]
            if kind == "ServiceAccount":
                account = doc["metadata"]["name"]
                self.api.create_namespaced_service_account(CHART_NAMESPACE, doc, _preload_content=False)
            elif kind == "ClusterRole":
                rbac.create_cluster_role(doc, _preload_content=False)
            elif kind == "ClusterRoleBinding":
                rbac.create_cluster_role_binding(doc, _preload_content=False)
            else:
                raise AssertionError(f"the chart's rbac.yaml renders an unexpected {kind}")
        assert account, "the chart renders no ServiceAccount"
        return CHART_NAMESPACE, account

    def token_kubeconfig(self, namespace: str, account: str, path: Path, *, port: int) -> Path:
        """A kubeconfig holding a token the API server issues for the service account."""
        answer = self._json(
            self.api.create_namespaced_service_account_token(
                account, namespace, {"spec": {"expirationSeconds": 3600}}, _preload_content=False
            )
        )
        server = f"https://127.0.0.1:{port}"
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "collector",
                    "clusters": [
                        {
                            "name": "it",
                            "cluster": {"server": server, "certificate-authority": str(self.dir / "pki/ca.crt")},
                        }
                    ],
                    "users": [{"name": account, "user": {"token": answer["status"]["token"]}}],
                    "contexts": [{"name": "collector", "context": {"cluster": "it", "user": account}}],
                }
            )
        )
        path.chmod(0o600)
        return path

    def etcd_revision(self, port: int) -> int:
        return int(self._etcd(port, "/v3/kv/range", {"key": "AA=="})["header"]["revision"])

    def compact_etcd(self, port: int) -> int:
        """Compact etcd's history up to its current revision (as the API server's compactor does
        every five minutes in a default cluster); return that revision."""
        revision = self.etcd_revision(port)
        self._etcd(port, "/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    @staticmethod
    def _etcd(port: int, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """etcd's gRPC gateway: its JSON over HTTP face of the same API."""
        import urllib.request

        request = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer: dict[str, Any] = json.loads(response.read())
        return answer
