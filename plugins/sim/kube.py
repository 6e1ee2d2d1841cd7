"""The `sim` provider's backend for a real API server: Node objects without machines.

Like Cluster Autoscaler's kwok provider, growing a group creates Node objects through the
API and shrinking it deletes them. Something else (kwok, or nothing at all for a dry
experiment) plays the kubelet. Nodes are created at once and marked Ready; the group's
provisionDelay only applies to the in-memory cluster.

Only the nodes labelled `clusterscaler.io/node-group` are listed, unless a group adopts
nodes by a `nodeSelector`: a label selector cannot say "this label, or any of these", so
then every node is listed and the provider sorts them into groups.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from clusterscaler.api import CloudProviderError, InstanceErrorInfo, ModelError, Node, parse_node
from clusterscaler.plugins.sim.config import NODE_GROUP_LABEL

log = structlog.get_logger()


class KubeNodeBackend:
    """Nodes of the `sim` groups as objects of a real API server. Satisfies `NodeBackend`."""

    def __init__(self, api_client: Any, *, all_nodes: bool = False) -> None:
        """`all_nodes`: list every node, not only those labelled with a group (needed when
        a group adopts nodes by its `nodeSelector`)."""
        from kubernetes import client

        self._core = client.CoreV1Api(api_client)
        self._label_selector = None if all_nodes else NODE_GROUP_LABEL
        # The nodes as last listed, minus those deleted since: the autoscaler deletes nodes
        # one call at a time, and each call must not list the cluster again.
        self._cache: dict[str, Node] | None = None
        # Changes of the cached nodes (see `node_changes_since`): a new listing is version
        # `_listed_at`, and each deletion since adds one version and its name.
        self._version = 0
        self._listed_at = 0
        self._deleted: list[str] = []

    def refresh(self) -> None:
        self._cache = None

    def _nodes(self) -> dict[str, Node]:
        if self._cache is None:
            self._cache = {n.name: n for n in self._list()}
            self._version += 1
            self._listed_at = self._version
            self._deleted = []
        return self._cache

    def list_nodes(self) -> Sequence[Node]:
        return list(self._nodes().values())

    def node_version(self) -> int:
        """A counter of changes to the listed nodes (a new listing, a deletion)."""
        self._nodes()
        return self._version

    def node_changes_since(self, version: int) -> list[str] | None:
        """Names of the nodes deleted since `version`, or `None` when the nodes were listed
        again since (any node may have changed)."""
        if version < self._listed_at or version > self._version:
            return None
        return self._deleted[version - self._listed_at :]

    def get_node(self, name: str) -> Node | None:
        return self._nodes().get(name)

    def _list(self) -> list[Node]:
        from kubernetes.client.exceptions import ApiException

        kwargs: dict[str, Any] = {"_preload_content": False}
        if self._label_selector is not None:
            kwargs["label_selector"] = self._label_selector
        try:
            resp = self._core.list_node(**kwargs)
            doc = json.loads(resp.data)
        except ApiException as exc:
            which = (
                "all nodes"
                if self._label_selector is None
                else f"nodes with label {self._label_selector}"
            )
            raise CloudProviderError(
                f"sim provider: listing {which} failed: {exc.status} {exc.reason}"
            ) from None
        nodes: list[Node] = []
        for item in doc.get("items") or []:
            item = {**item, "kind": "Node"}
            try:
                nodes.append(parse_node(item))
            except ModelError as exc:
                # One malformed node must not hide the others from the autoscaler.
                log.warning("sim_node_unparsable", error=str(exc))
        return nodes

    def list_pending_nodes(self) -> Sequence[Node]:
        return ()

    def create_node(self, node: Node, ready_after: timedelta) -> None:
        from kubernetes.client.exceptions import ApiException

        body = node.with_(creation_time=None).to_k8s()
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        status = body["status"]
        assert isinstance(status, dict)  # Node.to_k8s writes an object
        status["conditions"] = [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "created by the clusterscaler sim provider",
                "lastTransitionTime": now,
                "lastHeartbeatTime": now,
            }
        ]
        try:
            self._core.create_node(body=body)
        except ApiException as exc:
            raise CloudProviderError(
                f"sim provider: creating node {node.name} failed: {exc.status} {exc.reason}"
            ) from None
        self._cache = None

    def delete_node(self, name: str) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self._core.delete_node(name=name)
        except ApiException as exc:
            if exc.status != 404:
                raise CloudProviderError(
                    f"sim provider: deleting node {name} failed: {exc.status} {exc.reason}"
                ) from None
        # The node is gone, or going (a finalizer holds it until the next listing shows
        # it with its deletionTimestamp): either way it no longer counts.
        if self._cache is not None and self._cache.pop(name, None) is not None:
            self._version += 1
            self._deleted.append(name)

    def cancel_pending_node(self, name: str) -> bool:
        return False

    def provisioning_error(self, group: str) -> InstanceErrorInfo | None:
        return None
