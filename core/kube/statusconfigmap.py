"""Writes the status ConfigMap (``--write-status-configmap``, ``--status-config-map-name``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
from clusterscaler.framework.errors import ErrorType, describe
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
    the ConfigMap are kept. Failures are logged on one line and counted (``failures``, and
    their type through ``on_error``), never raised: a missing status must not stop
    autoscaling.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        namespace: str = "kube-system",
        name: str = "cluster-autoscaler-status",
        conflict_retries: int = 3,
        on_error: Callable[[ErrorType], None] | None = None,
    ) -> None:
        self.core = k8s.CoreV1Api(api_client)
        self.namespace = namespace
        self.name = name
        self.conflict_retries = conflict_retries
        self.on_error = on_error
        self.previous: AutoscalerStatus | None = None
        self.failures = 0
        self.uid = ""

    def write(self, status: AutoscalerStatus) -> bool:
        """Publish ``status``; return whether it was written."""
        status = with_transitions(self.previous, status)
        try:
            written = self._write(status)
        except Exception as exc:
            info = describe(exc)
            log.warning(
                "status_configmap_write_failed",
                action="write_status",
                configmap=f"{self.namespace}/{self.name}",
                **info.fields(exc),
            )
            self._failed(info.type)
            return False
        if written:
            self.previous = status
        return written

    def _failed(self, error_type: ErrorType) -> None:
        self.failures += 1
        if self.on_error is not None:
            self.on_error(error_type)

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
        log.warning(
            "status_configmap_write_failed",
            action="write_status",
            configmap=f"{self.namespace}/{self.name}",
            error_type=ErrorType.API_CALL.value,
            status=409,
            reason="Conflict",
            message=f"still conflicting after {self.conflict_retries} attempts",
        )
        self._failed(ErrorType.API_CALL)
        return False
