"""Writes what the loop decided for CapacityBuffers: the PodTemplate each buffer's chunks
are made from, and the buffer's status subresource."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import structlog
from clusterscaler.framework.errors import ErrorType, describe, describe_error
from clusterscaler.model.capacitybuffer import (
    CAPACITY_BUFFER_API_VERSION,
    CAPACITY_BUFFER_GROUP,
    CAPACITY_BUFFER_KIND,
    FAILED_TO_RESOLVE_POD,
    FAILED_TO_WRITE_TEMPLATE,
    NOT_READY_REASON,
    READY_FOR_PROVISIONING,
    without_token_volumes,
)
from clusterscaler.model.provisioning import Condition, set_condition
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from .provreq import condition_to_k8s
from .responses import read_json
from .statusupdate import StatusTarget, StatusWriter

if TYPE_CHECKING:
    from datetime import datetime

    from clusterscaler.loop.capacitybuffers import BufferResult, BufferStatus

__all__ = ["PLURAL", "CapacityBufferWriter", "resolve_template_by_defaulting"]

log = structlog.get_logger()

PLURAL = "capacitybuffers"
VERSION = "v1beta1"


def resolve_template_by_defaulting(template: Mapping[str, Any]) -> dict[str, Any]:
    """CA's DefaultingResolver: each container's requests default to its limits."""
    out: dict[str, Any] = json.loads(json.dumps(template))
    spec: dict[str, Any] = out["spec"] if isinstance(out.get("spec"), dict) else {}
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            if not isinstance(c, dict):
                continue
            resources = c.setdefault("resources", {})
            limits = resources.get("limits") or {}
            if limits:
                requests = resources.setdefault("requests", {})
                for name, quantity in limits.items():
                    requests.setdefault(name, quantity)
    return out


def _status_to_k8s(status: BufferStatus) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if status.pod_template_ref is not None:
        out["podTemplateRef"] = {"name": status.pod_template_ref}
    if status.replicas is not None:
        out["replicas"] = status.replicas
    if status.pod_template_generation is not None:
        out["podTemplateGeneration"] = status.pod_template_generation
    if status.provisioning_strategy is not None:
        out["provisioningStrategy"] = status.provisioning_strategy
    if status.conditions:
        out["conditions"] = [condition_to_k8s(c) for c in status.conditions]
    return out


class CapacityBufferWriter(StatusWriter):
    """Keeps each buffer's managed PodTemplate (`capacitybuffer-<buffer>-pod-template`,
    owned by the buffer) and writes the buffer's status, as CA's buffer controller and
    pod-list processor do.

    The template is built from the loop's copy by a server-side dry-run create of a pod
    (`dry_run_pods`, --capacity-buffer-pod-dry-run-enabled: admission defaulting, mutating
    webhooks and LimitRanges apply, no pod is created), else by defaulting requests from
    limits; it is written only when that differs from what the cluster holds, and a
    template a buffer's source did not change since is not built again. The status is
    conflict-safe: read, replaced, updated with the resourceVersion read, done again on
    a conflict up to `conflict_retries` times; a buffer deleted since is skipped. With
    --dry-run nothing is written. A failure is logged and counted (`on_error`), never
    raised, and does not stop the other buffers.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        dry_run: bool = False,
        dry_run_pods: bool = True,
        conflict_retries: int = 3,
        on_error: Callable[[ErrorType], None] | None = None,
    ) -> None:
        super().__init__(
            api_client, dry_run=dry_run, conflict_retries=conflict_retries, on_error=on_error
        )
        self.core = k8s.CoreV1Api(api_client)
        self.dry_run_pods = dry_run_pods
        # Per buffer: the source template last written for it, and the generation of
        # the managed template that write left.
        self._written: dict[str, tuple[str, int]] = {}
        # When each buffer (by uid, else key) was last reconciled: its status written, or
        # found current.
        self._reconciled: dict[str, datetime] = {}

    def oldest_reconciliation(
        self, results: Iterable[BufferResult], now: datetime
    ) -> tuple[datetime, datetime]:
        """CA's capacity_buffer_oldest_reconciliation_timestamp_seconds: the oldest
        creation time of the buffers never reconciled that have no condition yet
        (`new_buffer="true"`), and the oldest last reconciliation of the others (`"false"`);
        `now` when there is none. A buffer with conditions that this process never
        reconciled (it restarted) is left out, as upstream does."""
        newest = oldest = now
        seen = set()
        for r in results:
            if not r.reconciled:
                continue
            ident = r.uid or r.key
            seen.add(ident)
            when = self._reconciled.get(ident)
            if when is not None:
                oldest = min(oldest, when)
            elif not r.held.conditions and r.created is not None:
                newest = min(newest, r.created)
        for gone in self._reconciled.keys() - seen:
            del self._reconciled[gone]
        return newest, oldest

    def write(self, results: Iterable[BufferResult], now: datetime) -> int:
        """Write every buffer whose template or status needs it; how many statuses.
        `results` are all the buffers of this pass: what was written for any other (one
        deleted since) is forgotten, so a buffer created again under its name has its
        template built anew."""
        results = tuple(results)
        for gone in self._written.keys() - {r.key for r in results}:
            del self._written[gone]
        written = 0
        for r in results:
            try:
                status = r.status
                if r.template is not None:
                    status = self._ensure_template(r, now)
                if status.same_as(r.held):
                    self._reconciled_now(r, now)
                    continue
                if self.dry_run:
                    log.info("capacity_buffer_status_not_written", buffer=r.key,
                             reason="dry run", conditions=status.statuses())
                    continue
                if self._write_status(r, status):
                    self._reconciled_now(r, now)
                    written += 1
            except Exception as exc:
                info = describe(exc)
                log.warning("capacity_buffer_write_failed", buffer=r.key, **info.fields(exc))
                self._failed(info.type)
        return written

    def _reconciled_now(self, r: BufferResult, now: datetime) -> None:
        if r.reconciled:
            self._reconciled[r.uid or r.key] = now

    # ------------------------------------------------------------------ template

    def _ensure_template(self, r: BufferResult, now: datetime) -> BufferStatus:
        """The managed template written when needed; the status with its generation, or
        not ready when it could not be built or written (CA's words)."""
        template = r.template
        assert template is not None
        source = json.dumps(template.template, sort_keys=True)
        known = self._written.get(r.key)
        status = r.status
        if known is not None and known[0] == source and known[1] == template.generation:
            return replace(status, pod_template_generation=known[1])
        if self.dry_run:
            log.info("capacity_buffer_template_not_written", buffer=r.key,
                     template=template.name, reason="dry run")
            return status
        try:
            resolved = self._resolve(r.namespace, template.template)
        except Exception as exc:
            return self._not_ready(r, now, f"{FAILED_TO_RESOLVE_POD}: {describe_error(exc)}")
        try:
            generation = self._upsert(r, template.name, resolved)
        except Exception as exc:
            return self._not_ready(
                r, now, f"{FAILED_TO_WRITE_TEMPLATE}: {describe_error(exc)}"
            )
        self._written[r.key] = (source, generation)
        return replace(status, pod_template_generation=generation)

    def _not_ready(self, r: BufferResult, now: datetime, error: str) -> BufferStatus:
        log.warning("capacity_buffer_not_ready", buffer=r.key, error=error)
        self._failed(ErrorType.API_CALL)
        # Its transition counts from what the cluster holds, not from this pass's status.
        conditions = r.status.conditions
        held = r.held.condition(READY_FOR_PROVISIONING)
        if held is not None:
            conditions = set_condition(conditions, held)
        conditions = set_condition(
            conditions,
            Condition(READY_FOR_PROVISIONING, "False", NOT_READY_REASON,
                      f"Buffer not ready for provisioning: {error}", now, 0),
        )
        return replace(r.status, pod_template_ref=None, replicas=None,
                       pod_template_generation=None, conditions=conditions)

    def _resolve(self, namespace: str, template: Mapping[str, Any]) -> dict[str, Any]:
        """CA's DryRunResolver (a pod created with dryRun=All, as the API server would
        make it) or DefaultingResolver; the template of the pod returned."""
        if not self.dry_run_pods:
            return resolve_template_by_defaulting(template)
        meta = template.get("metadata") or {}
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"generateName": "fake-pod-", **{
                k: meta[k] for k in ("labels", "annotations") if meta.get(k)
            }},
            "spec": template.get("spec") or {},
        }
        pod = read_json(
            self.core.create_namespaced_pod(namespace, body, dry_run="All",
                                            _preload_content=False)
        )
        pod_meta = pod.get("metadata") or {}
        spec = without_token_volumes(pod.get("spec") or {})
        spec.pop("nodeName", None)
        out_meta = {k: pod_meta[k] for k in ("labels", "annotations") if pod_meta.get(k)}
        return {"metadata": out_meta, "spec": spec}

    def _upsert(self, r: BufferResult, name: str, template: dict[str, Any]) -> int:
        """CA's EnsurePodTemplate: created, or updated when its template differs; the
        generation the cluster holds after."""
        owner = {
            "apiVersion": CAPACITY_BUFFER_API_VERSION,
            "kind": CAPACITY_BUFFER_KIND,
            "name": r.name,
            "uid": r.uid,
            "controller": True,
        }
        try:
            held = read_json(
                self.core.read_namespaced_pod_template(name, r.namespace, _preload_content=False)
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {"name": name, "namespace": r.namespace, "ownerReferences": [owner]},
                "template": template,
            }
            made = read_json(
                self.core.create_namespaced_pod_template(r.namespace, body,
                                                         _preload_content=False)
            )
            log.info("capacity_buffer_template_created", buffer=r.key, template=name)
            return int((made.get("metadata") or {}).get("generation") or 0)
        if _same_template(held.get("template") or {}, template):
            return int((held.get("metadata") or {}).get("generation") or 0)
        held["template"] = template
        held.setdefault("metadata", {})["ownerReferences"] = [owner]
        updated = read_json(
            self.core.replace_namespaced_pod_template(name, r.namespace, held,
                                                      _preload_content=False)
        )
        log.info("capacity_buffer_template_updated", buffer=r.key, template=name)
        return int((updated.get("metadata") or {}).get("generation") or 0)

    # ------------------------------------------------------------------ status

    def _write_status(self, r: BufferResult, status: BufferStatus) -> bool:
        body = _status_to_k8s(status)
        target = StatusTarget(CAPACITY_BUFFER_GROUP, VERSION, PLURAL, r.name, r.namespace, r.uid)
        return self._update(
            target,
            lambda _: body,
            events=("capacity_buffer_gone", "capacity_buffer_status_written",
                    "capacity_buffer_write_failed"),
            names={"buffer": r.key},
            written={"replicas": status.replicas, "conditions": status.statuses()},
        )


def _same_template(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two PodTemplates' `template`s agree on what the controller writes: labels,
    annotations and spec (what the API server adds to the rest does not call for an update)."""

    def norm(t: Mapping[str, Any]) -> str:
        meta = t.get("metadata") or {}
        return json.dumps(
            {"labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {},
             "spec": t.get("spec") or {}},
            sort_keys=True,
        )

    return norm(a) == norm(b)
