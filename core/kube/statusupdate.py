"""A conflict-safe update of a custom object's status subresource, as the status writers of
ProvisioningRequests, CapacityBuffers and CapacityQuotas make it.

The object is read, its status changed by the caller on what the server holds, and the
update carries the resourceVersion read; on a conflict (409) the whole is done again, up to
`retries` times. An object deleted since (404 on either call), or deleted and created again
(another uid than the one the loop saw), is not written: its status is the next loop's.
Other API errors are raised for the writer to log and count. `StatusWriter` holds what the
three writers share: the client, --dry-run, the retries, and the count of failures.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog
from clusterscaler.framework.errors import ErrorType
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from .responses import discard, read_json

__all__ = ["StatusTarget", "StatusWriter", "UpdateOutcome", "merge_conditions", "update_status"]

log = structlog.get_logger()


class UpdateOutcome(enum.Enum):
    WRITTEN = "written"
    GONE = "gone"
    CREATED_AGAIN = "created again"
    CONFLICTED = "conflicted"


@dataclass(frozen=True)
class StatusTarget:
    """Which object: its API group, version and plural, its name, and its namespace (None
    for a cluster-scoped kind); `uid` is the one the loop saw, when it knows it."""

    group: str
    version: str
    plural: str
    name: str
    namespace: str | None = None
    uid: str | None = None


def update_status(
    custom: k8s.CustomObjectsApi,
    target: StatusTarget,
    change: Callable[[dict[str, Any]], dict[str, Any]],
    retries: int,
) -> UpdateOutcome:
    """Read `target`, set its status to `change(status held)`, write it back; see the module."""
    t = target
    for _ in range(retries):
        try:
            if t.namespace is None:
                response = custom.get_cluster_custom_object(
                    t.group, t.version, t.plural, t.name, _preload_content=False
                )
            else:
                response = custom.get_namespaced_custom_object(
                    t.group, t.version, t.namespace, t.plural, t.name, _preload_content=False
                )
            current: dict[str, Any] = read_json(response)
        except ApiException as exc:
            if exc.status == 404:
                return UpdateOutcome.GONE
            raise
        meta = current.get("metadata")
        uid = meta.get("uid") if isinstance(meta, dict) else None
        if t.uid and uid not in (None, t.uid):
            return UpdateOutcome.CREATED_AGAIN
        held = current.get("status")
        current["status"] = change(held if isinstance(held, dict) else {})
        try:
            if t.namespace is None:
                response = custom.replace_cluster_custom_object_status(
                    t.group, t.version, t.plural, t.name, current, _preload_content=False
                )
            else:
                response = custom.replace_namespaced_custom_object_status(
                    t.group, t.version, t.namespace, t.plural, t.name, current,
                    _preload_content=False,
                )
            discard(response)
        except ApiException as exc:
            if exc.status == 409:
                continue
            if exc.status == 404:
                return UpdateOutcome.GONE
            raise
        return UpdateOutcome.WRITTEN
    return UpdateOutcome.CONFLICTED


def merge_conditions(
    status: dict[str, Any], mine: Mapping[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """The conditions of `status` with those of the types in `mine` (type -> condition as the
    API writes it) replaced or added, the others kept as the server holds them."""
    held = status.get("conditions")
    kept: Iterable[Any] = held if isinstance(held, list) else []
    return [c for c in kept if not (isinstance(c, dict) and c.get("type") in mine)] + list(
        mine.values()
    )


class StatusWriter:
    """What the status writers share: the API client, --dry-run (nothing written), the
    conflict retries, and the failures, counted and passed to `on_error`."""

    def __init__(
        self,
        api_client: Any,
        *,
        dry_run: bool = False,
        conflict_retries: int = 3,
        on_error: Callable[[ErrorType], None] | None = None,
    ) -> None:
        self.custom = k8s.CustomObjectsApi(api_client)
        self.dry_run = dry_run
        self.conflict_retries = conflict_retries
        self.on_error = on_error
        self.failures = 0

    def _failed(self, error_type: ErrorType) -> None:
        self.failures += 1
        if self.on_error is not None:
            self.on_error(error_type)

    def _update(
        self,
        target: StatusTarget,
        change: Callable[[dict[str, Any]], dict[str, Any]],
        *,
        events: tuple[str, str, str],
        names: Mapping[str, Any],
        written: Mapping[str, Any],
    ) -> bool:
        """`update_status`, logged: `events` are the (gone, written, failed) event names,
        `names` the fields naming the object on each, `written` the fields added when it was
        written. True when written."""
        gone, done, failed = events
        outcome = update_status(self.custom, target, change, self.conflict_retries)
        if outcome is UpdateOutcome.WRITTEN:
            log.info(done, **names, **written)
            return True
        if outcome is UpdateOutcome.CONFLICTED:
            self._still_conflicting(failed, **names)
            return False
        if outcome is UpdateOutcome.CREATED_AGAIN:
            log.info(gone, **names, reason=outcome.value)
        else:
            log.info(gone, **names)
        return False

    def _still_conflicting(self, event: str, **names: Any) -> None:
        """Log and count an update that conflicted on every attempt."""
        log.warning(
            event,
            action="update_status",
            **names,
            error_type=ErrorType.API_CALL.value,
            status=409,
            reason="Conflict",
            message=f"still conflicting after {self.conflict_retries} attempts",
        )
        self._failed(ErrorType.API_CALL)
