"""Writes the status ConfigMap (``--write-status-configmap``, ``--status-config-map-name``)."""

from __future__ import annotations

from typing import Any

import structlog
import urllib3
from clusterscaler.report.status import (
    LAST_UPDATED_ANNOTATION,
    STATUS_KEY,
    AutoscalerStatus,
    format_last_updated,
    to_yaml,
    with_transitions,
)
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from .responses import discard, read_json

__all__ = ["KubeStatusWriter"]

log = structlog.get_logger()


class KubeStatusWriter:
    """Creates or updates the status ConfigMap in ``namespace``.

    Written in ``--dry-run`` too: it only describes decisions. The update carries the
    ConfigMap's resourceVersion and is retried on conflict; other keys and annotations of
    the ConfigMap are kept. Failures are logged and counted, never raised: a missing status
    must not stop autoscaling.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        namespace: str = "kube-system",
        name: str = "cluster-autoscaler-status",
        conflict_retries: int = 3,
    ) -> None:
        self.core = k8s.CoreV1Api(api_client)
        self.namespace = namespace
        self.name = name
        self.conflict_retries = conflict_retries
        self.previous: AutoscalerStatus | None = None
        self.failures = 0
        self.uid = ""

    def write(self, status: AutoscalerStatus) -> bool:
        """Publish ``status``; return whether it was written."""
        status = with_transitions(self.previous, status)
        try:
            written = self._write(status)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            self.failures += 1
            log.warning(
                "status_configmap_write_failed",
                namespace=self.namespace,
                name=self.name,
                error=str(exc),
            )
            return False
        if written:
            self.previous = status
        return written

    def _write(self, status: AutoscalerStatus) -> bool:
        document = to_yaml(status)
        stamp = format_last_updated(status.time)
        for _ in range(self.conflict_retries):
            try:
                response = self.core.read_namespaced_config_map(
                    self.name, self.namespace, _preload_content=False
                )
                current: dict[str, Any] = read_json(response)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                body = {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": self.name,
                        "namespace": self.namespace,
                        "annotations": {LAST_UPDATED_ANNOTATION: stamp},
                    },
                    "data": {STATUS_KEY: document},
                }
                try:
                    created = self.core.create_namespaced_config_map(
                        self.namespace, body, _preload_content=False
                    )
                    self.uid = read_json(created)["metadata"].get("uid", "")
                    return True
                except ApiException as create_exc:
                    if create_exc.status != 409:
                        raise
                    continue
            meta = current.setdefault("metadata", {})
            meta.setdefault("annotations", {})
            meta["annotations"] = {**(meta["annotations"] or {}), LAST_UPDATED_ANNOTATION: stamp}
            current["data"] = {**(current.get("data") or {}), STATUS_KEY: document}
            self.uid = meta.get("uid", "")
            try:
                discard(
                    self.core.replace_namespaced_config_map(
                        self.name, self.namespace, current, _preload_content=False
                    )
                )
                return True
            except ApiException as exc:
                if exc.status != 409:
                    raise
        log.warning("status_configmap_conflicts", namespace=self.namespace, name=self.name)
        self.failures += 1
        return False
