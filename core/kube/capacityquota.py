"""Writes the status the loop gave CapacityQuotas (usage, `Valid` and `Reconciled`) to
their status subresource, as upstream's CapacityQuota controller does."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import structlog
from clusterscaler.framework.errors import describe
from clusterscaler.model.capacityquota import (
    CAPACITY_QUOTA_GROUP,
    CAPACITY_QUOTA_PLURAL,
    CAPACITY_QUOTA_VERSION,
)

from .provreq import condition_to_k8s
from .statusupdate import StatusTarget, StatusWriter, merge_conditions

if TYPE_CHECKING:
    from clusterscaler.loop.quotas import CapacityQuotaStatus

__all__ = ["CapacityQuotaStatusWriter"]

log = structlog.get_logger()


class CapacityQuotaStatusWriter(StatusWriter):
    """Updates `status.used` and the `Valid` and `Reconciled` conditions of each quota
    whose status changed.

    Conflict-safe: the quota is read, those conditions are replaced (or added) in what the
    server holds and any other condition is kept, and the update of the status subresource
    carries the resourceVersion read; on a conflict the whole is done again, up to
    `conflict_retries` times. A quota deleted since, or deleted and created again (another
    uid), is skipped. With --dry-run nothing is written. A failure is logged and counted
    (`on_error`), never raised, and does not stop the other quotas.
    """

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

    def _write(self, s: CapacityQuotaStatus) -> bool:
        mine = {c.type: condition_to_k8s(c) for c in s.conditions}

        def change(status: dict[str, Any]) -> dict[str, Any]:
            status["conditions"] = merge_conditions(status, mine)
            if s.used is not None:
                status["used"] = {"resources": dict(s.used)}
            return status

        target = StatusTarget(
            CAPACITY_QUOTA_GROUP, CAPACITY_QUOTA_VERSION, CAPACITY_QUOTA_PLURAL, s.name, uid=s.uid
        )
        return self._update(
            target,
            change,
            events=(
                "capacity_quota_gone",
                "capacity_quota_status_written",
                "capacity_quota_status_write_failed",
            ),
            names={"quota": s.name},
            written={
                "used": dict(s.used) if s.used is not None else None,
                "valid": mine["Valid"]["status"] if "Valid" in mine else None,
            },
        )
