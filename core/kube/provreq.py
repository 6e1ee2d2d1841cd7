"""Writes the conditions the loop gave ProvisioningRequests to their status subresource."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import structlog
from clusterscaler.framework.errors import describe
from clusterscaler.model.common import _format_time
from clusterscaler.model.provisioning import PROVISIONING_REQUEST_GROUP, Condition
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from .responses import discard
from .statusupdate import StatusTarget, StatusWriter, merge_conditions

if TYPE_CHECKING:
    from clusterscaler.loop.decisions import ProvisioningRequestResult

__all__ = ["PLURAL", "ProvisioningRequestStatusWriter", "condition_to_k8s"]

log = structlog.get_logger()

PLURAL = "provisioningrequests"
VERSION = "v1"


def condition_to_k8s(c: Condition) -> dict[str, Any]:
    """A `metav1.Condition` as the API server takes it."""
    out: dict[str, Any] = {
        "type": c.type,
        "status": c.status,
        "reason": c.reason,
        "message": c.message,
        "observedGeneration": c.observed_generation,
    }
    if c.last_transition_time is not None:
        out["lastTransitionTime"] = _format_time(c.last_transition_time)
    return out


class ProvisioningRequestStatusWriter(StatusWriter):
    """Updates `status.conditions` of each request the loop changed, and deletes those
    whose time is over (`delete`, as CA's DeleteOldProvReqs).

    Conflict-safe: the request is read, the condition types the loop changed are replaced
    (or added) in what the server holds, the others are kept as they are, and the update
    of the status subresource carries the resourceVersion read; on a conflict the whole is
    done again, up to `conflict_retries` times. A request deleted since is skipped. With
    --dry-run nothing is written: a batch scheduler acts on these conditions. A failure is
    logged and counted (`on_error`), never raised, and does not stop the other requests.
    """

    def write(self, results: Iterable[ProvisioningRequestResult]) -> int:
        """Write every changed request; return how many were written."""
        written = 0
        for r in results:
            if r.delete:
                written += self._delete(r)
                continue
            if not r.changed:
                continue
            if self.dry_run:
                log.info(
                    "provisioning_request_status_not_written",
                    request=r.key,
                    reason="dry run",
                    conditions=r.statuses(),
                )
                continue
            try:
                if self._write(r):
                    written += 1
            except Exception as exc:
                info = describe(exc)
                log.warning(
                    "provisioning_request_status_write_failed",
                    action="update_status",
                    request=r.key,
                    **info.fields(exc),
                )
                self._failed(info.type)
        return written

    def _delete(self, r: ProvisioningRequestResult) -> int:
        """Delete a request CA's week-long TTL is over for; the uid, as a precondition,
        keeps a request re-created under the same name."""
        if self.dry_run:
            log.info("provisioning_request_not_deleted", request=r.key, reason="dry run")
            return 0
        body = k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid=r.uid or None))
        try:
            discard(
                self.custom.delete_namespaced_custom_object(
                    PROVISIONING_REQUEST_GROUP, VERSION, r.namespace, PLURAL, r.name,
                    body=body, _preload_content=False,
                )
            )
        except ApiException as exc:
            if exc.status in (404, 409):
                return 0
            info = describe(exc)
            log.warning("provisioning_request_delete_failed", action="delete",
                        request=r.key, **info.fields(exc))
            self._failed(info.type)
            return 0
        except Exception as exc:
            info = describe(exc)
            log.warning("provisioning_request_delete_failed", action="delete",
                        request=r.key, **info.fields(exc))
            self._failed(info.type)
            return 0
        log.info("provisioning_request_deleted", request=r.key,
                 reason="Provisioned or Failed for more than 7 days")
        return 1

    def _write(self, r: ProvisioningRequestResult) -> bool:
        mine = {c.type: condition_to_k8s(c) for c in r.conditions if c.type in r.changed}

        def change(status: dict[str, Any]) -> dict[str, Any]:
            status["conditions"] = merge_conditions(status, mine)
            return status

        target = StatusTarget(PROVISIONING_REQUEST_GROUP, VERSION, PLURAL, r.name, r.namespace)
        return self._update(
            target,
            change,
            events=("provisioning_request_gone", "provisioning_request_status_written",
                    "provisioning_request_status_write_failed"),
            names={"request": r.key},
            written={"conditions": r.statuses()},
        )
