"""Writes the status the loop gave CapacityQuotas (usage, `Valid` and `Reconciled`) to
their status subresource, as upstream's CapacityQuota controller does."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import structlog
from clusterscaler.framework.errors import ErrorType, describe
from clusterscaler.model.capacityquota import (
    CAPACITY_QUOTA_GROUP,
    CAPACITY_QUOTA_PLURAL,
    CAPACITY_QUOTA_VERSION,
)
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from .provreq import condition_to_k8s
from .responses import discard, read_json

if TYPE_CHECKING:
    from clusterscaler.loop.quotas import CapacityQuotaStatus

__all__ = ["CapacityQuotaStatusWriter"]

log = structlog.get_logger()


class CapacityQuotaStatusWriter:
    """Updates `status.used` and the `Valid` and `Reconciled` conditions of each quota
    whose status changed.

    Conflict-safe: the quota is read, those conditions are replaced (or added) in what the
    server holds and any other condition is kept, and the update of the status subresource
    carries the resourceVersion read; on a conflict the whole is done again, up to
    `conflict_retries` times. A quota deleted since, or deleted and created again (another
    uid), is skipped. With --dry-run nothing is written. A failure is logged and counted
    (`on_error`), never raised, and does not stop the other quotas.
    """

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

    def write(self, statuses: Iterable[CapacityQuotaStatus]) -> int:
        """Write every changed status; return how many were written."""
        written = 0
        for s in statuses:
            if not s.changed:
                continue
            if self.dry_run:
                log.info(
                    "capacity_quota_status_not_written",
                    quota=s.name,
                    reason="dry run",
                    used=dict(s.used) if s.used is not None else None,
                )
                continue
            try:
                if self._write(s):
                    written += 1
            except Exception as exc:
                info = describe(exc)
                log.warning(
                    "capacity_quota_status_write_failed",
                    action="update_status",
                    quota=s.name,
                    **info.fields(exc),
                )
                self._failed(info.type)
        return written

    def _failed(self, error_type: ErrorType) -> None:
        self.failures += 1
        if self.on_error is not None:
            self.on_error(error_type)

    def _write(self, s: CapacityQuotaStatus) -> bool:
        mine = {c.type: c for c in s.conditions}
        for _ in range(self.conflict_retries):
            try:
                current: dict[str, Any] = read_json(
                    self.custom.get_cluster_custom_object(
                        CAPACITY_QUOTA_GROUP,
                        CAPACITY_QUOTA_VERSION,
                        CAPACITY_QUOTA_PLURAL,
                        s.name,
                        _preload_content=False,
                    )
                )
            except ApiException as exc:
                if exc.status == 404:
                    log.info("capacity_quota_gone", quota=s.name)
                    return False
                raise
            meta = current.get("metadata")
            uid = meta.get("uid") if isinstance(meta, dict) else None
            if s.uid and uid != s.uid:
                # Created again since it was read: its status is the next loop's to write.
                log.info("capacity_quota_gone", quota=s.name, reason="created again")
                return False
            status = current.get("status")
            status = status if isinstance(status, dict) else {}
            held = status.get("conditions")
            conditions = [
                c
                for c in (held if isinstance(held, list) else [])
                if not (isinstance(c, dict) and c.get("type") in mine)
            ]
            conditions += [condition_to_k8s(c) for c in mine.values()]
            status["conditions"] = conditions
            if s.used is not None:
                status["used"] = {"resources": dict(s.used)}
            current["status"] = status
            try:
                discard(
                    self.custom.replace_cluster_custom_object_status(
                        CAPACITY_QUOTA_GROUP,
                        CAPACITY_QUOTA_VERSION,
                        CAPACITY_QUOTA_PLURAL,
                        s.name,
                        current,
                        _preload_content=False,
                    )
                )
            except ApiException as exc:
                if exc.status == 409:
                    continue
                if exc.status == 404:
                    log.info("capacity_quota_gone", quota=s.name)
                    return False
                raise
            log.info(
                "capacity_quota_status_written",
                quota=s.name,
                used=dict(s.used) if s.used is not None else None,
                valid=mine["Valid"].status if "Valid" in mine else None,
            )
            return True
        log.warning(
            "capacity_quota_status_write_failed",
            action="update_status",
            quota=s.name,
            error_type=ErrorType.API_CALL.value,
            status=409,
            reason="Conflict",
            message=f"still conflicting after {self.conflict_retries} attempts",
        )
        self._failed(ErrorType.API_CALL)
        return False
