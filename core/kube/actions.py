"""``KubeClusterActions``: taints, cordons, evictions and pod deletions on a real cluster.

Node changes are read-modify-write with the node's resourceVersion (an update, as CA does),
retried on 409 Conflict, so a concurrent kubelet or controller update is never lost. Adding
a taint and cordoning are one request where they can be: a JSON patch, which the API
server applies to the node as it is then (see `add_taint`). Every request takes a token of
--kube-client-qps, shared with the caches, the events and the status: a write spared is
a node removed sooner.
Evictions go through the policy/v1 Eviction subresource, which enforces
PodDisruptionBudgets; pods are deleted directly only where CA would force it (the caller
decides). With ``dry_run`` nothing is written: each skipped write is logged.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import structlog
import urllib3
from clusterscaler.framework.clusteractions import EvictionError, NodeNotFoundError
from clusterscaler.framework.errors import ErrorType, describe
from clusterscaler.model import Node, Pod, Taint, parse_node, parse_pod
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from .responses import discard, read_json

__all__ = ["ConflictRetriesExhaustedError", "KubeClusterActions"]

log = structlog.get_logger()



class ConflictRetriesExhaustedError(RuntimeError):
    """A node kept changing under us: every update attempt conflicted."""

    error_type = ErrorType.API_CALL


class KubeClusterActions:
    """The ``ClusterActions`` of the loop, against the Kubernetes API."""

    def __init__(
        self,
        api_client: Any,
        *,
        dry_run: bool = False,
        conflict_retries: int = 5,
        cached_node: Callable[[str], Node | None] | None = None,
    ) -> None:
        """`cached_node` looks a node up in a cache; it only decides which way a taint is
        written (a node the cache shows without taints, or with one of the same key and
        effect, is read and updated rather than patched first), never what is written."""
        self.core = k8s.CoreV1Api(api_client)
        self.dry_run = dry_run
        self.conflict_retries = conflict_retries
        self.cached_node = cached_node
        self._patch_forbidden = False

    # ------------------------------------------------------------------ nodes

    def _update_node(
        self, node_name: str, change: Callable[[dict[str, Any]], bool], action: str
    ) -> bool:
        """Apply ``change`` to the node and write it back; return what ``change`` returned.

        ``change`` edits the raw node in place and returns whether it changed anything; an
        unchanged node is not written.
        """
        for attempt in range(1, self.conflict_retries + 1):
            try:
                raw = read_json(self.core.read_node(node_name, _preload_content=False))
            except ApiException as exc:
                if exc.status == 404:
                    raise NodeNotFoundError(f"node {node_name} not found") from exc
                raise
            if not change(raw):
                return False
            if self.dry_run:
                log.info("dry_run_skip", action=action, node=node_name)
                return True
            try:
                discard(self.core.replace_node(node_name, raw, _preload_content=False))
                log.info("node_updated", action=action, node=node_name, attempt=attempt)
                return True
            except ApiException as exc:
                if exc.status == 404:
                    raise NodeNotFoundError(f"node {node_name} not found") from exc
                if exc.status != 409:
                    raise
                log.debug("node_update_conflict", action=action, node=node_name, attempt=attempt)
        raise ConflictRetriesExhaustedError(
            f"node {node_name}: {action} conflicted {self.conflict_retries} times; the node is "
            "being updated concurrently"
        )

    def add_taint(self, node_name: str, taint: Taint) -> None:
        """Add `taint`, replacing one of the same key and effect.

        CA updates the node it has cached, reading it afresh only after a conflict: one
        request a taint. We do not keep the raw node, so the taint is appended by a JSON
        patch: one request too, applied by the API server to the node as it is then, so it
        cannot conflict nor lose a concurrent change. The server refuses the patch whole
        (422) when the node has no taint list or already a taint of this key and effect;
        then the node is read and updated."""
        if not self.dry_run and self._append_taint(node_name, taint):
            return

        def change(raw: dict[str, Any]) -> bool:
            spec = raw.setdefault("spec", {})
            taints = [
                t
                for t in spec.get("taints") or []
                if not (t.get("key") == taint.key and t.get("effect") == taint.effect)
            ]
            new = taint.to_k8s()
            if new in (spec.get("taints") or []):
                return False
            spec["taints"] = [*taints, new]
            return True

        self._update_node(node_name, change, f"add_taint:{taint.key}")

    def add_taint_and_cordon(self, node_name: str, taint: Taint) -> None:
        """Taint and cordon with one JSON patch where `add_taint` could patch alone; else
        the two writes one after the other."""
        if not self.dry_run and self._append_taint(node_name, taint, cordon=True):
            return
        self.add_taint(node_name, taint)
        self.set_unschedulable(node_name, True)

    def _append_taint(self, node_name: str, taint: Taint, *, cordon: bool = False) -> bool:
        """Append `taint` (and cordon) with one JSON patch; False when it does not apply
        (see `add_taint`) and nothing was written."""
        known = self.cached_node(node_name) if self.cached_node is not None else None
        if known is not None and (
            not known.taints
            or any((t.key, t.effect) == (taint.key, taint.effect) for t in known.taints)
        ):
            return False
        patch: list[dict[str, Any]] = [
            {"op": "add", "path": "/spec/taints/-", "value": taint.to_k8s()}
        ]
        action = f"add_taint:{taint.key}"
        if cordon:
            patch.append({"op": "add", "path": "/spec/unschedulable", "value": True})
            action += "+cordon"
        return self._patch_node(node_name, patch, action)

    def _patch_node(self, node_name: str, patch: list[dict[str, Any]], action: str) -> bool:
        """Apply a JSON patch to the node; False when the server refused it whole (422)
        or patches are not allowed, and nothing was written.

        A ClusterRole written for CA grants nodes get and update, not patch: after one 403
        every node write is a read and an update, as it was, with one warning."""
        if self._patch_forbidden:
            return False
        try:
            discard(self.core.patch_node(node_name, patch, _preload_content=False))
        except ApiException as exc:
            if exc.status == 404:
                raise NodeNotFoundError(f"node {node_name} not found") from exc
            if exc.status == 403:
                self._patch_forbidden = True
                log.warning(
                    "node_patch_forbidden",
                    node=node_name,
                    hint="grant verb patch on nodes (deploy/*/rbac.yaml): each taint and "
                    "cordon then takes one request of --kube-client-qps instead of two",
                    **describe(exc).fields(),
                )
                return False
            if exc.status == 422:
                log.debug(
                    "node_patch_refused", action=action, node=node_name, **describe(exc).fields()
                )
                return False
            raise
        log.info("node_updated", action=action, node=node_name, attempt=1)
        return True

    def remove_taint(self, node_name: str, key: str) -> bool:
        def change(raw: dict[str, Any]) -> bool:
            spec = raw.setdefault("spec", {})
            current = spec.get("taints") or []
            kept = [t for t in current if t.get("key") != key]
            if len(kept) == len(current):
                return False
            spec["taints"] = kept
            return True

        return self._update_node(node_name, change, f"remove_taint:{key}")

    def set_unschedulable(self, node_name: str, unschedulable: bool) -> None:
        """Cordon or uncordon with one JSON patch (setting or removing
        `spec.unschedulable` of the node as it is then). An uncordon the server refuses
        (422: the field is not there) reads the node and updates it if it must."""
        if not self.dry_run:
            op: dict[str, Any] = (
                {"op": "add", "path": "/spec/unschedulable", "value": True}
                if unschedulable
                else {"op": "remove", "path": "/spec/unschedulable"}
            )
            if self._patch_node(node_name, [op], "cordon" if unschedulable else "uncordon"):
                return

        def change(raw: dict[str, Any]) -> bool:
            spec = raw.setdefault("spec", {})
            if bool(spec.get("unschedulable", False)) == unschedulable:
                return False
            if unschedulable:
                spec["unschedulable"] = True
            else:
                spec.pop("unschedulable", None)
            return True

        self._update_node(node_name, change, "cordon" if unschedulable else "uncordon")

    # ------------------------------------------------------------------ pods

    def evict(self, pod: Pod, grace_period_seconds: int | None) -> None:
        delete_options: dict[str, Any] = {}
        if grace_period_seconds is not None:
            delete_options["gracePeriodSeconds"] = grace_period_seconds
        if pod.uid:
            delete_options["preconditions"] = {"uid": pod.uid}
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod.name, "namespace": pod.namespace},
        }
        if delete_options:
            body["deleteOptions"] = delete_options
        if self.dry_run:
            log.info("dry_run_skip", action="evict", pod=pod.key)
            return
        try:
            discard(
                self.core.create_namespaced_pod_eviction(
                    pod.name, pod.namespace, body, _preload_content=False
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return  # already gone
            if exc.status == 409 and pod.uid:
                return  # the uid precondition failed: this pod is gone, a namesake replaced it
            # As CA's drain: every other answer (a PDB with no disruption left, a 500 from a
            # webhook, an overloaded server) is retried until --max-pod-eviction-time.
            raise EvictionError(pod.key, str(describe(exc)), retryable=True) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise EvictionError(pod.key, f"{type(exc).__name__}: {exc}", retryable=True) from exc
        log.info("pod_evicted", pod=pod.key, node=pod.node_name)

    def read_node(self, node_name: str) -> Node | None:
        """A fresh GET of the node (never the cache); None when it is gone."""
        try:
            raw = read_json(self.core.read_node(node_name, _preload_content=False))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        raw.setdefault("kind", "Node")
        return parse_node(raw)

    def read_pods_on_node(self, node_name: str) -> list[Pod]:
        """A fresh list of the node's pods (never the cache), page by page, by the
        `spec.nodeName` field selector. Reads are allowed in dry-run."""
        pods: list[Pod] = []
        continue_token = ""
        while True:
            kwargs: dict[str, Any] = {
                "limit": 500,
                "field_selector": f"spec.nodeName={node_name}",
            }
            if continue_token:
                kwargs["_continue"] = continue_token
            page = read_json(self.core.list_pod_for_all_namespaces(_preload_content=False, **kwargs))
            for item in page.get("items") or []:
                item.setdefault("kind", "Pod")
                pods.append(parse_pod(item))
            continue_token = (page.get("metadata") or {}).get("continue") or ""
            if not continue_token:
                return pods

    def registered_instances(self, provider_ids: Collection[str]) -> set[str]:
        """A fresh list of the Nodes (never the cache), page by page: which of
        ``provider_ids`` a Node carries. Reads are allowed in dry-run."""
        wanted = set(provider_ids)
        found: set[str] = set()
        if not wanted:
            return found
        continue_token = ""
        while True:
            kwargs: dict[str, Any] = {"limit": 500}
            if continue_token:
                kwargs["_continue"] = continue_token
            page = read_json(self.core.list_node(_preload_content=False, **kwargs))
            for item in page.get("items") or []:
                provider_id = (item.get("spec") or {}).get("providerID") or ""
                if provider_id in wanted:
                    found.add(provider_id)
            continue_token = (page.get("metadata") or {}).get("continue") or ""
            if not continue_token:
                return found

    def pod_exists(self, pod: Pod) -> bool:
        try:
            raw = read_json(
                self.core.read_namespaced_pod(pod.name, pod.namespace, _preload_content=False)
            )
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return not pod.uid or (raw.get("metadata") or {}).get("uid") == pod.uid
