"""The CapacityBuffer controller's part, as Cluster Autoscaler's `capacitybuffer/`
packages (strategy filter, translators, quota allocator) compute it: for each buffer of
the active strategy, the PodTemplate its chunks are made from (a copy of its
`podTemplateRef`, or the most recent pod of its `scalableRef`'s workload, named
`capacitybuffer-<buffer>-pod-template` and owned by the buffer), the number of chunks (the
smallest of `replicas`, `percentage` of the workload's replicas and what fits `limits`) and
ReadyForProvisioning; then the namespace's ResourceQuotas shared out among its buffers,
oldest first (LimitedByQuotas). Plain data in, plain data out: the caller writes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from clusterscaler.model import Controller, Pod
from clusterscaler.model.capacitybuffer import (
    ACTIVE_PROVISIONING_STRATEGY,
    ATTRIBUTES_SET_SUCCESSFULLY_REASON,
    LIMITED_BY_QUOTAS,
    LIMITED_BY_QUOTAS_REASON,
    NOT_READY_REASON,
    READY_FOR_PROVISIONING,
    CapacityBuffer,
    ResourceQuota,
    ScopeRequirement,
    without_token_volumes,
)
from clusterscaler.model.provisioning import (
    Condition,
    PodTemplate,
    find_condition,
    set_condition,
)
from clusterscaler.model.resources import Resources

__all__ = [
    "BufferStatus",
    "ManagedTemplate",
    "Translated",
    "buffer_replicas",
    "managed_template_name",
    "reconcile",
]

log = structlog.get_logger()


# The managed PodTemplate's name: `capacitybuffer-<buffer>-pod-template`, the buffer's name
# cut so that the whole fits a PodTemplate name.
_TEMPLATE_PREFIX = "capacitybuffer-"
_TEMPLATE_SUFFIX = "-pod-template"
_MAX_BUFFER_NAME = 253 - len(_TEMPLATE_PREFIX) - len(_TEMPLATE_SUFFIX)

# The scalable kinds whose pods the snapshot holds, by API group ("" and "core" alike).
_SCALABLE_KINDS = {
    ("apps", "Deployment"),
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
    ("", "ReplicationController"),
    ("batch", "Job"),
}

_MAX_INT32 = (1 << 31) - 1


def managed_template_name(buffer_name: str) -> str:
    return _TEMPLATE_PREFIX + buffer_name[:_MAX_BUFFER_NAME] + _TEMPLATE_SUFFIX


@dataclass(frozen=True, slots=True)
class BufferStatus:
    """A buffer's `status`, as its controller and the pod injection write it."""

    pod_template_ref: str | None = None
    replicas: int | None = None
    pod_template_generation: int | None = None
    provisioning_strategy: str | None = None
    conditions: tuple[Condition, ...] = ()

    @classmethod
    def of(cls, buffer: CapacityBuffer) -> BufferStatus:
        return cls(
            buffer.status_pod_template_ref,
            buffer.status_replicas,
            buffer.status_pod_template_generation,
            buffer.status_provisioning_strategy,
            buffer.conditions,
        )

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.conditions, type_)

    def has(self, type_: str, status: str) -> bool:
        c = self.condition(type_)
        return c is not None and c.status == status

    def same_as(self, other: BufferStatus) -> bool:
        """Equal but for the conditions' transition times."""

        def strip(s: BufferStatus) -> BufferStatus:
            return dataclasses.replace(
                s,
                conditions=tuple(
                    sorted(
                        (dataclasses.replace(c, last_transition_time=None) for c in s.conditions),
                        key=lambda c: c.type,
                    )
                ),
            )

        return strip(self) == strip(other)

    def statuses(self) -> dict[str, str]:
        return {c.type: c.status for c in self.conditions}


@dataclass(frozen=True, slots=True)
class ManagedTemplate:
    """The PodTemplate a buffer's chunks are made from, as its controller keeps it:
    `template` is the PodTemplate's `template` (metadata labels and annotations, spec).
    `generation` is that of the template of this name the cluster holds (None: none)."""

    name: str
    template: Mapping[str, Any]
    generation: int | None = None


def _strategy_of(buffer: CapacityBuffer) -> str:
    return buffer.provisioning_strategy or ""


def _default_strategy(strategy: str | None) -> str | None:
    """CA's mapEmptyProvStrategyToDefault."""
    return ACTIVE_PROVISIONING_STRATEGY if strategy == "" else strategy


def _chunk_requests(pod: Pod) -> Resources:
    """What one chunk requests, without the pod slot the model adds."""
    return pod.requests.with_(pods=0)


def _replicas_from_limits(pod: Pod, limits: Resources) -> int | str:
    """CA's calculateMaxPodsFromLimits: the chunks that fit the limits, by every resource
    the pod requests and the limits name."""
    requests = _chunk_requests(pod)
    named = set(limits.names())
    best = _MAX_INT32
    found = False
    for name in requests.names():
        need = requests.get(name)
        if need <= 0 or name not in named:
            continue
        found = True
        best = min(best, limits.get(name) // need)
    if not found:
        return "resources in configured limits not found in the pod template"
    return best


def buffer_replicas(
    buffer: CapacityBuffer, pod: Pod, workload_replicas: int | None
) -> int | str:
    """CA's getBufferNumberOfPods: the smallest of `replicas`, `percentage` of the
    workload's replicas and the chunks `limits` allows; or why none is defined."""
    replicas = _MAX_INT32
    resolved = False
    if buffer.replicas is not None:
        replicas = min(replicas, max(0, buffer.replicas))
        resolved = True
    if buffer.percentage is not None and workload_replicas is not None:
        replicas = min(replicas, max(0, buffer.percentage * workload_replicas // 100))
        resolved = True
    if buffer.limits is not None:
        fit = _replicas_from_limits(pod, buffer.limits)
        if isinstance(fit, str):
            return fit
        replicas = min(replicas, fit)
        resolved = True
    if not resolved:
        return "replicas, percentage and limits are not defined"
    return replicas


# ------------------------------------------------------------------ quotas


def _quota_requests(pod: Pod) -> dict[str, int]:
    """CA's calculatePodRequests: each requested resource under its own name and with the
    `requests.` prefix."""
    requests = _chunk_requests(pod)
    out: dict[str, int] = {}
    for name in requests.names():
        amount = requests.get(name)
        out[name] = amount
        out["requests." + name] = amount
    return out


def _is_best_effort(pod: Pod) -> bool:
    return not (pod.requests.cpu or pod.requests.memory)


def _cross_namespace_affinity(pod: Pod) -> bool:
    affinity = pod.affinity.pod if pod.affinity is not None else None
    if affinity is None:
        return False
    return any(
        t.namespace_selector is not None or t.namespaces != frozenset({pod.namespace})
        for t in (*affinity.affinity, *affinity.anti_affinity)
    )


def _matches_scope(pod: Pod, req: ScopeRequirement) -> bool:
    """CA's podMatchesSelector: buffer pods never terminate."""
    scope = req.scope
    if scope == "NotTerminating":
        return True
    if scope == "BestEffort":
        return _is_best_effort(pod)
    if scope == "NotBestEffort":
        return not _is_best_effort(pod)
    if scope == "CrossNamespacePodAffinity":
        return _cross_namespace_affinity(pod)
    if scope == "PriorityClass":
        name = pod.priority_class_name
        if req.operator == "Exists":
            return bool(name)
        if req.operator == "DoesNotExist":
            return not name
        if req.operator == "In":
            return bool(name) and name in req.values
        return not name or name not in req.values
    return False


def _max_for_quota(quota: ResourceQuota, requests: Mapping[str, int],
                   reserved: Mapping[str, int]) -> int:
    """CA's getMaxReplicasForQuota."""
    used = dict(quota.used)
    best = _MAX_INT32
    for name, hard in quota.hard:
        need = requests.get(name, 0)
        if need <= 0:
            continue
        available = hard - used.get(name, 0) - reserved.get(name, 0)
        if available < 0:
            return 0
        best = min(best, available // need)
    return best


@dataclass
class Translated:
    """One buffer as the controller leaves it: its status, the template kept for it and
    the pod that template makes (None when it could not be resolved), or why not."""

    buffer: CapacityBuffer
    status: BufferStatus
    template: ManagedTemplate | None = None
    pod: Pod | None = None
    error: str = ""


def reconcile(
    buffers: Sequence[CapacityBuffer],
    templates: Mapping[str, PodTemplate],
    pods: Sequence[Pod],
    controllers: Sequence[Controller],
    quotas: Sequence[ResourceQuota],
    now: datetime,
) -> dict[str, Translated]:
    """Each buffer of the active strategy (by `namespace/name`) as the controller leaves
    it: translated, then the namespace's ResourceQuotas shared out among them."""
    # CA's strategy filter: the active strategy, or none named.
    mine = [
        b for b in buffers
        if _strategy_of(b) in (ACTIVE_PROVISIONING_STRATEGY, "")
    ]
    # Oldest first, then by name: quotas are shared out in a stable order.
    mine.sort(key=lambda b: (
        b.creation_time.timestamp() if b.creation_time is not None else float("-inf"),
        b.name,
    ))
    out: dict[str, Translated] = {}
    for b in mine:
        out[b.key] = _translate(b, templates, pods, controllers, now)
        if out[b.key].error:
            log.warning("capacity_buffer_not_ready", buffer=b.key, error=out[b.key].error)
    by_namespace: dict[str, list[Translated]] = {}
    for t in out.values():
        by_namespace.setdefault(t.buffer.namespace, []).append(t)
    quotas_by_namespace: dict[str, list[ResourceQuota]] = {}
    for q in quotas:
        quotas_by_namespace.setdefault(q.namespace, []).append(q)
    for namespace, items in by_namespace.items():
        _allocate(items, quotas_by_namespace.get(namespace, []), now)
    return out


def _translate(
    buffer: CapacityBuffer,
    templates: Mapping[str, PodTemplate],
    pods: Sequence[Pod],
    controllers: Sequence[Controller],
    now: datetime,
) -> Translated:
    strategy = _default_strategy(buffer.provisioning_strategy)
    workload_replicas: int | None = None
    if buffer.pod_template_ref is not None:
        source = templates.get(f"{buffer.namespace}/{buffer.pod_template_ref}")
        if source is None:
            return _not_ready(
                buffer, strategy, now,
                "capacity buffer client can't get pod template: "
                f'podtemplates "{buffer.pod_template_ref}" not found',
            )
        pod = source.pod
        raw = _template_of(source)
    elif buffer.scalable_ref is not None:
        resolved = _resolve_scalable(buffer, pods, controllers)
        if isinstance(resolved, str):
            return _not_ready(buffer, strategy, now, resolved)
        pod, workload_replicas = resolved
        raw = _template_of_pod(pod)
    else:
        return _not_ready(
            buffer, strategy, now, "neither podTemplateRef nor scalableRef is set"
        )
    name = managed_template_name(buffer.name)
    held = templates.get(f"{buffer.namespace}/{name}")
    managed = ManagedTemplate(
        name=name,
        template=raw,
        generation=held.generation if held is not None else None,
    )
    if (
        held is not None
        and buffer.status_pod_template_ref == name
        and buffer.status_pod_template_generation == held.generation
    ):
        # As upstream, the chunks are counted on the template written for the buffer
        # (admission defaults of the dry-run applied), once the cluster holds it.
        pod = held.pod
    replicas = buffer_replicas(buffer, pod, workload_replicas)
    if isinstance(replicas, str):
        error = f"couldn't get number of replicas for buffer: {replicas}"
        status = _not_ready_status(buffer, name, managed.generation, None, strategy, now,
                                   error)
        return Translated(buffer, status, managed, pod, error)
    conditions = set_condition(
        BufferStatus.of(buffer).conditions,
        Condition(READY_FOR_PROVISIONING, "True", ATTRIBUTES_SET_SUCCESSFULLY_REASON,
                  "ready", now, 0),
    )
    status = BufferStatus(name, replicas, managed.generation, strategy, conditions)
    return Translated(buffer, status, managed, pod)


def _not_ready(
    buffer: CapacityBuffer, strategy: str | None, now: datetime, error: str
) -> Translated:
    return Translated(
        buffer, _not_ready_status(buffer, None, None, None, strategy, now, error),
        error=error,
    )


def _allocate(
    items: list[Translated], quotas: list[ResourceQuota], now: datetime
) -> None:
    """CA's resourceQuotaAllocator.Allocate, over the namespace's buffers in order."""
    reserved: dict[str, dict[str, int]] = {}
    for t in items:
        s = t.status
        if (
            t.pod is None
            or s.pod_template_ref is None
            or s.replicas is None
            or t.template is None
        ):
            continue
        requests = _quota_requests(t.pod)
        if not requests:
            continue
        current = s.replicas
        allowed = current
        blocking: list[str] = []
        matching: list[ResourceQuota] = []
        for q in quotas:
            if not all(_matches_scope(t.pod, r) for r in q.scopes):
                continue
            matching.append(q)
            most = _max_for_quota(q, requests, reserved.get(q.key, {}))
            if most < current:
                blocking.append(q.name)
            allowed = min(allowed, most)
        if allowed < current:
            message = (
                f"Buffer replicas limited from {current} to {allowed} due to quotas: "
                + ", ".join(blocking)
            )
            limited = Condition(LIMITED_BY_QUOTAS, "True", LIMITED_BY_QUOTAS_REASON,
                                message, now, t.buffer.generation)
            s = dataclasses.replace(s, replicas=allowed)
        else:
            limited = Condition(LIMITED_BY_QUOTAS, "False", LIMITED_BY_QUOTAS_REASON,
                                "", now, t.buffer.generation)
        conditions = set_condition(s.conditions, limited)
        t.status = dataclasses.replace(s, conditions=conditions)
        if allowed > 0:
            for q in matching:
                held = reserved.setdefault(q.key, {})
                hard = dict(q.hard)
                for name, amount in requests.items():
                    if name in hard:
                        held[name] = held.get(name, 0) + amount * allowed


def _not_ready_status(
    buffer: CapacityBuffer,
    template: str | None,
    generation: int | None,
    replicas: int | None,
    strategy: str | None,
    now: datetime,
    error: str,
) -> BufferStatus:
    """CA's SetBufferAsNotReadyForProvisioning."""
    conditions = set_condition(
        BufferStatus.of(buffer).conditions,
        Condition(READY_FOR_PROVISIONING, "False", NOT_READY_REASON,
                  f"Buffer not ready for provisioning: {error}", now, 0),
    )
    return BufferStatus(template, replicas, generation, strategy, conditions)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _template_of(source: PodTemplate) -> dict[str, Any]:
    """The PodTemplate's `template` as the controller copies it: labels, annotations and
    spec, without the service-account token volumes."""
    raw = source.raw_template
    meta = _mapping(raw.get("metadata"))
    out_meta: dict[str, Any] = {}
    for key in ("labels", "annotations"):
        if meta.get(key):
            out_meta[key] = meta[key]
    spec = raw.get("spec")
    return {"metadata": out_meta, "spec": without_token_volumes(spec if isinstance(spec, dict)
                                                                 else {})}


def _template_of_pod(pod: Pod) -> dict[str, Any]:
    raw = pod.to_k8s()
    meta = _mapping(raw["metadata"])
    spec = dict(_mapping(raw["spec"]))
    spec.pop("nodeName", None)
    out_meta = {k: meta[k] for k in ("labels", "annotations") if meta.get(k)}
    return {"metadata": out_meta, "spec": spec}


def _resolve_scalable(
    buffer: CapacityBuffer, pods: Sequence[Pod], controllers: Sequence[Controller]
) -> tuple[Pod, int] | str:
    """The pod shape and replicas of a buffer's workload, as CA's scale resolver finds
    them: the workload's replicas and its most recent pod."""
    ref = buffer.scalable_ref
    assert ref is not None
    group = "" if ref.api_group == "core" else ref.api_group
    if (group, ref.kind) not in _SCALABLE_KINDS:
        return (
            "failed to resolve scalable object: kind "
            f"{ref.api_group}/{ref.kind} is not supported to use pod template"
        )
    ns = buffer.namespace
    if ref.kind == "Deployment":
        owned = [
            c for c in controllers
            if c.namespace == ns and c.kind == "ReplicaSet" and c.owner is not None
            and c.owner.kind == "Deployment" and c.owner.name == ref.name
        ]
        if not owned:
            return (
                "failed to resolve scalable object: failed to get Deployment: "
                f'deployment.apps "{ref.name}" has no ReplicaSet'
            )
        replicas = sum(c.replicas or 0 for c in owned)
        names = {("ReplicaSet", c.name) for c in owned}
    else:
        found = next(
            (c for c in controllers
             if c.namespace == ns and c.kind == ref.kind and c.name == ref.name),
            None,
        )
        if found is None:
            return (
                f"failed to resolve scalable object: failed to get {ref.kind}: "
                f'{ref.kind.lower()} "{ref.name}" not found'
            )
        replicas = found.replicas or 0
        names = {(ref.kind, ref.name)}
    mine = [
        p for p in pods
        if p.namespace == ns and p.owner is not None and (p.owner.kind, p.owner.name) in names
        and not p.is_terminal
    ]
    if not mine:
        return (
            "failed to resolve scalable object: "
            f"{ref.kind} {ns}/{ref.name} has no pod to take the shape of"
        )
    epoch = datetime.min
    newest = max(
        mine,
        key=lambda p: (p.creation_time.replace(tzinfo=None) if p.creation_time else epoch,
                       p.name),
    )
    return newest.with_(node_name=""), replicas
