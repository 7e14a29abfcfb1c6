"""What a dcgm-exporter series' labels say about where it runs and who holds it (:mod:`pipelines.parsers.dcgm`).

* Node: ``Hostname`` (released exporters), ``hostname`` (newer), else a ``node`` or
  ``kubernetes_node`` target label (Prometheus relabelling), else the host part of ``instance``,
  else the caller's hint (``gpuledger ingest --node``): labels win over the hint. An exporter
  deployed without ``NODE_NAME`` puts its own pod's name in the host label
  (``dcgm-exporter-wwwjh``). Such a name — one containing ``dcgm-exporter``, or equal to the
  series' ``pod`` label — is not a node: ``node``/``kubernetes_node``, then the hint, then
  ``instance`` win over it (``instance`` last: it is then the pod's own address). With none of them
  there is no node, and the reason says which flag gives it; a node is never named after the pod.
* Kubernetes mapping: ``namespace``/``pod``/``container``, the older ``pod_namespace``/
  ``pod_name``/``container_name``, and ``exported_*`` (Prometheus renames the exporter's labels so
  when they collide with the scrape target's). When ``exported_*`` labels exist only they are read;
  a mapping naming the exporter itself is the scrape target's own label, not a workload, and is
  dropped.
"""

from __future__ import annotations

from pipelines.parsers import prom

EXPORTER = "dcgm-exporter"
NODE_KEYS = ("node", "kubernetes_node")  # Prometheus target labels naming the node
HOST_KEYS = ("Hostname", "hostname")
K8S_KEYS = (
    ("exported_namespace", "exported_pod", "exported_container"),
    ("namespace", "pod", "container"),
    ("pod_namespace", "pod_name", "container_name"),
)
_GIVE_NODE = "give the node with `gpuledger ingest dcgm --node <name>`"


def node_of(labels: dict[str, str], hint: str | None) -> tuple[str | None, str]:
    """``(node, "")``, or ``(None, the reason there is none)``."""
    labelled = first(labels, HOST_KEYS)
    named = first(labels, NODE_KEYS)
    instance = prom.host_of({"instance": labels.get("instance", "")}, ())
    if labelled and not is_exporter(labelled, labels):
        return labelled, ""
    if labelled:  # the exporter's own pod: the instance address is the pod's, the hint comes first
        candidates = [named, hint, instance if instance and not is_exporter(instance, labels) else None]
    else:
        candidates = [named, instance, hint]
    node = next((c for c in candidates if c), None)
    if node:
        return node, ""
    if labelled:
        return None, f"hostname label {labelled!r} is the exporter's pod, not a node: {_GIVE_NODE}"
    return None, f"no Hostname/hostname/node/instance label: {_GIVE_NODE}"


def first(labels: dict[str, str], keys: tuple[str, ...]) -> str | None:
    """The first non-blank value of ``keys``."""
    return next((value for key in keys if (value := labels.get(key, "").strip())), None)


def is_exporter(name: str, labels: dict[str, str]) -> bool:
    """A name that is dcgm-exporter's own pod (or service), not a node or a workload."""
    return EXPORTER in name or name == labels.get("pod", "").strip()


def k8s_mapping(labels: dict[str, str]) -> tuple[str | None, str | None, str | None]:
    """``(namespace, pod, container)`` of the workload holding the device, or Nones."""
    for keys in K8S_KEYS:
        if any(k in labels for k in keys):
            values = tuple(labels.get(k, "").strip() or None for k in keys)
            if any(v and EXPORTER in v for v in values[1:]):
                return None, None, None
            if keys[0].startswith("exported_") or any(values):
                return values  # type: ignore[return-value]
    return None, None, None
