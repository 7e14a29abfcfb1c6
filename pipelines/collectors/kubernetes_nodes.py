"""Node states for the Kubernetes collector: list the nodes, pass on what changed.

Each poll lists the nodes (``list_node``) and turns each into a ``node.state`` stamped with the
poll time (:mod:`pipelines.parsers.kubernetes_nodes`); a node's state is passed on only when its
(state, reason, GPU count, GPU replicas and sharing) differs from the last one passed on. A service account that may not
list nodes gets a warning, and the collector goes on with pods.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
from urllib3.exceptions import HTTPError

from pipelines.collectors.base import Batch
from pipelines.parsers.kubernetes_nodes import node_state
from pipelines.parsers.kubernetes_tracker import SOURCE, TOPIC
from pipelines.parsers.sched_events import add_record_events


class NodeStates:
    def __init__(self, cluster: str, *, node: str | None = None) -> None:
        self.cluster = cluster
        self.node = node  # only this node (a per-node collector)
        self.passed_on: dict[str, list[Any]] = {}  # node -> [state, reason, gpus, replicas, sharing] last passed on

    def poll(self, api: Any, observed: datetime, batch: Batch) -> None:
        """Add the changed node states (or a warning) to ``batch``."""
        from kubernetes.client.exceptions import ApiException

        try:
            selector = {"field_selector": f"metadata.name={self.node}"} if self.node else {}
            response = api.list_node(_preload_content=False, _request_timeout=60, **selector)
            doc = orjson.loads(response.data)
        except ApiException as exc:
            batch.warnings.append(f"listing nodes failed: HTTP {exc.status} {exc.reason} (node states skipped)")
            return
        except (HTTPError, OSError, orjson.JSONDecodeError) as exc:
            batch.warnings.append(f"listing nodes failed: {str(exc).splitlines()[0][:200]} (node states skipped)")
            return
        for node in (doc.get("items") or []) if isinstance(doc, dict) else []:
            raw = orjson.dumps(node).decode()
            try:
                obj = node_state({"kind": "Node", **node}, cluster=self.cluster, observed_at=observed)
            except (ValueError, TypeError) as exc:
                batch.result.reject(topic=TOPIC.name, source=SOURCE, reason=str(exc), raw=raw, origin="nodes")
                continue
            if obj is None:
                continue
            data = obj["data"]
            key = [data["state"], data["reason"], data.get("gpus"), data.get("gpu_replicas"), data.get("sharing")]
            if self.passed_on.get(data["node"]) != key:
                self.passed_on[data["node"]] = key
                add_record_events(batch.result, [obj], topic=TOPIC.name, source=SOURCE, raw=raw, origin="nodes")
